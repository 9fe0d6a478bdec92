//! The synthetic loop end to end: determinism, re-queued execution errors,
//! a checkpoint of the core resuming bit for bit, and the output files.

use wmrl_core::{Core, CoreConfig, Mode};
use wmrl_synth::policy::SoftmaxPolicy;
use wmrl_synth::report::{self, Outputs};
use wmrl_synth::world::{SynthAdapter, SynthExecutor, SynthWorldModel, SyntheticWorld};
use wmrl_synth::{Scenario, benchmark, run};

fn small() -> Scenario {
    let base = Scenario::default();
    Scenario {
        prompts: 4,
        actions: 20,
        steps: 30,
        seeds: 2,
        core: CoreConfig {
            groups: 16,
            ..base.core
        },
        ..base
    }
}

fn bits(run: &wmrl_synth::RunResult) -> Vec<u64> {
    run.records
        .iter()
        .map(|r| r.true_reward.to_bits())
        .collect()
}

#[test]
fn same_seed_same_run_bit_for_bit() {
    let s = small();
    for mode in Mode::ALL {
        let a = run(&s, mode, 3, |_| {}).unwrap();
        let b = run(&s, mode, 3, |_| {}).unwrap();
        assert_eq!(bits(&a), bits(&b), "{mode}");
        assert_eq!(a.records, b.records, "{mode}");
        let c = run(&s, mode, 4, |_| {}).unwrap();
        assert_ne!(bits(&a), bits(&c), "{mode}: another seed differs");
    }
}

#[test]
fn execution_errors_are_requeued_not_scored() {
    let mut s = small();
    s.execution_failure_rate = 0.3;
    s.core.max_attempts = 8;
    let r = run(&s, Mode::Wmrl, 0, |_| {}).unwrap();
    let completed: usize = r
        .records
        .iter()
        .filter_map(|x| x.diagnostics.as_ref())
        .map(|d| d.anchor_samples)
        .sum();
    let attempts = r.records.last().unwrap().executions as usize;
    // Every anchor sample completed; failed attempts were counted as executions on top.
    assert_eq!(
        completed,
        30 * 2 * 8,
        "⌈0.1·16⌉ = 2 anchor groups × 8 rollouts per step"
    );
    assert!(
        attempts > completed + completed / 5,
        "{attempts} attempts for {completed} completions"
    );
}

#[test]
fn an_episode_that_never_executes_stops_the_step_with_its_name() {
    let mut s = small();
    s.execution_failure_rate = 0.9;
    s.core.max_attempts = 2;
    let err = run(&s, Mode::Real, 0, |_| {}).unwrap_err().to_string();
    assert!(
        err.contains("failed to execute 2 times") && err.contains("group"),
        "{err}"
    );
}

#[test]
fn anchors_follow_the_ratio_in_every_mode() {
    let s = small();
    for (mode, anchors) in [
        (Mode::Real, 16),
        (Mode::WmOnly, 0),
        (Mode::Wmrl, 2),
        (Mode::Ppi, 2),
    ] {
        let r = run(&s, mode, 0, |_| {}).unwrap();
        for d in r.records.iter().filter_map(|x| x.diagnostics.as_ref()) {
            assert_eq!(d.anchor_groups, anchors, "{mode}");
            assert_eq!(d.anchor_groups + d.world_model_groups, 16);
        }
        assert_eq!(
            r.records.last().unwrap().executions,
            30 * anchors as u64 * 8,
            "{mode}"
        );
    }
}

#[test]
fn core_checkpoint_resumes_bit_for_bit() {
    let s = small();
    let world = SyntheticWorld::generate(&s, 0);
    let config = CoreConfig {
        mode: Mode::Ppi,
        seed: 9,
        ..s.core
    };
    let mut core = Core::new(config).unwrap();
    let mut adapter = SynthAdapter { prompts: s.prompts };
    let mut policy = SoftmaxPolicy::uniform(s.prompts, s.actions, s.learning_rate);
    let mut executor = SynthExecutor::new(&world, 0.0);
    let mut wm = SynthWorldModel::new(&world, 1);
    for _ in 0..12 {
        wmrl_core::step(&mut core, &mut adapter, &mut policy, &mut wm, &mut executor).unwrap();
    }
    assert!(!core.calibrator().is_identity());
    let saved = serde_json::to_string(&core).unwrap();
    let mut restored: Core = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        restored, core,
        "the core survives a JSON round trip exactly"
    );
    let (mut p2, mut wm2) = (policy.clone(), wm.clone());
    for _ in 0..12 {
        let a =
            wmrl_core::step(&mut core, &mut adapter, &mut policy, &mut wm, &mut executor).unwrap();
        let b = wmrl_core::step(
            &mut restored,
            &mut adapter,
            &mut p2,
            &mut wm2,
            &mut executor,
        )
        .unwrap();
        assert_eq!(a, b);
    }
    assert_eq!(policy, p2);
}

#[test]
fn outputs_are_written_and_table_lists_every_mode() {
    let s = small();
    let dir = tempfile::tempdir().unwrap();
    let outputs = Outputs::in_dir(dir.path());
    let mut sink = report::metrics_sink(&outputs.metrics).unwrap();
    let result = benchmark(&s, &Mode::ALL, 0.95, |run| {
        report::write_run(&mut sink, &s.name, run).unwrap()
    })
    .unwrap();
    report::write_summary_and_plots(&outputs, &result).unwrap();
    let rows = wmrl_report::metrics::read_rows(&outputs.metrics).unwrap();
    assert_eq!(rows.len(), 6 * 2 * 31);
    assert!(rows[1]["diagnostics"]["stream_weights"]["anchor"].is_number());
    for png in [&outputs.reward_vs_executions, &outputs.reward_vs_steps] {
        assert!(std::fs::metadata(png).unwrap().len() > 10_000, "{png:?}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&outputs.summary).unwrap()).unwrap();
    assert_eq!(summary["modes"].as_array().unwrap().len(), 6);
    let table = report::table(&result);
    for m in Mode::ALL {
        assert!(table.contains(m.name()), "{table}");
    }
}
