//! The seam between the sequence and root: [`RootSide`] lists every
//! operation the engine performs as root, each taking the proof of it
//! (`&AsRoot`). [`System`](super::System) performs them; the unit tests put a recording
//! fake in its place (`fake_root_side.rs`), so that what the sequence decides (which
//! image gets which instance, how many copies, what the cache is asked,
//! what is stacked and attached where) is tested without root, on any
//! machine.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Instant;

use crate::cache::store::OnStranded;
use crate::cache::{CacheError, Key, Kind, Offer, Placed, Reused, Want};
use crate::config::LoopOptions;
use crate::config::Settings;
use crate::mounts::budgets::{LaunchSlot, Shares};
use crate::mounts::fuse::{FuseError, Launcher, Starting};
use crate::mounts::fuse_log::Detached;
use crate::mounts::image::Image;
use crate::mounts::instance::Fresh;
use crate::mounts::mount_point::MountPoint;
use crate::mounts::overlay::{RootAttributes, WritableLimits};
use crate::privilege::{ActingAsCaller, AsRoot, Caller};
use crate::system::error::Failure;
use crate::system::{self, AwayFromWorkingDir, Uid};
use squashfs_format::kernel::KernelConfig;

use super::mirror::Mirror;

/// An image a fresh kernel instance is made of, and whom its loop device
/// counts for.
pub struct FreshImage<'a> {
    pub image: &'a Image,
    /// Wanted for the cache: made for it if the caller's share of the
    /// cache has room (else a private instance, counted for the caller).
    pub for_cache: bool,
    pub subject: &'a str,
}

/// The fresh instances of a call's images, in order, each with whether it
/// was made for the cache, and the caller's hold (`budgets::UserHold`),
/// to be kept until they are offered to the cache.
pub struct FreshInstances<H> {
    pub instances: Vec<(Fresh, bool)>,
    pub hold: H,
}

/// What the cache records about a fresh FUSE instance, read without a
/// request to its server: the server (pid and start time), the mount's
/// device, and the memory it holds.
pub struct FuseFacts {
    pub kind: Kind,
    pub device: u64,
    pub cost: u64,
}

/// The root-side operations of the sequence, in the order of its stages.
pub trait RootSide {
    /// The making of one image's instance, claimed (single flight) until
    /// dropped.
    type Claim;
    /// The caller's hold on their shares (`budgets::UserHold`), held until
    /// dropped.
    type Hold;
    /// The call's writable tmpfs (`--writable`).
    type Writable;

    // Stage 0.

    /// The site's settings (`/etc/squashfs-mount.conf`): read as root, or
    /// as the caller in rootless mode (so it takes no proof).
    fn site_settings(&mut self) -> Settings;
    /// One of the caller's launch slots (`max-launches-per-user`).
    fn launch_slot(
        &mut self,
        root: &AsRoot,
        caller: &Caller,
        settings: &Settings,
    ) -> Result<LaunchSlot, Failure>;

    // Stage 3, in the namespace the launch started in.

    /// A FUSE connection (/dev/fuse), opened as the caller: a site that
    /// restricts FUSE restricts it for this tool too. Caller-side, in the
    /// seam so that the unit tests need no /dev/fuse.
    fn fuse_device(
        &mut self,
        as_caller: &impl ActingAsCaller,
        subject: &str,
    ) -> Result<OwnedFd, Failure>;
    /// A FUSE mount of `image` on the connection `device` and its server,
    /// started.
    fn fuse_instance(
        &mut self,
        root: &AsRoot,
        image: &Image,
        device: OwnedFd,
        launcher: &Launcher<'_>,
        subject: &str,
    ) -> Result<(OwnedFd, Starting), Failure>;
    /// The caller's log for the servers of cached FUSE instances (which
    /// outlive the launch), in `fuse_log::LOG_DIR`: root's file, opened (made
    /// when missing) by root.
    fn fuse_log(&mut self, root: &AsRoot, caller: &Caller) -> Result<Detached, FuseError>;
    /// What the cache records about the fresh FUSE instance `mount` served
    /// by `server` (a pidfd); None when the server cannot be named. Reads
    /// only the launch's own descriptors and the server's /proc files (so
    /// it takes no proof).
    fn fuse_facts(&mut self, mount: &OwnedFd, server: &OwnedFd) -> Option<FuseFacts>;
    /// The launch's reporter of read errors from the cached instances
    /// served by `servers` (`fuse_report::start_reporter`).
    fn fuse_reporter(
        &mut self,
        root: &AsRoot,
        launcher: &Launcher<'_>,
        log: &Detached,
        servers: &[u32],
    ) -> Result<OwnedFd, FuseError>;
    /// A detached recursive copy of the bind source `source` (pinned as
    /// the caller), nosuid and nodev, its mounts slaves.
    fn copy_tree(
        &mut self,
        root: &AsRoot,
        source: BorrowedFd<'_>,
        subject: &str,
    ) -> Result<OwnedFd, Failure>;
    /// Opens the image cache (creating it if needed) and runs the periodic
    /// bounded collection; whether a cache is open now.
    fn open_cache(
        &mut self,
        root: &AsRoot,
        settings: &Settings,
        stranded: OnStranded,
    ) -> Result<bool, CacheError>;
    /// Opens the image cache if there is one, only to read its records
    /// when loop devices are counted (`fresh`): nothing is created, kept
    /// or evicted.
    fn read_cache_records(&mut self, root: &AsRoot, stranded: OnStranded);
    /// Moves to "/" for the visits to the cache (see
    /// `system::leave_working_dir`).
    fn leave_working_dir(&mut self, root: &AsRoot) -> Result<AwayFromWorkingDir, Failure>;
    fn return_to_working_dir(
        &mut self,
        root: &AsRoot,
        away: AwayFromWorkingDir,
    ) -> Result<(), system::Stranded>;

