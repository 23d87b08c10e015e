//! The root-only state directory in /run, where the image cache, the
//! budgets (launch slots, each user's lock, the loop devices' claims and
//! records) and the FUSE servers' logs
//! keep what they share between launches. Only root may have written it:
//! each user of it checks the directory it opened (as an fd), never a name.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

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
    /// A directory in it could not be opened or made: which, and why.
    Subdir(String, system::Error),
}

impl fmt::Display for StateDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateDirError::Stat(e) => write!(f, "cannot stat {STATE_DIR}: {e}"),
            StateDirError::NotRootOnly => write!(
                f,
                "{STATE_DIR} is not a directory owned by root with mode 0700"
            ),
            StateDirError::Subdir(name, e) => write!(f, "cannot use {STATE_DIR}/{name}: {e}"),
        }
    }
}

impl std::error::Error for StateDirError {}

/// Refuses a state directory that is not root's; gives root's own the
/// exact mode [`STATE_DIR_MODE`] (one made under a caller's umask by an
/// earlier version is repaired, not trusted nor given up on).
pub(crate) fn root_only(fd: BorrowedFd<'_>) -> Result<(), StateDirError> {
    let id = system::fstat(fd).map_err(StateDirError::Stat)?;
    if !id.is_dir() || !id.uid.is_root() {
        return Err(StateDirError::NotRootOnly);
    }
    if id.mode & 0o7777 == STATE_DIR_MODE {
        return Ok(());
    }
    system::ensure_mode(fd, STATE_DIR_MODE).map_err(|_| StateDirError::NotRootOnly)
}

/// The state directory, made when missing; None where it cannot be used
/// at all (a read-only /run, or none): what is kept there protects against
/// exhaustion, it is not a security boundary, so launches then go without
/// it rather than fail.
pub(crate) fn open() -> Result<Option<OwnedFd>, StateDirError> {
    let dir = match system::open_dir_nofollow(system::working_dir(), STATE_DIR).or_else(|e| match e
    {
        system::Error::NOENT => system::open_or_create_dir(STATE_DIR, STATE_DIR_MODE),
        e => Err(e),
    }) {
        Ok(dir) => dir,
        Err(
            system::Error::ROFS
            | system::Error::ACCESS
            | system::Error::PERM
            | system::Error::NOENT,
        ) => return Ok(None),
        Err(e) => return Err(StateDirError::Subdir(String::new(), e)),
    };
    root_only(dir.as_fd())?;
    Ok(Some(dir))
}

/// The root-only directory `name` of the state directory, made when
/// missing (None as for [`open`]).
pub(crate) fn subdir(name: &str) -> Result<Option<OwnedFd>, StateDirError> {
    let Some(state) = open()? else {
        return Ok(None);
    };
    let dir = match system::open_dir_nofollow(state.as_fd(), name) {
        Err(system::Error::NOENT) => {
            match system::make_dir(state.as_fd(), name, STATE_DIR_MODE) {
                Ok(()) | Err(system::Error::EXIST) => {}
                Err(e) => return Err(StateDirError::Subdir(name.into(), e)),
            }
            system::open_dir_nofollow(state.as_fd(), name)
        }
        other => other,
    }
    .map_err(|e| StateDirError::Subdir(name.into(), e))?;
    root_only(dir.as_fd())?;
    Ok(Some(dir))
}
