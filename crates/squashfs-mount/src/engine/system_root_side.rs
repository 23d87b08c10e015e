//! The root side of the running system: each [`RootSide`] operation as
//! the mechanisms below the engine do it (the unit tests use the
//! recording fake in `fake_root_side.rs` instead).
//!
//! For the setuid command ([`System::out_of_session`]), every operation on
//! what all users' launches share (the image cache, the loop devices'
//! claims and records, the claims of single flight) runs in a process of
//! its own session, out of the caller's scheduling reach and signals
//! (`system::in_own_session`); what reads the caller's images (the
//! squashfs superblocks) stays in the launch, within the caller's reach.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use crate::cache::claim::{Claim, Claims};
use crate::cache::store::OnStranded;
use crate::cache::{CacheError, Key, Kind, Offer, Placed, Reused, Store, Want};
use crate::config::LoopOptions;
use crate::config::{self, Settings};
use crate::mounts::budgets::{self, LaunchSlot, Shares, UserHold};
use crate::mounts::fuse::{self, FuseError, Launcher, Starting};
use crate::mounts::fuse_log::Detached;
use crate::mounts::fuse_report;
use crate::mounts::image::Image;
use crate::mounts::instance;
use crate::mounts::loop_device::LoopDevice;
use crate::mounts::loop_records::Devices;
use crate::mounts::mount_point::MountPoint;
use crate::mounts::overlay::{self, RootAttributes, WritableLimits, WritableTmpfs};
use crate::mounts::squashfs;
use crate::privilege::{ActingAsCaller, AsRoot, Caller};
use crate::system::error::Failure;
use crate::system::{self, AwayFromWorkingDir, OwnSession, Uid};
use squashfs_format::kernel::KernelConfig;

use super::context::SequenceError;
use super::mirror::{self, Mirror};
use super::root_side::{FreshImage, FreshInstances, FuseFacts, RootSide};

/// The root-side operations, performed. Holds the image cache and the
/// claims of single flight, once opened, for the rest of the launch.
#[derive(Default)]
pub struct System {
    store: Option<Store>,
    /// The cache opened only to read its records (`--no-cache`).
    records: Option<Store>,
    claims: Option<Claims>,
    /// Work on shared state in a process of its own session (the setuid
    /// command; the Slurm plugin's threads run in slurmstepd, whose
    /// scheduling is root's, and rootless mode has no shared state).
    own_session: bool,
}

impl System {
    /// The root side of the setuid command: shared work out of the
    /// caller's scheduling reach.
    pub(crate) fn out_of_session() -> System {
        System {
            own_session: true,
            ..System::default()
        }
    }

    fn store(&self) -> Result<&Store, CacheError> {
        self.store.as_ref().ok_or(CacheError::NotOpen)
    }

    fn claims(&self) -> Result<&Claims, CacheError> {
        self.claims.as_ref().ok_or(CacheError::NotOpen)
    }
}

/// Runs `work` on shared state: in a process of its own session when
/// `own_session` (see the module documentation), else here. Root's work
/// that could not start there is an error; one that ended half-way ends
/// the launch at once (the memory it shares with the launch may be
/// half-changed: nothing more runs on it).
pub(crate) fn shared<T>(own_session: bool, work: impl FnOnce() -> T) -> Result<T, OwnSession> {
    if !own_session {
        return Ok(work());
    }
    // Real uid 0 from before the clone, so that the work's process is born
    // out of the caller's reach: a signal sent to it in its first
    // instructions could otherwise stop it for good once it is root's
    // (only the launch's own terminal reaches the launch meanwhile: a ^C
    // ends it, the work then completes on its own).
    let _reach = system::OutOfReach::enter().map_err(|e| OwnSession::Setup("setresuid", e))?;
    match system::in_own_session(system::leave_the_callers_reach, work) {
        Err(died @ OwnSession::Died(_)) => {
            system::error::report(format_args!("fatal: {died}"));
            system::exit_now(1)
        }
        other => other,
    }
}

fn in_session_cache<T>(
    own_session: bool,
    work: impl FnOnce() -> Result<T, CacheError>,
) -> Result<T, CacheError> {
    shared(own_session, work).unwrap_or_else(|e| Err(CacheError::OwnSession(e)))
}

