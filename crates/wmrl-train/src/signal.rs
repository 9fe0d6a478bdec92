//! Which tasks give the learner a signal: a task whose groups all have equal
//! rewards (every rollout fails, or every one succeeds) contributes nothing
//! to GRPO's gradient. This tracks, per task, how many consecutive
//! iterations it trained without one informative group, so a run can say
//! which tasks are starved (a curriculum, a higher temperature or more
//! rollouts per group would give them signal).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wmrl_vla::grpo::TaskGroups;

/// A task that trained without signal for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StarvedTask {
    /// Task index in the suite.
    pub task: usize,
    /// Consecutive iterations, up to the latest, in which the task had
    /// groups and none of them was informative.
    pub iterations: u64,
    /// Iterations of the run in which the task had an informative group.
    pub informative_iterations: u64,
}

/// Per-task counters, saved in each checkpoint so a resumed run counts on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SignalTracker {
    /// Task → (consecutive iterations without signal, iterations with signal).
    tasks: BTreeMap<usize, (u64, u64)>,
}

impl SignalTracker {
    /// Counts one iteration's batch: a task with groups and no informative
    /// one extends its run without signal; one informative group ends it.
    /// Tasks without groups this iteration keep their counts.
    pub fn record(&mut self, groups: &[TaskGroups]) {
        for g in groups.iter().filter(|g| g.groups > 0) {
            let (without, with) = self.tasks.entry(g.task).or_default();
            if g.informative > 0 {
                *without = 0;
                *with += 1;
            } else {
                *without += 1;
            }
        }
    }

    /// Tasks whose current run without signal is at least `after`
    /// iterations long (none when `after` is 0), in task order.
    pub fn starved(&self, after: u64) -> Vec<StarvedTask> {
        if after == 0 {
            return Vec::new();
        }
        self.tasks
            .iter()
            .filter(|(_, (without, _))| *without >= after)
            .map(
                |(&task, &(iterations, informative_iterations))| StarvedTask {
                    task,
                    iterations,
                    informative_iterations,
                },
            )
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(task: usize, groups: usize, informative: usize) -> TaskGroups {
        TaskGroups {
            task,
            groups,
            informative,
        }
    }

    #[test]
    fn a_task_is_starved_after_consecutive_iterations_without_signal() {
        let mut tracker = SignalTracker::default();
        for _ in 0..3 {
            tracker.record(&[groups(3, 2, 0), groups(5, 2, 1)]);
        }
        assert_eq!(tracker.starved(4), vec![]);
        let starved = vec![StarvedTask {
            task: 3,
            iterations: 3,
            informative_iterations: 0,
        }];
        assert_eq!(tracker.starved(3), starved);
        assert_eq!(tracker.starved(0), vec![], "0 turns the report off");
        // An iteration without task 3's groups keeps its count ...
        tracker.record(&[groups(5, 4, 0)]);
        assert_eq!(tracker.starved(3), starved);
        // ... and one informative group ends the run.
        tracker.record(&[groups(3, 2, 1)]);
        assert!(tracker.starved(1).iter().all(|s| s.task != 3));
        tracker.record(&[groups(3, 2, 0), groups(5, 1, 0)]);
        assert_eq!(
            tracker.starved(2),
            vec![StarvedTask {
                task: 5,
                iterations: 2,
                informative_iterations: 3,
            }]
        );
    }
}
