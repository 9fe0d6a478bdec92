//! End-to-end tests of `wmrl robots serve` and `wmrl robots …` as separate
//! processes: discovery, a daemon killed with SIGKILL, certificates, bad input.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn wmrl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wmrl"))
}

fn free_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("tcp/127.0.0.1:{}", listener.local_addr().unwrap().port())
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn robots_seen(endpoint: &str) -> Vec<String> {
    let out = wmrl()
        .args([
            "--json",
            "robots",
            "list",
            "--connect",
            endpoint,
            "--wait-s",
            "1.5",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["robots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_daemon_announces_itself_and_disappears_when_killed() {
    let endpoint = free_endpoint();
    let mut daemon = KillOnDrop(
        wmrl()
            .args([
                "robots",
                "serve",
                "--id",
                "cli-panda",
                "--listen",
                &endpoint,
                "--camera-size",
                "16",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while seen.is_empty() && Instant::now() < deadline {
        seen = robots_seen(&endpoint);
    }
    assert_eq!(seen, vec!["cli-panda".to_string()]);
    // SIGKILL: no goodbye; the liveliness token still goes with the connection.
    daemon.0.kill().unwrap();
    daemon.0.wait().unwrap();
    let out = wmrl()
        .args([
            "--json",
            "robots",
            "list",
            "--connect",
            &endpoint,
            "--wait-s",
            "1",
        ])
        .output()
        .unwrap();
    // Nobody listens on the endpoint any more: either no session or no robots.
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["robots"], serde_json::json!([]));
    }
}

#[test]
fn certs_writes_a_ca_identities_and_zenoh_configs() {
    let dir = tempfile::tempdir().unwrap();
    let out = wmrl()
        .args([
            "--json",
            "robots",
            "certs",
            "--robots",
            "panda-1,panda-2",
            "--observers",
            "dash",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [
        "ca.pem",
        "router.json5",
        "trainer.json5",
        "operator.json5",
        "robot-panda-1.json5",
        "robot-panda-2.json5",
        "observer-dash.json5",
        "trainer.key",
    ] {
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let router = std::fs::read_to_string(dir.path().join("router.json5")).unwrap();
    assert!(router.contains("default_permission: \"deny\""));
    assert!(router.contains("\"panda-1\", \"panda-2\""));
}

#[test]
fn bad_robot_arguments_fail_with_clear_messages() {
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "robots",
                "serve",
                "--id",
                "bad/id",
                "--connect",
                "tcp/127.0.0.1:1",
            ],
            "bad/id",
        ),
        (&["robots", "serve", "--id", "x"], "--connect"),
        (
            &[
                "robots",
                "serve",
                "--id",
                "x",
                "--driver",
                "ur5",
                "--connect",
                "tcp/127.0.0.1:1",
            ],
            "RobotDriver",
        ),
        (
            &["robots", "list", "--zenoh-config", "/no/such.json5"],
            "/no/such.json5",
        ),
    ];
    for (args, expect) in cases {
        let out = wmrl().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
}
