//! Shared resources one user must not exhaust: launches in their
//! privileged phase per user, and loop devices attached by the tool (in
//! all, and per user), with each user's share of the image cache. Kept
//! under the root-only runtime directory with `flock`, which the kernel
//! releases when a launch ends in any way (exec, exit, SIGKILL).
//!
//! No launch waits on another user's (doc/threat-model.md, "No user waits
//! on another user's process"):
//! - **per-user state behind a per-user lock**: a user's launch slots, and
//!   their hold ([`UserHold`]): the lock under which their launch counts
//!   their loop devices and cached instances, attaches its fresh devices,
//!   mounts them and offers them to the cache. Only the same user's
//!   launches ever wait on it, and none counts without it.
//! - **the global limit by acting, re-counting and undoing**: a launch
//!   checks `max-loop-devices` before it attaches, attaches (each device
//!   claimed without waiting, `loop_records`), counts again, and detaches
//!   its own devices and refuses when the count went over: of any two
//!   launches, the one that counts last sees the other's devices, so the
//!   devices of launches that went on never pass the limit together.

use std::fmt;
use std::os::fd::{AsFd, OwnedFd};

use crate::config::LoopLimits;
use crate::mounts::loop_records::CachedDevice;
use crate::mounts::loop_records::{AttachedCount, Devices};
use crate::mounts::shared_lock::{self, Busy, Held, Holders, Reach};
use crate::mounts::state_dir::{self, StateDirError, STATE_DIR};
use crate::privilege::AsRoot;
use crate::system::error::Failure;
use crate::system::{self, Error, LockKind, Uid};

const SLOTS_DIR: &str = "launches";
const USERS_DIR: &str = "users";

/// A limit reached, or its bookkeeping broken.
#[derive(Debug)]
pub enum LimitsError {
    NotRootOnly(StateDirError),
    SlotOpen(Error),
    SlotLock(Error),
    /// Every one of the user's `max` slots stayed taken for `wait_ms`.
    Slots {
        max: u32,
        wait_ms: u64,
    },
    HoldOpen(Error),
    /// Another launch of the user's holds their hold, and will not let go
    /// of it in time.
    Held(Busy),
    /// Beyond the user's share of loop devices: `cache_full` of the `more`
    /// would have been for the cache, but the user's share of it is full.
    UserShare {
        now: usize,
        more: usize,
        share: u32,
        cache_full: usize,
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
            LimitsError::NotRootOnly(e) => write!(f, "{e}"),
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
            LimitsError::HoldOpen(e) => {
                write!(f, "cannot open your lock in {STATE_DIR}/{USERS_DIR}: {e}")
            }
            LimitsError::Held(busy) => write!(
                f,
                "another launch of yours is making its images' instances and holds your share of loop devices and of the image cache ({busy}); resume or end it, or let it finish (max-launches-wait in /etc/squashfs-mount.conf)"
            ),
            LimitsError::UserShare {
                now,
                more,
                share,
                cache_full,
            } => {
                write!(
                    f,
                    "you have {now} image instances on loop devices outside the image cache now (private ones, or being made by your launches) and this call needs {more} more"
                )?;
                if *cache_full > 0 {
                    write!(f, " ({cache_full} of them because your share of the image cache is full: cache-max-instances-per-user)")?;
                }
                write!(
                    f,
                    ", beyond your share of {share} (max-loop-devices-per-user in /etc/squashfs-mount.conf); end some of your running or stopped commands that use squashfs-mount, or let the cache keep the images (without --no-cache)"
                )
            }
            LimitsError::AllLoops { now, more, limit } => write!(
                f,
                "{now} loop devices are attached by squashfs-mount now and this call needs {more} more, beyond the limit of {limit} (max-loop-devices in /etc/squashfs-mount.conf); try again later or mount fewer images"
            ),
        }
    }
}

crate::error_kind!(LimitsError);

fn subdir(name: &str) -> Result<Option<OwnedFd>, Failure> {
    state_dir::subdir(name).map_err(|e| Failure::new(LimitsError::NotRootOnly(e)))
}

/// One of a user's launch slots, held until the launch execs or ends.
pub struct LaunchSlot {
    _lock: Option<OwnedFd>,
}

impl LaunchSlot {
    /// A slot that holds nothing: where the limit cannot be enforced.
    pub(crate) fn unbounded() -> LaunchSlot {
        LaunchSlot { _lock: None }
    }

