//! `scripts/check-setuid`, which `make test` runs last: it fails on a
//! set-id file of root's that other users can reach, and accepts one behind
//! a directory only root may pass. The files made here are mode 4644 or
//! 2644: set-id but not executable, so harmless even for the moment they
//! exist.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use sqfsmnt_test_support::cleanup::run_dir;
use sqfsmnt_test_support::cmd::run;
use sqfsmnt_test_support::privileged;

fn mkdir(p: &Path, mode: u32) {
    fs::create_dir_all(p).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn file(p: &Path, mode: u32) {
    fs::write(p, "").unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check-setuid")
}

fn check(dir: &Path) -> sqfsmnt_test_support::Run {
    run(Command::new(script()).arg(dir))
}

#[test]
fn set_id_files_of_root_are_found_unless_behind_a_root_only_directory() {
    // Root: the files must be root's; the lock: no other suite's check runs
    // meanwhile (it would see ours).
    if !privileged("scripts/check-setuid", &["find", "stat", "flock"]) {
        return;
    }
    let top = run_dir("setuid-check");
    let _ = fs::remove_dir_all(&top);
    mkdir(&top, 0o755);
    let open = top.join("open");
    let closed = top.join("closed");
    mkdir(&open.join("deep"), 0o755);
    mkdir(&closed.join("sub"), 0o755);
    fs::set_permissions(&closed, fs::Permissions::from_mode(0o700)).unwrap();

    // Behind root's 0700 directory: fine, at any depth.
    file(&closed.join("sub/setuid"), 0o4644);
    file(&closed.join("setgid"), 0o2644);
    let r = check(&top);
    assert!(r.success(), "{r:?}");

    // Another user's setuid file is not root's: not this check's business.
    file(&open.join("users"), 0o4644);
    std::os::unix::fs::chown(open.join("users"), Some(65534), Some(65534)).unwrap();
    let r = check(&top);
    assert!(r.success(), "{r:?}");

    // Reachable: setuid root, and setgid root, each named.
    file(&open.join("deep/setuid"), 0o4644);
    file(&open.join("setgid"), 0o2644);
    let r = check(&top);
    assert_eq!(r.code(), Some(1), "{r:?}");
    for f in ["deep/setuid", "setgid"] {
        assert!(
            r.stderr().contains(&open.join(f).display().to_string()),
            "{f} not named: {r:?}"
        );
    }
    assert!(!r.stderr().contains("closed"), "{r:?}");
    // What was there before a run (--record) is named but does not fail
    // the check after it (--baseline); a file made or changed since does.
    let before = top.join("before");
    let r = run(Command::new(script())
        .arg("--record")
        .arg(&before)
        .arg(&open));
    assert!(r.success(), "{r:?}");
    let with_baseline = || {
        run(Command::new(script())
            .arg("--baseline")
            .arg(&before)
            .arg(&open))
    };
    let r = with_baseline();
    assert!(r.success(), "{r:?}");
    assert!(
        r.stderr().contains("there before this run") && r.stderr().contains("deep/setuid"),
        "{r:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(1100)); // a new change time
    file(&open.join("setgid"), 0o2644);
    let r = with_baseline();
    assert_eq!(r.code(), Some(1), "{r:?}");
    let failed = r.stderr().split("FAILED").nth(1).unwrap_or("").to_string();
    assert!(
        failed.contains("setgid") && !failed.contains("deep/setuid"),
        "{r:?}"
    );
    // The same tree behind a root-only directory is fine again.
    fs::set_permissions(&top, fs::Permissions::from_mode(0o700)).unwrap();
    let r = check(&open);
    assert!(r.success(), "{r:?}");
    fs::remove_dir_all(&top).unwrap();
}

/// A script that holds the machine-wide lock (packaging/test-packages) runs
/// scripts/check-setuid, which takes the lock too: it must see that the
/// descriptor it inherited holds it, not wait for its own parent (an hour).
/// With a lock file of the test's own, so no other suite is involved.
#[test]
fn a_script_under_the_lock_of_its_parent_script_does_not_wait_for_it() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = run_dir("nested-lock");
    let _ = fs::remove_dir_all(&dir);
    mkdir(&dir.join("empty"), 0o755);
    let script = format!(
        ". '{}'; take_machine_lock outer; exec timeout 30 '{}' '{}'",
        top.join("scripts/lib/machine-lock.sh").display(),
        top.join("scripts/check-setuid").display(),
        dir.join("empty").display()
    );
    let r = sqfsmnt_test_support::cmd::run_for(
        Command::new("bash")
            .args(["-c", &script])
            .env("SQFSMNT_INTEGRATION_LOCK", dir.join("lock")),
        std::time::Duration::from_secs(60),
    );
    r.ok();
    assert!(!r.stderr().contains("waiting"), "{r:?}");
    fs::remove_dir_all(&dir).unwrap();
}
