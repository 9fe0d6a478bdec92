use wmrl_sim::*;
fn main() {
    let task: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(0);
    let mut env = SimEnv::new(EnvConfig::default());
    let t = std::time::Instant::now();
    let obs = env.reset(task, 0).unwrap();
    println!("reset {:?}", t.elapsed());
    println!("proprio {:?}", obs.proprio);
    obs.agent_view.save("/tmp/agent.png").unwrap();
    obs.wrist_view.save("/tmp/wrist.png").unwrap();
    let w = env.world();
    for e in &w.entities { println!("{} {:?}", e.name, w.body_pose(e.root).translation.vector.as_slice()); }
    let t = std::time::Instant::now();
    for i in 0..40 {
        let a = if i < 20 { [0.0, 0.0, -0.5, 0.0, 0.0, 0.0, -1.0] } else { [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0] };
        let out = env.step(&a);
        if i % 5 == 4 { println!("step {i} ee {:?} w {:.4} err {:?}", out.observation.proprio.eef_position, out.observation.proprio.gripper_width, out.execution_error); }
    }
    println!("40 steps {:?}", t.elapsed());
    let obs = env.observe();
    obs.agent_view.save("/tmp/agent2.png").unwrap();
}
