//! The outcome of the sequence, and what `--verbose` says: about the
//! instances of each image (a new one, a cached one reused, why the cache
//! was not used) and, at `-vvv`, how long each step took. Nothing here
//! decides anything.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::time::Instant;

use super::admit::Admitted;
use super::attach::Attached;
use super::fuse_path::Fused;
use super::images::{Cache, Images, NotCached, Outcome, Record};
use super::kernel::KernelSource;
use crate::cli::RunRequest;
use crate::mounts::budgets::LaunchSlot;

/// The outcome: everything is mounted in the (process's or thread's)
/// private mount namespace.
pub struct Mounted {
    /// `UENV_MOUNT_LIST` for the command.
    pub mount_list: OsString,
    /// What `--verbose` reports, each line with the verbosity it needs
    /// (1: which path each image took and why, cache reuse, binds, `-r`;
    /// 2: where each mount point resolved; 3: how long each step took).
    pub notes: Vec<(u8, String)>,
    /// How much of it to say: `-v`'s count, or 1 with the site's
    /// `verbose = yes`.
    pub verbosity: u8,
    /// Warnings worth printing even without `--verbose` (the cache or the
    /// loop-device budget could not be used as they should have been).
    pub warnings: Vec<String>,
    /// Pidfds of the FUSE servers started (the Slurm plugin kills them
    /// when the step ends).
    pub servers: Vec<OwnedFd>,
    /// The caller's launch slot (the setuid command), held until the
    /// privileged phase ends.
    pub slot: Option<LaunchSlot>,
    /// `--writable=DIR`: what the caller's stage stacks its layer on
    /// (`layer`), once every privilege is gone.
    pub layer: Option<crate::layer::Kept>,
}

/// The outcome, with every note in the order `--verbose` prints them.
pub(crate) fn mounted(
    admitted: Admitted,
    request: &RunRequest,
    fused: Fused,
    images: &Images,
    attached: Attached,
    kernel: &KernelSource,
    clock: &Clock,
) -> Mounted {
    let mut notes = self::images(images);
    notes.extend(attached.notes);
    notes.extend(fused.notes.into_iter().map(|n| (1, n)));
    notes.extend(kernel.notes().iter().map(|n| (1, n.clone())));
    notes.extend(attached.reentered.map(|n| (1, n)));
    notes.extend(clock.notes());
    let verbosity = request.verbose.max(u8::from(admitted.settings.verbose));
    Mounted {
        mount_list: attached.mount_list,
        notes,
        verbosity,
        warnings: fused
            .warnings
            .into_iter()
            .chain(kernel.warnings().iter().cloned())
            .collect(),
        servers: fused.servers,
        slot: admitted.slot,
        layer: attached.layer.map(|mut kept| {
            kept.plan.verbose = verbosity;
            kept
        }),
    }
}

/// One level-1 line per image: which way it was routed and why, and what
/// became of its instance.
pub(crate) fn images(images: &Images) -> Vec<(u8, String)> {
    images
        .records
        .iter()
        .map(|r| (1, format!("{}; {}", r.route, instance(r))))
        .collect()
}

/// The instance part of an image's `--verbose` line.
fn instance(r: &Record) -> String {
    let fuse = r.is_fuse();
    let why = match (r.outcome, r.cache()) {
        (Some(Outcome::Reused), _) if fuse => return "your cached FUSE instance reused".into(),
        (Some(Outcome::Reused), _) => return "cached instance reused".into(),
        (Some(Outcome::Cached), _) if fuse => {
            return "a FUSE server of yours started, its instance kept in the image cache for your next launches".into()
        }
        (Some(Outcome::Cached), _) => return "new instance, kept in the image cache".into(),
        (Some(Outcome::Private(NotCached::Refused)), _) => {
            "the image cache had no room for it, or your share of it (cache-max-instances-per-user) is full (or it could not store it)"
        }
        (Some(Outcome::Private(NotCached::NoCache)), _) => "the image cache could not be used",
        (_, Cache::Private(why)) => why,
        (_, Cache::Kept) => "not cacheable",
    };
    match fuse {
        true => format!("a FUSE server of yours started for this launch only, not cached: {why}"),
        false => format!("new private instance, not cached: {why}"),
    }
}

/// The time each step took, for `-vvv`.
pub struct Clock {
    last: Instant,
    laps: Vec<(&'static str, u128)>,
}

impl Clock {
    pub(crate) fn start() -> Clock {
        Clock {
            last: Instant::now(),
            laps: Vec::new(),
        }
    }

    /// The step `what` ended now.
    pub(crate) fn lap(&mut self, what: &'static str) {
        let now = Instant::now();
        self.laps
            .push((what, now.duration_since(self.last).as_micros()));
        self.last = now;
    }

    /// One level-3 line per step.
    pub(crate) fn notes(&self) -> Vec<(u8, String)> {
        self.laps
            .iter()
            .map(|(what, us)| (3, format!("{us} us: {what}")))
            .collect()
    }
}
