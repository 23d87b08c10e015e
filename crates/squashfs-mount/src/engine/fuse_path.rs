//! Stage 3, the FUSE path, in the namespace the launch started in: for
//! every image routed to FUSE, clones of the caller's cached FUSE instance,
//! else a FUSE mount on a connection the caller opened and its server
//! (started as root, it becomes the caller by itself; in rootless mode it
//! already is), offered to the cache; with as many clones as the call
//! needs. Through `flight`, as the kernel path: single flight between the
//! caller's concurrent launches of one image.
//!
//! A cached instance (the caller's alone, keyed by the file and the uid)
//! is served by a server detached from the launch (`--detached`), which
//! writes to the caller's log in `fuse_log::LOG_DIR` and exits when its mount
//! is evicted and unused. Without the cache (rootless, `--no-cache`,
//! `cache = no`, or the cache unavailable) each server lives exactly as
//! long as its mount and watches the launch.

use std::os::fd::OwnedFd;

use super::context::Call;
use super::flight::{self, away, CacheUse, Event, InstanceKind};
use super::images::{Images, NotCached, Outcome, Record};
use super::root_side::RootSide;
use crate::cache::{Identity, Kind, Meta, Offer, Placed};
use crate::mounts::fuse::{self, FuseError, Launcher};
use crate::mounts::fuse_log::Detached;
use crate::privilege::{Caller, Credentials, Mode};
use crate::system::error::Failure;
use crate::system::{self, rlimits::CallerLimits};

/// What the FUSE path did, besides the records' instances.
#[derive(Default)]
pub struct Fused {
    /// Pidfds of the servers of instances not kept in the cache (the Slurm
    /// plugin kills them when the step ends).
    pub servers: Vec<OwnedFd>,
    /// Lines worth printing without `--verbose`, and `--verbose`'s.
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

/// The FUSE instances of the images routed to FUSE, in their records.
pub(crate) fn start<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    images: &mut Images,
    call: &Call<'_>,
    cache: &CacheUse,
) -> Result<Fused, Failure> {
    let which: Vec<usize> = (0..images.records.len())
        .filter(|&i| images.records[i].is_fuse())
        .collect();
    let Some(&first) = which.first() else {
        return Ok(Fused::default());
    };
    let server = call
        .ctx
        .fuse_server
        .locate(&images.records[first].image.path)?;
    let drop_to_caller = C::MODE.has_root();
    let program = fuse::Server::pin(&*creds, &server, drop_to_caller)?;
    let mut path = FusePath {
        program,
        caller: creds.caller().clone(),
        drop_to_caller,
        // Rootless: every file shows as the caller's (its user namespace
        // maps no other id). A kept layer (`--writable=DIR`) sees the
        // image's own owners, as the kernel path does: the layer's stage
        // copies what overlayfs cannot copy up (`layer::copies`).
        show_as_caller: !drop_to_caller,
        threads: call.settings.fuse_threads,
        cache_bytes: fuse::cache_share(which.len()),
        limits: call.ctx.caller_limits,
        detached: None,
        fused: Fused::default(),
    };
    path.open_log(creds, root_side, images, cache)?;
    // Single flight waits only for the caller's own launches.
    let wait_ms = call.settings.max_launches_wait_ms;
    flight::instances(creds, root_side, images, &mut path, &which, wait_ms)?;
    path.report(creds, root_side, images)?;
    Ok(path.fused)
}

/// How this launch starts its servers, and what it did.
struct FusePath<'a> {
    program: fuse::Server,
    caller: Caller,
    drop_to_caller: bool,
    show_as_caller: bool,
    threads: u32,
    cache_bytes: u64,
    limits: Option<&'a CallerLimits>,
    /// The caller's log, when instances may be cached: the cache is in
    /// use.
    detached: Option<Detached>,
    fused: Fused,
}

