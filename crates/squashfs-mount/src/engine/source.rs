//! Where kernel instances come from, the same way for every front end:
//! clones of cached instances (one visit to the cache for the whole call),
//! else fresh ones (loop devices attached under the loop budget, mounted
//! without any lock held), offered to the cache in one more visit. Needs
//! root (call inside `Credentials::as_root`).

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};

use crate::cache::{evict, CacheError, Identity, Meta, Offer, Placed, Store};
use crate::config::Settings;
use crate::error::Failure;
use crate::image::Image;
use crate::instance;
use crate::limits::LoopBudget;
use crate::loopdev::{LoopDevice, LoopOptions};
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
    /// Clones of an instance the cache held.
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
    /// Why the cache was not used, when it should have been.
    note: Option<(bool, String)>,
    options: LoopOptions,
    max_loop_devices: u32,
    uid: u32,
    /// What the last `instances` call did, per wanted image.
    outcomes: Vec<Outcome>,
}

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
            note: None,
            options: settings.loop_options,
            max_loop_devices: settings.max_loop_devices,
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
                Err(e) => source.miss(e),
            }
        }
        source
    }

    fn miss(&mut self, e: CacheError) {
        let serious = matches!(e, CacheError::Unavailable(_));
        self.note.get_or_insert((
            serious,
            format!("image cache unavailable ({e}); mounting private instances"),
        ));
        self.store = None;
    }

    /// Why the cache was not used: (worth a warning, text).
    pub fn note(&self) -> Option<&(bool, String)> {
        self.note.as_ref()
    }

    /// What the last [`KernelSource::instances`] did, per wanted image.
    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    /// `copies` detached mounts of each wanted image, in order.
    pub fn instances(&mut self, wanted: &[Wanted<'_>]) -> Result<Vec<Vec<OwnedFd>>, Failure> {
        let mut out: Vec<Vec<OwnedFd>> = wanted.iter().map(|_| Vec::new()).collect();
        let not_cached = |w: &Wanted<'_>| {
            Outcome::Private(if w.cacheable {
                NotCached::NoCache
            } else {
                NotCached::NotCacheable
            })
        };
        self.outcomes = wanted.iter().map(not_cached).collect();
        let cached: Vec<usize> = (0..wanted.len()).filter(|&i| wanted[i].cacheable).collect();
        if let Some(store) = &self.store {
            if !cached.is_empty() {
                let ask: Vec<(Identity, usize)> = cached
                    .iter()
                    .map(|&i| (Identity::from(&wanted[i].image.id), wanted[i].copies))
                    .collect();
                match store.reuse(&ask) {
                    Ok(clones) => {
                        for (&i, c) in cached.iter().zip(clones) {
                            if !c.is_empty() {
                                self.outcomes[i] = Outcome::Reused;
                            }
                            out[i] = c;
                        }
                    }
                    Err(e) => self.miss(e),
                }
            }
        }
        let missing: Vec<usize> = (0..wanted.len()).filter(|&i| out[i].is_empty()).collect();
        if missing.is_empty() {
            return Ok(out);
        }
        // Can the kernel decompress them (the same verdict as `sqfs
        // inspect`'s)? Only asked for fresh instances: a cached one was
        // mounted by this kernel already.
        let config = crate::image::kernel_config();
        for &i in &missing {
            wanted[i]
                .image
                .check_kernel_support(config.as_ref(), wanted[i].subject)?;
        }
        // Loop devices, counted and configured under the budget's lock;
        // then the superblocks, which read the images, without it.
        let dev = system::open_dir_nofollow(system::working_dir(), "/dev")
            .map_err(|e| Failure::new(format!("cannot open /dev: {e}")))?;
        let devices: Vec<LoopDevice> = {
            let _budget = LoopBudget::reserve(missing.len(), self.max_loop_devices, dev.as_fd())?;
            missing
                .iter()
                .map(|&i| {
                    LoopDevice::attach(
                        wanted[i].image,
                        self.options,
                        dev.as_fd(),
                        wanted[i].subject,
                    )
                })
                .collect::<Result<_, _>>()?
        };
        let mut fresh = Vec::with_capacity(missing.len());
        for (&i, device) in missing.iter().zip(devices) {
            fresh.push((
                i,
                instance::on_device(device, wanted[i].image, self.options, wanted[i].subject)?,
            ));
        }
        let (mut offers, mut private) = (Vec::new(), Vec::new());
        for (i, f) in fresh {
            let w = &wanted[i];
            if w.cacheable && self.store.is_some() {
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
                offers.push((
                    i,
                    Offer {
                        mount: f.mount,
                        meta,
                        cost: evict::instance_cost(w.image.superblock.block_size),
                        copies: w.copies,
                    },
                ));
            } else {
                private.push((i, f.mount));
            }
        }
        if !offers.is_empty() {
            let protected: HashSet<(u64, u64)> = wanted
                .iter()
                .map(|w| (w.image.id.dev, w.image.id.ino))
                .collect();
            let (index, offered): (Vec<usize>, Vec<Offer>) = offers.into_iter().unzip();
            let placed = match self.store.as_ref().map(|s| s.place(offered, &protected)) {
                Some(Ok(placed)) => placed,
                Some(Err((e, back))) => {
                    self.miss(e);
                    back.into_iter().map(Placed::Private).collect()
                }
                None => Vec::new(),
            };
            for (i, p) in index.into_iter().zip(placed) {
                match p {
                    Placed::Cached(clones) => {
                        self.outcomes[i] = Outcome::Cached;
                        out[i] = clones
                    }
                    Placed::Private(offer) => {
                        if self.store.is_some() {
                            self.outcomes[i] = Outcome::Private(NotCached::Refused);
                        }
                        private.push((i, offer.mount))
                    }
                }
            }
        }
        for (i, mount) in private {
            let w = &wanted[i];
            let mut copies = Vec::with_capacity(w.copies);
            for _ in 1..w.copies {
                copies.push(instance::clone(&mount, w.image, w.subject)?);
            }
            copies.insert(0, mount);
            out[i] = copies;
        }
        Ok(out)
    }
}
