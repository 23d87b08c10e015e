//! What a test may leave behind: attached loop devices and mounts.

use std::path::Path;

/// (device, backing file) of every attached loop device.
pub fn attached_loops() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(f) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            out.push((name, f.trim_end().to_string()));
        }
    }
    out
}

/// Attached loop devices whose backing file is under `prefix` (other
/// programs on the machine may attach their own meanwhile, so tests count
/// only theirs).
pub fn loops_under(prefix: &Path) -> Vec<String> {
    let prefix = prefix.to_string_lossy().into_owned();
    attached_loops()
        .into_iter()
        .filter(|(_, f)| {
            f == &prefix || f.starts_with(&format!("{}/", prefix.trim_end_matches('/')))
        })
        .map(|(d, _)| d)
        .collect()
}

/// Mount points (field 5 of mountinfo) of the mount namespace of process
/// `pid` (`None`: this process) that are `prefix` or below it.
pub fn mounts_under_in(pid: Option<u32>, prefix: &Path) -> Vec<String> {
    let file = match pid {
        Some(p) => format!("/proc/{p}/mountinfo"),
        None => "/proc/self/mountinfo".to_string(),
    };
    let prefix = prefix.to_string_lossy().into_owned();
    let dir = format!("{}/", prefix.trim_end_matches('/'));
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|mp| *mp == prefix || mp.starts_with(&dir))
        .map(str::to_string)
        .collect()
}

/// Mounts on or below `prefix` in this process's (the host's) namespace.
pub fn mounts_under(prefix: &Path) -> Vec<String> {
    mounts_under_in(None, prefix)
}

/// The name the kernel keeps for `squashfs-mount-fuse` (15 characters).
pub const FUSE_SERVER_NAME: &str = "squashfs-mount-";

/// The name a cached instance's server takes once it found its image
/// corrupt (squashfs-mount then does not reuse it).
pub const CORRUPT_FUSE_SERVER_NAME: &str = "sqfsmnt-corrupt";

/// Every process's pid and its /proc/PID/status (those that ended while
/// read left out).
pub fn statuses() -> impl Iterator<Item = (u32, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            Some((pid, status))
        })
}

/// (pid, real uid, state) of each process whose name starts with `prefix`.
fn processes(prefix: &str) -> Vec<(u32, Option<u32>, char)> {
    let mut out = Vec::new();
    for (pid, status) in statuses() {
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.split_whitespace().next())
        };
        if field("Name:").is_some_and(|n| n.starts_with(prefix)) {
            let uid = field("Uid:").and_then(|u| u.parse().ok());
            let state = field("State:")
                .and_then(|s| s.chars().next())
                .unwrap_or('?');
            out.push((pid, uid, state));
        }
    }
    out.sort();
    out
}

/// Pids (sorted) of `uid`'s processes (real uid) whose name starts with
/// `prefix`, zombies left out. A detached server that ended is a child of
/// init, which may reap it seconds later (PID 1 of some machines polls),
/// and test users' uids are reused: a zombie of an earlier test's server
/// serves nothing and must not count as this test's.
pub fn processes_named(uid: u32, prefix: &str) -> Vec<u32> {
    processes(prefix)
        .into_iter()
        .filter(|&(_, u, state)| u == Some(uid) && !matches!(state, 'Z' | 'X'))
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Pids of `uid`'s FUSE servers of this tool (those that found their
/// image corrupt too), zombies left out. A launch's reporter is the same
/// program (`--report`), under the server's name from its exec until it
/// names itself: not a server.
pub fn fuse_servers_of(uid: u32) -> Vec<u32> {
    let mut all = processes_named(uid, FUSE_SERVER_NAME);
    all.extend(processes_named(uid, CORRUPT_FUSE_SERVER_NAME));
    all.retain(|pid| !is_reporter(*pid));
    all.sort();
    all
}

/// Whether `pid` runs with `--report` (a launch's reporter).
fn is_reporter(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .any(|arg| arg == b"--report")
}

/// Running FUSE servers of this tool, anyone's, zombies left out: their
/// pids.
pub fn fuse_servers() -> Vec<u32> {
    let mut all = processes(FUSE_SERVER_NAME);
    all.extend(processes(CORRUPT_FUSE_SERVER_NAME));
    all.into_iter()
        .filter(|&(_, _, state)| !matches!(state, 'Z' | 'X'))
        .map(|(pid, _, _)| pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_are_matched_by_whole_path_components() {
        let proc_mounts = mounts_under(Path::new("/proc"));
        assert!(proc_mounts.iter().any(|m| m == "/proc"), "{proc_mounts:?}");
        assert!(proc_mounts
            .iter()
            .all(|m| m == "/proc" || m.starts_with("/proc/")));
        assert!(mounts_under(Path::new("/pro")).is_empty());
    }

    /// A process that ended and waits to be reaped is not counted; while
    /// it runs, it is.
    #[test]
    fn a_zombie_is_not_a_running_process() {
        let uid = rustix::process::getuid().as_raw();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        // spawn may return before the exec has renamed the child (its
        // close-on-exec pipe closes first): wait for the name.
        let deadline = std::time::Instant::now() + crate::ends::HANG;
        while !processes_named(uid, "sleep").contains(&pid) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(processes_named(uid, "sleep").contains(&pid));
        // Ended, not reaped: a zombie.
        child.kill().unwrap();
        let state = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().starts_with('Z')))
                .unwrap_or(false)
        };
        let deadline = std::time::Instant::now() + crate::ends::HANG;
        while !state() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(state(), "sleep did not end");
        assert!(!processes_named(uid, "sleep").contains(&pid));
        child.wait().unwrap();
    }
}
