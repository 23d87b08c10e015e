//! Step 3, FUSE: for every FUSE-routed image, clones of the caller's cached
//! FUSE instance (`fuse_source`), else a server and mount started as the
//! caller (and offered to the cache), with as many clones as the call
//! needs. Single flight between the caller's concurrent launches of one
//! image. Without the cache (rootless, `--no-cache`, `cache = no`, or the
//! cache unavailable) each server lives exactly as long as its mount and
//! watches the launch, as before.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;

use super::fuse_source::{FreshFuse, FuseCache};
use super::plan::Plan;
use super::source::{NotCached, Outcome};
use super::{away_from_working_dir, Context, Opened};
use crate::cache::{Meta, Offer, Placed};
use crate::error::Failure;
use crate::fuse::{self, Detached, Launcher};
use crate::instance;
use crate::privilege::Credentials;

/// What the FUSE stage made.
#[derive(Default)]
pub struct FuseInstances {
    /// The detached mounts of each FUSE image (by image index).
    pub mounts: BTreeMap<usize, Vec<OwnedFd>>,
    /// Pidfds of the servers of instances not kept in the cache (the Slurm
    /// plugin kills them when the step ends).
    pub servers: Vec<OwnedFd>,
    pub outcomes: BTreeMap<usize, Outcome>,
    /// Lines worth printing without `--verbose`, and `--verbose`'s.
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

/// Runs the stage for the images of `opened` that `kernel` says are not
/// the kernel's.
pub fn run<C: Credentials>(
    creds: &mut C,
    opened: &[Opened],
    copies: &[usize],
    plan: &Plan,
    ctx: &Context<'_>,
) -> Result<FuseInstances, Failure> {
    let mut out = FuseInstances::default();
    let images: Vec<usize> = (0..opened.len()).filter(|&i| !opened[i].kernel).collect();
    let Some(&first) = images.first() else {
        return Ok(out);
    };
    let path = ctx
        .fuse_server
        .locate(&opened[first].image.path.to_string_lossy())?;
    let caller = creds.caller().clone();
    let program = fuse::Server::pin(&*creds, &path, !ctx.rootless)?;
    let mut launcher = Launcher {
        server: &program,
        caller: &caller,
        drop_to_caller: !ctx.rootless,
        // Rootless, and under a kept layer (`--writable=DIR`): every file
        // shows as the caller's, so that every file can be copied up into
        // a layer the caller mounts (the caller can read every byte of an
        // image served by FUSE anyway).
        show_as_caller: ctx.rootless || plan.layer_dir.is_some(),
        threads: ctx.settings.fuse_threads,
        limits: ctx.caller_limits,
        detached: None,
    };
    let cached = cache_for(creds, plan, ctx, &mut out)?;
    let Some((cache, detached)) = &cached else {
        let why =
            if plan.no_cache || !ctx.settings.cache || ctx.rootless || plan.layer_dir.is_some() {
                NotCached::NotCacheable
            } else {
                NotCached::NoCache
            };
        let fresh = start(creds, opened, &images, &launcher, &program)?;
        for (i, f) in images.iter().zip(fresh) {
            keep_private(&mut out, opened, copies, *i, f, why)?;
        }
        return Ok(out);
    };
    launcher.detached = Some(detached);
    let flight = Flight {
        cache,
        opened,
        copies,
        launcher: &launcher,
        program: &program,
    };
    flight.run(creds, &images, &mut out)?;
    Ok(out)
}

/// The caller's FUSE cache and the servers' log, when FUSE instances may be
/// cached for this launch; a warning when they should be but cannot.
fn cache_for<C: Credentials>(
    creds: &mut C,
    plan: &Plan,
    ctx: &Context<'_>,
    out: &mut FuseInstances,
) -> Result<Option<(FuseCache, Detached)>, Failure> {
    if ctx.rootless || plan.no_cache || !ctx.settings.cache {
        return Ok(None);
    }
    if plan.layer_dir.is_some() {
        // Its instances show every file as the caller's: not the
        // instances other launches share.
        out.notes.push(
            "a kept writable layer's FUSE instances show every file as yours: they are this launch's own, never cached".into(),
        );
        return Ok(None);
    }
    let caller = creds.caller().clone();
    let stranded = C::stranded;
    let opened = away_from_working_dir(creds, || {
        let detached = Detached::open(&caller)?;
        let cache = FuseCache::open(ctx.settings, caller.uid.as_raw(), stranded)
            .map_err(|e| Failure::new(e.to_string()))?;
        Ok::<_, Failure>((cache, detached))
    })?;
    match opened {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            out.warnings.push(format!(
                "image cache unavailable for FUSE instances ({e}); starting servers for this launch only"
            ));
            Ok(None)
        }
    }
}

