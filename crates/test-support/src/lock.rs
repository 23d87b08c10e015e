//! The machine-wide lock of the privileged suites.
//!
//! Suites from parallel worktrees, and the test binaries of one `cargo
//! test`, share the machine's loop devices, the image cache in
//! /run/squashfs-mount, the user database and Slurm's ports: each takes an
//! exclusive `flock` on [`LOCK_PATH`] before it starts and holds it until
//! its process exits (the kernel releases it then, also after a crash).
//!
//! A run started as `flock /tmp/sqfsmnt-integration.lock make test` already
//! holds it through an ancestor process; taking it again would wait for
//! ourselves, so then the ancestor's lock is used.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::sync::OnceLock;

use rustix::fs::{flock, FlockOperation};

pub const LOCK_PATH: &str = "/tmp/sqfsmnt-integration.lock";

static LOCK: OnceLock<Option<File>> = OnceLock::new();

/// Takes the lock (once per process; later calls return at once).
pub fn machine_lock() {
    LOCK.get_or_init(|| {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o644)
            .open(LOCK_PATH)
            .unwrap_or_else(|e| panic!("cannot open {LOCK_PATH}: {e}"));
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
            return Some(file);
        }
        let holders = holders(&file);
        if holders.iter().any(|&pid| is_ancestor(pid)) {
            close_inherited_on_exec(&file);
            return None;
        }
        let _ = writeln!(
            std::io::stderr(),
            "test-support: waiting for the machine-wide lock {LOCK_PATH} (held by pid {holders:?})"
        );
        flock(&file, FlockOperation::LockExclusive)
            .unwrap_or_else(|e| panic!("flock {LOCK_PATH}: {e}"));
        Some(file)
    });
}

/// `flock(1)` leaves its lock fd open in the command it runs, so this
/// process inherited it (without close-on-exec): keep it out of the
/// commands the tests run (one that counts or limits fds would see it).
/// The ancestor's lock stays: it belongs to its open file description.
fn close_inherited_on_exec(ours: &File) {
    let Ok(meta) = ours.metadata() else { return };
    for e in std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(fd) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(m) = std::fs::metadata(e.path()) else {
            continue;
        };
        if m.dev() == meta.dev() && m.ino() == meta.ino() {
            // SAFETY: fcntl(F_SETFD) on a descriptor number read from
            // /proc/self/fd; it changes only that descriptor's flags (a
            // number closed meanwhile makes it fail with EBADF, ignored).
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// Pids holding a `flock` on `file`, from /proc/locks.
fn holders(file: &File) -> Vec<u32> {
    let Ok(meta) = file.metadata() else {
        return Vec::new();
    };
    let dev = meta.dev();
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let want = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            // "1: FLOCK  ADVISORY  WRITE 1234 00:1c:5678 0 EOF"
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&want.as_str()))
                .then(|| f.get(4)?.parse().ok())?
        })
        .collect()
}

/// Whether `pid` is this process or one of its ancestors.
fn is_ancestor(pid: u32) -> bool {
    let mut cur = std::process::id();
    for _ in 0..64 {
        if cur == pid {
            return true;
        }
        if cur <= 1 {
            return false;
        }
        cur = parent_of(cur).unwrap_or(0);
    }
    false
}

pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|p| p.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_holder_of_a_flock_and_ancestry() {
        let path = std::env::temp_dir().join(format!("sqfsmnt-it-{}-locktest", std::process::id()));
        let f = File::create(&path).unwrap();
        assert!(holders(&f).is_empty());
        flock(&f, FlockOperation::LockExclusive).unwrap();
        assert_eq!(holders(&f), vec![std::process::id()]);
        drop(f);
        let _ = std::fs::remove_file(&path);
        assert!(is_ancestor(std::process::id()));
        assert!(is_ancestor(parent_of(std::process::id()).unwrap()));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(!is_ancestor(child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }
}
