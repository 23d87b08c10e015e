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
use super::{root_only, CacheError, STATE_DIR};
use crate::mounts::shared_lock::{self, Busy, Held, Reach};
use crate::privilege::AsRoot;
use crate::system::{self, Error, LockKind};

const MAKING_DIR: &str = "making";

/// The directory of claims, opened for one launch.
pub struct Claims {
    dir: OwnedFd,
}

/// The making of one image's instance, claimed until dropped.
pub type Claim = Held<OwnedFd>;

impl Claims {
    /// Opens (or creates) the claims directory.
    pub fn open(_root: &AsRoot) -> Result<Claims, CacheError> {
        let unavailable =
            |e: Error| CacheError::System(format!("cannot open {STATE_DIR}/{MAKING_DIR}"), e);
        let state =
            system::open_dir_nofollow(system::working_dir(), STATE_DIR).map_err(unavailable)?;
        root_only(state.as_fd())?;
        match system::make_dir(state.as_fd(), MAKING_DIR, 0o700) {
            Ok(()) | Err(Error::EXIST) => {}
            Err(e) => return Err(unavailable(e)),
        }
        let dir = system::open_dir_nofollow(state.as_fd(), MAKING_DIR).map_err(unavailable)?;
        root_only(dir.as_fd())?;
        Ok(Claims { dir })
    }

    fn file(&self, key: &Key) -> Result<OwnedFd, CacheError> {
        system::open_lock_file(self.dir.as_fd(), &name(key), 0o600).map_err(|e| {
            CacheError::System(
                format!("cannot open a claim in {STATE_DIR}/{MAKING_DIR}"),
                e,
            )
        })
    }

    /// Claims the making of the instance `key` (a file's kernel instance,
    /// or one user's FUSE instance of it), unless another launch has: None
    /// then.
    pub fn claim(&self, root: &AsRoot, key: &Key) -> Result<Option<Claim>, CacheError> {
        shared_lock::try_take(root, self.file(key)?, LockKind::Exclusive, Reach::Within)
            .map_err(CacheError::Busy)
    }

    /// Waits until the launch that claimed `key` has let go, at most until
    /// `deadline`; not at all for a maker that cannot make progress.
    pub fn wait(&self, root: &AsRoot, key: &Key, deadline: Instant) -> Result<(), CacheError> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        shared_lock::take(root, self.file(key)?, LockKind::Shared, Reach::Within, left)
            .map(drop)
            .map_err(|busy: Busy| CacheError::Busy(busy))
    }

    /// Removes the claim files no launch holds (at a collection).
    pub fn tidy(&self, root: &AsRoot) {
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
            if let Ok(Some(_held)) =
                shared_lock::try_take(root, fd, LockKind::Exclusive, Reach::Within)
            {
                let _ = system::remove_file(self.dir.as_fd(), n);
            }
        }
    }
}

/// `<dev>-<ino>` for a kernel instance, `<dev>-<ino>-u<uid>` for a user's
/// FUSE instance.
fn name(key: &Key) -> String {
    match key.fuse_user {
        None => format!("{}-{}", key.dev, key.ino),
        Some(uid) => format!("{}-{}-u{uid}", key.dev, key.ino),
    }
}
