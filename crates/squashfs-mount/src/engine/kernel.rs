//! Stage 5, the kernel path: the kernel's instances of the images routed
//! to it, the same way for every front end. Clones of cached instances,
//! else fresh ones (loop devices attached under the loop budget, mounted
//! without any lock held), offered to the cache: through `flight`, which
//! the FUSE path shares. Every root-side call goes through [`RootSide`].

use super::flight::{self, away, CacheUse, Event, InstanceKind};
use super::images::{Images, NotCached, Outcome, Record};
use super::root_side::{FreshImage, RootSide};
use crate::cache::{evict, CacheError, Identity, Key, Kind, Meta, Offer, Placed};
use crate::config::LoopOptions;
use crate::config::Settings;
use crate::mounts::budgets::Shares;
use crate::mounts::instance;
use crate::privilege::{AsRoot, Credentials};
use crate::system::error::Failure;
use crate::system::{self, Uid};

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
    /// The caller's shares of loop devices and of the cache.
    shares: Shares,
    /// How long a launch waits for another of its user's making the same
    /// instance (`max-launches-wait`: single flight is per user).
    wait_ms: u64,
    uid: Uid,
}

impl KernelSource {
    /// The kernel path of a launch whose image cache is `cache`.
    pub(crate) fn new<C: Credentials>(
        creds: &C,
        images: &Images,
        settings: &Settings,
        cache: &CacheUse,
    ) -> KernelSource {
        let mut source = KernelSource {
            cache: matches!(cache, CacheUse::Open),
            warnings: Vec::new(),
            notes: Vec::new(),
            options: settings.loop_options,
            shares: Shares {
                loops: settings.loop_limits(),
                cache_per_user: settings.cache_limits().per_user,
                wait_ms: settings.max_launches_wait_ms,
            },
            wait_ms: settings.max_launches_wait_ms,
            uid: creds.caller().uid,
        };
        if let CacheUse::Unavailable(e) = cache {
            if images.records.iter().any(Record::is_kernel) {
                source.warnings.push(unavailable(e));
            }
        }
        source
    }

    /// Stage 5: the kernel instances, `copies` of each kernel image, in
    /// its record, with what was done.
    pub(crate) fn instances<C: Credentials, R: RootSide>(
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
        let wait_ms = self.wait_ms;
        flight::instances(creds, root_side, images, self, &kernel, wait_ms)
    }

    /// The cache cannot be used for the rest of this launch (said once).
    fn miss(&mut self, e: CacheError) {
        if std::mem::take(&mut self.cache) {
            self.warnings.push(unavailable(&e));
        }
    }

    /// Why the cache or the loop budget was not used as it should have
    /// been: one line each, printed even without `--verbose`.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// What `--verbose` adds about the instances.
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Fresh instances of the records `which`, offered to the cache where
    /// they may be kept (and the caller's share of it has room); private
    /// ones otherwise. The caller's hold is kept until the offers are
    /// placed: what was counted under it stays true until then.
    fn make_as_root<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        images: &mut Images,
        which: &[usize],
    ) -> Result<(), Failure> {
        let for_cache = |r: &Record| r.cacheable() && self.cache;
        let fresh: Vec<FreshImage<'_>> = which
            .iter()
            .map(|&i| {
                let r = &images.records[i];
                FreshImage {
                    image: &r.image,
                    for_cache: for_cache(r),
                    subject: &r.subject,
                }
            })
            .collect();
        let made = rs.fresh(root, &fresh, self.shares, self.options, self.uid)?;
        let (mut offers, mut private) = (Vec::new(), Vec::new());
        for (&i, (f, cached)) in which.iter().zip(made.instances) {
            match cached {
                true => offers.push((i, self.offer(&images.records[i], f))),
                false => {
                    if for_cache(&images.records[i]) {
                        // Beyond the caller's share of the cache.
                        images.records[i].outcome = Some(Outcome::Private(NotCached::Refused));
                    }
                    private.push((i, f.mount))
                }
            }
        }
        let placed = self.place(root, rs, images, offers);
        drop(made.hold);
        for (i, placed) in placed {
            match placed {
                Placed::Cached(clones) => {
                    images.records[i].outcome = Some(Outcome::Cached);
                    images.records[i].instances = clones;
                }
                // Its loop device counts for the caller already.
                Placed::Private(offer) => {
                    if self.cache {
                        images.records[i].outcome = Some(Outcome::Private(NotCached::Refused));
                    }
                    private.push((i, offer.mount));
                }
            }
        }
        for (i, mount) in private {
            let r = &mut images.records[i];
            r.instances = rs.copies(root, mount, r.copies, &r.image, &r.subject)?;
        }
        Ok(())
    }

    fn offer(&self, r: &Record, f: instance::Fresh) -> Offer {
        let kind = Kind::Kernel {
            loop_number: f.loop_number,
            block_size: r.image.superblock.block_size,
        };
        let meta = Meta::new(
            &Identity::from(&r.image.id),
            kind,
            f.loop_rdev,
            self.uid,
            system::unix_time(),
            r.image.path.as_encoded_bytes(),
        );
        Offer {
            mount: f.mount,
            meta,
            cost: evict::instance_cost(r.image.superblock.block_size),
            copies: r.copies,
        }
    }

    /// Offers fresh instances to the cache (one visit), never evicting the
    /// launch's own kernel instances: each comes back as clones of the
    /// cached instance, or as the offer to use privately.
    fn place<R: RootSide>(
        &mut self,
        root: &AsRoot,
        rs: &mut R,
        images: &Images,
        offers: Vec<(usize, Offer)>,
    ) -> Vec<(usize, Placed)> {
        if offers.is_empty() {
            return Vec::new();
        }
        let protected: Vec<Key> = images
            .records
            .iter()
            .filter(|r| r.is_kernel())
            .map(|r| r.key(self.uid))
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

impl InstanceKind for KernelSource {
    fn cache_in_use(&self) -> bool {
        self.cache
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::ReuseFailed(e) => self.miss(e),
            Event::Stale(..) => {}
            Event::NoSingleFlight(e) => self.notes.push(format!("no single flight: {e}")),
            Event::NotWaiting(r, e) => self.notes.push(format!(
                "{}: not waiting for another launch making its instance ({e}); making one",
                r.subject
            )),
        }
    }

    /// Can the kernel decompress them (the same verdict as `sqfs
    /// inspect`'s)? Only asked for fresh instances: a cached one was
    /// mounted by this kernel already.
    fn check<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        images: &Images,
        missing: &[usize],
    ) -> Result<(), Failure> {
        let config = creds.as_root(|root| root_side.kernel_config(root))?;
        missing.iter().try_for_each(|&i| {
            let r = &images.records[i];
            r.image.check_kernel_support(config.as_ref(), &r.subject)
        })
    }

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
        away(creds, root_side, |root, rs| {
            self.make_as_root(root, rs, images, which)
        })?
    }
}

fn unavailable(e: &CacheError) -> String {
    format!("image cache unavailable ({e}); mounting private instances")
}
