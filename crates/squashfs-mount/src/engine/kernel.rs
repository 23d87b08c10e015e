//! Stages 3 and 5, the kernel path: where kernel instances come from, the
//! same way for every front end. Clones of cached instances (one visit to
//! the cache for the whole call), else fresh ones (loop devices attached
//! under the loop budget, mounted without any lock held), offered to the
//! cache in one more visit. Concurrent launches of one uncached image make
//! one instance between them (single flight, `cache::claim`). Every
//! root-side call goes through [`RootSide`].

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use super::images::{Images, NotCached, Outcome, Record};
use super::plan::Plan;
use super::root_side::{FreshImage, RootSide};
use crate::cache::{evict, CacheError, Identity, Meta, Offer, Placed};
use crate::config::Settings;
use crate::error::Failure;
use crate::image::Image;
use crate::instance;
use crate::limits::LoopLimits;
use crate::loopdev::{LoopOptions, Owner};
use crate::privilege::{AsRoot, Credentials};
use crate::system::{self, Uid};

/// One image of the call that the kernel mounts.
struct Wanted<'a> {
    image: &'a Image,
    /// How many detached mounts of it the call needs.
    copies: usize,
    /// May be kept in the cache.
    cacheable: bool,
    subject: &'a str,
}

impl<'a> Wanted<'a> {
    fn of(r: &'a Record) -> Wanted<'a> {
        Wanted {
            image: &r.image,
            copies: r.copies,
            cacheable: r.cacheable(),
            subject: &r.subject,
        }
    }
}

/// The kernel instances of one launch.
pub struct KernelSource {
    /// The image cache is in use (opened, and not given up since).
    cache: bool,
    /// Lines worth printing even without `--verbose` (the cache or the
    /// loop-device budget could not be used as they should have been).
    warnings: Vec<String>,
    /// What `--verbose` adds.
    notes: Vec<String>,
    options: LoopOptions,
    loop_limits: LoopLimits,
    /// How long a launch waits for another making the same instance.
    wait_ms: u64,
    uid: Uid,
    /// What the current `make_all` did, per wanted image.
    outcomes: Vec<Outcome>,
}

/// `copies` detached mounts of each wanted image, in order (empty: none yet).
type Instances = Vec<Vec<OwnedFd>>;

/// Runs `f` as root from "/", then goes back to the working directory: `f`
/// visits the image cache under its lock, and the working directory may be
/// on a file system the caller serves (FUSE), whose stalled answer to
/// root's fchdir back into it must not hold the lock for everyone. The
/// way back happens after `f`, lock released (it can stall only this
/// launch).
fn away<C: Credentials, R: RootSide, T>(
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

impl KernelSource {
    /// Stage 3, in the namespace the launch started in: opens the image
    /// cache (creating it if needed) when the launch uses it and has kernel
    /// images, and runs the periodic bounded collection.
    pub fn open<C: Credentials, R: RootSide>(
        creds: &mut C,
        root_side: &mut R,
        images: &Images,
        plan: &Plan,
        settings: &Settings,
    ) -> Result<KernelSource, Failure> {
        let mut source = KernelSource {
            cache: false,
            warnings: Vec::new(),
            notes: Vec::new(),
            options: settings.loop_options,
            loop_limits: settings.loop_limits(),
            wait_ms: settings.cache_lock_timeout_ms,
            uid: creds.caller().uid,
            outcomes: Vec::new(),
        };
        if !images.records.iter().any(Record::is_kernel) || !settings.cache || plan.no_cache {
            return Ok(source);
        }
        match away(creds, root_side, |root, rs| {
            rs.open_cache(root, settings, C::stranded)
        })? {
            Ok(open) => source.cache = open,
            Err(e) => source.warnings.push(unavailable(&e)),
        }
        Ok(source)
    }

    /// Stage 5: the kernel instances, `copies` of each kernel image, in
    /// its record, with what was done.
    pub fn instances<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &mut Images,
    ) -> Result<(), Failure> {
        let kernel: Vec<usize> = (0..images.records.len())
            .filter(|&i| images.records[i].is_kernel())
            .collect();
        if kernel.is_empty() {
            return Ok(());
        }
        let records = &images.records;
        let made = away(creds, root_side, |root, rs| {
            let wanted: Vec<Wanted<'_>> = kernel.iter().map(|&i| Wanted::of(&records[i])).collect();
            self.make_all(root, rs, &wanted)
        })??;
        for ((&i, instances), outcome) in kernel.iter().zip(made).zip(&self.outcomes) {
            images.records[i].instances = instances;
            images.records[i].outcome = Some(*outcome);
        }
        Ok(())
    }

    /// The cache cannot be used for the rest of this launch (said once).
    fn miss(&mut self, e: CacheError) {
        if std::mem::take(&mut self.cache) {
            self.warnings.push(unavailable(&e));
        }
    }

    /// Why the cache or the loop budget was not used as it should have
    /// been: one line each, printed even without `--verbose`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// What `--verbose` adds about the instances.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
    /// `copies` detached mounts of each wanted image, in order.
    fn make_all<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        wanted: &[Wanted<'_>],
    ) -> Result<Instances, Failure> {
        let mut out: Instances = wanted.iter().map(|_| Vec::new()).collect();
        self.outcomes = wanted
            .iter()
            .map(|w| {
                Outcome::Private(match w.cacheable {
                    true => NotCached::NoCache,
                    false => NotCached::NotCacheable,
                })
            })
            .collect();
        let cacheable: Vec<usize> = (0..wanted.len()).filter(|&i| wanted[i].cacheable).collect();
        self.reuse(root, rs, wanted, &cacheable, &mut out);
        if out.iter().all(|o| !o.is_empty()) {
            return Ok(out);
        }
        // Can the kernel decompress them (the same verdict as `sqfs
        // inspect`'s)? Only asked for fresh instances: a cached one was
        // mounted by this kernel already.
        let config = crate::image::kernel_config();
        for (w, _) in wanted.iter().zip(&out).filter(|(_, o)| o.is_empty()) {
            w.image.check_kernel_support(config.as_ref(), w.subject)?;
        }
        // Single flight: make the cacheable ones no other launch is making
        // (looking in the cache once more, now that the claims are ours),
        // then wait for the others' and take what they cached.
        let (claims, theirs) = self.claim(root, rs, wanted, &out);
        let ours: Vec<usize> = claims.iter().map(|(i, _)| *i).collect();
        self.reuse(root, rs, wanted, &ours, &mut out);
        let now: Vec<usize> = (0..wanted.len())
            .filter(|&i| out[i].is_empty() && !theirs.contains(&i))
            .collect();
        self.make(root, rs, wanted, &now, &mut out)?;
        drop(claims);
        if !theirs.is_empty() {
            self.await_others(root, rs, wanted, &theirs);
            self.reuse(root, rs, wanted, &theirs, &mut out);
            let left: Vec<usize> = theirs.into_iter().filter(|&i| out[i].is_empty()).collect();
            self.make(root, rs, wanted, &left, &mut out)?;
        }
        Ok(out)
    }

    /// Clones of cached instances for the images `which` (one visit).
    fn reuse<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        wanted: &[Wanted<'_>],
        which: &[usize],
        out: &mut Instances,
    ) {
        if !self.cache || which.is_empty() {
            return;
        }
        let ask: Vec<(Identity, usize)> = which
            .iter()
            .map(|&i| (Identity::from(&wanted[i].image.id), wanted[i].copies))
            .collect();
        match rs.reuse(root, &ask) {
            Ok(clones) => {
                for (&i, c) in which.iter().zip(clones) {
                    if !c.is_empty() {
                        self.outcomes[i] = Outcome::Reused;
                        out[i] = c;
                    }
                }
            }
            Err(e) => self.miss(e),
        }
    }

    /// Claims the making of each missing cacheable image: the claims taken,
    /// and the images another launch is making.
    #[allow(clippy::type_complexity)]
    fn claim<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        wanted: &[Wanted<'_>],
        out: &Instances,
    ) -> (Vec<(usize, R::Claim)>, Vec<usize>) {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        if !self.cache {
            return (ours, theirs);
        }
        if let Err(e) = rs.open_claims(root) {
            self.notes.push(format!("no single flight: {e}"));
            return (ours, theirs);
        }
        for i in (0..wanted.len()).filter(|&i| wanted[i].cacheable && out[i].is_empty()) {
            match rs.claim(root, &wanted[i].image.id) {
                Ok(Some(c)) => ours.push((i, c)),
                Ok(None) => theirs.push(i),
                Err(e) => self.notes.push(format!("no single flight: {e}")),
            }
        }
        (ours, theirs)
    }

    /// Waits (bounded, and not for a stalled maker) until the launches
    /// making the images `theirs` are done.
    fn await_others<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        wanted: &[Wanted<'_>],
        theirs: &[usize],
    ) {
        let deadline = Instant::now() + Duration::from_millis(self.wait_ms);
        for &i in theirs {
            if let Err(e) = rs.await_claim(root, &wanted[i].image.id, deadline) {
                self.notes.push(format!(
                    "{}: not waiting for another launch making its instance ({e}); making one",
                    wanted[i].subject
                ));
            }
        }
    }

    /// Fresh instances of the images `which`, offered to the cache where
    /// they may be kept; private ones otherwise.
    fn make<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        wanted: &[Wanted<'_>],
        which: &[usize],
        out: &mut Instances,
    ) -> Result<(), Failure> {
        if which.is_empty() {
            return Ok(());
        }
        let for_cache = |w: &Wanted<'_>| w.cacheable && self.cache;
        let fresh: Vec<FreshImage<'_>> = which
            .iter()
            .map(|&i| FreshImage {
                image: wanted[i].image,
                owner: match for_cache(&wanted[i]) {
                    true => Owner::Cache,
                    false => Owner::User(self.uid),
                },
                subject: wanted[i].subject,
            })
            .collect();
        let (made, note) = rs.fresh(root, &fresh, self.loop_limits, self.options, self.uid)?;
        self.warnings.extend(note);
        let (mut offers, mut private) = (Vec::new(), Vec::new());
        for (&i, f) in which.iter().zip(made) {
            if for_cache(&wanted[i]) {
                offers.push((i, self.offer(&wanted[i], f)));
            } else {
                private.push((i, f.mount));
            }
        }
        for (i, placed) in self.place(root, rs, wanted, offers) {
            match placed {
                Placed::Cached(clones) => {
                    self.outcomes[i] = Outcome::Cached;
                    out[i] = clones
                }
                Placed::Private(offer) => {
                    if self.cache {
                        self.outcomes[i] = Outcome::Private(NotCached::Refused);
                    }
                    // Made for the cache, kept by this launch alone: it
                    // counts for the user's share from now on.
                    if let Err(e) = rs.count_as_private(root, offer.meta.loop_number, self.uid) {
                        self.notes.push(format!(
                            "/dev/loop{} could not be counted as yours: {e}",
                            offer.meta.loop_number
                        ));
                    }
                    private.push((i, offer.mount));
                }
            }
        }
        for (i, mount) in private {
            let w = &wanted[i];
            out[i] = rs.copies(root, mount, w.copies, w.image, w.subject)?;
        }
        Ok(())
    }

    fn offer(&self, w: &Wanted<'_>, f: instance::Fresh) -> Offer {
        let id = Identity::from(&w.image.id);
        let meta = Meta::new(
            &id,
            w.image.superblock.block_size,
            f.loop_number,
            f.loop_rdev,
            self.uid,
            system::unix_time(),
            w.image.path.as_encoded_bytes(),
        );
        Offer {
            mount: f.mount,
            meta,
            cost: evict::instance_cost(w.image.superblock.block_size),
            copies: w.copies,
        }
    }

    /// Offers fresh instances to the cache (one visit): each comes back as
    /// clones of the cached instance, or as the offer to use privately.
    fn place<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        wanted: &[Wanted<'_>],
        offers: Vec<(usize, Offer)>,
    ) -> Vec<(usize, Placed)> {
        if offers.is_empty() {
            return Vec::new();
        }
        let protected: HashSet<(u64, u64)> = wanted
            .iter()
            .map(|w| (w.image.id.dev, w.image.id.ino))
            .collect();
        let (index, offered): (Vec<usize>, Vec<Offer>) = offers.into_iter().unzip();
        let placed = match rs.place(root, offered, &protected) {
            Ok(placed) => placed,
            Err((e, back)) => {
                self.miss(e);
                back.into_iter().map(Placed::Private).collect()
            }
        };
        index.into_iter().zip(placed).collect()
    }
}

fn unavailable(e: &CacheError) -> String {
    format!("image cache unavailable ({e}); mounting private instances")
}
