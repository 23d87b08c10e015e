//! Waiting for processes to end, on the event itself: a pidfd becomes
//! readable when its process ends, whether or not anyone has reaped it
//! yet. A sample of /proc cannot tell a process that ended from one that
//! runs until its parent reaps it, and PID 1 here reaps orphans (detached
//! FUSE servers, a namespace's last process) one or two seconds late; a
//! pidfd can, and it wakes the test as soon as the process is gone.
//!
//! The limits here only catch a process that never ends (a hang or a
//! bug): [`HANG`] is far beyond what any loaded machine needs, and a wait
//! returns as soon as its event comes.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// The limit of a wait for something that must happen: only a hang
/// reaches it.
pub const HANG: Duration = Duration::from_secs(60);

/// A pidfd of `pid`, or `None` when the process is already gone (reaped).
pub fn pidfd(pid: u32) -> Option<OwnedFd> {
    pidfd_open(Pid::from_raw(pid as i32)?, PidfdFlags::empty()).ok()
}

/// Whether the process of `fd` has ended (it may be a zombie).
pub fn ended(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    poll(&mut fds, Some(&Timespec::default())).is_ok_and(|n| n > 0)
}

/// Waits until every process of `pids` has ended, for at most `limit`;
/// returns those still running then (empty when all ended).
pub fn wait_ended(pids: &[u32], limit: Duration) -> Vec<u32> {
    let mut left: Vec<(u32, OwnedFd)> = pids.iter().filter_map(|&p| Some((p, pidfd(p)?))).collect();
    let deadline = Instant::now() + limit;
    while !left.is_empty() {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let wait = Timespec::try_from(deadline - now).unwrap_or_default();
        let mut fds: Vec<PollFd<'_>> = left
            .iter()
            .map(|(_, fd)| PollFd::new(fd, PollFlags::IN))
            .collect();
        match poll(&mut fds, Some(&wait)) {
            Ok(0) => break,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => panic!("poll on pidfds: {e}"),
        }
        let done: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        drop(fds);
        let mut i = 0;
        left.retain(|_| {
            i += 1;
            !done[i - 1]
        });
    }
    left.into_iter().map(|(p, _)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that was killed counts as ended at once, though nobody
    /// has reaped it (a zombie); a running one does not.
    #[test]
    fn a_killed_child_has_ended_before_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        let fd = pidfd(pid).expect("pidfd");
        assert!(!ended(&fd));
        assert_eq!(wait_ended(&[pid], Duration::from_millis(50)), vec![pid]);
        child.kill().unwrap();
        assert_eq!(wait_ended(&[pid], HANG), Vec::<u32>::new());
        assert!(ended(&fd));
        // Still there to be reaped: the wait did not depend on it.
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        child.wait().unwrap();
    }
}
