//! Waiting for a lock that another launch holds. Since round 35 only two
//! kinds remain (doc/threat-model.md, "No user waits on another user's
//! process"):
//!
//! - **a user's own locks**: their hold (`budgets::UserHold`) and their
//!   claims of making an instance (single flight, `cache::claim`). Only the
//!   same user's launches take them, so a user who stops or starves one of
//!   their launches slows only themselves. Their waiters wait for a holder
//!   that runs, however slowly (the user's own `nice`), and not for one
//!   that is stopped or frozen ([`Holders::Own`]).
//! - **the image cache's lock**, shared by every user: held only across a
//!   few milliseconds of work that reads no image (inserting, evicting,
//!   creating the cache namespace), and only by a process out of the
//!   caller's reach (`system::in_own_session`: real uid 0, so no signal and
//!   no ptrace; a session, and so an autogroup, of its own; SCHED_OTHER at
//!   nice 0 on every allowed CPU). Its waiters trust no holder
//!   ([`Holders::Any`]): one that is stopped, stopped by a tracer or
//!   frozen by a cgroup freezer is not waited for; nor is one that ran for
//!   less than [`PROGRESS_MIN_NS`] of CPU time over [`PROGRESS_WINDOW_MS`]
//!   of waiting (a CPU quota or weight on a delegated cgroup of its
//!   caller's, the one lever left); and none is waited for longer than
//!   `cache-lock-timeout` (100 ms by default). A waiter that gives up
//!   mounts a private instance: nothing is counted or taken without it.
//!
//! The kernel releases a lock when its holder dies in any way. A holder
//! [`Reach::Out`] is out of its caller's reach (real uid 0, the terminal's
//! stop signals blocked) from before it tries the lock until it released
//! it; waiting happens within reach.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};

use crate::privilege::AsRoot;
use crate::system::{self, LockKind, OutOfReach};

/// First look at the holders after this many milliseconds of waiting, then
/// again every [`LOOK_EVERY_MS`].
const FIRST_LOOK_MS: u64 = 0;
const LOOK_EVERY_MS: u64 = 10;
/// A holder that ran for less CPU time than [`PROGRESS_MIN_NS`] over this
/// much waiting makes no progress.
pub const PROGRESS_WINDOW_MS: u64 = 100;
pub const PROGRESS_MIN_NS: u64 = 1_000_000;

/// Whether the holder is kept out of its caller's reach while it holds the
/// lock: for the cache's lock, held only across short work that reads no
/// image. A lock held across I/O on an image (a user's hold, a claim of
/// making an instance) stays within reach, so that a user can always end
/// their own launch; its waiters do not wait for a stopped holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    Out,
    Within,
}

/// A lock held on `F` (a lock file's fd, owned or borrowed) until dropped.
pub struct Held<F: AsFd> {
    fd: F,
    _reach: Option<OutOfReach>,
}

impl<F: AsFd> Drop for Held<F> {
    fn drop(&mut self) {
        // Unlock first; `_reach` (dropped after this) then puts the
        // process back within its caller's reach.
        let _ = system::unlock(self.fd.as_fd());
    }
}

/// Which holders a waiter waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holders {
    /// Another user's, possibly: none that is stopped, frozen or starved.
    Any,
    /// The same user's launches only: one that runs, however slowly, is
    /// waited for (bounded); a stopped or frozen one is not.
    Own,
}

/// Why a lock was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Busy {
    /// A holder cannot release it in time.
    Stalled { pid: u32, how: &'static str },
    /// A holder runs too little to release it in time (nanoseconds of
    /// CPU time over [`PROGRESS_WINDOW_MS`]).
    Starved { pid: u32, ran_ns: u64 },
    /// Held for longer than the wait allowed.
    Timeout { waited_ms: u64 },
    /// The lock could not be used at all.
    Failed(system::Error),
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Busy::Stalled { pid, how } => write!(f, "it is held by process {pid}, which is {how}"),
            Busy::Starved { pid, ran_ns } => write!(
                f,
                "it is held by process {pid}, which makes no progress ({:.1} ms of CPU time in {PROGRESS_WINDOW_MS} ms)",
                *ran_ns as f64 / 1e6
            ),
            Busy::Timeout { waited_ms } => {
                write!(f, "it was busy for {:.1} s", *waited_ms as f64 / 1000.0)
            }
            Busy::Failed(e) => write!(f, "it cannot be locked: {e}"),
        }
    }
}

