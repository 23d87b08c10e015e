//! Which cached instances some mount namespace uses: a scan of
//! `/proc/<pid>/mountinfo`, one process per namespace, bounded in CPU time
//! and bytes. What it cannot tell counts as unused (see `evict::Candidate`),
//! so nobody can stop eviction by making the scan expensive; and since
//! evicting an instance in use only ever costs sharing (a FUSE server is
//! ended only when the kernel says its connection is gone, see
//! `kinds::end`), nobody can make eviction hurt another user either. The
//! budget is the scanning thread's CPU time, not wall time: a caller who
//! starves its launch of CPU cannot exhaust the budget without the scan
//! having done its work. It runs before the cache's exclusive lock.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use super::evict::mountinfo_devices;
use crate::privilege::AsRoot;
use crate::system;

/// Bounds of one scan.
#[derive(Clone, Copy, Debug)]
pub struct ScanBudget {
    /// CPU time of the scanning thread.
    pub cpu: Duration,
    pub bytes: usize,
    /// Largest mountinfo read of one namespace; a larger one is skipped.
    pub per_namespace: usize,
}

/// A launch's opportunistic collection must not slow the launch down.
pub const AT_LAUNCH: ScanBudget = ScanBudget {
    cpu: Duration::from_millis(50),
    bytes: 16 << 20,
    per_namespace: 1 << 20,
};
/// `--gc` and `--cache-status` may take longer.
pub const ON_REQUEST: ScanBudget = ScanBudget {
    cpu: Duration::from_secs(2),
    bytes: 256 << 20,
    per_namespace: 8 << 20,
};

/// The scan's answer: the devices among those asked for that were found
/// mounted, and whether every namespace could be read within the budget.
#[derive(Debug, Default)]
pub struct Usage {
    pub used: HashSet<u64>,
    pub complete: bool,
}

/// The loop devices among `devs` that some mount namespace other than the
/// cache's (`cache_ns_ino`) has mounted. Root looks at other users'
/// processes (CAP_SYS_PTRACE: without it every instance reads as unused).
pub(crate) fn devices_in_use(
    _root: &AsRoot,
    devs: &HashSet<u64>,
    cache_ns_ino: u64,
    budget: ScanBudget,
) -> Usage {
    let mut usage = Usage::default();
    if devs.is_empty() {
        usage.complete = true;
        return usage;
    }
    let started = system::thread_cpu_time();
    let here = system::working_dir();
    let Ok((pids, more)) = system::list_dir(here, "/proc", 1 << 22) else {
        return usage;
    };
    let mut seen = HashSet::from([cache_ns_ino]);
    let mut read = 0usize;
    let mut complete = !more;
    for pid in pids {
        let pid = pid.as_bytes();
        if pid.is_empty() || !pid.iter().all(u8::is_ascii_digit) {
            continue;
        }
        if system::thread_cpu_time().saturating_sub(started) > budget.cpu || read > budget.bytes {
            complete = false;
            break;
        }
        let pid = String::from_utf8_lossy(pid);
        let Ok(ns) = system::stat_following(here, &format!("/proc/{pid}/ns/mnt")) else {
            continue;
        };
        if !seen.insert(ns.ino) {
            continue;
        }
        match system::read_file_at(
            here,
            &format!("/proc/{pid}/mountinfo"),
            budget.per_namespace,
        ) {
            Ok((text, longer)) => {
                read += text.len();
                usage
                    .used
                    .extend(mountinfo_devices(&text).intersection(devs));
                complete &= !longer;
            }
            // The process exited meanwhile; its namespace, if still alive,
            // is seen through another process.
            Err(_) => {
                seen.remove(&ns.ino);
            }
        }
        if usage.used.len() == devs.len() {
            break;
        }
    }
    usage.complete = complete;
    usage
}