impl FusePath<'_> {
    /// The caller's log for detached servers, when the FUSE instances may
    /// be cached; a warning when they should be but cannot.
    fn open_log<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &Images,
        cache: &CacheUse,
    ) -> Result<(), Failure> {
        if !images.records.iter().any(|r| r.is_fuse() && r.cacheable()) {
            return Ok(());
        }
        let why = match cache {
            CacheUse::NotWanted => return Ok(()),
            CacheUse::Unavailable(e) => e.to_string(),
            CacheUse::Open => match self.log(creds, root_side)? {
                Ok(log) => {
                    self.detached = Some(log);
                    return Ok(());
                }
                Err(e) => e.to_string(),
            },
        };
        self.fused.warnings.push(format!(
            "image cache unavailable for FUSE instances ({why}); starting servers for this launch only"
        ));
        Ok(())
    }

    /// The caller's log, opened (made when missing) by root.
    fn log<C: Credentials, R: RootSide>(
        &self,
        creds: &mut C,
        root_side: &mut R,
    ) -> Result<Result<Detached, FuseError>, Failure> {
        let caller = &self.caller;
        away(creds, root_side, |root, rs| rs.fuse_log(root, caller))
    }

    /// The setuid command's launch becomes its command, and the servers of
    /// its cached instances have no stderr: a reporter tells the command's
    /// stderr about their read errors when it exits (`fuse_report::start_reporter`).
    /// The Slurm plugin's servers write to the user's log only.
    fn report<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &Images,
    ) -> Result<(), Failure> {
        let servers: Vec<u32> = images.records.iter().filter_map(|r| r.server).collect();
        let Some(log) = self.detached.as_ref() else {
            return Ok(());
        };
        if C::MODE != Mode::Setuid || servers.is_empty() {
            return Ok(());
        }
        let launcher = self.launcher();
        let started =
            creds.as_root(|root| root_side.fuse_reporter(root, &launcher, log, &servers))?;
        if let Err(e) = started {
            self.fused
                .notes
                .push(format!("read errors will not be reported at exit: {e}"));
        }
        Ok(())
    }

    fn launcher(&self) -> Launcher<'_> {
        Launcher {
            server: &self.program,
            caller: &self.caller,
            drop_to_caller: self.drop_to_caller,
            show_as_caller: self.show_as_caller,
            threads: self.threads,
            cache_bytes: self.cache_bytes,
            limits: self.limits,
            detached: self.detached.as_ref(),
        }
    }

    /// Starts a server and mount for each record of `which`, as the caller
    /// (the device opened with the caller's rights, the mount and start as
    /// root), then waits for all of them: each mount with its server.
    fn start<C: Credentials, R: RootSide>(
        &self,
        creds: &mut C,
        root_side: &mut R,
        images: &Images,
        which: &[usize],
    ) -> Result<Vec<(OwnedFd, OwnedFd)>, Failure> {
        let launcher = self.launcher();
        let mut mounts = Vec::with_capacity(which.len());
        let mut starting = Vec::with_capacity(which.len());
        for &i in which {
            let r = &images.records[i];
            let device = root_side.fuse_device(&*creds, &r.subject)?;
            let (mount, s) = creds.try_as_root(|root| {
                root_side.fuse_instance(root, &r.image, device, &launcher, &r.subject)
            })?;
            mounts.push(mount);
            starting.push(s);
        }
        let servers = fuse::wait_ready(starting, &self.program)?;
        Ok(mounts.into_iter().zip(servers).collect())
    }

    /// Uses a fresh instance for this launch only: its copies, and its
    /// server among those the launch ends.
    fn keep_private<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        r: &mut Record,
        mount: OwnedFd,
        server: OwnedFd,
    ) -> Result<(), Failure> {
        r.instances = creds
            .try_as_root(|root| root_side.copies(root, mount, r.copies, &r.image, &r.subject))?;
        self.fused.servers.push(server);
        Ok(())
    }

    /// The offer of a fresh instance: its record names the server (pid and
    /// start time) and the mount's device, read without asking the server.
    /// None when the server cannot be named.
    fn offer<R: RootSide>(
        &self,
        root_side: &mut R,
        r: &Record,
        mount: &OwnedFd,
        server: &OwnedFd,
    ) -> Option<(Meta, u64)> {
        let facts = root_side.fuse_facts(mount, server)?;
        let meta = Meta::new(
            &Identity::from(&r.image.id),
            facts.kind,
            facts.device,
            self.caller.uid,
            system::unix_time(),
            r.image.path.as_encoded_bytes(),
        );
        Some((meta, facts.cost))
    }
}

