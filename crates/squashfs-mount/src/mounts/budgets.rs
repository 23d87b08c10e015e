//! Shared resources one user must not exhaust: launches in their
//! privileged phase per user, and loop devices attached by the tool (in
//! all, and per user). Counted under the root-only runtime directory with
//! `flock`, which the kernel releases when a launch ends in any way (exec,
//! exit, SIGKILL); the loop-device lock, which every user's launches share,
//! through `shared_lock` (no user can stall it).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::config::LoopLimits;
use crate::mounts::loop_device::{self, CachedDevice};
use crate::mounts::shared_lock::{self, Held, Reach};
use crate::mounts::state_dir::{self, StateDirError, STATE_DIR};
use crate::privilege::AsRoot;
use crate::system::error::Failure;
use crate::system::{self, Error, LockKind, Uid};

const SLOTS_DIR: &str = "launches";
const LOOP_LOCK: &str = "loop-lock";
/// Longest wait for the loop-device lock (held only while devices are
/// counted and configured, never across I/O on an image); then a launch
/// counts without it.
const LOOP_LOCK_TIMEOUT_MS: u64 = 10_000;

/// A limit reached, or its bookkeeping broken.
#[derive(Debug)]
pub enum LimitsError {
    StateDir(Error),
    NotRootOnly(StateDirError),
    SlotsDir(&'static str, Error),
    SlotOpen(Error),
    SlotLock(Error),
    /// Every one of the user's `max` slots stayed taken for `wait_ms`.
    Slots {
        max: u32,
        wait_ms: u64,
    },
    LoopLock(Error),
    /// Beyond the user's share of loop devices.
    UserShare {
        now: usize,
        more: usize,
        share: u32,
    },
    /// Beyond every user's loop devices together.
    AllLoops {
        now: usize,
        more: usize,
        limit: u32,
    },
}

impl fmt::Display for LimitsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitsError::StateDir(e) => write!(f, "cannot use {STATE_DIR}: {e}"),
            LimitsError::NotRootOnly(e) => write!(f, "{e}"),
            LimitsError::SlotsDir(what, e) => write!(f, "cannot {what} {STATE_DIR}/{SLOTS_DIR}: {e}"),
            LimitsError::SlotOpen(e) => write!(
                f,
                "cannot open a launch slot in {STATE_DIR}/{SLOTS_DIR}: {e}"
            ),
            LimitsError::SlotLock(e) => write!(f, "cannot lock a launch slot: {e}"),
            LimitsError::Slots { max, wait_ms } => write!(
                f,
                "you have had {max} launches of squashfs-mount setting up at once for {:.0} s (max-launches-per-user, max-launches-wait in /etc/squashfs-mount.conf); some are stuck (an image on a file system that hangs?), or run fewer at a time",
                *wait_ms as f64 / 1000.0
            ),
            LimitsError::LoopLock(e) => write!(f, "cannot open {STATE_DIR}/{LOOP_LOCK}: {e}"),
            LimitsError::UserShare { now, more, share } => write!(
                f,
                "you have {now} image instances on loop devices outside the image cache now (private ones, or being made by your launches) and this call needs {more} more, beyond your share of {share} (max-loop-devices-per-user in /etc/squashfs-mount.conf); end some of your running or stopped commands that use squashfs-mount, or let the cache keep the images (without --no-cache)"
            ),
            LimitsError::AllLoops { now, more, limit } => write!(
                f,
                "{now} loop devices are attached by squashfs-mount now and this call needs {more} more, beyond the limit of {limit} (max-loop-devices in /etc/squashfs-mount.conf); try again later or mount fewer images"
            ),
        }
    }
}

crate::error_kind!(LimitsError);

/// The runtime directory, or None where it cannot be used (a read-only
/// /run): the limits are a protection against exhaustion, not a security
/// boundary, so they are not enforced then rather than failing every
/// launch.
fn state_dir() -> Result<Option<OwnedFd>, Failure> {
    let dir = match system::open_dir_nofollow(system::working_dir(), STATE_DIR).or_else(|e| match e
    {
        Error::NOENT => system::open_or_create_dir(STATE_DIR, 0o700),
        e => Err(e),
    }) {
        Ok(dir) => dir,
        Err(Error::ROFS | Error::ACCESS | Error::PERM | Error::NOENT) => return Ok(None),
        Err(e) => return Err(Failure::new(LimitsError::StateDir(e))),
    };
    state_dir::root_only(dir.as_fd()).map_err(|e| Failure::new(LimitsError::NotRootOnly(e)))?;
    Ok(Some(dir))
}

/// One of a user's launch slots, held until the launch execs or ends.
pub struct LaunchSlot {
    _lock: Option<OwnedFd>,
}