/// Takes `kind` on `fd`, waiting at most `timeout_ms` for the `holders` it
/// waits for, and not at all for one that cannot release it. Returns how
/// long it waited, in milliseconds, with the lock.
pub(crate) fn take<F: AsFd>(
    _root: &AsRoot,
    fd: F,
    kind: LockKind,
    reach: Reach,
    holders: Holders,
    timeout_ms: u64,
) -> Result<(Held<F>, u64), Busy> {
    // Clock time (CLOCK_MONOTONIC), not the sum of the sleeps asked for: a
    // loaded machine stretches sleeps, and the bounds are the waiter's.
    let started = std::time::Instant::now();
    let (mut waited, mut step, mut next_look) = (0u64, 1u64, FIRST_LOOK_MS);
    let mut progress = Progress::default();
    loop {
        let reach = enter(reach)?;
        match system::try_lock(fd.as_fd(), kind) {
            Ok(true) => return Ok((Held { fd, _reach: reach }, waited)),
            Ok(false) => {}
            Err(e) => return Err(Busy::Failed(e)),
        }
        drop(reach);
        if waited >= next_look {
            if let Some(stalled) = stalled_holder(fd.as_fd(), holders, &mut progress, waited) {
                return Err(stalled);
            }
            next_look = waited + LOOK_EVERY_MS;
        }
        if waited >= timeout_ms {
            return Err(Busy::Timeout { waited_ms: waited });
        }
        system::pause_millis(step);
        waited = started.elapsed().as_millis() as u64;
        step = (step * 2).min(16);
    }
}

/// One attempt, without waiting or looking at holders: None when busy.
pub(crate) fn try_take<F: AsFd>(
    _root: &AsRoot,
    fd: F,
    kind: LockKind,
    reach: Reach,
) -> Result<Option<Held<F>>, Busy> {
    let reach = enter(reach)?;
    match system::try_lock(fd.as_fd(), kind) {
        Ok(true) => Ok(Some(Held { fd, _reach: reach })),
        Ok(false) => Ok(None),
        Err(e) => Err(Busy::Failed(e)),
    }
}

fn enter(reach: Reach) -> Result<Option<OutOfReach>, Busy> {
    match reach {
        Reach::Out => {
            let out = OutOfReach::enter().map_err(Busy::Failed)?;
            // Out of reach now: what the caller set while the launch was
            // within reach (chrt, renice, ionice on its pid) is undone for
            // the hold, and cannot be set again until it ends.
            let _ = system::set_root_scheduling();
            Ok(Some(out))
        }
        Reach::Within => Ok(None),
    }
}

/// A holder of the lock on `fd` that cannot make progress, if any: one
/// stopped or frozen, or (for [`Holders::Any`]) one that `progress` saw
/// run too little since the waiter first saw it (`waited`: milliseconds
/// waited so far).
fn stalled_holder(
    fd: BorrowedFd<'_>,
    holders: Holders,
    progress: &mut Progress,
    waited: u64,
) -> Option<Busy> {
    let me = std::process::id();
    let pids = system::lock_holders(fd).ok()?;
    pids.into_iter().filter(|&pid| pid != me).find_map(|pid| {
        if let Some(how) = system::stalled(pid) {
            return Some(Busy::Stalled { pid, how });
        }
        if holders == Holders::Own {
            return None;
        }
        let ran = system::cpu_progress(pid)?;
        progress.starved(pid, ran, waited)
    })
}

/// What a waiter saw of the holders' CPU time: per holder, the CPU time
/// and the wait at the start of the current window.
#[derive(Default)]
struct Progress(Vec<(u32, u64, u64)>);

impl Progress {
    /// `pid` has run for `ran` ns after `waited` ms of waiting: starved when
    /// a whole window passed with less than the minimum of CPU time.
    fn starved(&mut self, pid: u32, ran: u64, waited: u64) -> Option<Busy> {
        let Some(w) = self.0.iter_mut().find(|w| w.0 == pid) else {
            self.0.push((pid, ran, waited));
            return None;
        };
        if waited < w.2 + PROGRESS_WINDOW_MS {
            return None;
        }
        let ran_ns = ran.saturating_sub(w.1);
        if ran_ns < PROGRESS_MIN_NS {
            return Some(Busy::Starved { pid, ran_ns });
        }
        *w = (pid, ran, waited);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_starved_only_after_a_whole_window_with_too_little_cpu() {
        let mut p = Progress::default();
        assert_eq!(p.starved(7, 5_000_000, 0), None, "first sight");
        assert_eq!(p.starved(7, 5_000_000, 50), None, "within the window");
        assert_eq!(
            p.starved(7, 5_500_000, PROGRESS_WINDOW_MS),
            Some(Busy::Starved {
                pid: 7,
                ran_ns: 500_000
            })
        );
    }

    #[test]
    fn a_holder_that_runs_starts_a_new_window() {
        let mut p = Progress::default();
        p.starved(7, 0, 0);
        assert_eq!(p.starved(7, 3_000_000, PROGRESS_WINDOW_MS), None);
        assert_eq!(p.starved(7, 3_100_000, PROGRESS_WINDOW_MS + 50), None);
        assert!(matches!(
            p.starved(7, 3_200_000, 2 * PROGRESS_WINDOW_MS),
            Some(Busy::Starved {
                ran_ns: 200_000,
                ..
            })
        ));
        // Another holder has a window of its own.
        assert_eq!(p.starved(8, 0, 2 * PROGRESS_WINDOW_MS), None);
    }
}
