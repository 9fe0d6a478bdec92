//! The task format: generation from scikit-learn's bundled data (deterministic),
//! loading, and bad task folders named precisely.

use std::path::Path;

use wmrl_research::suite::{self, SKLEARN_V1};
use wmrl_research::{Metric, Task};

fn python() -> std::path::PathBuf {
    wmrl_research::python::find_python(venv_python().as_deref()).unwrap()
}

#[test]
fn generation_is_deterministic_and_hides_the_answers() {
    let wine: Vec<_> = SKLEARN_V1
        .tasks
        .iter()
        .copied()
        .filter(|t| t.id == "wine")
        .collect();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    suite::generate(&python(), a.path(), &wine).unwrap();
    suite::generate(&python(), b.path(), &wine).unwrap();
    for file in [
        "task.toml",
        "public/train.csv",
        "public/test.csv",
        "hidden/answers.csv",
        "description.md",
    ] {
        let x = std::fs::read(a.path().join("wine").join(file)).unwrap();
        let y = std::fs::read(b.path().join("wine").join(file)).unwrap();
        assert_eq!(x, y, "{file} differs between two generations");
    }
    let task = Task::load(&a.path().join("wine")).unwrap();
    assert_eq!(task.metric, Metric::Accuracy);
    assert_eq!(task.spec.classes, ["0", "1", "2"]);
    assert_eq!(task.test_ids.len(), 71); // round(178 · 0.4)
    assert!(task.leaderboard.is_none());
    let test_header = std::fs::read_to_string(a.path().join("wine/public/test.csv")).unwrap();
    assert!(!test_header.lines().next().unwrap().contains("target"));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(a.path().join("wine/hidden"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    // Every public file a sandbox receives, and nothing hidden.
    let names: Vec<String> = task.public_files().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["train.csv", "test.csv", "sample_submission.csv"]);
}

fn write_task(dir: &Path, toml: &str) {
    let w = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w("task.toml", toml);
    w("description.md", "d\n");
    w("public/train.csv", "id,f0,target\n1,0.0,0\n2,1.0,1\n");
    w("public/test.csv", "id,f0\n3,0.5\n");
    w("public/sample_submission.csv", "id,target\n3,0\n");
    w("hidden/answers.csv", "id,target\n3,1\n");
}

#[test]
fn bad_task_folders_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t");
    let good = "id = \"t\"\ntitle = \"T\"\nmetric = \"accuracy\"\ndirection = \"higher\"\nclasses = [\"0\", \"1\"]\n";
    write_task(&t, good);
    assert!(Task::load(&t).is_ok());

    std::fs::remove_file(t.join("hidden/answers.csv")).unwrap();
    let err = Task::load(&t).unwrap_err().to_string();
    assert!(err.contains("missing hidden/answers.csv"), "{err}");

    write_task(&t, &good.replace("accuracy", "auc"));
    let err = Task::load(&t).unwrap_err().to_string();
    assert!(
        err.contains("task.toml")
            && err.contains("unknown metric `auc`")
            && err.contains("roc-auc"),
        "{err}"
    );

    write_task(&t, &good.replace("higher", "lower"));
    let err = Task::load(&t).unwrap_err().to_string();
    assert!(err.contains("contradicts metric `accuracy`"), "{err}");

    write_task(&t, &format!("{good}colour = \"red\"\n"));
    let err = Task::load(&t).unwrap_err().to_string();
    assert!(err.contains("colour"), "{err}");

    write_task(&t, good);
    std::fs::write(t.join("hidden/answers.csv"), "id,target\n4,1\n").unwrap();
    let err = Task::load(&t).unwrap_err().to_string();
    assert!(
        err.contains("answers.csv") && err.contains("no answer for test id `3`"),
        "{err}"
    );

    write_task(&t, good);
    std::fs::write(t.join("leaderboard.csv"), "name,score\na,0.5\nb,oops\n").unwrap();
    let err = Task::load(&t).unwrap_err().to_string();
    assert!(
        err.contains("leaderboard.csv:3") && err.contains("oops"),
        "{err}"
    );
}

#[test]
fn submissions_are_scored_against_the_hidden_answers() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t");
    write_task(
        &t,
        "id = \"t\"\ntitle = \"T\"\nmetric = \"accuracy\"\ndirection = \"higher\"\nclasses = [\"0\", \"1\"]\n",
    );
    std::fs::write(
        t.join("leaderboard.csv"),
        "name,score\nworst,0.0\nbest,1.0\n",
    )
    .unwrap();
    let task = Task::load(&t).unwrap();
    use wmrl_research::submission::score_submission;
    assert_eq!(score_submission(&task, b"id,target\n3,1\n"), Ok(1.0));
    assert_eq!(score_submission(&task, b"id,target\n3,0\n"), Ok(0.0));
    assert!(
        score_submission(&task, b"id,target\n3,1\n3,1\n")
            .unwrap_err()
            .contains("appears twice")
    );
    assert!(
        score_submission(&task, b"id,prediction\n3,1\n")
            .unwrap_err()
            .contains("no `target` column")
    );
    assert!(
        score_submission(&task, b"id,target\n")
            .unwrap_err()
            .contains("1 test ids missing")
    );
    assert_eq!(task.percentile(1.0).unwrap(), 1.0);
}

/// The project venv's python (`cargo xtask` creates it), if there.
fn venv_python() -> Option<std::path::PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join(".venv/bin/python"))
        .find(|p| p.is_file())
}
