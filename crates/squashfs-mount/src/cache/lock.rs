//! The cache's lock (`/run/squashfs-mount/lock`): `flock`, shared to reuse
//! instances, exclusive to insert or evict, taken through `shared_lock`
//! (held out of the caller's reach; a stalled holder is not waited for;
//! other waits bounded by `cache-lock-timeout`).

use std::os::fd::BorrowedFd;

use super::CacheError;
use crate::mounts::shared_lock::{self, Held, Reach};
use crate::privilege::AsRoot;
use crate::system::LockKind;

/// Takes the lock `kind` on `fd` for at most `timeout_ms`.
pub fn lock_with_timeout<'a>(
    root: &AsRoot,
    fd: BorrowedFd<'a>,
    kind: LockKind,
    timeout_ms: u64,
) -> Result<Held<BorrowedFd<'a>>, CacheError> {
    shared_lock::take(root, fd, kind, Reach::Out, timeout_ms)
        .map(|(held, _)| held)
        .map_err(CacheError::Busy)
}