impl InstanceKind for FusePath<'_> {
    fn cache_in_use(&self) -> bool {
        self.detached.is_some()
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::ReuseFailed(e) => self
                .fused
                .notes
                .push(format!("FUSE instances not reused: {e}")),
            Event::Stale(r, meta) => {
                let note = stale_note(r, &meta);
                if !self.fused.warnings.contains(&note) {
                    self.fused.warnings.push(note);
                }
            }
            Event::NoSingleFlight(_) | Event::NotWaiting(..) => {}
        }
    }

    /// Starts instances of `which` and offers them to the cache (when it
    /// is in use).
    fn make<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &mut Images,
        which: &[usize],
    ) -> Result<(), Failure> {
        if which.is_empty() {
            return Ok(());
        }
        let fresh = self.start(creds, root_side, images, which)?;
        let mut offers: Vec<Offer> = Vec::new();
        let mut offered: Vec<(usize, OwnedFd, Option<u32>)> = Vec::new();
        for (&i, (mount, server)) in which.iter().zip(fresh) {
            let r = &mut images.records[i];
            let offer = match self.cache_in_use() {
                true => self.offer(root_side, r, &mount, &server),
                false => None,
            };
            let Some((meta, cost)) = offer else {
                if self.cache_in_use() {
                    r.outcome = Some(Outcome::Private(NotCached::Refused));
                }
                self.keep_private(creds, root_side, r, mount, server)?;
                continue;
            };
            let copies = r.copies;
            let pid = match meta.kind {
                Kind::Fuse { pid, .. } => Some(pid),
                Kind::Kernel { .. } => None,
            };
            offered.push((i, server, pid));
            offers.push(Offer {
                mount,
                meta,
                cost,
                copies,
            });
        }
        self.place(creds, root_side, images, offers, offered)
    }
}

impl FusePath<'_> {
    /// Offers fresh instances to the cache (one visit, never evicting what
    /// is offered): each comes back as clones of the cached mount, or as
    /// the offer to use privately; on an error all come back.
    fn place<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &mut Images,
        offers: Vec<Offer>,
        offered: Vec<(usize, OwnedFd, Option<u32>)>,
    ) -> Result<(), Failure> {
        if offers.is_empty() {
            return Ok(());
        }
        let protected: Vec<_> = offers.iter().map(|o| o.meta.key()).collect();
        let placed = match away(creds, root_side, |root, rs| {
            rs.place(root, offers, &protected)
        })? {
            Ok(placed) => placed,
            Err((e, back)) => {
                self.fused
                    .notes
                    .push(format!("FUSE instances not kept in the cache: {e}"));
                back.into_iter().map(Placed::Private).collect()
            }
        };
        for ((i, server, pid), placed) in offered.into_iter().zip(placed) {
            let r = &mut images.records[i];
            match placed {
                Placed::Cached(clones) => {
                    r.instances = clones;
                    r.outcome = Some(Outcome::Cached);
                    // Ours, unless another launch of the caller's kept
                    // the same file a moment before (its clones, whose
                    // server's reports are then not told at exit).
                    r.server = pid;
                }
                Placed::Private(offer) => {
                    r.outcome = Some(Outcome::Private(NotCached::Refused));
                    self.keep_private(creds, root_side, r, offer.mount, server)?;
                }
            }
        }
        Ok(())
    }
}

/// Why a cached instance of the caller's was not reused.
fn stale_note(r: &Record, m: &Meta) -> String {
    let image = r.image.path.to_string_lossy();
    match m.kind {
        Kind::Fuse { pid, .. } => format!(
            "{image}: your cached FUSE instance's server (pid {pid}) is gone; starting a new one"
        ),
        Kind::Kernel { .. } => format!("{image}: the cached instance is stale"),
    }
}
