//! Single flight: concurrent launches of one uncached image by one user
//! share one fresh instance. A launch that finds no cached instance claims
//! the making of it (an exclusive `flock` on
//! `/run/squashfs-mount/making/<uid>/<dev>-<ino>`, through `shared_lock`),
//! looks in the cache once more, makes the instance, offers it to the
//! cache and then lets go. The user's launches that find the claim taken
//! wait for it to be let go (shared lock), then find the instance in the
//! cache.
//!
//! The claims are each user's own (since round 35): no launch waits for
//! another user's maker. Launches of different users that make the same
//! image's instance at once each make one; the first the cache takes is
//! the one every later launch clones, and the others' devices go when
//! their launches end (`Store::place`). A user's own maker that is stopped
//! or frozen is not waited for (`shared_lock`), a running one at most
//! until the deadline; either way the waiter then makes its own instance,
//! as it would without single flight. The files are named by the image's
//! device and inode in root-only directories (no user can list them);
//! those no launch holds are removed at collections.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use super::entry_names::Key;
use super::{root_only, CacheError, STATE_DIR};
use crate::mounts::shared_lock::{self, Busy, Held, Holders, Reach};
use crate::privilege::AsRoot;
use crate::system::{self, Error, LockKind, Uid};

const MAKING_DIR: &str = "making";

/// The caller's directory of claims, opened for one launch.
pub struct Claims {
    dir: OwnedFd,
}

/// The making of one image's instance, claimed until dropped.
pub type Claim = Held<OwnedFd>;

impl Claims {
    /// Opens (or creates) the claims directory of `uid`.
    pub(crate) fn open(_root: &AsRoot, uid: Uid) -> Result<Claims, CacheError> {
        let making = open_making()?;
        let mine = uid.to_string();
        let unavailable = |e: Error| {
            CacheError::System(format!("cannot open {STATE_DIR}/{MAKING_DIR}/{mine}"), e)
        };
        match system::make_dir(making.as_fd(), &mine, 0o700) {
            Ok(()) | Err(Error::EXIST) => {}
            Err(e) => return Err(unavailable(e)),
        }
        let dir = system::open_dir_nofollow(making.as_fd(), &mine).map_err(unavailable)?;
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
    /// or the user's FUSE instance of it), unless another launch of the
    /// user's has: None then.
    pub(crate) fn claim(&self, root: &AsRoot, key: &Key) -> Result<Option<Claim>, CacheError> {
        shared_lock::try_take(root, self.file(key)?, LockKind::Exclusive, Reach::Within)
            .map_err(CacheError::Busy)
    }

    /// Waits until the user's launch that claimed `key` has let go, at
    /// most until `deadline`; not at all for a maker that is stopped or
    /// frozen.
    pub(crate) fn wait(
        &self,
        root: &AsRoot,
        key: &Key,
        deadline: Instant,
    ) -> Result<(), CacheError> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        shared_lock::take(
            root,
            self.file(key)?,
            LockKind::Shared,
            Reach::Within,
            Holders::Own,
            left,
        )
        .map(drop)
        .map_err(|busy: Busy| CacheError::Busy(busy))
    }
}

/// The root-only directory of every user's claims, made when missing.
fn open_making() -> Result<OwnedFd, CacheError> {
    let unavailable =
        |e: Error| CacheError::System(format!("cannot open {STATE_DIR}/{MAKING_DIR}"), e);
    let state = system::open_dir_nofollow(system::working_dir(), STATE_DIR).map_err(unavailable)?;
    root_only(state.as_fd())?;
    match system::make_dir(state.as_fd(), MAKING_DIR, 0o700) {
        Ok(()) | Err(Error::EXIST) => {}
        Err(e) => return Err(unavailable(e)),
    }
    let dir = system::open_dir_nofollow(state.as_fd(), MAKING_DIR).map_err(unavailable)?;
    root_only(dir.as_fd())?;
    Ok(dir)
}

/// Removes the claim files no launch holds, of every user (at a
/// collection), and the files of versions before round 35 (claims of all
/// users in one directory).
pub(crate) fn tidy(root: &AsRoot) {
    let Ok(making) = open_making() else {
        return;
    };
    let Ok((names, _)) = system::list_dir(making.as_fd(), ".", 1 << 20) else {
        return;
    };
    for n in names.iter().filter_map(|n| n.to_str()) {
        match system::open_dir_nofollow(making.as_fd(), n) {
            Ok(dir) if root_only(dir.as_fd()).is_ok() => tidy_dir(root, dir.as_fd()),
            Ok(_) => {}
            Err(_) => remove_unheld(root, making.as_fd(), n),
        }
    }
}

fn tidy_dir(root: &AsRoot, dir: std::os::fd::BorrowedFd<'_>) {
    let Ok((names, _)) = system::list_dir(dir, ".", 1 << 20) else {
        return;
    };
    for n in names.iter().filter_map(|n| n.to_str()) {
        remove_unheld(root, dir, n);
    }
}

/// Removes the claim file `n` of `dir` unless a launch holds it. Removed
/// while held: a launch that opened it before waits on a file no one else
/// will lock, and at worst makes an instance another launch makes too.
fn remove_unheld(root: &AsRoot, dir: std::os::fd::BorrowedFd<'_>, n: &str) {
    let Ok(fd) = system::open_lock_file(dir, n, 0o600) else {
        return;
    };
    if let Ok(Some(_held)) = shared_lock::try_take(root, fd, LockKind::Exclusive, Reach::Within) {
        let _ = system::remove_file(dir, n);
    }
}

/// `<dev>-<ino>` for a kernel instance, `<dev>-<ino>-fuse` for the user's
/// FUSE instance (the directory is the user's).
fn name(key: &Key) -> String {
    match key.fuse_user {
        None => format!("{}-{}", key.dev, key.ino),
        Some(_) => format!("{}-{}-fuse", key.dev, key.ino),
    }
}
