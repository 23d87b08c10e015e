//! The root side of the running system: each [`RootSide`] operation as
//! the mechanisms below the engine do it (the unit tests use the
//! recording fake in `fake_root_side.rs` instead).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use crate::cache::claim::{Claim, Claims};
use crate::cache::store::OnStranded;
use crate::cache::{CacheError, Key, Kind, Offer, Placed, Reused, Store, Want};
use crate::config::{self, Settings};
use crate::config::{LoopLimits, LoopOptions};
use crate::mounts::budgets::{LaunchSlot, LoopBudget};
use crate::mounts::fuse::{self, FuseError, Launcher, Starting};
use crate::mounts::fuse_log::{self, Detached};
use crate::mounts::image::Image;
use crate::mounts::instance::{self, Fresh};
use crate::mounts::loop_device::{LoopDevice, Owner};
use crate::mounts::mount_point::MountPoint;
use crate::mounts::overlay::{self, RootAttributes, WritableLimits, WritableTmpfs};
use crate::mounts::squashfs;
use crate::privilege::{ActingAsCaller, AsRoot, Caller};
use crate::system::error::Failure;
use crate::system::{self, AwayFromWorkingDir, Uid};

use super::context::SequenceError;
use super::mirror::{self, Mirror};
use super::root_side::{FreshImage, FuseFacts, RootSide};

/// The root-side operations, performed. Holds the image cache and the
/// claims of single flight, once opened, for the rest of the launch.
#[derive(Default)]
pub struct System {
    store: Option<Store>,
    /// The cache opened only to read its records (`--no-cache`).
    records: Option<Store>,
    claims: Option<Claims>,
}

impl System {
    fn store(&self) -> Result<&Store, CacheError> {
        self.store.as_ref().ok_or(CacheError::NotOpen)
    }

    fn claims(&self) -> Result<&Claims, CacheError> {
        self.claims.as_ref().ok_or(CacheError::NotOpen)
    }
}

fn dev_dir() -> Result<OwnedFd, Failure> {
    system::open_dir_nofollow(system::working_dir(), "/dev")
        .map_err(|e| Failure::new(SequenceError::Dev(e)))
}

impl RootSide for System {
    type Claim = Claim;
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
        Detached::create(root, caller)
    }

    fn fuse_reporter(
        &mut self,
        root: &AsRoot,
        launcher: &Launcher<'_>,
        log: &Detached,
        servers: &[u32],
    ) -> Result<OwnedFd, FuseError> {
        fuse_log::start_reporter(root, launcher, log, servers)
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
        self.store = store;
        Ok(self.store.is_some())
    }

    fn read_cache_records(&mut self, root: &AsRoot, stranded: OnStranded) {
        let defaults = Settings::default();
        self.records = Store::open(
            root,
            defaults.cache_limits(),
            defaults.cache_lock_timeout_ms,
            false,
            stranded,
        )
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
        self.store()?.reuse(root, wanted)
    }

    fn open_claims(&mut self, root: &AsRoot) -> Result<(), CacheError> {
        self.claims = Some(Claims::open(root)?);
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
        limits: LoopLimits,
        options: LoopOptions,
        caller: Uid,
    ) -> Result<(Vec<Fresh>, Option<String>), Failure> {
        let dev = dev_dir()?;
        // Every device counts for the caller from its attach on, those
        // made for the cache too: until the cache holds one, the launch
        // holds it within the caller's reach. What the cache holds is read
        // from its records, also by a launch that does not use the cache
        // (its caller's cached instances are not theirs to count).
        let owner = Owner::User(caller);
        let store = self.store.as_ref().or(self.records.as_ref());
        let cached = || {
            store
                .map(|store| store.cached_devices(root))
                .unwrap_or_default()
        };
        // Counted and configured under the budget's lock; the superblocks,
        // which read the images, without it.
        let (devices, note) = {
            let budget = LoopBudget::reserve(
                root,
                images.len(),
                images.len(),
                limits,
                caller,
                dev.as_fd(),
                cached,
            )?;
            let devices: Vec<LoopDevice> = images
                .iter()
                .map(|f| LoopDevice::attach(root, f.image, options, dev.as_fd(), owner, f.subject))
                .collect::<Result<_, _>>()?;
            (devices, budget.note.clone())
        };
        let fresh = images
            .iter()
            .zip(devices)
            .map(|(f, device)| instance::on_device(root, device, f.image, options, f.subject))
            .collect::<Result<_, _>>()?;
        Ok((fresh, note))
    }

    fn place(
        &mut self,
        root: &AsRoot,
        offers: Vec<Offer>,
        protected: &[Key],
    ) -> Result<Vec<Placed>, (CacheError, Vec<Offer>)> {
        match self.store() {
            Ok(store) => store.place(root, offers, protected),
            Err(e) => Err((e, offers)),
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
