//! Hostile AutoResearch solutions, each contained with the right outcome and
//! the machine unharmed: an infinite loop, a sleeping loop, a memory bomb, a
//! fork bomb, a huge output, a huge file, writes outside the work folder, an
//! attempt to read the hidden answers, a network connection, a submission
//! with wrong ids and one with NaN. Limits are small so the file runs in
//! seconds.

mod sandbox_support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sandbox_support::{say_if_unisolated, test_isolation, venv_python};
use wmrl_research::executor::{ExecutionRecord, Outcome};
use wmrl_research::{SolutionRunner, Task};
use wmrl_sandbox::{LimitKind, Limits};

/// A tiny binary task (ROC-AUC) written by hand: ids 100.., feature = label + noise.
fn tiny_task(dir: &Path) -> Task {
    let w = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    w(
        "task.toml",
        "id = \"tiny\"\ntitle = \"Tiny\"\nmetric = \"roc-auc\"\ndirection = \"higher\"\nclasses = [\"0\", \"1\"]\n",
    );
    w("description.md", "Predict the probability of class 1.\n");
    let mut train = String::from("id,f0,target\n");
    for i in 0..20 {
        train.push_str(&format!("{},{}.{},{}\n", 100 + i, i % 2, i, i % 2));
    }
    w("public/train.csv", &train);
    let (mut test, mut sample, mut answers) = (
        String::from("id,f0\n"),
        String::from("id,target\n"),
        String::from("id,target\n"),
    );
    for i in 0..10 {
        test.push_str(&format!("{},{}.5\n", 200 + i, i % 2));
        sample.push_str(&format!("{},0.5\n", 200 + i));
        answers.push_str(&format!("{},{}\n", 200 + i, i % 2));
    }
    w("public/test.csv", &test);
    w("public/sample_submission.csv", &sample);
    w("hidden/answers.csv", &answers);
    w("leaderboard.csv", "name,score\nconstant,0.5\nperfect,1.0\n");
    Task::load(dir).unwrap()
}

fn python() -> PathBuf {
    wmrl_research::python::find_python(venv_python().as_deref()).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    task: Arc<Task>,
    runner: SolutionRunner,
    rt: tokio::runtime::Runtime,
}

impl Fixture {
    fn new(limits: Limits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let task = Arc::new(tiny_task(&dir.path().join("tiny")));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sandbox = rt
            .block_on(wmrl_research::python::sandbox(
                &python(),
                limits,
                2,
                test_isolation(),
            ))
            .unwrap();
        say_if_unisolated(&sandbox);
        Self {
            _dir: dir,
            task,
            runner: SolutionRunner::new(sandbox, None),
            rt,
        }
    }

    fn run(&self, solution: &str) -> ExecutionRecord {
        self.rt
            .block_on(self.runner.run(&self.task, solution))
            .unwrap()
    }

    fn isolated(&self) -> bool {
        self.runner.sandbox().isolation().is_isolated()
    }
}

fn small_limits() -> Limits {
    Limits {
        wall_time_s: 4.0,
        cpu_time_s: 2,
        address_space: 1 << 30,
        file_size: 4 << 20,
        processes: 16,
        output_bytes: 16 << 10,
        ..Limits::default()
    }
}

/// Copies the sample submission: a valid, constant answer.
const VALID: &str = "import shutil\nshutil.copy('sample_submission.csv', 'submission.csv')\n";

/// Processes on the machine owned by `uid`.
/// Live processes of `uid`: zombies (killed, waiting for their new parent,
/// init, to reap them) do not count; they hold no memory and run nothing.
fn processes_of(uid: u32) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
        };
        let owner = field("Uid:").and_then(|u| u.parse::<u32>().ok());
        let dead = matches!(field("State:"), Some("Z" | "X"));
        if owner == Some(uid) && !dead {
            n += 1;
        }
    }
    n
}

#[test]
fn a_valid_solution_is_scored_and_ranked() {
    let f = Fixture::new(small_limits());
    eprintln!("isolation: {}", f.runner.sandbox().isolation());
    let r = f.run(VALID);
    assert_eq!(r.outcome, Outcome::Scored { score: 0.5 });
    assert_eq!(r.percentile, Some(0.0));
    let perfect = "import csv\nrows = list(csv.reader(open('test.csv')))[1:]\n\
                   with open('submission.csv', 'w') as f:\n    f.write('id,target\\n')\n    \
                   for r in rows:\n        f.write(r[0] + ',' + ('1' if float(r[1]) > 1 else '0') + '\\n')\n";
    let r = f.run(perfect);
    assert_eq!(r.outcome, Outcome::Scored { score: 1.0 }, "{:?}", r.outcome);
    assert_eq!(r.percentile, Some(1.0));
}

