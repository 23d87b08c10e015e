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
pub(crate) fn try_lock(fd: BorrowedFd<'_>, kind: LockKind) -> SysResult<bool> {
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

pub(crate) fn unlock(fd: BorrowedFd<'_>) -> SysResult<()> {
    rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock)
}

/// The pids of the processes holding a lock on the file `fd` refers to, as
/// /proc/locks lists them (flock: the process that took it; waiters of a
/// blocking lock, the `->` lines, are left out). Pids of processes outside
/// this pid namespace are not listed (0).
pub(crate) fn lock_holders(fd: BorrowedFd<'_>) -> SysResult<Vec<u32>> {
    let st = super::fstat(fd)?;
    let id = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(st.dev),
        rustix::fs::minor(st.dev),
        st.ino
    );
    let (text, _) = super::read_file_at(super::working_dir(), "/proc/locks", 4 << 20)?;
    Ok(holders_in(&String::from_utf8_lossy(&text), &id))
}

/// The holders of the lock on the file `id` (`MAJ:MIN:INODE`) in the text
/// of /proc/locks.
fn holders_in(text: &str, id: &str) -> Vec<u32> {
    text.lines()
        .filter(|l| !l.contains("->"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // "1: FLOCK ADVISORY WRITE <pid> <maj:min:ino> <start> <end>"
            (f.len() >= 6 && f[5] == id).then(|| f[4].parse().ok())?
        })
        .filter(|&pid| pid > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::holders_in;

    #[test]
    fn proc_locks_lines() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 00:1a:77 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 4343 00:1a:77 0 EOF\n\
                    2: FLOCK  ADVISORY  READ 11 00:1a:77 0 EOF\n\
                    3: POSIX  ADVISORY  WRITE 12 08:01:77 0 EOF\n\
                    4: OFDLCK ADVISORY  READ -1 00:1a:77 0 EOF\n";
        assert_eq!(holders_in(text, "00:1a:77"), vec![4242, 11]);
        assert!(holders_in(text, "00:1a:78").is_empty());
    }
}
