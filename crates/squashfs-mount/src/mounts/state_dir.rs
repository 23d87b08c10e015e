//! The root-only state directory in /run, where the image cache, the
//! budgets (launch slots, the loop-device lock) and the FUSE servers' logs
//! keep what they share between launches. Only root may have written it:
//! each user of it checks the directory it opened (as an fd), never a name.

use std::fmt;
use std::os::fd::BorrowedFd;

use crate::system;

/// The state directory (compiled in, never from the environment).
pub const STATE_DIR: &str = "/run/squashfs-mount";
/// The mode of every state directory root keeps in /run.
pub const STATE_DIR_MODE: u32 = 0o700;

/// Why a state directory was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateDirError {
    /// It could not be looked at.
    Stat(system::Error),
    /// It is not a directory owned by root.
    NotRootOnly,
}

impl fmt::Display for StateDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateDirError::Stat(e) => write!(f, "cannot stat {STATE_DIR}: {e}"),
            StateDirError::NotRootOnly => write!(
                f,
                "{STATE_DIR} is not a directory owned by root with mode 0700"
            ),
        }
    }
}

impl std::error::Error for StateDirError {}

/// Refuses a state directory that is not root's; gives root's own the
/// exact mode [`STATE_DIR_MODE`] (one made under a caller's umask by an
/// earlier version is repaired, not trusted nor given up on).
pub fn root_only(fd: BorrowedFd<'_>) -> Result<(), StateDirError> {
    let id = system::fstat(fd).map_err(StateDirError::Stat)?;
    if !id.is_dir() || !id.uid.is_root() {
        return Err(StateDirError::NotRootOnly);
    }
    if id.mode & 0o7777 == STATE_DIR_MODE {
        return Ok(());
    }
    system::ensure_mode(fd, STATE_DIR_MODE).map_err(|_| StateDirError::NotRootOnly)
}
