//! The cache's lock (`/run/squashfs-mount/lock`): `flock`, shared to reuse
//! instances, exclusive to insert or evict, waited for with a bounded poll
//! (`cache-lock-timeout`) and released when its guard goes.

use std::os::fd::BorrowedFd;

use super::{CacheError, CACHE_DIR, LOCK_FILE};
use crate::system::{self, LockKind};

/// A lock held on the lock file until dropped.
pub struct LockGuard<'a>(BorrowedFd<'a>);

impl<'a> LockGuard<'a> {
    /// A guard for a lock taken otherwise (released on drop).
    pub fn held(fd: BorrowedFd<'a>) -> Self {
        LockGuard(fd)
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let _ = system::unlock(self.0);
    }
}

/// Takes the lock `kind` on `fd`, polling with growing pauses (1 to 16 ms)
/// for at most `timeout_ms`.
pub fn lock_with_timeout(
    fd: BorrowedFd<'_>,
    kind: LockKind,
    timeout_ms: u64,
) -> Result<LockGuard<'_>, CacheError> {
    let (mut waited, mut step) = (0u64, 1u64);
    loop {
        match system::try_lock(fd, kind) {
            Ok(true) => return Ok(LockGuard(fd)),
            Ok(false) => {}
            Err(e) => {
                return Err(CacheError::Unavailable(format!(
                    "cannot lock {CACHE_DIR}/{LOCK_FILE}: {e}"
                )))
            }
        }
        if waited >= timeout_ms {
            return Err(CacheError::Busy(waited));
        }
        system::pause_millis(step);
        waited += step;
        step = (step * 2).min(16);
    }
}
