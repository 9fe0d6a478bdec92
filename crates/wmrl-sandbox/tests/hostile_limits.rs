//! Hostile solutions against the limits: an endless loop, a sleeping loop, a
//! memory bomb, memory spread over processes, a fork bomb, a huge output, a
//! huge file, a disk fill, an inode fill and a faked limit message. Each
//! asserts how the run ended and that the host is left as it was.

mod common;

use common::{assert_host_clean, job, marker, python_sandbox, run, shell, small};
use wmrl_sandbox::{LimitKind, Limits, Termination};

#[tokio::test]
async fn an_endless_loop_hits_the_cpu_limit_and_a_sleeper_the_wall_clock() {
    let limits = Limits {
        cpu_time_s: 1,
        wall_time_s: 15.0,
        ..small()
    };
    let Some(sandbox) = shell(limits).await else {
        return;
    };
    let m = marker("loop");
    let busy = run(&sandbox, job(&m, "while :; do :; done\n")).await;
    assert_eq!(busy.limit_hit, Some(LimitKind::CpuTime), "{busy:?}");
    assert_host_clean(&sandbox, &busy, &m);

    let sleepy_limits = Limits {
        wall_time_s: 1.0,
        ..small()
    };
    let m = marker("sleep");
    let mut sleepy = job(&m, "while :; do sleep 1; done\n");
    sleepy.limits = Some(sleepy_limits);
    let sleepy = run(&sandbox, sleepy).await;
    assert_eq!(sleepy.termination, Termination::TimedOut);
    assert!(
        sleepy.wall_time.as_secs_f64() < 4.0,
        "{:?}",
        sleepy.wall_time
    );
    assert_host_clean(&sandbox, &sleepy, &m);
}

#[tokio::test]
async fn a_memory_bomb_hits_the_address_space_limit() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let m = marker("membomb");
    let report = run(&sandbox, job(&m, "x = bytearray(8 << 30)\n")).await;
    // RLIMIT_AS refuses the allocation before any page is used: the kernel
    // counts nothing, so only Python's MemoryError (a claim) names the limit.
    assert_eq!(report.termination, Termination::Exited { code: 1 });
    assert_eq!(report.limit_hit, None, "{report:?}");
    assert_eq!(report.limit_claimed, Some(LimitKind::Memory), "{report:?}");
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn a_limit_message_on_stderr_is_only_a_claim() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    for (case, code, claimed) in [("spoof", 1, Some(LimitKind::Memory)), ("spoofok", 0, None)] {
        let m = marker(case);
        let script = format!(
            "import sys\nsys.stderr.write('Traceback (most recent call last):\\nMemoryError\\n')\nsys.exit({code})\n"
        );
        let report = run(&sandbox, job(&m, &script)).await;
        assert_eq!(report.termination, Termination::Exited { code });
        assert_eq!(
            report.limit_hit, None,
            "{case}: faked text decided the limit"
        );
        assert_eq!(report.limit_claimed, claimed, "{case}");
        assert_host_clean(&sandbox, &report, &m);
    }
}

