use wmrl_sim::*;
fn main() {
    let task: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    let n: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(3);
    let mut cfg = EnvConfig::default();
    cfg.camera.enabled = std::env::var("CAM").is_ok();
    cfg.world = physics::WorldParams::from_env();
    cfg.camera.width = 320;
    cfg.camera.height = 320;
    let mut env = SimEnv::new(cfg);
    for k in 0..n {
        let t = std::time::Instant::now();
        let mut frames = 0;
        let mut last = (9, 9);
        env.reset(task, k).unwrap();
        let mut ex = expert::Expert::new(&env);
        loop {
            let a = ex.act(&env);
            if ex.progress() != last {
                last = ex.progress();
                let p = env.proprio();
                eprintln!(
                    "  step {} skill/phase {:?} ee {:?} w {:.3}",
                    env.steps(),
                    last,
                    p.eef_position,
                    p.gripper_width
                );
            }
            let out = env.step(&a);
            frames += 1;
            if std::env::var("CAM").is_ok() && frames % 5 == 0 && frames < 140 {
                out.observation
                    .agent_view
                    .save(format!("/tmp/f{task}_{frames:03}.png"))
                    .unwrap();
            }
            if out.done {
                println!(
                    "task {task} state {k}: success {} steps {} err {:?} ({:.2?})",
                    out.success,
                    env.steps(),
                    out.execution_error,
                    t.elapsed()
                );
                break;
            }
        }
    }
}
