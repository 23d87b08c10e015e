//! The caller's cached FUSE instances (issue "every image at kernel
//! speed"): a FUSE instance (server + mount) is kept in the image cache
//! like a kernel instance, for its user alone, so that the next launch of
//! the same file by the same user attaches a clone of the mount and finds
//! the kernel's caches of it warm. Keyed by the file's identity and the
//! user (`cache::Key`); the server is the user's own process, which exits
//! when its cached mount is evicted and unused (and is killed if its user
//! stopped it). Every function here needs root (inside
//! `Credentials::as_root`), run from `/` (`away_from_working_dir`): the
//! cache's lock may be held, and no request ever goes to a FUSE server
//! meanwhile (`cache::entries` looks at FUSE mounts from the kernel's
//! cached attributes only).

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::cache::claim::{Claim, Claims};
use crate::cache::store::{Reused, Stranded, Want};
use crate::cache::{CacheError, Identity, Key, Kind, Meta, Offer, Placed, Store};
use crate::config::Settings;
use crate::image::Image;
use crate::system;

/// The cache, opened for a launch's FUSE instances.
pub struct FuseCache {
    store: Store,
    uid: u32,
    wait_ms: u64,
}

/// A fresh FUSE instance: its detached mount and its server.
pub struct FreshFuse {
    pub mount: OwnedFd,
    pub server: OwnedFd,
}

impl FuseCache {
    /// Opens (or creates) the cache for the FUSE instances of user `uid`,
    /// and runs the periodic bounded collection.
    pub fn open(
        settings: &Settings,
        uid: u32,
        stranded: Stranded,
    ) -> Result<FuseCache, CacheError> {
        let store = Store::open(
            settings.cache_limits(),
            settings.cache_lock_timeout_ms,
            true,
            stranded,
        )?
        .ok_or_else(|| CacheError::Unavailable("the image cache could not be made".into()))?;
        store.maintain(crate::cache::GC_INTERVAL);
        Ok(FuseCache {
            store,
            uid,
            wait_ms: settings.cache_lock_timeout_ms,
        })
    }

    fn key(&self, image: &Image) -> Key {
        Key {
            dev: image.id.dev,
            ino: image.id.ino,
            fuse_user: Some(self.uid),
        }
    }

    /// Clones of the caller's cached instances of `images` (each with how
    /// many copies), and for each one not reused, the record of a stale
    /// entry (a server that is gone, say).
    pub fn reuse(&self, images: &[(&Image, usize)]) -> Result<Vec<Reused>, CacheError> {
        let wanted: Vec<Want> = images
            .iter()
            .map(|(image, copies)| Want {
                key: self.key(image),
                id: Identity::from(&image.id),
                copies: *copies,
            })
            .collect();
        self.store.reuse(&wanted)
    }

    /// Claims the making of the caller's instance of each of `images`
    /// (single flight between the caller's concurrent launches): the claims
    /// taken, by position, and the positions another launch is making.
    pub fn claim(&self, images: &[&Image]) -> (Vec<(usize, Claim)>, Vec<usize>) {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let Ok(claims) = Claims::open() else {
            return (ours, theirs);
        };
        for (at, image) in images.iter().enumerate() {
            match claims.claim_key(&self.key(image)) {
                Ok(Some(c)) => ours.push((at, c)),
                Ok(None) => theirs.push(at),
                Err(_) => {}
            }
        }
        (ours, theirs)
    }

    /// Waits (bounded; not for a stalled maker) for the launches making
    /// the caller's instances of `images`.
    pub fn await_others(&self, images: &[&Image]) {
        let deadline = Instant::now() + Duration::from_millis(self.wait_ms);
        let Ok(claims) = Claims::open() else { return };
        for image in images {
            let _ = claims.wait_key(&self.key(image), deadline);
        }
    }

    /// Offers fresh instances to the cache (one visit): each comes back as
    /// clones of the cached mount, or as the offer to use privately; on an
    /// error all come back.
    pub fn place(&self, offers: Vec<Offer>) -> Result<Vec<Placed>, (CacheError, Vec<Offer>)> {
        let protected: Vec<Key> = offers.iter().map(|o| o.meta.key()).collect();
        self.store.place(offers, &protected)
    }

    /// The offer of a fresh instance of `image`: its record names the
    /// server (pid and start time) and the mount's device, read without
    /// asking the server. The mount back when the server cannot be named.
    pub fn offer(
        &self,
        image: &Image,
        copies: usize,
        fresh: FreshFuse,
    ) -> Result<(Offer, OwnedFd), FreshFuse> {
        let named = system::pid_of_pidfd(fresh.server.as_fd())
            .ok()
            .and_then(|pid| Some((pid, system::process_started(pid)?)));
        let root = system::fstat_cached(fresh.mount.as_fd());
        let (Some((pid, started)), Ok(root)) = (named, root) else {
            return Err(fresh);
        };
        let meta = Meta::new(
            &Identity::from(&image.id),
            Kind::Fuse { pid, started },
            root.dev,
            self.uid,
            system::unix_time(),
            image.path.as_encoded_bytes(),
        );
        let offer = Offer {
            mount: fresh.mount,
            meta,
            cost: crate::cache::fuse_cost(pid),
            copies,
        };
        Ok((offer, fresh.server))
    }
}
