use wmrl_sim::*;
fn main() {
    let task: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    let mut cfg = EnvConfig::default();
    cfg.camera.enabled = false;
    cfg.world = physics::WorldParams::from_env();
    let mut env = SimEnv::new(cfg);
    env.reset(task, 0).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..50 {
        env.step(&NOOP_ACTION);
    }
    println!("noop: {:.2} ms/step", t.elapsed().as_secs_f64() * 20.0);
    let w = env.world();
    let awake = w
        .world
        .bodies
        .iter()
        .filter(|(_, b)| b.is_dynamic() && !b.is_sleeping())
        .count();
    let pairs = w.world.narrow_phase.contact_pairs().count();
    let active = w
        .world
        .narrow_phase
        .contact_pairs()
        .filter(|p| p.has_any_active_contact())
        .count();
    println!(
        "awake dynamic bodies {awake}, colliders {}, contact pairs {pairs} active {active}",
        w.world.colliders.len()
    );
    let mut ex = expert::Expert::new(&env);
    let t = std::time::Instant::now();
    for _ in 0..50 {
        let a = ex.act(&env);
        env.step(&a);
    }
    println!("expert: {:.2} ms/step", t.elapsed().as_secs_f64() * 20.0);
}
