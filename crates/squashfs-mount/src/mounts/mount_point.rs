//! Mount points: resolved once with the caller's rights, pinned as an O_PATH
//! fd, and judged by the directory they really are.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};

use crate::config::paths::{self, tilde_hint};
use crate::privilege::ActingAsCaller;
use crate::system::error::{errno_hint, errno_words, Failure};
use crate::system::{self, Error as Errno, FileId};

/// How a mount point (or bind destination) is named in messages: "mount
/// path" or "bind destination", as given (`shown`), and what a `~` in
/// `given` means.
#[derive(Debug)]
pub struct Named {
    pub what: &'static str,
    pub shown: String,
    pub tilde: &'static str,
}

/// What is wrong with a mount point.
#[derive(Debug)]
pub enum MountPointError {
    /// It does not exist, and how to have it created.
    Missing(Named, String),
    NotDirectory(Named),
    Unreachable(Named, Errno),
    Stat(Named, Errno),
    Unnamed(Named, Errno),
    Forbidden(Named, String),
    Statfs(Named, Errno),
    KernelApi(Named, &'static str),
}

impl fmt::Display for MountPointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // uenv's words for the refusals it makes.
        let named = match self {
            MountPointError::Missing(n, hint) => {
                write!(f, "the {} {} does not exist; {hint}", n.what, n.shown)?;
                n
            }
            MountPointError::NotDirectory(n) => {
                write!(f, "the {} {} is not a directory", n.what, n.shown)?;
                n
            }
            MountPointError::Unreachable(n, e) => {
                write!(
                    f,
                    "unable to access the {} {} ({}){}; it must be an existing directory you can reach",
                    n.what,
                    n.shown,
                    errno_words(*e),
                    errno_hint(*e)
                )?;
                n
            }
            MountPointError::Stat(n, e) => {
                write!(f, "cannot stat the {}: {e}", n.what)?;
                n
            }
            MountPointError::Unnamed(n, e) => {
                write!(f, "cannot tell where the mount point is: {e}")?;
                n
            }
            MountPointError::Forbidden(n, why) => {
                write!(
                    f,
                    "refusing to mount there: {why}; choose a directory such as /user-environment"
                )?;
                n
            }
            MountPointError::Statfs(n, e) => {
                write!(f, "cannot statfs the mount point: {e}")?;
                n
            }
            MountPointError::KernelApi(n, fs) => {
                write!(
                    f,
                    "refusing to mount there: the mount point is on {fs}, a kernel API filesystem"
                )?;
                n
            }
        };
        f.write_str(named.tilde)
    }
}

crate::error_kind!(MountPointError);

#[derive(Debug)]
pub struct MountPoint {
    /// The kernel's name of the pinned directory in our mount namespace.
    pub real: OsString,
    pub fd: OwnedFd,
    pub id: FileId,
}

impl MountPoint {
    /// Resolves `path` as the caller (symlinks followed exactly as the
    /// caller's own lookup would), pins it, and refuses `/`, anything in
    /// /proc, /sys, /dev or on a kernel API filesystem. `what` names it in
    /// messages ("mount path", "bind destination"), `given` is how the
    /// caller wrote it; `create_hint` says how to have a missing one
    /// created.
    pub(crate) fn resolve(
        _as_caller: &impl ActingAsCaller,
        path: &OsStr,
        given: &OsStr,
        subject: &str,
        what: &'static str,
        create_hint: &str,
    ) -> Result<MountPoint, Failure> {
        let named = || Named {
            what,
            shown: path.to_string_lossy().into_owned(),
            tilde: tilde_hint(given),
        };
        let fail = |e: MountPointError| Failure::about(subject, e);
        let fd = system::open_directory_path(path).map_err(|e| {
            fail(match e {
                Errno::NOENT => MountPointError::Missing(named(), create_hint.to_string()),
                Errno::NOTDIR => MountPointError::NotDirectory(named()),
                e => MountPointError::Unreachable(named(), e),
            })
        })?;
        let id = system::fstat(fd.as_fd()).map_err(|e| fail(MountPointError::Stat(named(), e)))?;
        if !id.is_dir() {
            return Err(fail(MountPointError::NotDirectory(named())));
        }
        let real = system::path_of_fd(fd.as_fd())
            .map_err(|e| fail(MountPointError::Unnamed(named(), e)))?;
        if let Some(why) = paths::forbidden_reason(&real) {
            return Err(fail(MountPointError::Forbidden(named(), why)));
        }
        let magic = system::filesystem_type(fd.as_fd())
            .map_err(|e| fail(MountPointError::Statfs(named(), e)))?;
        if let Some(fs) = paths::forbidden_filesystem(magic) {
            return Err(fail(MountPointError::KernelApi(named(), fs)));
        }
        Ok(MountPoint { real, fd, id })
    }
}
