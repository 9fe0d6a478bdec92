//! A training step with the anchor stream overlapped: the simulator
//! executes the anchor groups on a worker thread, with a snapshot of the
//! policy, while the world model imagines the other groups on the calling
//! thread; then the anchors are scored, the core fuses and the learner
//! steps. The phases, seeds and data are those of [`wmrl_core::step`]
//! (built from the same public phases, dynamic sampling's refill rounds
//! included), so the result is the same; only the wall-clock differs.
//!
//! Learning is not overlapped with execution: the next iteration's anchors
//! need the policy after this iteration's update (GRPO is on-policy).

use wmrl_core::StepReport;
use wmrl_core::driver::{self, ExecutedAnchors};
use wmrl_vla::VlaPolicy;
use wmrl_vla::grpo::VlaLearner;
use wmrl_vla::rollout::VlaAdapter;
use wmrl_wm::VlaWorldModel;

use crate::Result;
use crate::anchors::AnchorStream;
use crate::timed::Timed;

/// One step of the core with anchor execution running beside imagination.
pub fn overlapped_step(
    core: &mut wmrl_core::Core,
    adapter: &mut VlaAdapter,
    learner: &mut Timed<VlaLearner>,
    world_model: &mut Timed<VlaWorldModel>,
    executor: &mut Timed<AnchorStream>,
) -> Result<StepReport> {
    type Learner = Timed<VlaLearner>;
    let plan = driver::plan_step(core, adapter)?;
    let _span =
        tracing::info_span!("train_step", step = plan.step, mode = %plan.config.mode, overlapped = true)
            .entered();
    let anchor_requests = plan.requests(true);
    let wm_requests = plan.requests(false);
    // tch tensors are not `Sync`: the worker gets its own copy of the weights.
    let snapshot: Option<VlaPolicy> = if anchor_requests.is_empty() {
        None
    } else {
        Some(learner.inner.policy().try_clone()?)
    };
    let (executed, imagined) = std::thread::scope(|scope| {
        let worker = snapshot.map(|policy| {
            let requests = &anchor_requests;
            let executor = &mut *executor;
            let config = plan.config;
            let step = plan.step;
            let parent = tracing::Span::current();
            scope.spawn(move || {
                let _span = parent.entered();
                driver::execute_anchors::<VlaAdapter, VlaPolicy, _>(
                    executor,
                    &policy,
                    requests,
                    config.seed,
                    step,
                    config.max_attempts,
                )
            })
        });
        // The anchors' twins (if any) are imagined with the world-model
        // groups, before the world model observes the real outcomes.
        let imagined = driver::imagine_with_twins::<VlaAdapter, Learner, _>(
            world_model,
            &*learner,
            &plan,
            &wm_requests,
        );
        let executed = match worker {
            Some(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => Ok(ExecutedAnchors {
                episodes: Vec::new(),
                failures: 0,
            }),
        };
        (executed, imagined)
    });
    let (executed, imagined) = (executed?, imagined?);
    let anchor_scores = driver::score_anchors::<VlaAdapter, Learner, _>(
        world_model,
        &plan,
        &anchor_requests,
        &executed.episodes,
        imagined.twins,
    )?;
    drop(anchor_requests);
    drop(wm_requests);
    let round = driver::Round {
        plan,
        executed,
        anchor_scores,
        imagined: imagined.groups,
        sampling: Default::default(),
    };
    // Refill rounds (dynamic sampling) are rare and short: not overlapped.
    let round = driver::refill::<VlaAdapter, Learner, _, _>(
        core,
        adapter,
        learner,
        world_model,
        executor,
        round,
    )?;
    Ok(driver::finish_step::<VlaAdapter, Learner>(
        core, learner, round,
    )?)
}
