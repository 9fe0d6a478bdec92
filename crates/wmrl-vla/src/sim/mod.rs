//! The Rapier simulator (`wmrl-sim`) as an anchor executor for the policy and
//! as the source of expert demonstrations (feature `sim`).

pub mod collect;
pub mod executor;
pub mod takeover;

pub use collect::{CollectOptions, CollectSummary, Perturbations, collect_demos};
pub use executor::{SimExecutor, SimExecutorOptions};
pub use takeover::{TakeoverOptions, TakeoverSummary, collect_takeover_demos};

/// The suite the simulator implements.
pub const SUITE: &str = "libero-long";

/// `(task index, instruction)` of every LIBERO-Long task.
pub fn suite_tasks() -> Vec<(usize, String)> {
    wmrl_sim::libero_long_tasks()
        .into_iter()
        .map(|t| (t.index, t.instruction))
        .collect()
}

/// An adapter over `tasks` (all ten when empty) with the 50 fixed initial states.
pub fn libero_adapter(tasks: &[usize], seed: u64) -> crate::Result<crate::rollout::VlaAdapter> {
    let all = suite_tasks();
    let chosen = if tasks.is_empty() {
        all
    } else {
        tasks
            .iter()
            .map(|&t| {
                all.iter().find(|(i, _)| *i == t).cloned().ok_or_else(|| {
                    crate::Error::mismatch("task index", format!("0..{}", wmrl_sim::NUM_TASKS), t)
                })
            })
            .collect::<crate::Result<Vec<_>>>()?
    };
    Ok(crate::rollout::VlaAdapter {
        tasks: chosen,
        states: wmrl_sim::NUM_INIT_STATES,
        seed,
    })
}
