//! The shipped task suite, `sklearn-v1`: five tasks built offline from data
//! sets bundled with scikit-learn, and their leaderboards from reference
//! solutions of graded quality that the project runs in its own sandbox.
//!
//! Building is deterministic: the data split and noise come from fixed seeds
//! (`python/generate_tasks.py`), the references are rendered [`Plan`]s with
//! `random_state=0`. Data goes to a git-ignored cache
//! (`.wmrl-cache/research-tasks/<suite>/<task>/`); a task whose files exist is
//! not regenerated, and a task with a `leaderboard.csv` is not re-scored.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::executor::{Outcome, SolutionRunner};
use crate::leaderboard::{Entry, Leaderboard};
use crate::metric::Metric;
use crate::plan::{Family, Plan, Preprocessing};
use crate::task::{Task, files};
use crate::{Error, Result};

/// The generator script (run with the project's Python, outside the sandbox: it is ours).
pub const GENERATOR: &str = include_str!("../python/generate_tasks.py");

/// One task of a suite.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SuiteTask {
    /// Task id and folder name.
    pub id: &'static str,
    /// Title.
    pub title: &'static str,
    /// scikit-learn loader name (`iris` → `load_iris`).
    pub dataset: &'static str,
    /// The metric.
    pub metric: Metric,
    /// Share of rows held out as the test set.
    pub test_fraction: f64,
    /// Seed of the split (and of noise features).
    pub seed: u64,
    /// Gaussian noise columns appended to the features (makes easy data sets discriminate between solutions).
    pub noise_features: usize,
    /// What the data is, for the description.
    pub about: &'static str,
}

/// A named list of tasks.
#[derive(Debug, Clone, Copy)]
pub struct Suite {
    /// Name used with `--suite`.
    pub name: &'static str,
    /// The tasks, in order.
    pub tasks: &'static [SuiteTask],
}

/// The shipped suite.
pub const SKLEARN_V1: Suite = Suite {
    name: "sklearn-v1",
    tasks: &[
        SuiteTask {
            id: "iris-noisy",
            title: "Iris species with distracting features",
            dataset: "iris",
            metric: Metric::Accuracy,
            test_fraction: 0.5,
            seed: 11,
            noise_features: 24,
            about: "Fisher's iris flowers: 4 measurements (f0-f3) followed by 24 columns of pure noise \
                    (f4-f27). Predict the species (0, 1, 2).",
        },
        SuiteTask {
            id: "wine",
            title: "Wine cultivar",
            dataset: "wine",
            metric: Metric::Accuracy,
            test_fraction: 0.4,
            seed: 12,
            noise_features: 0,
            about: "Chemical analysis (13 features on very different scales) of Italian wines. \
                    Predict the cultivar (0, 1, 2).",
        },
        SuiteTask {
            id: "breast-cancer",
            title: "Breast cancer diagnosis",
            dataset: "breast_cancer",
            metric: Metric::RocAuc,
            test_fraction: 0.4,
            seed: 13,
            noise_features: 0,
            about: "30 features of cell nuclei from breast mass images. Predict the probability that \
                    the tumour is benign (class 1).",
        },
        SuiteTask {
            id: "digits",
            title: "Handwritten digits",
            dataset: "digits",
            metric: Metric::MacroF1,
            test_fraction: 0.3,
            seed: 14,
            noise_features: 0,
            about: "8x8 grey-level images of handwritten digits, 64 pixel features (0-16). Predict the digit.",
        },
        SuiteTask {
            id: "diabetes",
            title: "Diabetes progression",
            dataset: "diabetes",
            metric: Metric::Rmse,
            test_fraction: 0.3,
            seed: 15,
            noise_features: 0,
            about: "10 baseline variables of diabetes patients. Predict a quantitative measure of \
                    disease progression one year later.",
        },
    ],
};

/// Every shipped suite.
pub const SUITES: [Suite; 1] = [SKLEARN_V1];

/// Finds a suite by name.
pub fn find_suite(name: &str) -> Result<Suite> {
    SUITES
        .iter()
        .copied()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::UnknownSuite {
            name: name.into(),
            known: SUITES.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
        })
}

/// The default folder of built suites, under a repository or working folder.
pub fn default_cache(root: &Path) -> PathBuf {
    root.join(".wmrl-cache").join("research-tasks")
}

/// Reference solutions, from trivial to strong; the leaderboard is their measured scores.
pub fn references() -> Vec<(&'static str, Plan)> {
    use Family::*;
    use Preprocessing as P;
    let plan = |preprocessing, family, capacity, regularisation| Plan {
        preprocessing,
        family,
        capacity,
        regularisation,
    };
    vec![
        ("constant", plan(P::None, Constant, 0, 0)),
        ("stump", plan(P::None, Tree, 0, 3)),
        ("knn-50-raw", plan(P::None, Knn, 0, 0)),
        ("linear-weak-raw", plan(P::None, Linear, 0, 1)),
        ("knn-15-raw", plan(P::None, Knn, 1, 0)),
        ("tree-depth-4", plan(P::None, Tree, 1, 1)),
        ("linear-standard", plan(P::Standard, Linear, 1, 2)),
        ("knn-5-standard", plan(P::Standard, Knn, 2, 1)),
        ("tree-depth-8", plan(P::None, Tree, 2, 1)),
        ("forest-small", plan(P::None, Forest, 0, 2)),
        ("linear-strong-standard", plan(P::Standard, Linear, 2, 2)),
        ("svm-standard", plan(P::Standard, Svm, 1, 0)),
        ("extra-trees-100", plan(P::None, ExtraTrees, 2, 0)),
        ("forest-200", plan(P::None, Forest, 3, 0)),
        ("boosting-100", plan(P::None, Boosting, 2, 1)),
        ("svm-c10-standard", plan(P::Standard, Svm, 2, 0)),
    ]
}

