//! The caller's FUSE log: the servers of cached FUSE instances have no
//! terminal, so they write to a per-user log that root keeps (root's file
//! in a root-owned directory, readable by its user through an ACL entry).
//! What reads it for a launch is `fuse_report.rs` (doc/fuse.md).

use std::os::fd::{AsFd, OwnedFd};

use crate::config::acl;
use crate::privilege::{AsRoot, Caller};
use crate::system;

/// Where the servers of cached FUSE instances write their messages: one
/// file per user (`<uid>.log`, root's, mode [`LOG_MODE`]: its user may
/// read it through an ACL entry, nobody but root may write it) in a
/// root-owned directory that lets users reach their file but not list
/// the others.
pub const LOG_DIR: &str = "/run/squashfs-mount-fuse";
/// A user's log: root's, its user may read it (ACL), nobody else.
pub const LOG_MODE: u32 = 0o640;
/// A user's log is emptied when a launch finds it larger than this; its
/// servers empty it before a line would make it larger (the server's
/// `log::FILE_LIMIT`, the same size).
const LOG_LIMIT: u64 = 1 << 20;

/// Why the caller's log cannot be given to the servers (`FuseError::Log`
/// and `FuseError::LogDirUnsafe` say it to the user).
#[derive(Debug)]
pub enum LogError {
    /// A system call on the log or its directory failed.
    Open(system::Error),
    /// [`LOG_DIR`] is not root's alone, or the log not as it was made.
    Unsafe,
}

/// What the servers of cached instances are given.
pub struct Detached {
    pub(super) log: OwnedFd,
    pub(super) null: OwnedFd,
}

/// [`LOG_DIR`], checked: a directory of root's that nobody else can
/// write.
fn log_dir(dir: Result<OwnedFd, system::Error>) -> Result<OwnedFd, LogError> {
    let dir = dir.map_err(LogError::Open)?;
    let st = system::fstat(dir.as_fd()).map_err(LogError::Open)?;
    if !st.is_dir() || !st.uid.is_root() || st.mode & 0o022 != 0 {
        return Err(LogError::Unsafe);
    }
    Ok(dir)
}

impl Detached {
    /// The caller's log in [`LOG_DIR`] (the directory too, if missing),
    /// opened by root for appending: root's file, made by root with mode
    /// 0600 and an ACL that lets the caller read it ([`LOG_MODE`] then),
    /// emptied beyond `LOG_LIMIT`. The caller can neither write it nor
    /// fill `/run` with it; the servers get this descriptor and keep it
    /// within the limit themselves.
    pub(crate) fn create(_root: &AsRoot, caller: &Caller) -> Result<Detached, LogError> {
        let dir = log_dir(system::open_or_create_dir(LOG_DIR, 0o711))?;
        let name = format!("{}.log", caller.uid);
        let log = system::open_root_log(dir.as_fd(), &name, 0o600).map_err(LogError::Open)?;
        // Without POSIX ACLs on /run the log stays root's alone (0600).
        let mode = match system::set_access_acl(log.as_fd(), &acl::read_only_for(caller.uid)) {
            Ok(()) => LOG_MODE,
            Err(system::Error::OPNOTSUPP) => 0o600,
            Err(e) => return Err(LogError::Open(e)),
        };
        let st = system::fstat(log.as_fd()).map_err(LogError::Open)?;
        if st.mode & 0o7777 != mode {
            return Err(LogError::Unsafe);
        }
        Detached::with(log)
    }

    fn with(log: OwnedFd) -> Result<Detached, LogError> {
        if system::fstat(log.as_fd()).is_ok_and(|st| st.size > LOG_LIMIT) {
            let _ = system::truncate(log.as_fd());
        }
        let null = system::open_null().map_err(LogError::Open)?;
        Ok(Detached { log, null })
    }

    /// /dev/null for both (the engine's unit tests).
    #[cfg(test)]
    pub(crate) fn stand_in() -> Detached {
        let null = || system::open_null().expect("/dev/null");
        Detached {
            log: null(),
            null: null(),
        }
    }
}
