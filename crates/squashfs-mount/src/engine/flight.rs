//! Instances through the image cache, the same way for every kind of
//! instance (the kernel's, shared by everyone who can open the file; a
//! user's FUSE instance, for that user alone): clones of cached instances
//! (one visit for the call's images), else fresh ones offered to the cache.
//! Single flight: concurrent launches of one uncached instance by one user
//! make one between them (`cache::claim`: no launch waits for another
//! user's). What differs between the kinds (how a
//! fresh instance is made, what is said when the cache fails) is the
//! [`InstanceKind`]'s; the image cache is opened once for both (`open_cache`).
//!
//! Every visit to the cache runs as root from "/" ([`away`]): the cache's
//! lock may be held, and the working directory may be on a file system
//! the caller serves (FUSE), whose stalled answer to root's fchdir back
//! into it must not hold the lock for everyone. The way back happens
//! after the visit, lock released (it can stall only this launch).

use std::time::{Duration, Instant};

use super::images::{Images, NotCached, Outcome, Record};
use super::plan::Plan;
use super::root_side::RootSide;
use crate::cache::{CacheError, Identity, Kind, Meta, Want};
use crate::config::Settings;
use crate::privilege::{AsRoot, Credentials};
use crate::system::error::Failure;
use crate::system::Uid;

/// The image cache for this launch.
pub enum CacheUse {
    /// No image of the launch may be kept in it (rootless, `--no-cache`,
    /// `cache = no`, or no image at all).
    NotWanted,
    Open,
    /// Wanted, but it could not be opened.
    Unavailable(CacheError),
}

/// Stage 3: opens the image cache (creating it if needed) when the launch
/// may keep instances in it, and runs the periodic bounded collection.
/// A launch that may not keep instances there but attaches loop devices
/// still opens the cache, if there is one, to read which loop devices it
/// holds (they are not its caller's to count, see `mounts::loop_device`):
/// here, before the launch's own mount namespace, which has no copy of
/// the cache namespace's bind.
pub(crate) fn open_cache<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    images: &Images,
    plan: &Plan,
    settings: &Settings,
) -> Result<CacheUse, Failure> {
    if !C::MODE.has_root() || images.records.is_empty() {
        return Ok(CacheUse::NotWanted);
    }
    if plan.no_cache || !settings.cache {
        if !images.records.iter().any(|r| r.is_kernel()) {
            return Ok(CacheUse::NotWanted);
        }
        away(creds, root_side, |root, rs| {
            rs.read_cache_records(root, C::stranded)
        })?;
        return Ok(CacheUse::NotWanted);
    }
    Ok(
        match away(creds, root_side, |root, rs| {
            rs.open_cache(root, settings, C::stranded)
        })? {
            Ok(true) => CacheUse::Open,
            Ok(false) => CacheUse::NotWanted,
            Err(e) => CacheUse::Unavailable(e),
        },
    )
}

/// Runs `f` as root from "/", then goes back to the working directory
/// (see the module documentation).
pub(crate) fn away<C: Credentials, R: RootSide, T>(
    creds: &mut C,
    root_side: &mut R,
    f: impl FnOnce(&AsRoot, &mut R) -> T,
) -> Result<T, Failure> {
    creds.as_root(|root| {
        let away = root_side.leave_working_dir(root)?;
        let t = f(root, root_side);
        if let Err(s) = root_side.return_to_working_dir(root, away) {
            C::stranded(&s);
        }
        Ok(t)
    })?
}

