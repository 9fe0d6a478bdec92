//! Hostile solutions that try to get out: reading the hidden answers and the
//! host's files, writing outside the work folder, reaching a loopback service,
//! a double-forked `setsid` daemon, signals to the caller, leaked descriptors
//! and nested namespaces. Each asserts what the solution saw and that the
//! host is left as it was.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::os::fd::FromRawFd;
use std::time::Duration;

use common::{assert_host_clean, job, marker, python_sandbox, run, small};

#[tokio::test]
async fn the_hidden_answers_and_the_hosts_files_cannot_be_read() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let task = tempfile::tempdir().unwrap();
    let answers = task.path().join("hidden/answers.csv");
    std::fs::create_dir_all(answers.parent().unwrap()).unwrap();
    std::fs::write(&answers, "id,target\n1,0.5\n").unwrap();
    let m = marker("read");
    let targets = [
        answers.display().to_string(),
        env!("CARGO_MANIFEST_DIR").to_string(),
        "/etc/shadow".into(),
        "/etc/ssh".into(),
        "/root".into(),
        "/home".into(),
        "/proc/1/environ".into(),
        "/sys/kernel".into(),
        "/run".into(),
        "/var".into(),
    ];
    let script = format!(
        "import os\nseen = [p for p in {targets:?} if os.path.exists(p)]\n\
         if os.uname().nodename != 'sandbox':\n    seen.append('host name ' + os.uname().nodename)\n\
         passwd = open('/etc/passwd').read()\n\
         open('out.txt', 'w').write(repr(seen) + '\\n' + passwd)\n"
    );
    let report = run(&sandbox, job(&m, &script)).await;
    assert!(report.succeeded(), "{report:?}");
    let out = String::from_utf8(report.files["out.txt"].clone()).unwrap();
    let (seen, passwd) = out.split_once('\n').unwrap();
    assert_eq!(seen, "[]", "host paths visible inside the jail");
    // The generated passwd: root, the run's user, nobody; not the host's users.
    assert_eq!(passwd.lines().count(), 3, "{passwd}");
    assert!(passwd.contains("sandbox:x:"), "{passwd}");
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn writes_outside_the_work_folder_fail_and_reach_nothing() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let outside = tempfile::tempdir().unwrap();
    let m = marker("write");
    let targets = [
        outside.path().join(&m).display().to_string(),
        format!("/usr/{m}"),
        format!("/etc/{m}"),
        format!("/{m}"),
        format!("/sandbox/../{m}"),
        format!("/usr/lib/{m}"),
    ];
    let script = format!(
        "wrote = []\nfor p in {targets:?}:\n    try:\n        open(p, 'w').write('x')\n        wrote.append(p)\n    except OSError:\n        pass\n\
         open('/tmp/{m}', 'w').write('private tmp is fine')\n\
         open('out.txt', 'w').write(repr(wrote))\n"
    );
    let report = run(&sandbox, job(&m, &script)).await;
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.files["out.txt"], b"[]");
    for t in &targets {
        assert!(
            !std::path::Path::new(t).exists(),
            "{t} was created on the host"
        );
    }
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn a_loopback_service_of_the_host_is_unreachable() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let m = marker("net");
    // An abstract unix socket lives in the network namespace too.
    let abstract_name = format!("\0{m}");
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            m.as_bytes(),
        )
        .unwrap();
    let unix = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    unix.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\nres = []\n\
         try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    res.append('tcp')\nexcept OSError:\n    pass\n\
         try:\n    s = socket.socket(socket.AF_UNIX)\n    s.connect({abstract_name:?})\n    res.append('unix')\nexcept OSError:\n    pass\n\
         open('out.txt', 'w').write(repr(res))\n"
    );
    let report = run(&sandbox, job(&m, &script)).await;
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.files["out.txt"], b"[]");
    assert!(
        listener.accept().is_err(),
        "the host's TCP listener got a connection"
    );
    assert!(
        unix.accept().is_err(),
        "the host's unix socket got a connection"
    );
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn a_double_forked_daemon_dies_with_the_run() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let m = marker("daemon");
    let script = format!(
        "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        \
         os.execv('/bin/sleep', ['{m}', '30'])\n    os._exit(0)\n\
         os.wait()\nimport time\ntime.sleep(0.3)\n"
    );
    let report = run(&sandbox, job(&m, &script)).await;
    assert!(report.succeeded(), "{report:?}");
    assert!(
        report.wall_time < Duration::from_secs(5),
        "{:?}",
        report.wall_time
    );
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn signals_to_the_caller_reach_nothing() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    // A process of the caller's, which the solution knows the pid of.
    let mut victim = std::process::Command::new("/bin/sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let m = marker("signal");
    let script = format!(
        "import os, signal\nres = []\n\
         for pid in [{victim}, {me}, os.getppid(), 1, -1]:\n    try:\n        os.kill(pid, signal.SIGKILL if pid != -1 else signal.SIGTERM)\n        res.append(pid)\n    except OSError:\n        pass\n\
         open('out.txt', 'w').write(repr(res))\n",
        victim = victim.id(),
        me = std::process::id(),
    );
    let report = run(&sandbox, job(&m, &script)).await;
    // kill(-1) reaches only the solution's own namespace (here: itself).
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        victim.try_wait().unwrap(),
        None,
        "the caller's process was killed: {report:?}"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn descriptors_of_the_caller_do_not_leak_in() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "the-secret").unwrap();
    // Opened without O_CLOEXEC, as a C library might.
    let path = std::ffi::CString::new(secret.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: open of a valid path; the descriptor is owned by `leaked`.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    assert!(fd > 2);
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let mut leaked = unsafe { std::fs::File::from_raw_fd(fd) };
    let m = marker("fds");
    let script = "import os\nopen_fds = []\nfor fd in range(3, 1024):\n    try:\n        os.fstat(fd)\n        open_fds.append(fd)\n    except OSError:\n        pass\n\
                  open('out.txt', 'w').write(repr(open_fds))\n";
    let report = run(&sandbox, job(&m, script)).await;
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.files["out.txt"], b"[]", "descriptors open inside");
    let mut still = String::new();
    leaked.read_to_string(&mut still).unwrap();
    assert_eq!(still, "the-secret");
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn nested_namespaces_mounts_and_ptrace_are_refused() {
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let m = marker("nested");
    // CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID; mount; ptrace;
    // a netfilter netlink socket; clone with CLONE_NEWUSER.
    let script = "import ctypes, os, socket\nlibc = ctypes.CDLL(None, use_errno=True)\nallowed = []\n\
                  for flag in [0x10000000, 0x00020000, 0x40000000, 0x20000000]:\n    \
                  if libc.unshare(flag) == 0:\n        allowed.append(hex(flag))\n\
                  if libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0:\n    allowed.append('mount')\n\
                  if libc.prctl(21, 0, 0, 0, 0) != 2:\n    allowed.append('no seccomp filter')\n\
                  if libc.ptrace(16, 1, None, None) == 0:\n    allowed.append('ptrace')\n\
                  try:\n    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)\n    allowed.append('netfilter')\nexcept OSError:\n    pass\n\
                  if os.uname().machine == 'x86_64' and libc.syscall(56, 0x10000000 | 17, None, None, None, None) > 0:\n    allowed.append('clone')\n\
                  pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\n\
                  open('out.txt', 'w').write(repr(allowed))\n";
    let report = run(&sandbox, job(&m, script)).await;
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(
        report.files["out.txt"],
        b"[]",
        "{}",
        String::from_utf8_lossy(&report.files["out.txt"])
    );
    assert_host_clean(&sandbox, &report, &m);
}

