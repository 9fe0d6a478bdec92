//! `cargo run --release -p wmrl-synth --example sweep PRESET RATE,RATE,… [MODE,…] [key=value …]`: every mode at every rate.
use wmrl_core::Mode;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut scenario = wmrl_synth::Scenario::preset(&args[0]).expect("preset");
    let rates: Vec<f64> = args[1]
        .split(',')
        .map(|r| r.parse().expect("rate"))
        .collect();
    let modes: Vec<Mode> = args.get(2).map_or(Mode::ALL.to_vec(), |m| {
        m.split(',').map(|m| m.parse().expect("mode")).collect()
    });
    for kv in args.iter().skip(3) {
        scenario.apply_override(kv).expect("override");
    }
    let sweep = wmrl_synth::sweep::sweep(&scenario, &modes, &rates).expect("sweep");
    for m in &sweep.modes {
        let cells: Vec<String> = m
            .points
            .iter()
            .map(|p| {
                format!(
                    "{:>6}: {:.3} ± {:.3}",
                    p.learning_rate, p.summary.final_true_reward, p.summary.final_true_reward_se
                )
            })
            .collect();
        println!(
            "{:<16} best lr {:>5}: {:.3}   | {}",
            m.mode.name(),
            m.best.learning_rate,
            m.best.summary.final_true_reward,
            cells.join("  ")
        );
    }
}
