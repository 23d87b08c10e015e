//! Who holds the tool's shared locks (from /proc/locks), and process groups
//! that a test starts and that end with it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, Stdio};

/// `MAJ:MIN:INO` of a file, as /proc/locks names it.
pub fn lock_id(path: &str) -> Option<String> {
    let m = fs::metadata(path).ok()?;
    let dev = m.dev();
    Some(format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        m.ino()
    ))
}

/// The ids ([`lock_id`]) of those of `paths` that exist.
pub fn lock_ids(paths: &[&str]) -> Vec<String> {
    paths.iter().filter_map(|p| lock_id(p)).collect()
}

/// The state directory of the installed tool.
pub const STATE: &str = "/run/squashfs-mount";

/// The ids of the lock files in the state directory that launches of
/// every user take: the image cache's lock, the claim of each loop device
/// (`devices/`), and the loop-device lock of versions before round 35
/// (where it exists).
pub fn shared_lock_ids() -> Vec<String> {
    let mut paths = vec![format!("{STATE}/lock"), format!("{STATE}/loop-lock")];
    for e in fs::read_dir(format!("{STATE}/devices"))
        .into_iter()
        .flatten()
        .flatten()
    {
        paths.push(e.path().to_string_lossy().into_owned());
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    lock_ids(&paths)
}

/// The ids of the lock files a launch of user `uid` holds while it counts
/// and attaches loop devices: its user's hold (`users/<uid>`), each loop
/// device's claim, and the loop-device lock of versions before round 35.
pub fn attach_lock_ids(uid: u32) -> Vec<String> {
    let mut ids = shared_lock_ids();
    ids.extend(lock_id(&format!("{STATE}/users/{uid}")));
    ids
}

/// The pids holding a lock on one of the files `ids` whose line in
/// /proc/locks contains `kind` (`""`: any, `" WRITE "`: exclusive).
pub fn holders(ids: &[String], kind: &str) -> Vec<u32> {
    fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("->") && l.contains(kind))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && ids.iter().any(|id| id == f[5])).then(|| f[4].parse().ok())?
        })
        .collect()
}

/// A child started in a process group of its own: the whole group is
/// killed when this is dropped.
pub struct Group(pub Child);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