#[tokio::test]
async fn faked_outputs_are_not_collected() {
    // The score is computed on the host from the collected files: a link to
    // something the host can read, a FIFO that would block the reader, or a
    // file larger than asked for must not come back as a submission.
    let Some(sandbox) = python_sandbox(small()).await else {
        return;
    };
    let host = tempfile::tempdir().unwrap();
    let secret = host.path().join("answers.csv");
    std::fs::write(&secret, "the answers").unwrap();
    let m = marker("fake");
    let script = format!(
        "import os\nos.symlink({secret:?}, 'link.csv')\nos.symlink('/etc/passwd', 'passwd.csv')\n\
         os.mkfifo('fifo.csv')\nopen('big.csv', 'wb').write(b'x' * 100000)\n",
        secret = secret.display().to_string()
    );
    let mut fake = job(&m, &script);
    fake.collect = ["link.csv", "passwd.csv", "fifo.csv", "big.csv"]
        .map(String::from)
        .to_vec();
    fake.collect_max_bytes = 1000;
    let report = run(&sandbox, fake).await;
    assert!(report.succeeded(), "{report:?}");
    let names: Vec<&str> = report.files.keys().map(String::as_str).collect();
    assert_eq!(names, ["big.csv"], "only the regular file comes back");
    assert_eq!(
        report.files["big.csv"].len(),
        1000,
        "and only as much as asked"
    );
    assert_host_clean(&sandbox, &report, &m);
}