impl LaunchSlot {
    /// A slot that holds nothing: where the limit cannot be enforced.
    pub fn unbounded() -> LaunchSlot {
        LaunchSlot { _lock: None }
    }

    /// Takes a free slot of `uid` among `max`, waiting for one at most
    /// `wait_ms` (`max-launches-wait`): launches queue up rather than fail
    /// (128 at once by one user are normal in a job script), but one whose
    /// setup is stuck cannot block the user's others forever.
    pub fn take(_root: &AsRoot, uid: Uid, max: u32, wait_ms: u64) -> Result<LaunchSlot, Failure> {
        let Some(dir) = state_dir()? else {
            return Ok(LaunchSlot::unbounded());
        };
        let slots = match system::open_dir_nofollow(dir.as_fd(), SLOTS_DIR) {
            Err(Error::NOENT) => {
                match system::make_dir(dir.as_fd(), SLOTS_DIR, 0o700) {
                    Ok(()) | Err(Error::EXIST) => {}
                    Err(e) => return Err(Failure::new(LimitsError::SlotsDir("create", e))),
                }
                system::open_dir_nofollow(dir.as_fd(), SLOTS_DIR)
            }
            other => other,
        }
        .map_err(|e| Failure::new(LimitsError::SlotsDir("open", e)))?;
        state_dir::root_only(slots.as_fd())
            .map_err(|e| Failure::new(LimitsError::NotRootOnly(e)))?;
        // Start at a slot chosen by the pid, so that waiting launches spread.
        let first = std::process::id() % max.max(1);
        let (mut waited, mut step) = (0u64, 1u64);
        loop {
            for k in 0..max {
                let n = (first + k) % max;
                let lock = system::open_lock_file(slots.as_fd(), &format!("{uid}.{n}"), 0o600)
                    .map_err(|e| Failure::new(LimitsError::SlotOpen(e)))?;
                if system::try_lock(lock.as_fd(), LockKind::Exclusive)
                    .map_err(|e| Failure::new(LimitsError::SlotLock(e)))?
                {
                    return Ok(LaunchSlot { _lock: Some(lock) });
                }
            }
            if waited >= wait_ms {
                return Err(Failure::new(LimitsError::Slots { max, wait_ms }));
            }
            system::pause_millis(step);
            waited += step;
            step = (step * 2).min(32);
        }
    }
}

/// The right to attach loop devices, held while they are counted and
/// configured (the lock, when it could be taken; see `shared_lock`).
pub struct LoopBudget {
    _lock: Option<Held<OwnedFd>>,
    /// Why the devices were counted without the lock, if they were.
    pub note: Option<String>,
}

impl LoopBudget {
    /// Takes the loop-device lock and checks that `wanted` more devices
    /// stay within `limits`, `private` of them counted for the user `uid`
    /// (the engine counts every fresh one for its user, those made for
    /// the cache too, until the cache holds them: `cached` reads its
    /// records, under the lock, after the devices' status).
    /// A lock that cannot be taken in time (or whose holder is stopped)
    /// does not fail the launch: the devices are then counted without it,
    /// and concurrent launches may overshoot the limits by a few.
    pub fn reserve(
        root: &AsRoot,
        wanted: usize,
        private: usize,
        limits: LoopLimits,
        uid: Uid,
        dev_dir: BorrowedFd<'_>,
        cached: impl FnOnce() -> Vec<CachedDevice>,
    ) -> Result<LoopBudget, Failure> {
        let mut budget = LoopBudget {
            _lock: None,
            note: None,
        };
        if let Some(dir) = state_dir()? {
            let lock = system::open_lock_file(dir.as_fd(), LOOP_LOCK, 0o600)
                .map_err(|e| Failure::new(LimitsError::LoopLock(e)))?;
            match shared_lock::take(
                root,
                lock,
                LockKind::Exclusive,
                Reach::Out,
                LOOP_LOCK_TIMEOUT_MS,
            ) {
                Ok((held, _)) => budget._lock = Some(held),
                Err(busy) => {
                    budget.note = Some(format!(
                        "loop devices counted without {STATE_DIR}/{LOOP_LOCK}: {busy}"
                    ))
                }
            }
        }
        let now = loop_device::attached(root, dev_dir, uid, cached);
        if private > 0 && now.users + private > limits.per_user as usize {
            return Err(Failure::new(LimitsError::UserShare {
                now: now.users,
                more: private,
                share: limits.per_user,
            }));
        }
        if now.all + wanted > limits.all as usize {
            return Err(Failure::new(LimitsError::AllLoops {
                now: now.all,
                more: wanted,
                limit: limits.all,
            }));
        }
        Ok(budget)
    }
}
