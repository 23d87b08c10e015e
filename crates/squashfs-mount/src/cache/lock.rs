//! The cache's lock (`/run/squashfs-mount/lock`): `flock`, shared to list
//! the entries, exclusive to insert or evict, taken through `shared_lock`
//! by root's work in a session of its own (held out of the caller's
//! reach; a stalled holder is not waited for; other waits bounded by
//! `cache-lock-timeout`, 100 ms by default).

use std::os::fd::BorrowedFd;

use super::CacheError;
use crate::mounts::shared_lock::{self, Held, Holders, Reach};
use crate::privilege::AsRoot;
use crate::system::LockKind;

/// Takes the lock `kind` on `fd` for at most `timeout_ms`.
pub(crate) fn lock_with_timeout<'a>(
    root: &AsRoot,
    fd: BorrowedFd<'a>,
    kind: LockKind,
    timeout_ms: u64,
) -> Result<Held<BorrowedFd<'a>>, CacheError> {
    shared_lock::take(root, fd, kind, Reach::Out, Holders::Any, timeout_ms)
        .map(|(held, _)| held)
        .map_err(CacheError::Busy)
}
