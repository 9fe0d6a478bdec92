//! Records where libtorch's shared libraries live: as an rpath on this crate's
//! tests, as `WMRL_LIBTORCH_LIB` for the CUDA loader, and as link metadata for
//! dependents' build scripts.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
        println!("cargo:rustc-env=WMRL_LIBTORCH_LIB={lib}");
        println!("cargo:libtorch_lib={lib}");
    } else {
        println!("cargo:rustc-env=WMRL_LIBTORCH_LIB=");
    }
}
