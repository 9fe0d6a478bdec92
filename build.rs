//! Gives the `wmrl` binary an rpath to libtorch's shared libraries, so
//! `target/*/wmrl` runs without LD_LIBRARY_PATH.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_WMRL_TCH_LIBTORCH_LIB");
    if let Ok(lib) = std::env::var("DEP_WMRL_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
}