    // Stages 3 (FUSE instances) and 5 (kernel instances): the image cache.

    /// Clones of the cached instances `wanted` (an empty list for one the
    /// cache does not hold, with the record of a stale entry).
    fn reuse(&mut self, root: &AsRoot, wanted: &[Want]) -> Result<Vec<Reused>, CacheError>;
    /// Opens the caller's claims of single flight.
    fn open_claims(&mut self, root: &AsRoot, caller: Uid) -> Result<(), CacheError>;
    /// Claims the making of the instance `key`, unless another launch of
    /// the caller's has (None then).
    fn claim(&mut self, root: &AsRoot, key: &Key) -> Result<Option<Self::Claim>, CacheError>;
    /// Waits, at most until `deadline`, for the launch that claimed `key`
    /// to let go.
    fn await_claim(
        &mut self,
        root: &AsRoot,
        key: &Key,
        deadline: Instant,
    ) -> Result<(), CacheError>;
    /// Loop devices for `images`, attached within the caller's `shares`
    /// (under their hold, each device claimed), and a squashfs instance on
    /// each (made within the caller's reach: the kernel reads the image).
    fn fresh(
        &mut self,
        root: &AsRoot,
        images: &[FreshImage<'_>],
        shares: Shares,
        options: LoopOptions,
        caller: Uid,
    ) -> Result<FreshInstances<Self::Hold>, Failure>;
    /// The running kernel's configuration, read as root (`/proc/config.gz`
    /// may be root's only), when it is readable as plain text: whether a
    /// fresh kernel instance's compressor is built in.
    fn kernel_config(&mut self, root: &AsRoot) -> Option<KernelConfig>;
    /// Offers fresh instances to the cache (see `Store::place`).
    fn place(
        &mut self,
        root: &AsRoot,
        offers: Vec<Offer>,
        protected: &[Key],
    ) -> Result<Vec<Placed>, (CacheError, Vec<Offer>)>;
    /// Another detached mount of the instance `mount`.
    fn clone(
        &mut self,
        root: &AsRoot,
        mount: &OwnedFd,
        image: &Image,
        subject: &str,
    ) -> Result<OwnedFd, Failure>;

    /// `mount` and `n - 1` clones of it: the `n` copies an image used at
    /// `n` mount points needs.
    fn copies(
        &mut self,
        root: &AsRoot,
        mount: OwnedFd,
        n: usize,
        image: &Image,
        subject: &str,
    ) -> Result<Vec<OwnedFd>, Failure> {
        let mut all = Vec::with_capacity(n.max(1));
        for _ in 1..n {
            all.push(self.clone(root, &mount, image, subject)?);
        }
        all.insert(0, mount);
        Ok(all)
    }

    // Stages 5 and 6, in the private namespace.

    /// The call's writable tmpfs.
    fn writable_tmpfs(
        &mut self,
        root: &AsRoot,
        limits: WritableLimits,
    ) -> Result<Self::Writable, Failure>;
    /// `-r`: the read-only copy of a directory, with the missing mount
    /// points in it, mounted over it (see `view.rs`).
    fn mirror(&mut self, root: &AsRoot, mirror: Mirror<'_>) -> Result<(), Failure>;
    /// A union of `layers` (top first), with a writable layer on top when
    /// `writable` is given.
    fn stack(
        &mut self,
        root: &AsRoot,
        layers: &[OwnedFd],
        writable: Option<&mut Self::Writable>,
        attributes: RootAttributes,
        subject: &str,
    ) -> Result<OwnedFd, Failure>;
    /// Attaches `mount` onto the pinned mount point.
    fn attach(
        &mut self,
        root: &AsRoot,
        mount: &OwnedFd,
        target: &MountPoint,
        subject: &str,
    ) -> Result<(), Failure>;
}