#[test]
fn loops_are_stopped_by_the_cpu_limit_or_the_wall_clock() {
    // A generous wall clock so that the CPU limit bites first even on a loaded machine.
    let f = Fixture::new(Limits {
        cpu_time_s: 1,
        wall_time_s: 15.0,
        ..small_limits()
    });
    let busy = f.run("while True:\n    pass\n");
    assert_eq!(
        busy.outcome,
        Outcome::ResourceLimit {
            limit: LimitKind::CpuTime
        }
    );
    let f = Fixture::new(Limits {
        wall_time_s: 2.0,
        ..small_limits()
    });
    let sleepy = f.run("import time\nwhile True:\n    time.sleep(0.1)\n");
    assert_eq!(sleepy.outcome, Outcome::TimedOut);
    assert!(
        sleepy.wall_time_s < 2.0 + 3.0,
        "killed soon after the limit: {}",
        sleepy.wall_time_s
    );
}

#[test]
fn a_memory_bomb_hits_the_address_space_limit() {
    // Generous CPU and wall-clock limits: zero-filling 1 GiB in page faults
    // takes seconds of CPU on a loaded 2-core machine, and this test is about
    // the address-space limit only.
    let f = Fixture::new(Limits {
        cpu_time_s: 20,
        wall_time_s: 40.0,
        ..small_limits()
    });
    // RLIMIT_AS refuses the allocations before any page is used, so the
    // kernel counts nothing: the run is a crash whose stderr says MemoryError
    // (a limit is only reported on the kernel's evidence, never on text a
    // solution could print).
    let refused = |outcome: &Outcome| match outcome {
        Outcome::Crashed { stderr_tail, .. } => stderr_tail.contains("MemoryError"),
        _ => false,
    };
    let big = f.run("x = bytearray(8 << 30)\n");
    assert!(refused(&big.outcome), "{:?}", big.outcome);
    let creeping = f.run("chunks = []\nwhile True:\n    chunks.append(bytearray(64 << 20))\n");
    assert!(refused(&creeping.outcome), "{:?}", creeping.outcome);
}

#[test]
fn a_fork_bomb_is_contained_and_leaves_nothing_behind() {
    let f = Fixture::new(Limits {
        processes: 8,
        wall_time_s: 3.0,
        ..small_limits()
    });
    let bomb =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let job = wmrl_sandbox::Job {
        args: vec!["solution.py".into()],
        files: vec![(
            "solution.py".into(),
            wmrl_sandbox::JobFile::Bytes(bomb.as_bytes().into()),
        )],
        collect: vec!["submission.csv".into()],
        ..Default::default()
    };
    let report = f.rt.block_on(f.runner.sandbox().run(job)).unwrap();
    let outcome = Outcome::from_report(&f.task, &report);
    assert!(
        matches!(
            outcome,
            Outcome::TimedOut
                | Outcome::ResourceLimit {
                    limit: LimitKind::Processes | LimitKind::CpuTime
                }
        ),
        "{outcome:?}"
    );
    if let Some(uid) = report.uid {
        // Every process of the run's uid was killed. A SIGKILLed process
        // under a loaded machine may take a moment to die: wait up to 10 s.
        let mut left = processes_of(uid);
        for _ in 0..200 {
            if left == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            left = processes_of(uid);
        }
        assert_eq!(left, 0, "processes of uid {uid} outlived the run");
    }
    // The machine still runs things.
    assert_eq!(f.run(VALID).outcome, Outcome::Scored { score: 0.5 });
}