/// What went wrong with the cache, for the path to say its way (and to
/// stop using the cache, if it does).
pub enum Event<'a> {
    /// The cache could not be read.
    ReuseFailed(CacheError),
    /// The cached instance of the record could not be reused; its entry's
    /// record.
    Stale(&'a Record, Meta),
    /// The making of instances cannot be claimed.
    NoSingleFlight(CacheError),
    /// Not waiting for the launch that makes the record's instance.
    NotWaiting(&'a Record, CacheError),
}

/// What differs between the kinds of instance.
pub trait InstanceKind {
    /// Whether the cache is in use for this path (opened, and not given up
    /// since).
    fn cache_in_use(&self) -> bool;
    /// Something went wrong with the cache.
    fn event(&mut self, event: Event<'_>);
    /// Before fresh instances of the records `missing` are made: whether
    /// they can be.
    fn check<C: Credentials, R: RootSide>(
        &mut self,
        _creds: &mut C,
        _root_side: &mut R,
        _images: &Images,
        _missing: &[usize],
    ) -> Result<(), Failure> {
        Ok(())
    }
    /// Fresh instances of the records `which` (`copies` detached mounts of
    /// each, in its record, with its outcome), offered to the cache where
    /// they may be kept.
    fn make<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &mut Images,
        which: &[usize],
    ) -> Result<(), Failure>;
}

/// The instances of the records `which`, all of one path: reuse; claim
/// what is missing and may be cached; look again; make what is ours (and
/// what may not be cached); let go; wait for the other launches' and take
/// what they cached; make what is still missing.
pub(crate) fn instances<C: Credentials, R: RootSide, P: InstanceKind>(
    creds: &mut C,
    root_side: &mut R,
    images: &mut Images,
    path: &mut P,
    which: &[usize],
    wait_ms: u64,
) -> Result<(), Failure> {
    let caller = creds.caller().uid;
    for &i in which {
        let r = &mut images.records[i];
        r.outcome = Some(Outcome::Private(match r.cacheable() {
            true => NotCached::NoCache,
            false => NotCached::NotCacheable,
        }));
    }
    let cacheable: Vec<usize> = which
        .iter()
        .copied()
        .filter(|&i| images.records[i].cacheable())
        .collect();
    let mut visit = Visit {
        creds,
        root_side,
        caller,
    };
    visit.reuse(images, path, &cacheable)?;
    let missing = without_instances(images, which);
    if missing.is_empty() {
        return Ok(());
    }
    path.check(visit.creds, visit.root_side, images, &missing)?;
    let (claims, theirs) = visit.claim(images, path, &missing)?;
    let ours: Vec<usize> = claims.iter().map(|(i, _)| *i).collect();
    visit.reuse(images, path, &ours)?;
    let now: Vec<usize> = without_instances(images, &missing)
        .into_iter()
        .filter(|i| !theirs.contains(i))
        .collect();
    path.make(visit.creds, visit.root_side, images, &now)?;
    drop(claims);
    if theirs.is_empty() {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    visit.await_others(images, path, &theirs, deadline)?;
    visit.reuse(images, path, &theirs)?;
    let left = without_instances(images, &theirs);
    path.make(visit.creds, visit.root_side, images, &left)
}

/// The records of `which` that have no instances yet.
fn without_instances(images: &Images, which: &[usize]) -> Vec<usize> {
    which
        .iter()
        .copied()
        .filter(|&i| images.records[i].instances.is_empty())
        .collect()
}

/// The cache's side of [`instances`]: each step one visit.
struct Visit<'a, C, R> {
    creds: &'a mut C,
    root_side: &'a mut R,
    caller: Uid,
}

/// The claims taken (by record), and the records another launch is making.
type Claimed<K> = (Vec<(usize, K)>, Vec<usize>);

impl<C: Credentials, R: RootSide> Visit<'_, C, R> {
    /// Clones of the cached instances of the records `which`.
    fn reuse<P: InstanceKind>(
        &mut self,
        images: &mut Images,
        path: &mut P,
        which: &[usize],
    ) -> Result<(), Failure> {
        if !path.cache_in_use() || which.is_empty() {
            return Ok(());
        }
        let ask: Vec<Want> = which
            .iter()
            .map(|&i| {
                let r = &images.records[i];
                Want {
                    key: r.key(self.caller),
                    id: Identity::from(&r.image.id),
                    copies: r.copies,
                    by: self.caller,
                }
            })
            .collect();
        match away(self.creds, self.root_side, |root, rs| rs.reuse(root, &ask))? {
            Ok(found) => {
                for (&i, (clones, stale)) in which.iter().zip(found) {
                    if !clones.is_empty() {
                        let r = &mut images.records[i];
                        r.instances = clones;
                        r.outcome = Some(Outcome::Reused);
                        r.server = stale.and_then(|m| match m.kind {
                            Kind::Fuse { pid, .. } => Some(pid),
                            Kind::Kernel { .. } => None,
                        });
                    } else if let Some(meta) = stale {
                        path.event(Event::Stale(&images.records[i], meta));
                    }
                }
            }
            Err(e) => path.event(Event::ReuseFailed(e)),
        }
        Ok(())
    }

    /// Claims the making of each record of `missing` that may be cached.
    fn claim<P: InstanceKind>(
        &mut self,
        images: &Images,
        path: &mut P,
        missing: &[usize],
    ) -> Result<Claimed<R::Claim>, Failure> {
        let which: Vec<usize> = missing
            .iter()
            .copied()
            .filter(|&i| images.records[i].cacheable())
            .collect();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        if !path.cache_in_use() || which.is_empty() {
            return Ok((ours, theirs));
        }
        let caller = self.caller;
        away(self.creds, self.root_side, |root, rs| {
            if let Err(e) = rs.open_claims(root, caller) {
                path.event(Event::NoSingleFlight(e));
                return;
            }
            for i in which {
                match rs.claim(root, &images.records[i].key(caller)) {
                    Ok(Some(c)) => ours.push((i, c)),
                    Ok(None) => theirs.push(i),
                    Err(e) => path.event(Event::NoSingleFlight(e)),
                }
            }
        })?;
        Ok((ours, theirs))
    }

    /// Waits (bounded, and not for a stalled maker) until the launches
    /// making the records `theirs` are done.
    fn await_others<P: InstanceKind>(
        &mut self,
        images: &Images,
        path: &mut P,
        theirs: &[usize],
        deadline: Instant,
    ) -> Result<(), Failure> {
        let caller = self.caller;
        away(self.creds, self.root_side, |root, rs| {
            for &i in theirs {
                let r = &images.records[i];
                if let Err(e) = rs.await_claim(root, &r.key(caller), deadline) {
                    path.event(Event::NotWaiting(r, e));
                }
            }
        })
    }
}