/// Starts a server and mount for each image of `which`, as the caller
/// (the device opened with the caller's rights, the mount and start as
/// root), then waits for all of them.
fn start<C: Credentials>(
    creds: &mut C,
    opened: &[Opened],
    which: &[usize],
    launcher: &Launcher<'_>,
    program: &fuse::Server,
) -> Result<Vec<FreshFuse>, Failure> {
    let mut mounts = Vec::with_capacity(which.len());
    let mut starting = Vec::with_capacity(which.len());
    for &i in which {
        let image = &opened[i].image;
        let subject = image.given.to_string_lossy().into_owned();
        let device = fuse::open_device(&*creds, &subject)?;
        let (mount, s) = creds.as_root(|| fuse::instance(image, device, launcher, &subject))??;
        mounts.push(mount);
        starting.push(s);
    }
    let servers = fuse::wait_ready(starting, program)?;
    Ok(mounts
        .into_iter()
        .zip(servers)
        .map(|(mount, server)| FreshFuse { mount, server })
        .collect())
}

/// Uses a fresh instance for this launch only.
fn keep_private(
    out: &mut FuseInstances,
    opened: &[Opened],
    copies: &[usize],
    i: usize,
    fresh: FreshFuse,
    why: NotCached,
) -> Result<(), Failure> {
    out.mounts
        .insert(i, copies_of(fresh.mount, &opened[i], copies[i])?);
    out.servers.push(fresh.server);
    out.outcomes.insert(i, Outcome::Private(why));
    Ok(())
}

/// `n` detached mounts of a private instance.
fn copies_of(mount: OwnedFd, o: &Opened, n: usize) -> Result<Vec<OwnedFd>, Failure> {
    let subject = o.image.given.to_string_lossy();
    let mut all = Vec::with_capacity(n);
    for _ in 1..n {
        all.push(instance::clone(&mount, &o.image, &subject)?);
    }
    all.insert(0, mount);
    Ok(all)
}

/// Single flight through the caller's FUSE cache.
struct Flight<'a> {
    cache: &'a FuseCache,
    opened: &'a [Opened],
    copies: &'a [usize],
    launcher: &'a Launcher<'a>,
    program: &'a fuse::Server,
}

