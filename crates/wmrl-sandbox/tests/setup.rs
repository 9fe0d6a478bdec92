//! How a sandbox is set up: it fails closed, refuses folders someone else
//! could control, and a run costs no fixed sweep time.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use common::{job, marker, run, shell, small};
use wmrl_sandbox::{Error, Sandbox, SandboxConfig};

#[test]
fn isolation_is_required_by_default() {
    assert!(SandboxConfig::new("/bin/sh").require_isolation);
}

#[tokio::test]
async fn a_scratch_folder_others_can_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = SandboxConfig {
        scratch: dir.path().to_path_buf(),
        ..SandboxConfig::new("/bin/sh")
    };
    match Sandbox::new(config).await {
        Err(Error::UnsafeFolder { path, .. }) => assert_eq!(path, dir.path()),
        other => panic!("expected UnsafeFolder, got {other:?}"),
    }
}

#[tokio::test]
async fn a_linked_scratch_folder_or_one_under_a_shared_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // Others may write (no sticky bit): they could swap the folder below for a link.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    for scratch in [link, shared.join("scratch")] {
        let config = SandboxConfig {
            scratch: scratch.clone(),
            ..SandboxConfig::new("/bin/sh")
        };
        match Sandbox::new(config).await {
            Err(Error::UnsafeFolder { path, .. }) => assert_eq!(path, scratch),
            other => panic!(
                "{}: expected UnsafeFolder, got {other:?}",
                scratch.display()
            ),
        }
    }
}

#[tokio::test]
async fn a_lease_folder_others_can_write_or_a_link_is_refused_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: uid leases are taken in root mode only");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    // A link to a good folder is refused too: what it points at can change.
    let good = tempfile::tempdir().unwrap();
    let link = scratch.path().join("lease-link");
    std::os::unix::fs::symlink(good.path(), &link).unwrap();
    for lease_dir in [dir.path().to_path_buf(), link] {
        let config = SandboxConfig {
            scratch: scratch.path().join("scratch"),
            lease_dir: lease_dir.clone(),
            ..SandboxConfig::new("/bin/sh")
        };
        match Sandbox::new(config).await {
            Err(Error::UnsafeFolder { path, .. }) => assert_eq!(path, lease_dir),
            // Without CAP_SYS_ADMIN the root mode fails before it takes a lease.
            Ok(s) if s.isolation() != wmrl_sandbox::Isolation::Root => {
                eprintln!("skipped: root mode unavailable here ({})", s.isolation());
                return;
            }
            other => panic!(
                "{}: expected UnsafeFolder, got {other:?}",
                lease_dir.display()
            ),
        }
    }
}

#[tokio::test]
async fn a_short_run_takes_no_fixed_sweep_time() {
    let Some(sandbox) = shell(small()).await else {
        return;
    };
    eprintln!(
        "isolation: {}; cgroups: {:?}",
        sandbox.isolation(),
        sandbox.cgroups()
    );
    let started = Instant::now();
    for _ in 0..4 {
        let report = run(&sandbox, job(&marker("quick"), "exit 0\n")).await;
        assert!(report.succeeded(), "{report:?}");
    }
    let each = started.elapsed() / 4;
    assert!(each < Duration::from_millis(800), "{each:?} per run");
}
