use wmrl_sim::*;
fn main() {
    let mut cfg = EnvConfig::default();
    cfg.camera.enabled = false;
    let mut env = SimEnv::new(cfg);
    env.reset(0, 0).unwrap();
    let mut ex = expert::Expert::new(&env);
    for i in 0..16 {
        let a = ex.act(&env);
        env.step(&a);
        let w = env.world();
        let f0 = w.body_pose(w.robot.finger_bodies[0]).translation.vector;
        let f1 = w.body_pose(w.robot.finger_bodies[1]).translation.vector;
        let can = w.body_pose(w.entities[w.entity_index("alphabet_soup_1").unwrap()].root).translation.vector;
        let ee = env.ee_pose().translation.vector;
        println!("{i} {:?} a {:?}\n  ee {:.3?}\n  f0 {:.3?} f1 {:.3?} can {:.3?}", ex.progress(), a.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>(), ee.as_slice(), f0.as_slice(), f1.as_slice(), can.as_slice());
    }
}
