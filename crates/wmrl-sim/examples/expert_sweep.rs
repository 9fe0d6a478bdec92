//! Prints which of the first N initial states each task's expert solves (scratch).
use wmrl_sim::rollout::run_expert;
use wmrl_sim::{EnvConfig, SimEnv};
fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(4);
    let mut c = EnvConfig::default();
    c.camera.enabled = false;
    let mut env = SimEnv::new(c);
    for task in 0..10 {
        let ok: Vec<usize> = (0..n).filter(|&k| run_expert(&mut env, task, k, |_| {}).unwrap().success).collect();
        println!("task {task}: {ok:?}");
    }
}
