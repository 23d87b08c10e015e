//! The layer directory DIR, as the caller: created (0700) if missing in a
//! directory the caller can write, refused unless it is the caller's own,
//! not writable by group or others, on a file system that can hold an
//! upper layer and not read-only; and its lock, which refuses a second
//! launch on the same DIR (overlayfs does not support two mounts sharing
//! an upper layer). The lock is a file in DIR (0600): no other user can
//! open it, so none can hold it.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use super::filesystem::ACCEPTED;
use super::layout::{COPIED_MARK, LOCK_FILE};
use super::{Foreign, LayerError, STAMP_FILE};
use crate::system::error::Failure;
use crate::system::{self, Error, LockKind, Uid};
use squashfs_format::stamp::Stamp;

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
    pub(crate) fn open(path: &OsStr, uid: Uid) -> Result<LayerDir, Failure> {
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
    pub(crate) fn lock(&self, uid: Uid, handed: Option<OwnedFd>) -> Result<OwnedFd, Failure> {
        let fail = |e: Error| LayerError::Lock(shown(&self.path), e);
        let fd = match handed {
            None => system::open_lock_file(self.fd.as_fd(), LOCK_FILE, 0o600).map_err(fail)?,
            Some(fd) => {
                let named = system::stat_at(self.fd.as_fd(), LOCK_FILE).map_err(fail)?;
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
    let name = judge_filesystem(magic, &shown(path))?;
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
pub(crate) fn precheck(
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
            read_stamp(&dir).map(drop)
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
    judge_filesystem(magic, &shown(path))?;
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

/// The stamp's largest size (a stamp of 500 images is about 60 KiB).
const STAMP_LIMIT: usize = 1 << 20;

/// DIR's stamp, or the refusal of a directory that is no layer.
pub(super) fn read_stamp(dir: &LayerDir) -> Result<Stamp, Failure> {
    let not_ours = |why: Foreign| {
        Failure::new(LayerError::NotALayer {
            dir: shown(&dir.path),
            why,
        })
    };
    match system::read_file_at(dir.fd.as_fd(), STAMP_FILE, STAMP_LIMIT) {
        Ok((_, true)) => Err(not_ours(Foreign::StampTooLarge)),
        Ok((text, false)) => {
            Stamp::parse(&text).map_err(|e| not_ours(Foreign::BadStamp(e.to_string())))
        }
        Err(Error::NOENT) => {
            let (names, _) = system::list_dir(dir.fd.as_fd(), ".", 8)
                .map_err(|e| LayerError::List(shown(&dir.path), e))?;
            let Some(first) = names.iter().find(|n| n.as_os_str() != LOCK_FILE) else {
                return Ok(Stamp::default());
            };
            match left_of_a_layer(dir) {
                Some(name) => Err(Failure::new(LayerError::PartlyRemoved {
                    dir: shown(&dir.path),
                    name,
                })),
                None => Err(not_ours(Foreign::Holds(shown(first)))),
            }
        }
        Err(e) => Err(Failure::new(LayerError::ReadStamp(shown(&dir.path), e))),
    }
}

/// Whether DIR, which has no stamp, holds only what `rm -rf DIR` leaves
/// of a layer when it stops at the caller's read-only copies: sub-layers
/// `DIR/<n>` holding nothing but `upper`, `work` and `copied` (and perhaps
/// the lock, or a stamp being written). Then the first sub-layer's name;
/// None for anything else (a directory of the user's data is never taken
/// for a layer to remove).
fn left_of_a_layer(dir: &LayerDir) -> Option<String> {
    let (names, more) = system::list_dir(dir.fd.as_fd(), ".", 256).ok()?;
    let number = |n: &OsString| {
        let b = n.as_encoded_bytes();
        !b.is_empty() && b.len() <= 10 && b.iter().all(u8::is_ascii_digit)
    };
    let sub_layer = |n: &OsString| {
        let Some(path) = n.to_str().filter(|_| number(n)) else {
            return false;
        };
        match system::list_dir(dir.fd.as_fd(), path, 8) {
            Ok((inside, false)) => {
                !inside.is_empty()
                    && inside
                        .iter()
                        .all(|i| ["upper", "work", COPIED_MARK].contains(&&*i.to_string_lossy()))
            }
            _ => false,
        }
    };
    let layer_file = |n: &OsString| n.as_os_str() == LOCK_FILE || n.as_os_str() == ".stamp.new";
    let first = names.iter().find(|n| number(n))?;
    let only_layer = names.iter().all(|n| layer_file(n) || sub_layer(n));
    (!more && only_layer).then(|| shown(first))
}

/// The file system of DIR (statfs type `magic`), by name, or its refusal
/// (`filesystem.rs` lists what holds an upper layer).
pub(crate) fn judge_filesystem(magic: u64, dir: &str) -> Result<&'static str, LayerError> {
    match ACCEPTED.iter().find(|(m, _)| *m == magic) {
        Some((_, name)) => Ok(name),
        None => Err(LayerError::FileSystem {
            dir: dir.to_string(),
            magic,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(judge_filesystem(0xEF53, "/d").ok(), Some("ext4"));
        assert_eq!(judge_filesystem(0x0102_1994, "/d").ok(), Some("tmpfs"));
        let e = judge_filesystem(0x6969, "/home/me/l")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/home/me/l is on NFS") && e.contains("node-local"),
            "{e}"
        );
        assert!(judge_filesystem(0x6573_5546, "/d")
            .unwrap_err()
            .to_string()
            .contains("on FUSE"));
        assert!(judge_filesystem(0x794C_7630, "/d")
            .unwrap_err()
            .to_string()
            .contains("on overlay"));
        assert!(judge_filesystem(0x1234, "/d")
            .unwrap_err()
            .to_string()
            .contains("0x1234"));
    }
}
