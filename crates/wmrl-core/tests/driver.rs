//! The generic step driver against scripted components: who is called in
//! which mode, re-queued execution errors, and broken contracts.

use std::cell::Cell;
use std::fmt;

use wmrl_core::seams::{
    Adapter, AnchorExecutor, Batch, EpisodeRequest, ExecutedEpisode, Execution, Imagined, Policy,
    WorldModel,
};
use wmrl_core::{Core, CoreConfig, Mode, Stream, TaskId};

#[derive(Debug)]
struct Boom;
impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("boom")
    }
}
impl std::error::Error for Boom {}

/// Prompts are `g % 3`; a rollout is (prompt, sample, seed).
struct Domain;
impl Adapter for Domain {
    type Prompt = u32;
    type Rollout = (u32, usize, u64);
    type Error = Boom;
    fn prompts(&mut self, _step: u64, count: usize) -> Result<Vec<u32>, Boom> {
        Ok((0..count as u32).map(|g| g % 3).collect())
    }
    fn task(&self, prompt: &u32) -> TaskId {
        *prompt
    }
}

#[derive(Default)]
struct Learner {
    batches: Vec<Batch<u32, (u32, usize, u64)>>,
}
impl Policy<Domain> for Learner {
    type Error = Boom;
    fn learn(&mut self, batch: Batch<u32, (u32, usize, u64)>) -> Result<(), Boom> {
        self.batches.push(batch);
        Ok(())
    }
}