    /// Takes a free slot of `uid` among `max`, waiting for one at most
    /// `wait_ms` (`max-launches-wait`): launches queue up rather than fail
    /// (128 at once by one user are normal in a job script), but one whose
    /// setup is stuck cannot block the user's others forever.
    pub(crate) fn take(
        _root: &AsRoot,
        uid: Uid,
        max: u32,
        wait_ms: u64,
    ) -> Result<LaunchSlot, Failure> {
        let Some(slots) = subdir(SLOTS_DIR)? else {
            return Ok(LaunchSlot::unbounded());
        };
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

/// What bounds one user's fresh kernel instances: the loop devices
/// (`max-loop-devices`, `max-loop-devices-per-user`), their share of the
/// image cache (`cache-max-instances-per-user`), and how long their launch
/// waits for their own other launch's hold (`max-launches-wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    pub loops: LoopLimits,
    pub cache_per_user: u32,
    pub wait_ms: u64,
}

/// What the image cache holds that counts for a user: the devices of its
/// kernel instances (counted for the cache, not their makers), and how
/// many of its instances (kernel and FUSE) the user's launches made.
#[derive(Clone, Debug, Default)]
pub struct Holdings {
    pub devices: Vec<CachedDevice>,
    pub made: usize,
}

/// A user's hold: held by their launch from before it counts their loop
/// devices and cached instances until its fresh kernel instances are
/// attached, mounted and offered to the cache; so what it counted stays
/// true until it is done (a launch stopped meanwhile keeps it, and with it
/// every other fresh instance of the user's back). Within the caller's
/// reach (it is held across I/O on their images): only their own launches
/// wait for it, at most `max-launches-wait`, and never for one that is
/// stopped or frozen. Released when dropped.
pub struct UserHold {
    _lock: Option<Held<OwnedFd>>,
}

impl UserHold {
    /// A hold that holds nothing: where the limits cannot be kept.
    pub(crate) fn none() -> UserHold {
        UserHold { _lock: None }
    }

    pub(crate) fn take(root: &AsRoot, uid: Uid, wait_ms: u64) -> Result<UserHold, Failure> {
        let Some(dir) = subdir(USERS_DIR)? else {
            return Ok(UserHold::none());
        };
        let lock = system::open_lock_file(dir.as_fd(), &uid.to_string(), 0o600)
            .map_err(|e| Failure::new(LimitsError::HoldOpen(e)))?;
        match shared_lock::take(
            root,
            lock,
            LockKind::Exclusive,
            Reach::Within,
            Holders::Own,
            wait_ms,
        ) {
            Ok((held, _)) => Ok(UserHold { _lock: Some(held) }),
            Err(busy) => Err(Failure::new(LimitsError::Held(busy))),
        }
    }
}

/// Under the user's hold, before attaching: of `wanted` fresh devices,
/// `for_cache` wanted for the cache, how many may be (within the user's
/// share of the cache; the others are private), with the private ones
/// within the user's share of loop devices and all of them within
/// `max-loop-devices`. Refuses otherwise. What the cache holds (`cache`)
/// is read only when it matters: for instances wanted for it, or when the
/// user has devices it may hold. Without records (`devices` None) nothing
/// is counted.
pub(crate) fn reserve(
    root: &AsRoot,
    devices: Option<&Devices>,
    uid: Uid,
    (wanted, for_cache): (usize, usize),
    shares: Shares,
    cache: impl Fn() -> Holdings,
) -> Result<usize, Failure> {
    let Some(devices) = devices else {
        return Ok(for_cache);
    };
    let read = std::cell::OnceCell::new();
    let holdings = || read.get_or_init(&cache);
    let now = devices.count(root, uid, || holdings().devices.clone());
    let room = match for_cache {
        0 => 0,
        _ => (shares.cache_per_user as usize).saturating_sub(holdings().made),
    };
    let cached = for_cache.min(room);
    let private = wanted - cached;
    if private > 0 && now.users + private > shares.loops.per_user as usize {
        return Err(Failure::new(LimitsError::UserShare {
            now: now.users,
            more: private,
            share: shares.loops.per_user,
            cache_full: for_cache - cached,
        }));
    }
    over_all(now, wanted, shares.loops)?;
    Ok(cached)
}

/// After attaching: the devices counted again. Beyond `max-loop-devices`
/// (launches attached meanwhile), the caller undoes its own and refuses.
pub(crate) fn recount(
    root: &AsRoot,
    devices: Option<&Devices>,
    uid: Uid,
    limits: LoopLimits,
    mine: usize,
) -> Result<(), Failure> {
    let Some(devices) = devices else {
        return Ok(());
    };
    let now = devices.count(root, uid, Vec::new);
    over_all(
        AttachedCount {
            all: now.all.saturating_sub(mine),
            ..now
        },
        mine,
        limits,
    )
}

fn over_all(now: AttachedCount, more: usize, limits: LoopLimits) -> Result<(), Failure> {
    if now.all + more > limits.all as usize {
        return Err(Failure::new(LimitsError::AllLoops {
            now: now.all,
            more,
            limit: limits.all,
        }));
    }
    Ok(())
}
