//! Where kernel instances come from, the same way for every front end:
//! clones of cached instances (one visit to the cache for the whole call),
//! else fresh ones (loop devices attached under the loop budget, mounted
//! without any lock held), offered to the cache in one more visit.
//! Concurrent launches of one uncached image make one instance between
//! them (`cache::claim`). Needs root (call inside `Credentials::as_root`).

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::cache::claim::{Claim, Claims};
use crate::cache::store::Want;
use crate::cache::{evict, CacheError, Identity, Key, Kind, Meta, Offer, Placed, Store};
use crate::config::Settings;
use crate::error::Failure;
use crate::image::Image;
use crate::instance;
use crate::limits::{LoopBudget, LoopLimits};
use crate::loopdev::{self, LoopDevice, LoopOptions, Owner};
use crate::system;

/// One image of the call that the kernel mounts.
pub struct Wanted<'a> {
    pub image: &'a Image,
    /// How many detached mounts of it the call needs (mount points it is
    /// used at).
    pub copies: usize,
    /// May be kept in the cache (its path is open to everyone, it is not on
    /// a user's FUSE file system, and caching is on for this launch).
    pub cacheable: bool,
    pub subject: &'a str,
}

/// What [`KernelSource::instances`] did for one wanted image (for
/// `--verbose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Clones of an instance the cache held (or another launch made
    /// meanwhile).
    Reused,
    /// A new instance, now in the cache.
    Cached,
    /// A new instance for this launch only, and why.
    Private(NotCached),
}

/// Why a new instance is not in the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCached {
    /// The image may not be cached (`Wanted::cacheable`; the caller knows
    /// why).
    NotCacheable,
    /// The cache is not in use for this launch (off, or unavailable).
    NoCache,
    /// The cache did not take it (no room, or it could not be stored).
    Refused,
}

/// The kernel instances of one launch.
pub struct KernelSource {
    store: Option<Store>,
    /// Lines worth printing even without `--verbose` (the cache or the
    /// loop-device budget could not be used as they should have been).
    warnings: Vec<String>,
    /// What `--verbose` adds.
    notes: Vec<String>,
    options: LoopOptions,
    loop_limits: LoopLimits,
    /// How long a launch waits for another making the same instance.
    wait_ms: u64,
    uid: u32,
    /// What the last `instances` call did, per wanted image.
    outcomes: Vec<Outcome>,
}

/// `copies` detached mounts of each wanted image, in order (empty: none yet).
type Instances = Vec<Vec<OwnedFd>>;

impl KernelSource {
    /// Opens the cache (creating it if needed) unless `use_cache` is false,
    /// and runs the periodic bounded collection. Needs root, in the
    /// namespace the launch started in.
    pub fn open(
        settings: &Settings,
        use_cache: bool,
        uid: u32,
        stranded: crate::cache::store::Stranded,
    ) -> KernelSource {
        let mut source = KernelSource {
            store: None,
            warnings: Vec::new(),
            notes: Vec::new(),
            options: settings.loop_options,
            loop_limits: settings.loop_limits(),
            wait_ms: settings.cache_lock_timeout_ms,
            uid,
            outcomes: Vec::new(),
        };
        if use_cache {
            match Store::open(
                settings.cache_limits(),
                settings.cache_lock_timeout_ms,
                true,
                stranded,
            ) {
                Ok(Some(store)) => {
                    store.maintain(crate::cache::GC_INTERVAL);
                    source.store = Some(store);
                }
                Ok(None) => {}
                Err(e) => source.warnings.push(unavailable(&e)),
            }
        }
        source
    }

