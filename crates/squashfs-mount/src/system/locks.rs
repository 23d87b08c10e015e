//! `flock` locks.

use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use super::SysResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Shared,
    Exclusive,
}

/// flock(LOCK_NB): Ok(true) when the lock was taken, Ok(false) when another
/// process holds a conflicting one.
pub fn try_lock(fd: BorrowedFd<'_>, kind: LockKind) -> SysResult<bool> {
    use rustix::fs::FlockOperation as Op;
    let op = match kind {
        LockKind::Shared => Op::NonBlockingLockShared,
        LockKind::Exclusive => Op::NonBlockingLockExclusive,
    };
    match rustix::fs::flock(fd, op) {
        Ok(()) => Ok(true),
        Err(Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

pub fn unlock(fd: BorrowedFd<'_>) -> SysResult<()> {
    rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock)
}