#[tokio::test]
async fn memory_spread_over_processes_hits_the_run_limit() {
    // Four processes of 96 MiB each stay under the 1 GiB per-process limit;
    // together they pass the run's 256 MiB.
    let limits = Limits {
        memory: 256 << 20,
        ..small()
    };
    let Some(sandbox) = python_sandbox(limits).await else {
        return;
    };
    if !sandbox.cgroups().is_available() {
        eprintln!("skipped: no cgroups here ({:?})", sandbox.cgroups());
        return;
    }
    let m = marker("memspread");
    let script = "import os, sys, time\n\
                  kids = []\n\
                  for _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n        \
                  x = b'x' * (96 << 20)\n        time.sleep(3)\n        os._exit(0)\n    kids.append(pid)\n\
                  bad = [os.waitpid(k, 0)[1] for k in kids]\n\
                  sys.exit(1 if any(bad) else 0)\n";
    let report = run(&sandbox, job(&m, script)).await;
    assert_eq!(report.limit_hit, Some(LimitKind::Memory), "{report:?}");
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn a_fork_bomb_is_contained_and_leaves_nothing_behind() {
    let limits = Limits {
        processes: 8,
        wall_time_s: 2.0,
        ..small()
    };
    let Some(sandbox) = python_sandbox(limits).await else {
        return;
    };
    let m = marker("forkbomb");
    let bomb =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let report = run(&sandbox, job(&m, bomb)).await;
    assert!(
        report.termination == Termination::TimedOut
            || matches!(
                report.limit_hit,
                Some(LimitKind::Processes | LimitKind::CpuTime)
            ),
        "{report:?}"
    );
    assert_host_clean(&sandbox, &report, &m);
    // The machine still runs things.
    let ok = run(&sandbox, job(&marker("after"), "print('fine')\n")).await;
    assert!(ok.succeeded(), "{ok:?}");
}

#[tokio::test]
async fn a_huge_output_is_bounded_and_a_huge_file_hits_the_size_limit() {
    let Some(sandbox) = shell(small()).await else {
        return;
    };
    let m = marker("output");
    let chatty = run(
        &sandbox,
        job(&m, "head -c 20000000 /dev/zero | tr '\\0' x\n"),
    )
    .await;
    assert!(chatty.succeeded(), "{chatty:?}");
    assert_eq!(chatty.stdout.total_bytes, 20_000_000);
    assert!(chatty.stdout.truncated && chatty.stdout.text.len() < 32 << 10);
    assert_host_clean(&sandbox, &chatty, &m);

    // A single file past the 4 MiB per-file limit, well within the folder's 16 MiB.
    let m = marker("bigfile");
    let mut big = job(&m, "exec head -c 12000000 /dev/zero > big.bin\n");
    big.limits = Some(Limits {
        file_size: 4 << 20,
        ..small()
    });
    let report = run(&sandbox, big).await;
    assert_eq!(report.limit_hit, Some(LimitKind::FileSize), "{report:?}");
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn a_disk_fill_stops_at_the_work_folder_quota() {
    // Files below the per-file limit, more of them than the work folder holds.
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    for (case, dir) in [
        ("diskfill", "."),
        ("tmpfill", "/tmp"),
        ("shmfill", "/dev/shm"),
    ] {
        let m = marker(case);
        let script = format!(
            "import os\nfor i in range(64):\n    with open(os.path.join({dir:?}, f'f{{i}}'), 'wb') as f:\n        \
             f.write(b'x' * (4 << 20))\n"
        );
        let report = run(&sandbox, job(&m, &script)).await;
        assert_eq!(report.limit_hit, Some(LimitKind::Disk), "{dir}: {report:?}");
        assert_host_clean(&sandbox, &report, &m);
    }
}

#[tokio::test]
async fn an_inode_fill_stops_at_the_inode_limit() {
    let Some(sandbox) = shell(small()).await else {
        return;
    };
    for (case, dir) in [
        ("inodefill", "."),
        ("tmpinodes", "/tmp"),
        ("shminodes", "/dev/shm"),
    ] {
        let m = marker(case);
        // 256 inodes: a thousand empty files cannot all be made (the shell
        // stops at the first failed redirection).
        let script =
            format!("i=0\nwhile [ $i -lt 1000 ]; do : > {dir}/f$i; i=$((i+1)); done\nexit 0\n");
        let report = run(&sandbox, job(&m, &script)).await;
        assert!(
            matches!(report.termination, Termination::Exited { code } if code != 0),
            "{dir}: {report:?}"
        );
        assert!(
            report.stderr.text.contains("No space left"),
            "{dir}: {}",
            report.stderr.text
        );
        assert_eq!(report.limit_hit, Some(LimitKind::Disk));
        assert_host_clean(&sandbox, &report, &m);
    }
}