#[test]
fn huge_output_is_truncated_and_a_huge_file_hits_the_size_limit() {
    let f = Fixture::new(small_limits());
    let chatty =
        format!("import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 50000)\n{VALID}");
    assert_eq!(f.run(&chatty).outcome, Outcome::Scored { score: 0.5 });
    let report = f.rt.block_on(f.runner.sandbox().run(wmrl_sandbox::Job {
        args: vec!["s.py".into()],
        files: vec![(
            "s.py".into(),
            wmrl_sandbox::JobFile::Bytes(chatty.as_bytes().into()),
        )],
        ..Default::default()
    }));
    let report = report.unwrap();
    assert_eq!(report.stdout.total_bytes, 100_000_000);
    assert!(report.stdout.truncated && report.stdout.text.len() < 32 << 10);
    let hoarder = f.run(
        "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))\n",
    );
    assert_eq!(
        hoarder.outcome,
        Outcome::ResourceLimit {
            limit: LimitKind::FileSize
        }
    );
}

#[test]
fn writes_outside_the_work_folder_fail_and_reach_nothing() {
    let f = Fixture::new(small_limits());
    if !f.isolated() {
        eprintln!("skipped: no filesystem isolation on this machine");
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let targets = [
        outside.path().join("escaped.txt"),
        f.task.dir.join("public/escaped.txt"),
        PathBuf::from("/usr/escaped.txt"),
        PathBuf::from("/etc/escaped.txt"),
        PathBuf::from("/escaped.txt"),
    ];
    let list: Vec<String> = targets
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    let solution = format!(
        "wrote = []\nfor p in [{}]:\n    try:\n        open(p, 'w').write('x')\n        wrote.append(p)\n    except OSError:\n        pass\n\
         open('/tmp/scratch.txt', 'w').write('private tmp is fine')\n\
         if wrote:\n    raise SystemExit('wrote ' + repr(wrote))\n{VALID}",
        list.join(", ")
    );
    assert_eq!(f.run(&solution).outcome, Outcome::Scored { score: 0.5 });
    for t in &targets {
        assert!(!t.exists(), "{} was created on the host", t.display());
    }
}

#[test]
fn the_hidden_answers_cannot_be_read() {
    let f = Fixture::new(small_limits());
    if !f.isolated() {
        eprintln!("skipped: no filesystem isolation on this machine");
        return;
    }
    let answers = f.task.dir.join("hidden/answers.csv");
    let cheat = format!(
        "import shutil\nshutil.copy({:?}, 'submission.csv')\n",
        answers.display().to_string()
    );
    match f.run(&cheat).outcome {
        Outcome::Crashed { stderr_tail, .. } => {
            assert!(
                stderr_tail.contains("No such file") || stderr_tail.contains("Permission denied"),
                "{stderr_tail}"
            )
        }
        other => panic!("the answers were reachable: {other:?}"),
    }
}

#[test]
fn network_connections_fail() {
    let f = Fixture::new(small_limits());
    if !f.isolated() {
        eprintln!("skipped: no network namespace on this machine");
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let solution = format!(
        "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n{VALID}"
    );
    match f.run(&solution).outcome {
        Outcome::Crashed { stderr_tail, .. } => assert!(
            stderr_tail.contains("unreachable")
                || stderr_tail.contains("refused")
                || stderr_tail.contains("OSError"),
            "{stderr_tail}"
        ),
        other => panic!("the connection attempt did not fail: {other:?}"),
    }
    assert!(
        listener.accept().is_err(),
        "the host listener got a connection"
    );
}

#[test]
fn wrong_ids_and_nan_are_invalid_submissions() {
    let f = Fixture::new(small_limits());
    let write = |body: &str| format!("open('submission.csv', 'w').write({body:?})\n");
    let mut wrong = String::from("id,target\n");
    for i in 0..10 {
        wrong.push_str(&format!("{},0.5\n", 300 + i));
    }
    match f.run(&write(&wrong)).outcome {
        Outcome::InvalidSubmission { reason } => assert!(
            reason.contains("line 2") && reason.contains("300"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    let mut nan = String::from("id,target\n");
    for i in 0..10 {
        nan.push_str(&format!(
            "{},{}\n",
            200 + i,
            if i == 3 { "nan" } else { "0.5" }
        ));
    }
    match f.run(&write(&nan)).outcome {
        Outcome::InvalidSubmission { reason } => assert!(
            reason.contains("line 5") && reason.contains("NaN"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    let missing = f.run("print('forgot to write the submission')\n");
    assert!(matches!(missing.outcome, Outcome::InvalidSubmission { .. }));
    let crash = f.run("raise ValueError('bad model')\n");
    match crash.outcome {
        Outcome::Crashed { stderr_tail, .. } => assert!(stderr_tail.contains("bad model")),
        other => panic!("{other:?}"),
    }
}
