//! Single flight: concurrent launches of one uncached image share one fresh
//! instance. A launch that finds no cached instance claims the making of
//! it (an exclusive `flock` on `/run/squashfs-mount/making/<dev>-<ino>`,
//! through `shared_lock`), looks in the cache once more, makes the
//! instance, offers it to the cache and then lets go. Launches that find
//! the claim taken wait for it to be let go (shared lock), then find the
//! instance in the cache.
//!
//! Nobody can stall the others with it: a maker that is stopped or frozen
//! is not waited for (`shared_lock`), a running one at most until the
//! deadline; either way the waiter then makes its own instance, as it
//! would without single flight. The files are named by the image's device
//! and inode in a root-only directory (no user can list it); those no
//! launch holds are removed at collections.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use super::meta::Key;
use super::{root_only, CacheError, CACHE_DIR};
use crate::shared_lock::{self, Busy, Held, Reach};
use crate::system::{self, Error, LockKind};

const MAKING_DIR: &str = "making";

/// The directory of claims, opened for one launch.
pub struct Claims {
    dir: OwnedFd,
}

/// The making of one image's instance, claimed until dropped.
pub type Claim = Held<OwnedFd>;

impl Claims {
    /// Opens (or creates) the claims directory. Needs root.
    pub fn open() -> Result<Claims, CacheError> {
        let unavailable = |e: Error| {
            CacheError::Unavailable(format!("cannot open {CACHE_DIR}/{MAKING_DIR}: {e}"))
        };
        let state =
            system::open_dir_nofollow(system::working_dir(), CACHE_DIR).map_err(unavailable)?;
        root_only(state.as_fd())?;
        match system::make_dir(state.as_fd(), MAKING_DIR, 0o700) {
            Ok(()) | Err(Error::EXIST) => {}
            Err(e) => return Err(unavailable(e)),
        }
        let dir = system::open_dir_nofollow(state.as_fd(), MAKING_DIR).map_err(unavailable)?;
        root_only(dir.as_fd())?;
        Ok(Claims { dir })
    }

    fn file(&self, dev: u64, ino: u64) -> Result<OwnedFd, CacheError> {
        self.file_named(&name(dev, ino))
    }

    fn file_named(&self, name: &str) -> Result<OwnedFd, CacheError> {
        system::open_lock_file(self.dir.as_fd(), name, 0o600).map_err(|e| {
            CacheError::Unavailable(format!(
                "cannot open a claim in {CACHE_DIR}/{MAKING_DIR}: {e}"
            ))
        })
    }

    /// Claims the making of the instance of the file (`dev`, `ino`), unless
    /// another launch has: None then.
    pub fn claim(&self, dev: u64, ino: u64) -> Result<Option<Claim>, CacheError> {
        shared_lock::try_take(self.file(dev, ino)?, LockKind::Exclusive, Reach::Within)
            .map_err(CacheError::Busy)
    }

    /// Waits until the launch that claimed the file (`dev`, `ino`) has let
    /// go, at most until `deadline`; not at all for a maker that cannot
    /// make progress.
    pub fn wait(&self, dev: u64, ino: u64, deadline: Instant) -> Result<(), CacheError> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        shared_lock::take(self.file(dev, ino)?, LockKind::Shared, Reach::Within, left)
            .map(drop)
            .map_err(|busy: Busy| CacheError::Busy(busy))
    }

    /// [`Claims::claim`] of one cache entry: a kernel instance's, or one
    /// user's FUSE instance's.
    pub fn claim_key(&self, key: &Key) -> Result<Option<Claim>, CacheError> {
        shared_lock::try_take(
            self.file_named(&key_name(key))?,
            LockKind::Exclusive,
            Reach::Within,
        )
        .map_err(CacheError::Busy)
    }

    /// [`Claims::wait`] for one cache entry.
    pub fn wait_key(&self, key: &Key, deadline: Instant) -> Result<(), CacheError> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        shared_lock::take(
            self.file_named(&key_name(key))?,
            LockKind::Shared,
            Reach::Within,
            left,
        )
        .map(drop)
        .map_err(CacheError::Busy)
    }

    /// Removes the claim files no launch holds (at a collection).
    pub fn tidy(&self) {
        let Ok((names, _)) = system::list_dir(self.dir.as_fd(), ".", 1 << 20) else {
            return;
        };
        for n in names.iter().filter_map(|n| n.to_str()) {
            let Ok(fd) = system::open_lock_file(self.dir.as_fd(), n, 0o600) else {
                continue;
            };
            // Removed while held: a launch that opened it before waits on
            // a file no one else will lock, and at worst makes an instance
            // another launch makes too.
            if let Ok(Some(_held)) = shared_lock::try_take(fd, LockKind::Exclusive, Reach::Within) {
                let _ = system::remove_file(self.dir.as_fd(), n);
            }
        }
    }
}

fn name(dev: u64, ino: u64) -> String {
    format!("{dev}-{ino}")
}

fn key_name(key: &Key) -> String {
    match key.fuse_user {
        None => name(key.dev, key.ino),
        Some(uid) => format!("{}-u{uid}", name(key.dev, key.ino)),
    }
}
