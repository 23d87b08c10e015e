//! Shared resources one user must not exhaust: launches in their
//! privileged phase per user, and loop devices attached by the tool in all.
//! Counted under the root-only runtime directory with `flock`, which the
//! kernel releases when a launch ends in any way (exec, exit, SIGKILL).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::cache::CACHE_DIR;
use crate::error::Failure;
use crate::loopdev;
use crate::system::{self, Error, LockKind};

const SLOTS_DIR: &str = "launches";
const LOOP_LOCK: &str = "loop-lock";
/// Longest wait for the loop-device lock (held only while devices are
/// counted and configured, never across I/O on an image).
const LOOP_LOCK_TIMEOUT_MS: u64 = 10_000;

fn state_dir() -> Result<OwnedFd, Failure> {
    let dir = system::open_or_create_dir(CACHE_DIR, 0o700).map_err(|e| Failure::new(format!("cannot use {CACHE_DIR}: {e}")))?;
    crate::cache::store::root_only(dir.as_fd()).map_err(|e| Failure::new(e.to_string()))?;
    Ok(dir)
}

/// One of a user's launch slots, held until the launch execs or ends.
pub struct LaunchSlot {
    _lock: OwnedFd,
}

impl LaunchSlot {
    /// Takes a free slot of `uid` among `max`, or refuses. Needs root.
    pub fn take(uid: u32, max: u32) -> Result<LaunchSlot, Failure> {
        let dir = state_dir()?;
        match system::make_dir(dir.as_fd(), SLOTS_DIR, 0o700) {
            Ok(()) | Err(Error::EXIST) => {}
            Err(e) => return Err(Failure::new(format!("cannot create {CACHE_DIR}/{SLOTS_DIR}: {e}"))),
        }
        let slots = system::open_dir_nofollow(dir.as_fd(), SLOTS_DIR).map_err(|e| Failure::new(format!("cannot open {CACHE_DIR}/{SLOTS_DIR}: {e}")))?;
        for n in 0..max {
            let lock = system::open_lock_file(slots.as_fd(), &format!("{uid}.{n}"), 0o600)
                .map_err(|e| Failure::new(format!("cannot open a launch slot in {CACHE_DIR}/{SLOTS_DIR}: {e}")))?;
            if system::try_lock(lock.as_fd(), LockKind::Exclusive).map_err(|e| Failure::new(format!("cannot lock a launch slot: {e}")))? {
                return Ok(LaunchSlot { _lock: lock });
            }
        }
        Err(Failure::new(format!(
            "you already have {max} launches of squashfs-mount setting up at once (max-launches-per-user in /etc/squashfs-mount.conf); wait for them, or run fewer at a time"
        )))
    }
}

/// The right to attach loop devices, held while they are counted and
/// configured.
pub struct LoopBudget {
    lock: OwnedFd,
}

impl Drop for LoopBudget {
    fn drop(&mut self) {
        let _ = system::unlock(self.lock.as_fd());
    }
}

impl LoopBudget {
    /// Takes the loop-device lock and checks that `wanted` more devices stay
    /// within `max` (counting every device the tool has attached). Needs
    /// root.
    pub fn reserve(wanted: usize, max: u32, dev_dir: BorrowedFd<'_>) -> Result<LoopBudget, Failure> {
        let dir = state_dir()?;
        let lock = system::open_lock_file(dir.as_fd(), LOOP_LOCK, 0o600).map_err(|e| Failure::new(format!("cannot open {CACHE_DIR}/{LOOP_LOCK}: {e}")))?;
        let (mut waited, mut step) = (0u64, 1u64);
        while !system::try_lock(lock.as_fd(), LockKind::Exclusive).map_err(|e| Failure::new(format!("cannot lock {CACHE_DIR}/{LOOP_LOCK}: {e}")))? {
            if waited >= LOOP_LOCK_TIMEOUT_MS {
                return Err(Failure::new("too many launches are attaching loop devices right now; try again"));
            }
            system::pause_millis(step);
            waited += step;
            step = (step * 2).min(16);
        }
        let budget = LoopBudget { lock };
        let attached = loopdev::owned_count(dev_dir);
        if attached + wanted > max as usize {
            return Err(Failure::new(format!(
                "{attached} loop devices are attached by squashfs-mount now and this call needs {wanted} more, beyond the limit of {max} (max-loop-devices in /etc/squashfs-mount.conf); try again later or mount fewer images"
            )));
        }
        Ok(budget)
    }
}