fn description(task: &SuiteTask) -> String {
    let metric = task.metric;
    let target = match metric.target_kind() {
        crate::metric::TargetKind::Label => "the predicted class label",
        crate::metric::TargetKind::Probability => "the predicted probability (0 to 1) of class 1",
        crate::metric::TargetKind::Value => "the predicted value",
    };
    format!(
        "# {title}\n\n{about}\n\n## Files (in the working folder)\n\
         - `train.csv`: `id`, features `f0`…, `target`.\n\
         - `test.csv`: `id` and the same features, no target.\n\
         - `sample_submission.csv`: a valid submission.\n\n\
         ## Submission\nWrite `submission.csv` with columns `id,target`: one row per test id, \
         `target` being {target}.\n\n## Metric\n{metric} ({direction} is better), ranked against the \
         task's leaderboard.\n\nThe program runs as `python3 solution.py` with numpy and scikit-learn, \
         no network, limited time and memory.\n",
        title = task.title,
        about = task.about,
        direction = metric.direction().name(),
    )
}

#[derive(serde::Deserialize)]
struct Generated {
    classes: Vec<String>,
}

/// Generates the data of `tasks` into `dir` with `python` (skipping tasks already there).
pub fn generate(python: &Path, dir: &Path, tasks: &[SuiteTask]) -> Result<()> {
    let todo: Vec<&SuiteTask> = tasks
        .iter()
        .filter(|t| !dir.join(t.id).join(files::SPEC).is_file())
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    let _span = tracing::info_span!("generate_tasks", tasks = todo.len()).entered();
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let specs: Vec<serde_json::Value> = todo
        .iter()
        .map(|t| {
            serde_json::json!({
                "id": t.id, "dataset": t.dataset, "metric": t.metric.name(), "test_fraction": t.test_fraction,
                "seed": t.seed, "noise_features": t.noise_features,
                "kind": if t.metric.target_kind() == crate::metric::TargetKind::Value { "regression" } else { "classification" },
            })
        })
        .collect();
    let output = std::process::Command::new(python)
        .arg("-c")
        .arg(GENERATOR)
        .arg(serde_json::to_string(&specs).expect("json"))
        .arg(dir)
        .output()
        .map_err(|source| Error::Io {
            path: python.to_path_buf(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::Build {
            what: "task data".into(),
            message: format!(
                "{} generate_tasks.py failed ({}): {}",
                python.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    let generated: std::collections::HashMap<String, Generated> =
        serde_json::from_slice(&output.stdout).map_err(|e| Error::Build {
            what: "task data".into(),
            message: format!("generator output: {e}"),
        })?;
    for task in todo {
        let task_dir = dir.join(task.id);
        let classes = &generated
            .get(task.id)
            .map(|g| g.classes.clone())
            .unwrap_or_default();
        let spec = crate::task::TaskSpec {
            id: task.id.into(),
            title: task.title.into(),
            metric: task.metric.name().into(),
            direction: task.metric.direction(),
            id_column: "id".into(),
            target_column: "target".into(),
            classes: classes.clone(),
        };
        let hidden = task_dir.join("hidden");
        std::fs::set_permissions(&hidden, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .map_err(|source| Error::Io {
                path: hidden,
                source,
            })?;
        wmrl_report::write_atomic(
            &task_dir.join(files::DESCRIPTION),
            description(task).as_bytes(),
        )?;
        let toml = toml::to_string(&spec).expect("task spec serialises");
        wmrl_report::write_atomic(&task_dir.join(files::SPEC), toml.as_bytes())?;
    }
    Ok(())
}

/// Progress of leaderboard building: (task id, reference name, outcome).
pub type Progress<'a> = &'a (dyn Fn(&str, &str, &Outcome) + Sync);

/// Runs the reference solutions of every task lacking a leaderboard and writes it.
pub async fn build_leaderboards(
    runner: &SolutionRunner,
    dirs: &[PathBuf],
    progress: Progress<'_>,
) -> Result<()> {
    for dir in dirs {
        let task = Arc::new(Task::load(dir)?);
        if task.leaderboard.is_some() {
            continue;
        }
        tracing::info!(
            task = task.id(),
            "running reference solutions for the leaderboard"
        );
        let refs = references();
        let items: Vec<(Arc<Task>, String)> = refs
            .iter()
            .map(|(_, plan)| (task.clone(), plan.render(&task)))
            .collect();
        let reference_dir = dir.join("references");
        std::fs::create_dir_all(&reference_dir).map_err(|source| Error::Io {
            path: reference_dir.clone(),
            source,
        })?;
        let results = runner.run_batch(&items).await;
        let mut entries = Vec::new();
        for (((name, _), (_, text)), result) in refs.iter().zip(&items).zip(results) {
            let record = result?;
            progress(task.id(), name, &record.outcome);
            wmrl_report::write_atomic(&reference_dir.join(format!("{name}.py")), text.as_bytes())?;
            match record.outcome {
                Outcome::Scored { score } => entries.push(Entry {
                    name: name.to_string(),
                    score,
                }),
                other => {
                    return Err(Error::Build {
                        what: format!("leaderboard of {}", task.id()),
                        message: format!("reference `{name}` did not score: {other:?}"),
                    });
                }
            }
        }
        Leaderboard::new(entries, task.metric.direction()).save(&dir.join(files::LEADERBOARD))?;
    }
    Ok(())
}

/// Loads a built suite's tasks in order.
pub fn load(dir: &Path, suite: &Suite) -> Result<Vec<Task>> {
    suite
        .tasks
        .iter()
        .map(|t| Task::load(&dir.join(t.id)))
        .collect()
}
