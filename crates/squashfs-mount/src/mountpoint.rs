//! Mount points: resolved once with the caller's rights, pinned as an O_PATH
//! fd, and judged by the directory they really are.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use crate::error::{errno_hint, errno_words, Failure};
use crate::paths;
use crate::privilege::ActingAsCaller;
use crate::system::{self, Error as Errno, FileId};

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
    /// messages ("mount path", "bind destination"); `create_hint` says how
    /// to have a missing one created.
    pub fn resolve(
        _as_caller: &impl ActingAsCaller,
        path: &OsStr,
        subject: &str,
        what: &str,
        create_hint: &str,
    ) -> Result<MountPoint, Failure> {
        let shown = path.to_string_lossy();
        // uenv's words for the refusals it makes.
        let fd = system::open_directory_path(path).map_err(|e| {
            Failure::about(
                subject,
                match e {
                    Errno::NOENT => format!("the {what} {shown} does not exist; {create_hint}"),
                    Errno::NOTDIR => format!("the {what} {shown} is not a directory"),
                    e => format!(
                        "unable to access the {what} {shown} ({}){}; it must be an existing directory you can reach",
                        errno_words(e),
                        errno_hint(e)
                    ),
                },
            )
        })?;
        let id = system::fstat(fd.as_fd())
            .map_err(|e| Failure::about(subject, format!("cannot stat the {what}: {e}")))?;
        if !id.is_dir() {
            return Err(Failure::about(
                subject,
                format!("the {what} {shown} is not a directory"),
            ));
        }
        let real = system::path_of_fd(fd.as_fd()).map_err(|e| {
            Failure::about(
                subject,
                format!("cannot tell where the mount point is: {e}"),
            )
        })?;
        if let Some(why) = paths::forbidden_reason(&real) {
            return Err(Failure::about(
                subject,
                format!(
                    "refusing to mount there: {why}; choose a directory such as /user-environment"
                ),
            ));
        }
        let magic = system::filesystem_type(fd.as_fd())
            .map_err(|e| Failure::about(subject, format!("cannot statfs the mount point: {e}")))?;
        if let Some(fs) = paths::forbidden_filesystem(magic) {
            return Err(Failure::about(
                subject,
                format!(
                    "refusing to mount there: the mount point is on {fs}, a kernel API filesystem"
                ),
            ));
        }
        Ok(MountPoint { real, fd, id })
    }
}