/// The loop devices of `images` (`shares` and the loop `options`), each
/// claimed, attached and recorded for `caller`, within the caller's shares
/// and `max-loop-devices` (counted before and after, the caller's own
/// detached when the count went over): whether each is made for the
/// cache, as the caller's share of it allows.
fn attach_all(
    root: &AsRoot,
    images: &[FreshImage<'_>],
    (shares, options): (Shares, LoopOptions),
    dev: BorrowedFd<'_>,
    store: Option<&Store>,
    caller: Uid,
) -> Result<Vec<(LoopDevice, bool)>, Failure> {
    let devices =
        Devices::open(root).map_err(|e| Failure::new(budgets::LimitsError::NotRootOnly(e)))?;
    let holdings = || store.map(|s| s.holdings(root, caller)).unwrap_or_default();
    let wanted = images.iter().filter(|f| f.for_cache).count();
    let mut room = budgets::reserve(
        root,
        devices.as_ref(),
        caller,
        (images.len(), wanted),
        shares,
        holdings,
    )?;
    let mut out = Vec::with_capacity(images.len());
    for f in images {
        let cached = f.for_cache && room > 0;
        room -= usize::from(cached);
        let device = LoopDevice::attach(
            root,
            f.image,
            options,
            dev,
            (devices.as_ref(), caller),
            f.subject,
        )?;
        out.push((device, cached));
    }
    // Dropped on a refusal: their descriptors close, and autoclear
    // detaches them.
    budgets::recount(root, devices.as_ref(), caller, shares.loops, out.len())?;
    Ok(out)
}

fn dev_dir() -> Result<OwnedFd, Failure> {
    system::open_dir_nofollow(system::working_dir(), "/dev")
        .map_err(|e| Failure::new(SequenceError::Dev(e)))
}

impl RootSide for System {
    type Claim = Claim;
    type Hold = UserHold;
    type Writable = WritableTmpfs;

    fn site_settings(&mut self) -> Settings {
        config::load()
    }

    fn launch_slot(
        &mut self,
        root: &AsRoot,
        caller: &Caller,
        settings: &Settings,
    ) -> Result<LaunchSlot, Failure> {
        LaunchSlot::take(
            root,
            caller.uid,
            settings.max_launches_per_user,
            settings.max_launches_wait_ms,
        )
    }

    fn fuse_instance(
        &mut self,
        root: &AsRoot,
        image: &Image,
        device: OwnedFd,
        launcher: &Launcher<'_>,
        subject: &str,
    ) -> Result<(OwnedFd, Starting), Failure> {
        fuse::instance(root, image, device, launcher, subject)
    }

    fn fuse_device(
        &mut self,
        as_caller: &impl ActingAsCaller,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        fuse::open_device(as_caller, subject)
    }

    fn fuse_log(&mut self, root: &AsRoot, caller: &Caller) -> Result<Detached, FuseError> {
        Ok(Detached::create(root, caller)?)
    }

    fn fuse_reporter(
        &mut self,
        root: &AsRoot,
        launcher: &Launcher<'_>,
        log: &Detached,
        servers: &[u32],
    ) -> Result<OwnedFd, FuseError> {
        fuse_report::start_reporter(root, launcher, log, servers)
    }

    fn fuse_facts(&mut self, mount: &OwnedFd, server: &OwnedFd) -> Option<FuseFacts> {
        let (pid, started) = system::process_of_pidfd(server.as_fd())?;
        let root = system::fstat_cached(mount.as_fd()).ok()?;
        Some(FuseFacts {
            kind: Kind::Fuse { pid, started },
            device: root.dev,
            cost: crate::cache::fuse_cost(pid),
        })
    }

    fn copy_tree(
        &mut self,
        root: &AsRoot,
        source: BorrowedFd<'_>,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        squashfs::bind_copy(root, source, subject)
    }

    fn open_cache(
        &mut self,
        root: &AsRoot,
        settings: &Settings,
        stranded: OnStranded,
    ) -> Result<bool, CacheError> {
        let store = in_session_cache(self.own_session, || {
            let store = Store::open(
                root,
                settings.cache_limits(),
                settings.cache_lock_timeout_ms,
                true,
                stranded,
            )?;
            if let Some(store) = &store {
                store.maintain(root, crate::cache::GC_INTERVAL);
            }
            Ok(store)
        })?;
        self.store = store;
        Ok(self.store.is_some())
    }

    fn read_cache_records(&mut self, root: &AsRoot, stranded: OnStranded) {
        let defaults = Settings::default();
        self.records = in_session_cache(self.own_session, || {
            Store::open(
                root,
                defaults.cache_limits(),
                defaults.cache_lock_timeout_ms,
                false,
                stranded,
            )
        })
        .ok()
        .flatten();
    }

    fn leave_working_dir(&mut self, _root: &AsRoot) -> Result<AwayFromWorkingDir, Failure> {
        system::leave_working_dir().map_err(|e| Failure::new(SequenceError::LeaveWorkingDir(e)))
    }

    fn return_to_working_dir(
        &mut self,
        _root: &AsRoot,
        away: AwayFromWorkingDir,
    ) -> Result<(), system::Stranded> {
        system::return_to_working_dir(away)
    }

    fn reuse(&mut self, root: &AsRoot, wanted: &[Want]) -> Result<Vec<Reused>, CacheError> {
        let store = self.store()?;
        in_session_cache(self.own_session, || store.reuse(root, wanted))
    }

    fn open_claims(&mut self, root: &AsRoot, caller: Uid) -> Result<(), CacheError> {
        self.claims = Some(Claims::open(root, caller)?);
        Ok(())
    }

    fn claim(&mut self, root: &AsRoot, key: &Key) -> Result<Option<Claim>, CacheError> {
        self.claims()?.claim(root, key)
    }

    fn await_claim(
        &mut self,
        root: &AsRoot,
        key: &Key,
        deadline: Instant,
    ) -> Result<(), CacheError> {
        self.claims()?.wait(root, key, deadline)
    }

    fn fresh(
        &mut self,
        root: &AsRoot,
        images: &[FreshImage<'_>],
        shares: Shares,
        options: LoopOptions,
        caller: Uid,
    ) -> Result<FreshInstances<UserHold>, Failure> {
        let dev = dev_dir()?;
        // Held here, within the caller's reach, until the instances are
        // offered to the cache: only the caller's own launches wait for it.
        let hold = UserHold::take(root, caller, shares.wait_ms)?;
        // What the cache holds is read from its records, also by a launch
        // that does not use the cache (its caller's cached instances are
        // not theirs to count).
        let store = self.store.as_ref().or(self.records.as_ref());
        let devices = shared(self.own_session, || {
            attach_all(root, images, (shares, options), dev.as_fd(), store, caller)
        })
        .map_err(|e| Failure::new(SequenceError::OwnSession(e)))??;
        // The superblocks, which read the images, in the launch.
        let instances = images
            .iter()
            .zip(devices)
            .map(|(f, (device, cached))| {
                instance::on_device(root, device, f.image, options, f.subject).map(|i| (i, cached))
            })
            .collect::<Result<_, _>>()?;
        Ok(FreshInstances { instances, hold })
    }

    fn kernel_config(&mut self, _root: &AsRoot) -> Option<KernelConfig> {
        crate::mounts::image::kernel_config()
    }

    fn place(
        &mut self,
        root: &AsRoot,
        offers: Vec<Offer>,
        protected: &[Key],
    ) -> Result<Vec<Placed>, (CacheError, Vec<Offer>)> {
        let store = match self.store() {
            Ok(store) => store,
            Err(e) => return Err((e, offers)),
        };
        // The offers' mounts are the launch's descriptors: the work only
        // borrows them, and hands back those the cache did not take.
        let mut pending = Some(offers);
        match shared(self.own_session, || {
            store.place(root, pending.take().unwrap_or_default(), protected)
        }) {
            Ok(placed) => placed,
            Err(e) => Err((CacheError::OwnSession(e), pending.unwrap_or_default())),
        }
    }

    fn clone(
        &mut self,
        root: &AsRoot,
        mount: &OwnedFd,
        image: &Image,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        instance::clone(root, mount, image, subject)
    }

    fn writable_tmpfs(
        &mut self,
        root: &AsRoot,
        limits: WritableLimits,
    ) -> Result<WritableTmpfs, Failure> {
        WritableTmpfs::create(root, limits)
    }

    fn mirror(&mut self, root: &AsRoot, m: Mirror<'_>) -> Result<(), Failure> {
        mirror::build(root, m)
    }

    fn stack(
        &mut self,
        root: &AsRoot,
        layers: &[OwnedFd],
        writable: Option<&mut WritableTmpfs>,
        attributes: RootAttributes,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        overlay::stack(root, layers, writable, attributes, subject)
    }

    fn attach(
        &mut self,
        root: &AsRoot,
        mount: &OwnedFd,
        target: &MountPoint,
        subject: &str,
    ) -> Result<(), Failure> {
        squashfs::attach(root, mount, target, subject)
    }
}