/// Fails every episode whose first attempt has sample index 1 once; counts calls.
#[derive(Default)]
struct Executor {
    calls: Cell<usize>,
    fail_first_attempt_of_sample: Option<usize>,
    always_fail: bool,
    drop_one: bool,
    /// Episodes of this prompt all get reward 0 (an uninformative group).
    flat_prompt: Option<u32>,
}
impl<P> AnchorExecutor<Domain, P> for Executor {
    type Error = Boom;
    fn execute(
        &mut self,
        _: &P,
        eps: &[EpisodeRequest<'_, u32>],
    ) -> Result<Vec<Execution<(u32, usize, u64)>>, Boom> {
        self.calls.set(self.calls.get() + 1);
        let mut out: Vec<_> = eps
            .iter()
            .map(|e| {
                if self.always_fail
                    || (Some(e.sample) == self.fail_first_attempt_of_sample && e.attempt == 0)
                {
                    Execution::Failed {
                        reason: format!("robot vanished in group {}", e.group),
                    }
                } else {
                    Execution::Completed {
                        rollout: (*e.prompt, e.sample, e.seed),
                        reward: if Some(*e.prompt) == self.flat_prompt {
                            0.0
                        } else {
                            (e.sample % 2) as f64
                        },
                    }
                }
            })
            .collect();
        if self.drop_one {
            out.pop();
        }
        Ok(out)
    }
}

#[derive(Default)]
struct Model {
    imagined: usize,
    scored: usize,
    observed: usize,
    /// Added to imagined scores (the executed rollouts' scores lack it).
    imagine_bias: f64,
    /// (prompt, seed) of every imagined episode, and how many episodes the
    /// model had observed when it imagined them.
    imagined_requests: Vec<(u32, u64, usize)>,
    /// Imagined episodes of this prompt all score 0.5.
    flat_prompt: Option<u32>,
}
impl<P> WorldModel<Domain, P> for Model {
    type Error = Boom;
    fn imagine(
        &mut self,
        _: &P,
        eps: &[EpisodeRequest<'_, u32>],
    ) -> Result<Vec<Imagined<(u32, usize, u64)>>, Boom> {
        self.imagined += eps.len();
        let observed = self.observed;
        self.imagined_requests
            .extend(eps.iter().map(|e| (*e.prompt, e.seed, observed)));
        Ok(eps
            .iter()
            .map(|e| Imagined {
                rollout: (*e.prompt, e.sample, e.seed),
                score: if Some(*e.prompt) == self.flat_prompt {
                    0.5
                } else {
                    0.1 * e.sample as f64 + self.imagine_bias
                },
            })
            .collect())
    }
    fn score(
        &mut self,
        eps: &[ExecutedEpisode<'_, u32, (u32, usize, u64)>],
    ) -> Result<Vec<f64>, Boom> {
        self.scored += eps.len();
        Ok(eps.iter().map(|e| 0.1 * e.sample as f64).collect())
    }
    fn observe(&mut self, eps: &[ExecutedEpisode<'_, u32, (u32, usize, u64)>]) -> Result<(), Boom> {
        self.observed += eps.len();
        Ok(())
    }
}

fn core(mode: Mode) -> Core {
    Core::new(CoreConfig {
        mode,
        groups: 20,
        group_size: 4,
        ..CoreConfig::default()
    })
    .unwrap()
}

#[test]
fn each_mode_calls_only_what_it_needs() {
    for (mode, anchors) in [
        (Mode::Real, 20),
        (Mode::WmOnly, 0),
        (Mode::Wmrl, 2),
        (Mode::Ppi, 2),
    ] {
        let (mut learner, mut wm, mut ex) =
            (Learner::default(), Model::default(), Executor::default());
        let mut c = core(mode);
        let report = wmrl_core::step(&mut c, &mut Domain, &mut learner, &mut wm, &mut ex).unwrap();
        assert_eq!(report.executions, anchors * 4, "{mode}");
        assert_eq!(report.imagined, (20 - anchors) * 4, "{mode}");
        let scored = if mode.mixes_streams() { anchors * 4 } else { 0 };
        assert_eq!(
            (report.scored, wm.scored, wm.observed),
            (scored, scored, scored),
            "{mode}"
        );
        let batch = &learner.batches[0];
        assert_eq!(batch.samples.len(), 80);
        assert_eq!(batch.prompts.len(), 20);
        // Rollouts line up with their signals and prompts.
        for s in &batch.samples {
            assert_eq!(s.rollout.0, batch.prompts[s.signal.group]);
            assert_eq!(s.rollout.1, s.signal.sample);
        }
        let anchor_samples = batch
            .samples
            .iter()
            .filter(|s| s.stream() == Stream::Anchor)
            .count();
        assert_eq!(anchor_samples, anchors * 4, "{mode}");
        assert_eq!(c.step(), 1);
    }
}

#[test]
fn twin_scoring_pairs_anchors_with_imagined_twins() {
    use wmrl_core::AnchorScoring;
    for (scoring, mode, twins) in [
        (AnchorScoring::Replay, Mode::Wmrl, false),
        (AnchorScoring::Twin, Mode::Wmrl, true),
        (AnchorScoring::Twin, Mode::WmrlNoDenoise, true),
        (AnchorScoring::Twin, Mode::WmrlNoDebias, true),
        (AnchorScoring::Twin, Mode::Ppi, false),
        (AnchorScoring::Twin, Mode::Real, false),
        (AnchorScoring::Twin, Mode::WmOnly, false),
    ] {
        let (mut learner, mut ex) = (Learner::default(), Executor::default());
        let mut wm = Model {
            imagine_bias: 0.5,
            ..Default::default()
        };
        let mut c = Core::new(CoreConfig {
            mode,
            groups: 20,
            group_size: 4,
            anchor_scoring: scoring,
            ..CoreConfig::default()
        })
        .unwrap();
        let report = wmrl_core::step(&mut c, &mut Domain, &mut learner, &mut wm, &mut ex).unwrap();
        let label = format!("{scoring:?} {mode}");
        let twin_count = if twins { report.executions } else { 0 };
        assert_eq!(report.twins, twin_count, "{label}");
        assert_eq!(wm.imagined, report.imagined + twin_count, "{label}");
        // The executed anchors are still scored and observed.
        assert_eq!((wm.scored, wm.observed), (report.scored, report.scored));
        // Each twin has its anchor's prompt and seed and was imagined
        // before the world model observed any real outcome.
        let anchors: Vec<(u32, u64, usize)> = learner.batches[0]
            .samples
            .iter()
            .filter(|s| s.stream() == Stream::Anchor)
            .map(|s| (s.rollout.0, s.rollout.2, 0))
            .collect();
        let imagined_twins = &wm.imagined_requests[report.imagined..];
        if twins {
            assert_eq!(imagined_twins, &anchors[..], "{label}");
        } else {
            assert!(imagined_twins.is_empty(), "{label}");
        }
        // The calibrator's pairs carry the twins' (biased) scores.
        let scores: Vec<f64> = c.calibrator().window().map(|(p, _)| p.score).collect();
        if mode.mixes_streams() {
            assert_eq!(scores.len(), report.executions, "{label}");
            let biased = scores.iter().all(|&s| s >= 0.5);
            let unbiased = scores.iter().all(|&s| s < 0.5);
            assert!(if twins { biased } else { unbiased }, "{label}: {scores:?}");
        }
    }
}

#[test]
fn execution_errors_are_requeued_with_fresh_seeds() {
    let (mut learner, mut wm) = (Learner::default(), Model::default());
    let mut ex = Executor {
        fail_first_attempt_of_sample: Some(1),
        ..Default::default()
    };
    let mut c = core(Mode::Wmrl);
    let report = wmrl_core::step(&mut c, &mut Domain, &mut learner, &mut wm, &mut ex).unwrap();
    assert_eq!((report.executions, report.execution_failures), (8, 2));
    assert_eq!(ex.calls.get(), 2, "one retry round");
    let anchors: Vec<_> = learner.batches[0]
        .samples
        .iter()
        .filter(|s| s.stream() == Stream::Anchor)
        .collect();
    assert_eq!(anchors.len(), 8);
    let retried: Vec<_> = anchors.iter().filter(|s| s.signal.sample == 1).collect();
    let first: Vec<_> = anchors.iter().filter(|s| s.signal.sample == 0).collect();
    assert_ne!(retried[0].rollout.2, first[0].rollout.2);
    // The same step again gives the same seeds: determinism includes re-queues.
    let (mut l2, mut wm2) = (Learner::default(), Model::default());
    let mut ex2 = Executor {
        fail_first_attempt_of_sample: Some(1),
        ..Default::default()
    };
    wmrl_core::step(
        &mut core(Mode::Wmrl),
        &mut Domain,
        &mut l2,
        &mut wm2,
        &mut ex2,
    )
    .unwrap();
    assert_eq!(l2.batches[0].samples, learner.batches[0].samples);
}

#[test]
fn exhausted_episodes_and_broken_contracts_stop_the_step() {
    let (mut learner, mut wm) = (Learner::default(), Model::default());
    let mut ex = Executor {
        always_fail: true,
        ..Default::default()
    };
    let mut c = core(Mode::Real);
    let err = wmrl_core::step(&mut c, &mut Domain, &mut learner, &mut wm, &mut ex)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("anchor episode (group 0, sample 0) failed to execute 4 times"),
        "{err}"
    );
    assert!(err.contains("robot vanished in group 0"), "{err}");
    assert_eq!((c.step(), learner.batches.len()), (0, 0));

    let mut ex = Executor {
        drop_one: true,
        ..Default::default()
    };
    let err = wmrl_core::step(&mut c, &mut Domain, &mut learner, &mut wm, &mut ex)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "the anchor executor returned 79 results for 80 requests"
    );
}

/// Dynamic sampling replaces each group whose values are all equal with a
/// group on a new prompt, of the same stream, until the step holds `groups`
/// informative groups or the cap of extra rollouts is spent; the dropped
/// groups stay in the batch (with zero advantages), and every episode run
/// counts as an execution.
#[test]
fn dynamic_sampling_drops_and_refills_uninformative_groups() {
    use wmrl_core::DynamicSampling;
    // Prompts are g % 3, and prompt 0's groups are uninformative: groups 0
    // and 3 of the six planned; the refills get prompts 0, 1, 2 in turn.
    let run = |mode: Mode, cap_groups: usize| {
        let mut core = Core::new(CoreConfig {
            mode,
            groups: 6,
            group_size: 4,
            dynamic_sampling: DynamicSampling {
                enabled: true,
                max_extra_rollouts: cap_groups * 4,
            },
            ..CoreConfig::default()
        })
        .unwrap();
        let mut learner = Learner::default();
        let mut wm = Model {
            flat_prompt: Some(0),
            ..Model::default()
        };
        let mut ex = Executor {
            flat_prompt: Some(0),
            ..Executor::default()
        };
        let report =
            wmrl_core::step(&mut core, &mut Domain, &mut learner, &mut wm, &mut ex).unwrap();
        (report, learner.batches.pop().unwrap())
    };
    // Cap of two groups: refills on prompts 0 (uninformative again) and 1.
    let (report, batch) = run(Mode::Real, 2);
    let counts = report.sampling;
    assert_eq!(
        (
            counts.dropped_anchor,
            counts.refilled_anchor,
            counts.informative
        ),
        (3, 2, 5)
    );
    assert_eq!(report.executions, 8 * 4, "dropped groups' episodes count");
    assert_eq!(batch.prompts, vec![0, 1, 2, 0, 1, 2, 0, 1]);
    assert_eq!(batch.samples.len(), 32);
    for s in &batch.samples {
        assert_eq!(s.rollout.0, batch.prompts[s.signal.group]);
        let flat = batch.prompts[s.signal.group] == 0;
        assert_eq!(s.signal.advantage == 0.0, flat, "group {}", s.signal.group);
    }
    let mut seeds: Vec<u64> = batch.samples.iter().map(|s| s.rollout.2).collect();
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), 32, "refill episodes get fresh seeds");
    // A larger cap fills the step: a third refill round (prompt 2).
    let (report, batch) = run(Mode::Real, 5);
    let counts = report.sampling;
    assert_eq!(
        (
            counts.dropped_anchor,
            counts.refilled_anchor,
            counts.informative
        ),
        (3, 3, 6)
    );
    assert_eq!((report.executions, batch.prompts.len()), (9 * 4, 9));
    // Imagined groups are judged on their scores and refilled imagined.
    let (report, batch) = run(Mode::WmOnly, 2);
    let counts = report.sampling;
    assert_eq!(
        (
            counts.dropped_world_model,
            counts.refilled_world_model,
            counts.dropped_anchor,
            counts.informative
        ),
        (3, 2, 0, 5)
    );
    assert_eq!((report.executions, report.imagined), (0, 8 * 4));
    assert_eq!(batch.prompts.len(), 8);
    // Off: nothing is refilled, the uninformative groups are only counted.
    let mut core = core(Mode::Real);
    let mut ex = Executor {
        flat_prompt: Some(0),
        ..Executor::default()
    };
    let report = wmrl_core::step(
        &mut core,
        &mut Domain,
        &mut Learner::default(),
        &mut Model::default(),
        &mut ex,
    )
    .unwrap();
    assert_eq!(
        (
            report.sampling.dropped_anchor,
            report.sampling.refilled_anchor
        ),
        (7, 0)
    );
    assert_eq!(report.executions, 20 * 4);
}
