//! The layer directory DIR, as the caller: created (0700) if missing in a
//! directory the caller can write, refused unless it is the caller's own,
//! not writable by group or others, on a file system that can hold an
//! upper layer and not read-only; and its lock, which refuses a second
//! launch on the same DIR (overlayfs does not support two mounts sharing
//! an upper layer). The lock is a file in DIR (0600): no other user can
//! open it, so none can hold it.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use super::{filesystem, LayerError};
use crate::system::error::Failure;
use crate::system::{self, Error, LockKind, Uid};

/// DIR, opened and judged.
pub struct LayerDir {
    pub fd: OwnedFd,
    pub path: OsString,
    /// The file system's name (for `-v`).
    pub filesystem: &'static str,
    /// Made by this launch.
    pub created: bool,
}

fn shown(path: &OsStr) -> String {
    path.to_string_lossy().into_owned()
}

impl LayerDir {
    /// Creates DIR if missing and opens it (symlinks followed, as the
    /// caller's own lookup would), then judges it; `uid` is the caller's.
    pub fn open(path: &OsStr, uid: Uid) -> Result<LayerDir, Failure> {
        let created = system::make_directory_path_no_magic(path, 0o700)
            .map_err(|e| LayerError::Create(shown(path), e))?;
        let fd = system::open_directory_path_no_magic(path)
            .map_err(|e| LayerError::Open(shown(path), e))?;
        let filesystem = judge(fd.as_fd(), path, uid)?;
        Ok(LayerDir {
            fd,
            path: path.to_owned(),
            filesystem,
            created,
        })
    }

    /// Takes DIR's lock, or says that another launch holds it. The lock
    /// file stays open as long as the returned fd (the command keeps it).
    /// `handed`: the lock the launch took (`engine::kept_layer::claim`)
    /// and handed over; it must be DIR's, and taking it again on the same
    /// open file succeeds (flock belongs to the open file description).
    pub fn lock(&self, uid: Uid, handed: Option<OwnedFd>) -> Result<OwnedFd, Failure> {
        let fail = |e: Error| LayerError::Lock(shown(&self.path), e);
        let fd = match handed {
            None => {
                system::open_lock_file(self.fd.as_fd(), super::LOCK_FILE, 0o600).map_err(fail)?
            }
            Some(fd) => {
                let named = system::stat_at(self.fd.as_fd(), super::LOCK_FILE).map_err(fail)?;
                let got = system::fstat(fd.as_fd()).map_err(fail)?;
                if (named.dev, named.ino) != (got.dev, got.ino) {
                    return Err(Failure::new(LayerError::NotHandedLock(shown(&self.path))));
                }
                fd
            }
        };
        let st = system::fstat(fd.as_fd()).map_err(fail)?;
        if !st.is_regular() || st.uid != uid {
            return Err(Failure::new(LayerError::NotTheLock {
                dir: shown(&self.path),
                kind: st.kind(),
                owner: st.uid,
            }));
        }
        if !system::try_lock(fd.as_fd(), LockKind::Exclusive).map_err(fail)? {
            let holders = system::lock_holders(fd.as_fd()).unwrap_or_default();
            return Err(Failure::new(LayerError::InUse {
                dir: shown(&self.path),
                by: holders.first().copied(),
            }));
        }
        Ok(fd)
    }
}

/// Owner, mode, file system and read-only state of the opened DIR.
fn judge(fd: std::os::fd::BorrowedFd<'_>, path: &OsStr, uid: Uid) -> Result<&'static str, Failure> {
    let fail = |e: Error| LayerError::Examine(shown(path), e);
    let st = system::fstat(fd).map_err(fail)?;
    if !st.is_dir() {
        return Err(Failure::new(LayerError::NotADirectory {
            dir: shown(path),
            kind: st.kind(),
        }));
    }
    if st.uid != uid {
        return Err(Failure::new(LayerError::NotYours {
            dir: shown(path),
            owner: st.uid,
        }));
    }
    if st.mode & 0o022 != 0 {
        return Err(Failure::new(LayerError::OpenToOthers {
            dir: shown(path),
            mode: st.mode & 0o7777,
        }));
    }
    let magic = system::filesystem_type(fd).map_err(fail)?;
    let name = filesystem::judge(magic, &shown(path))?;
    if system::on_read_only_filesystem(fd).map_err(fail)? {
        return Err(Failure::new(LayerError::ReadOnly(shown(path))));
    }
    Ok(name)
}

/// Before root mounts anything (a stage of `engine::mount_all`): refuses
/// a DIR that exists but cannot be a layer (another owner, open to
/// others, a refused file system, not a layer squashfs-mount made), or
/// that is missing where the caller cannot create it or on a refused file
/// system, so that such a call fails at once, with the words the helper
/// would say. As the caller; the helper judges again what it opens.
pub fn precheck(
    _as_caller: &impl crate::privilege::ActingAsCaller,
    path: &OsStr,
    uid: Uid,
) -> Result<(), Failure> {
    match system::open_directory_path_no_magic(path) {
        Ok(fd) => {
            let filesystem = judge(fd.as_fd(), path, uid)?;
            let dir = LayerDir {
                fd,
                path: path.to_owned(),
                filesystem,
                created: false,
            };
            super::stage::read_stamp(&dir).map(drop)
        }
        Err(e) => match system::stat_name_at(system::working_dir(), path) {
            // Something there (a file, a dangling symlink): what the
            // helper's open would meet.
            Ok(_) => Err(LayerError::Open(shown(path), e).into()),
            Err(_) if e == Error::NOENT => precheck_parent(path),
            // What creating it would meet.
            Err(_) => Err(LayerError::Create(shown(path), e).into()),
        },
    }
}

/// A missing DIR: where it would be created.
fn precheck_parent(path: &OsStr) -> Result<(), Failure> {
    let parent = parent_of(path);
    let fd = match system::open_directory_path_no_magic(&parent) {
        Ok(fd) => fd,
        // What creating DIR would meet.
        Err(e @ (Error::NOENT | Error::ACCESS)) => {
            return Err(LayerError::Create(shown(path), e).into())
        }
        // Said precisely when the helper tries to create it.
        Err(_) => return Ok(()),
    };
    let magic = system::filesystem_type(fd.as_fd())
        .map_err(|e| LayerError::ExamineParent(shown(&parent), e))?;
    filesystem::judge(magic, &shown(path))?;
    match system::may_create_in(fd.as_fd()) {
        Err(e @ (Error::ACCESS | Error::ROFS)) => Err(LayerError::Create(shown(path), e).into()),
        _ => Ok(()),
    }
}

/// The directory `path` (absolute, tidy) is in.
fn parent_of(path: &OsStr) -> OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let b = path.as_bytes();
    match b.iter().rposition(|&c| c == b'/') {
        Some(0) | None => OsString::from("/"),
        Some(at) => OsString::from_vec(b[..at].to_vec()),
    }
}
