//! `cargo run --release -p wmrl-synth --example fusion [draws] [scenario…]`: the fusion bench without the `wmrl` binary.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = wmrl_synth::fusion_bench::FusionBenchOptions::default();
    if let Some(d) = args.first() {
        options.draws = d.parse().expect("draws");
    }
    if args.len() > 1 {
        options.scenarios = args[1..].to_vec();
    }
    let report = wmrl_synth::fusion_bench::bench_fusion(&options).expect("bench");
    print!("{}", wmrl_synth::fusion_bench::table(&report));
    if std::env::var_os("FUSION_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    }
}
