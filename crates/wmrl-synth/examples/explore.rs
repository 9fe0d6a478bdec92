// TEMPORARY exploration harness (deleted before hand-off).
use wmrl_core::Mode;
use wmrl_synth::{Scenario, benchmark, report};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().cloned().unwrap_or("paper".into());
    let mut s = Scenario::preset(&name).unwrap_or_default();
    for kv in &args[1..] {
        let (k, v) = kv.split_once('=').unwrap();
        let mut val = serde_json::to_value(&s).unwrap();
        let mut cur = &mut val;
        let parts: Vec<&str> = k.split('.').collect();
        for p in &parts[..parts.len() - 1] {
            cur = cur.get_mut(*p).unwrap();
        }
        cur[parts[parts.len() - 1]] =
            serde_json::from_str(v).unwrap_or(serde_json::Value::String(v.into()));
        s = serde_json::from_value(val).unwrap();
    }
    if let Ok(m) = std::env::var("TRACE") {
        let mode: Mode = m.parse().unwrap();
        let r = wmrl_synth::run(&s, mode, 0, |_| {}).unwrap();
        for rec in r.records.iter().step_by(10) {
            let d = rec.diagnostics.as_ref();
            println!(
                "step {:>4} J {:.3} hack {:.3} wA {} s2 {} vr {} lam {} rawb {} calb {} zero {} blocks {}",
                rec.step,
                rec.true_reward,
                rec.overrated_mass,
                d.map_or("-".into(), |d| format!("{:.3}", d.stream_weights.anchor)),
                d.and_then(|d| d.residual_variance)
                    .map_or("-".into(), |x| format!("{x:.4}")),
                d.and_then(|d| d.reward_variance)
                    .map_or("-".into(), |x| format!("{x:.4}")),
                d.and_then(|d| d.ppi_lambda)
                    .map_or("-".into(), |x| format!("{x:.3}")),
                d.and_then(|d| d.raw_bias)
                    .map_or("-".into(), |x| format!("{x:.3}")),
                d.and_then(|d| d.calibrated_bias)
                    .map_or("-".into(), |x| format!("{x:.3}")),
                d.map_or("-".into(), |d| format!("{:.2}", d.zero_variance_share)),
                d.map_or("-".into(), |d| format!("{}", d.calibrator_blocks)),
            );
        }
        return;
    }
    let t = std::time::Instant::now();
    let r = benchmark(&s, &Mode::ALL, 0.95, |_| {}).unwrap();
    if std::env::var("COMPACT").is_ok() {
        let f: Vec<String> = r
            .modes
            .iter()
            .map(|m| {
                format!(
                    "{}={:.3}±{:.3}{}",
                    m.mode.name(),
                    m.final_true_reward,
                    m.final_true_reward_se,
                    m.savings_vs_real
                        .map_or(String::new(), |x| format!("({x:.1}x)"))
                )
            })
            .collect();
        println!("{}", f.join(" "));
        return;
    }
    print!("{}", report::table(&r));
    for c in &r.curves {
        let pts: Vec<String> = c
            .points
            .iter()
            .step_by((s.steps as usize / 10).max(1))
            .map(|p| format!("{:.2}", p.3))
            .collect();
        println!("{:<16} {}", c.mode.name(), pts.join(" "));
    }
    eprintln!("{:.2}s", t.elapsed().as_secs_f64());
}