    /// The cache cannot be used for the rest of this launch (said once).
    fn miss(&mut self, e: CacheError) {
        if self.store.take().is_some() {
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

    /// What the last [`KernelSource::instances`] did, per wanted image.
    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    /// `copies` detached mounts of each wanted image, in order.
    pub fn instances(&mut self, wanted: &[Wanted<'_>]) -> Result<Instances, Failure> {
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
        self.reuse(wanted, &cacheable, &mut out);
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
        let (claims, theirs) = self.claim(wanted, &out);
        let ours: Vec<usize> = claims.iter().map(|(i, _)| *i).collect();
        self.reuse(wanted, &ours, &mut out);
        let now: Vec<usize> = (0..wanted.len())
            .filter(|&i| out[i].is_empty() && !theirs.contains(&i))
            .collect();
        self.make(wanted, &now, &mut out)?;
        drop(claims);
        if !theirs.is_empty() {
            self.await_others(wanted, &theirs);
            self.reuse(wanted, &theirs, &mut out);
            let left: Vec<usize> = theirs.into_iter().filter(|&i| out[i].is_empty()).collect();
            self.make(wanted, &left, &mut out)?;
        }
        Ok(out)
    }

    /// Clones of cached instances for the images `which` (one visit).
    fn reuse(&mut self, wanted: &[Wanted<'_>], which: &[usize], out: &mut Instances) {
        let Some(store) = &self.store else { return };
        if which.is_empty() {
            return;
        }
        let ask: Vec<Want> = which
            .iter()
            .map(|&i| Want {
                key: kernel_key(wanted[i].image),
                id: Identity::from(&wanted[i].image.id),
                copies: wanted[i].copies,
            })
            .collect();
        match store.reuse(&ask) {
            Ok(clones) => {
                for (&i, (c, _)) in which.iter().zip(clones) {
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
    fn claim(
        &mut self,
        wanted: &[Wanted<'_>],
        out: &Instances,
    ) -> (Vec<(usize, Claim)>, Vec<usize>) {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        if self.store.is_none() {
            return (ours, theirs);
        }
        let claims = match Claims::open() {
            Ok(c) => c,
            Err(e) => {
                self.notes.push(format!("no single flight: {e}"));
                return (ours, theirs);
            }
        };
        for i in (0..wanted.len()).filter(|&i| wanted[i].cacheable && out[i].is_empty()) {
            let id = &wanted[i].image.id;
            match claims.claim(id.dev, id.ino) {
                Ok(Some(c)) => ours.push((i, c)),
                Ok(None) => theirs.push(i),
                Err(e) => self.notes.push(format!("no single flight: {e}")),
            }
        }
        (ours, theirs)
    }

    /// Waits (bounded, and not for a stalled maker) until the launches
    /// making the images `theirs` are done.
    fn await_others(&mut self, wanted: &[Wanted<'_>], theirs: &[usize]) {
        let deadline = Instant::now() + Duration::from_millis(self.wait_ms);
        let Ok(claims) = Claims::open() else { return };
        for &i in theirs {
            let id = &wanted[i].image.id;
            if let Err(e) = claims.wait(id.dev, id.ino, deadline) {
                self.notes.push(format!(
                    "{}: not waiting for another launch making its instance ({e}); making one",
                    wanted[i].subject
                ));
            }
        }
    }

    /// Fresh instances of the images `which`, offered to the cache where
    /// they may be kept; private ones otherwise.
    fn make(
        &mut self,
        wanted: &[Wanted<'_>],
        which: &[usize],
        out: &mut Instances,
    ) -> Result<(), Failure> {
        if which.is_empty() {
            return Ok(());
        }
        let fresh = self.fresh(wanted, which)?;
        let (mut offers, mut private) = (Vec::new(), Vec::new());
        for (i, f) in fresh {
            if wanted[i].cacheable && self.store.is_some() {
                offers.push((i, self.offer(&wanted[i], f)));
            } else {
                private.push((i, f.mount));
            }
        }
        for (i, placed) in self.place(wanted, offers) {
            match placed {
                Placed::Cached(clones) => {
                    self.outcomes[i] = Outcome::Cached;
                    out[i] = clones
                }
                Placed::Private(offer) => {
                    if self.store.is_some() {
                        self.outcomes[i] = Outcome::Private(NotCached::Refused);
                    }
                    // Made for the cache, kept by this launch alone: it
                    // counts for the user's share from now on.
                    if let Kind::Kernel { loop_number, .. } = offer.meta.kind {
                        self.count_as_private(loop_number);
                    }
                    private.push((i, offer.mount));
                }
            }
        }
        for (i, mount) in private {
            out[i] = copies_of(mount, &wanted[i])?;
        }
        Ok(())
    }

    /// Loop devices for the images `which`, counted and configured under
    /// the budget's lock; then the superblocks, which read the images,
    /// without it.
    fn fresh(
        &mut self,
        wanted: &[Wanted<'_>],
        which: &[usize],
    ) -> Result<Vec<(usize, instance::Fresh)>, Failure> {
        let dev = system::open_dir_nofollow(system::working_dir(), "/dev")
            .map_err(|e| Failure::new(format!("cannot open /dev: {e}")))?;
        let owner = |w: &Wanted<'_>| match w.cacheable && self.store.is_some() {
            true => Owner::Cache,
            false => Owner::User(self.uid),
        };
        let private = which
            .iter()
            .filter(|&&i| owner(&wanted[i]) != Owner::Cache)
            .count();
        let devices: Vec<LoopDevice> = {
            let budget = LoopBudget::reserve(
                which.len(),
                private,
                self.loop_limits,
                self.uid,
                dev.as_fd(),
            )?;
            self.warnings.extend(budget.note.clone());
            which
                .iter()
                .map(|&i| {
                    let w = &wanted[i];
                    LoopDevice::attach(w.image, self.options, dev.as_fd(), owner(w), w.subject)
                })
                .collect::<Result<_, _>>()?
        };
        which
            .iter()
            .zip(devices)
            .map(|(&i, device)| {
                let w = &wanted[i];
                Ok((
                    i,
                    instance::on_device(device, w.image, self.options, w.subject)?,
                ))
            })
            .collect()
    }

    fn count_as_private(&mut self, loop_number: u32) {
        let counted = system::open_dir_nofollow(system::working_dir(), "/dev")
            .and_then(|dev| loopdev::count_for(dev.as_fd(), loop_number, Owner::User(self.uid)));
        if let Err(e) = counted {
            self.notes.push(format!(
                "/dev/loop{loop_number} could not be counted as yours: {e}"
            ));
        }
    }

    fn offer(&self, w: &Wanted<'_>, f: instance::Fresh) -> Offer {
        let id = Identity::from(&w.image.id);
        let kind = Kind::Kernel {
            loop_number: f.loop_number,
            block_size: w.image.superblock.block_size,
        };
        let meta = Meta::new(
            &id,
            kind,
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
    fn place(
        &mut self,
        wanted: &[Wanted<'_>],
        offers: Vec<(usize, Offer)>,
    ) -> Vec<(usize, Placed)> {
        if offers.is_empty() {
            return Vec::new();
        }
        let protected: Vec<Key> = wanted.iter().map(|w| kernel_key(w.image)).collect();
        let (index, offered): (Vec<usize>, Vec<Offer>) = offers.into_iter().unzip();
        let placed = match self.store.as_ref().map(|s| s.place(offered, &protected)) {
            Some(Ok(placed)) => placed,
            Some(Err((e, back))) => {
                self.miss(e);
                back.into_iter().map(Placed::Private).collect()
            }
            None => Vec::new(),
        };
        index.into_iter().zip(placed).collect()
    }
}

/// The cache key of an image's kernel instance.
fn kernel_key(image: &Image) -> Key {
    Key {
        dev: image.id.dev,
        ino: image.id.ino,
        fuse_user: None,
    }
}

fn unavailable(e: &CacheError) -> String {
    format!("image cache unavailable ({e}); mounting private instances")
}

/// The `copies` detached mounts of a private instance.
fn copies_of(mount: OwnedFd, w: &Wanted<'_>) -> Result<Vec<OwnedFd>, Failure> {
    let mut copies = Vec::with_capacity(w.copies);
    for _ in 1..w.copies {
        copies.push(instance::clone(&mount, w.image, w.subject)?);
    }
    copies.insert(0, mount);
    Ok(copies)
}
