//! `wmrl device`: which device training would use, and what libtorch reports.

use anyhow::Context;

use crate::cli::GlobalArgs;

pub fn run(global: &GlobalArgs) -> anyhow::Result<()> {
    let cuda_backend = wmrl_tch::cuda_backend_loaded();
    let device = wmrl_tch::select_device(global.device).context("selecting the compute device")?;
    let report = serde_json::json!({
        "requested": global.device.to_string(),
        "selected": format!("{device:?}"),
        "cuda_backend_loaded": cuda_backend,
        "cuda_available": tch::Cuda::is_available(),
        "cuda_device_count": tch::Cuda::device_count(),
        "cudnn_available": tch::Cuda::cudnn_is_available(),
        "torch_threads": tch::get_num_threads(),
    });
    if global.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("selected device : {device:?} (requested {})", global.device);
        println!(
            "CUDA backend    : {}",
            if cuda_backend {
                "loaded"
            } else {
                "not present (CPU-only libtorch or no driver)"
            }
        );
        println!("CUDA devices    : {}", tch::Cuda::device_count());
        println!("torch threads   : {}", tch::get_num_threads());
    }
    Ok(())
}