impl Flight<'_> {
    /// Reuse; claim what is missing; look again; start what is ours (or
    /// unclaimable) and offer it; let go; wait for the other launches'
    /// and take what they cached; start what is still missing.
    fn run<C: Credentials>(
        &self,
        creds: &mut C,
        images: &[usize],
        out: &mut FuseInstances,
    ) -> Result<(), Failure> {
        self.reuse(creds, images, out)?;
        let missing: Vec<usize> = images
            .iter()
            .copied()
            .filter(|i| !out.mounts.contains_key(i))
            .collect();
        let (claims, theirs) = {
            let imgs: Vec<_> = missing.iter().map(|&i| &self.opened[i].image).collect();
            let (ours, theirs) = creds.as_root(|| self.cache.claim(&imgs))?;
            let theirs: Vec<usize> = theirs.into_iter().map(|at| missing[at]).collect();
            let ours_idx: Vec<usize> = ours.iter().map(|(at, _)| missing[*at]).collect();
            self.reuse(creds, &ours_idx, out)?;
            (ours, theirs)
        };
        let now: Vec<usize> = missing
            .iter()
            .copied()
            .filter(|i| !out.mounts.contains_key(i) && !theirs.contains(i))
            .collect();
        self.make(creds, &now, out)?;
        drop(claims);
        if theirs.is_empty() {
            return Ok(());
        }
        let imgs: Vec<_> = theirs.iter().map(|&i| &self.opened[i].image).collect();
        creds.as_root(|| self.cache.await_others(&imgs))?;
        self.reuse(creds, &theirs, out)?;
        let left: Vec<usize> = theirs
            .into_iter()
            .filter(|i| !out.mounts.contains_key(i))
            .collect();
        self.make(creds, &left, out)
    }

    /// Clones of the cached instances of `which` (one visit).
    fn reuse<C: Credentials>(
        &self,
        creds: &mut C,
        which: &[usize],
        out: &mut FuseInstances,
    ) -> Result<(), Failure> {
        if which.is_empty() {
            return Ok(());
        }
        let ask: Vec<_> = which
            .iter()
            .map(|&i| (&self.opened[i].image, self.copies[i]))
            .collect();
        match away_from_working_dir(creds, || self.cache.reuse(&ask))? {
            Ok(found) => {
                for (&i, (clones, stale)) in which.iter().zip(found) {
                    if clones.is_empty() {
                        let note = stale.map(|m| stale_note(&self.opened[i], &m));
                        if let Some(note) = note.filter(|n| !out.warnings.contains(n)) {
                            out.warnings.push(note);
                        }
                        continue;
                    }
                    out.mounts.insert(i, clones);
                    out.outcomes.insert(i, Outcome::Reused);
                }
            }
            Err(e) => out.notes.push(format!("FUSE instances not reused: {e}")),
        }
        Ok(())
    }

    /// Starts instances of `which` and offers them to the cache.
    fn make<C: Credentials>(
        &self,
        creds: &mut C,
        which: &[usize],
        out: &mut FuseInstances,
    ) -> Result<(), Failure> {
        if which.is_empty() {
            return Ok(());
        }
        let fresh = start(creds, self.opened, which, self.launcher, self.program)?;
        let mut offers: Vec<Offer> = Vec::new();
        let mut offered: Vec<(usize, OwnedFd)> = Vec::new();
        for (&i, f) in which.iter().zip(fresh) {
            match self.cache.offer(&self.opened[i].image, self.copies[i], f) {
                Ok((offer, server)) => {
                    offers.push(offer);
                    offered.push((i, server));
                }
                Err(f) => keep_private(out, self.opened, self.copies, i, f, NotCached::Refused)?,
            }
        }
        let placed = match away_from_working_dir(creds, || self.cache.place(offers))? {
            Ok(placed) => placed,
            Err((e, back)) => {
                out.notes
                    .push(format!("FUSE instances not kept in the cache: {e}"));
                back.into_iter().map(Placed::Private).collect()
            }
        };
        for ((i, server), placed) in offered.into_iter().zip(placed) {
            match placed {
                Placed::Cached(clones) => {
                    out.mounts.insert(i, clones);
                    out.outcomes.insert(i, Outcome::Cached);
                }
                Placed::Private(offer) => {
                    let f = FreshFuse {
                        mount: offer.mount,
                        server,
                    };
                    keep_private(out, self.opened, self.copies, i, f, NotCached::Refused)?;
                }
            }
        }
        Ok(())
    }
}

/// Why a cached instance of the caller's was not reused.
fn stale_note(o: &Opened, m: &Meta) -> String {
    let image = o.image.path.to_string_lossy();
    match m.kind {
        crate::cache::Kind::Fuse { pid, .. } => format!(
            "{image}: your cached FUSE instance's server (pid {pid}) is gone; starting a new one"
        ),
        crate::cache::Kind::Kernel { .. } => format!("{image}: the cached instance is stale"),
    }
}
