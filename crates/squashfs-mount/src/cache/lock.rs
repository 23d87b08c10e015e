//! The cache's lock (`/run/squashfs-mount/lock`): `flock`, shared to reuse
//! instances, exclusive to insert or evict, taken through `shared_lock`
//! (held out of the caller's reach; a stalled holder is not waited for;
//! other waits bounded by `cache-lock-timeout`).

use std::os::fd::BorrowedFd;

use super::CacheError;
use crate::shared_lock::{self, Held, Reach};
use crate::system::LockKind;

/// Takes the lock `kind` on `fd` for at most `timeout_ms`.
pub fn lock_with_timeout(
    fd: BorrowedFd<'_>,
    kind: LockKind,
    timeout_ms: u64,
) -> Result<Held<BorrowedFd<'_>>, CacheError> {
    shared_lock::take(fd, kind, Reach::Out, timeout_ms)
        .map(|(held, _)| held)
        .map_err(CacheError::Busy)
}
