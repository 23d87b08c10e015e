//! The caller's own copies, made before the overlay is stacked, of what
//! overlayfs could not copy up by itself.
//!
//! The layer's user namespace maps the caller's uid and primary gid only
//! (mapping another user's or group's id would give the caller power over
//! their files on the host). Overlayfs copies a file up with the lower
//! file's owner and group, which must be mapped there: any other owner
//! would fail with EOVERFLOW, and a copy owned by anyone but the caller
//! could not be in DIR anyway. So the caller's stage makes, as the caller,
//! with the caller's rights, in the sub-layer's upper directory:
//!
//! - every directory overlayfs would have to copy up and could not: one
//!   of another owner or group that the caller owns or may write, and
//!   each one above anything copied or of the caller's (a root
//!   directory with nothing the caller may change gets none); the
//!   caller's, with the rights the caller has on the image's directory
//!   in its owner bits (a root 0755 directory becomes the caller's 0555:
//!   nothing can be made in it, as without a layer);
//! - a copy of every file or symlink the overlay might have to copy up
//!   and cannot (owner or group not the caller's uid and primary gid):
//!   one the caller owns (and may chmod), may write, or may rename or
//!   remove (its directory is writable by the caller and, when sticky,
//!   the caller's: a sticky directory's rule holds for copies, so root's
//!   file in a world-writable `/tmp` of an image gets none); with the same
//!   rights in its owner bits (a root 0644 file in a directory the caller
//!   may write becomes the caller's 0444: writing it is still refused).
//!
//! Rights are judged as the kernel judges them without a layer: owner
//! bits when the caller owns the entry, else group bits when its group
//! is one of the caller's, else the others' bits. Group and other bits of
//! the copies are the image's without write; a directory's copy keeps
//! the sticky bit. Nothing is copied that the
//! caller cannot read; such a case is named in one line. Once a
//! sub-layer is complete a mark (`DIR/<n>/copied`) spares later launches
//! the walk; a name present in the upper directory (the caller's change,
//! or a whiteout) is never replaced, and nothing is made below an opaque
//! directory or a removed one.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::failure::CopyError;
use crate::system::{self, Error, FileId, Gid, Uid};

/// Who the caller is, for judging rights.
pub struct CallerRights {
    pub uid: Uid,
    /// The primary (effective) gid: mapped in the layer's namespace.
    pub gid: Gid,
    /// Every group of the caller's (the primary among them).
    pub groups: Vec<Gid>,
}

impl CallerRights {
    /// The current process's ids.
    pub(crate) fn current() -> CallerRights {
        let uid = system::effective_uid();
        let gid = system::effective_gid();
        let mut groups = system::supplementary_groups().unwrap_or_default();
        groups.push(gid);
        CallerRights { uid, gid, groups }
    }

    /// The caller's rights (rwx as 0..=7) on an entry with this owner,
    /// group and mode, as the kernel's permission check judges them.
    pub(crate) fn rights(&self, uid: Uid, gid: Gid, mode: u32) -> u32 {
        if uid == self.uid {
            (mode >> 6) & 7
        } else if self.groups.contains(&gid) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    }

    fn rights_of(&self, st: &FileId) -> u32 {
        self.rights(st.uid, st.gid, st.mode)
    }

    /// The mode of the caller's copy: the caller's rights as owner bits,
    /// the image's group and other bits without write; no set-id or
    /// sticky bit.
    pub(crate) fn copy_mode(&self, uid: Uid, gid: Gid, mode: u32) -> u32 {
        (self.rights(uid, gid, mode) << 6) | (mode & 0o055)
    }

    fn copy_mode_of(&self, st: &FileId) -> u32 {
        self.copy_mode(st.uid, st.gid, st.mode)
    }

    /// The mode of the caller's copy of a directory: as [`Self::copy_mode`],
    /// keeping the sticky bit (which restricts nothing for the copy's
    /// owner, the caller: the entries it protects get no copy, see
    /// [`Self::may_replace_entries_in`]).
    pub(crate) fn dir_copy_mode(&self, uid: Uid, gid: Gid, mode: u32) -> u32 {
        self.copy_mode(uid, gid, mode) | (mode & 0o1000)
    }

    fn dir_copy_mode_of(&self, st: &FileId) -> u32 {
        self.dir_copy_mode(st.uid, st.gid, st.mode)
    }

    /// Whether the caller may rename or remove the entries of other owners
    /// in a directory with this owner, group and mode: they may write and
    /// search it, and it is not sticky, or is theirs (a sticky directory
    /// lets only an entry's owner and its own owner do so).
    pub(crate) fn may_replace_entries_in(&self, uid: Uid, gid: Gid, mode: u32) -> bool {
        let sticky = mode & 0o1000 != 0;
        self.rights(uid, gid, mode) & 3 == 3 && (!sticky || uid == self.uid)
    }

    fn may_replace_in(&self, st: &FileId) -> bool {
        self.may_replace_entries_in(st.uid, st.gid, st.mode)
    }
}

/// What a non-directory entry needs.
#[derive(Debug, PartialEq, Eq)]
pub enum Need {
    /// Nothing: overlayfs copies it when needed, or nothing can change it.
    Nothing,
    /// The caller's copy.
    Copy,
}

/// Whether an entry (not a directory) whose owner, group and mode are
/// given needs the caller's copy, in a directory the caller may or may
/// not write.
fn need(caller: &CallerRights, uid: Uid, gid: Gid, mode: u32, dir_writable: bool) -> Need {
    if uid == caller.uid && gid == caller.gid {
        return Need::Nothing;
    }
    let changeable = uid == caller.uid || caller.rights(uid, gid, mode) & 2 != 0 || dir_writable;
    if changeable {
        Need::Copy
    } else {
        Need::Nothing
    }
}

/// The walk's account (for `-v`) and the cases it could not copy.
#[derive(Default)]
pub struct Account {
    pub dirs: u64,
    pub files: u64,
    pub bytes: u64,
    pub problems: Vec<String>,
}

/// The deepest directory walked (each level holds two fds).
const MAX_DEPTH: usize = 256;

/// A directory on the walk's path: the image's, and the layer's copy of
/// it once one is needed (made lazily, with every directory above it).
struct Level {
    /// Its name in the directory above (empty at the top).
    name: OsString,
    st: FileId,
    lower: Option<OwnedFd>,
    upper: Option<OwnedFd>,
    /// Made by this walk (its mode is set once its entries are done).
    made: bool,
    /// Removed or replaced in the layer (a whiteout, the caller's file, an
    /// opaque directory): nothing is made below it.
    dead: bool,
}

/// Copies what `lower` (the image's mount, opened for listing; `st` its
/// stat) needs into `upper` (its sub-layer's upper directory), as the
/// caller. `shown` names `lower` in messages.
pub(crate) fn copy_tree(
    caller: &CallerRights,
    lower: BorrowedFd<'_>,
    st: &FileId,
    upper: BorrowedFd<'_>,
    shown: &OsStr,
    account: &mut Account,
) -> Result<(), CopyError> {
    let fail = |e: Error| CopyError::Open(shown.to_string_lossy().into_owned(), e);
    let mut stack = vec![Level {
        name: OsString::new(),
        st: *st,
        lower: Some(system::open_listable_dir(lower, OsStr::new(".")).map_err(fail)?),
        upper: Some(system::open_listable_dir(upper, OsStr::new(".")).map_err(fail)?),
        made: false,
        dead: false,
    }];
    let mut path = shown.as_bytes().to_vec();
    walk(caller, &mut stack, &mut path, account)?;
    system::set_mode(upper, caller.dir_copy_mode_of(st))
        .map_err(|e| CopyError::TopMode(shown.to_string_lossy().into_owned(), e))
}

fn named(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

fn owner(st: &FileId) -> String {
    format!("owner uid {}, group gid {}", st.uid, st.gid)
}

fn fail(path: &[u8], what: &'static str, e: Error) -> CopyError {
    CopyError::At {
        what,
        path: named(path),
        e,
    }
}

impl CallerRights {
    /// Whether overlayfs could copy up an entry with these ids itself.
    fn mapped(&self, st: &FileId) -> bool {
        st.uid == self.uid && st.gid == self.gid
    }

    /// Whether overlayfs would have to copy up a directory it cannot (one
    /// of another owner or group, without a copy yet) to copy up anything
    /// in the innermost directory of `stack`.
    fn exposed(&self, stack: &[Level]) -> bool {
        stack.iter().fold(false, |exposed, l| {
            l.upper.is_none() && (exposed || !self.mapped(&l.st))
        })
    }
}

/// Makes the layer's copy of every directory of `stack` that has none;
/// false when one of them was removed or replaced in the layer.
fn ensure(stack: &mut [Level], path: &[u8], account: &mut Account) -> Result<bool, CopyError> {
    for i in 1..stack.len() {
        let (above, here) = stack.split_at_mut(i);
        let (parent, level) = (&above[i - 1], &mut here[0]);
        if level.dead || parent.dead {
            level.dead = true;
            return Ok(false);
        }
        if level.upper.is_some() {
            continue;
        }
        let Some(up) = parent.upper.as_ref() else {
            return Ok(false);
        };
        let made = match system::make_dir_named(up, &level.name, 0o700) {
            Ok(()) => true,
            Err(Error::EXIST) => false,
            Err(e) => {
                return Err(fail(
                    path,
                    "cannot make the layer's copy of a directory on",
                    e,
                ))
            }
        };
        let fd = match system::open_listable_dir(up, &level.name) {
            Ok(fd) => fd,
            Err(Error::NOTDIR | Error::LOOP) if !made => {
                level.dead = true;
                return Ok(false);
            }
            Err(e) => {
                return Err(fail(
                    path,
                    "cannot open the layer's copy of a directory on",
                    e,
                ))
            }
        };
        if !made && system::is_opaque_dir(fd.as_fd()) {
            level.dead = true;
            return Ok(false);
        }
        account.dirs += u64::from(made);
        level.upper = Some(fd);
        level.made = made;
    }
    Ok(!stack.last().is_some_and(|l| l.dead))
}

/// The entries of the innermost directory of `stack`.
fn walk(
    caller: &CallerRights,
    stack: &mut Vec<Level>,
    path: &mut Vec<u8>,
    account: &mut Account,
) -> Result<(), CopyError> {
    let here = stack.last().expect("the walk's path is never empty");
    let dir_writable = caller.may_replace_in(&here.st);
    let Some(lower) = here.lower.as_ref() else {
        return Ok(());
    };
    let names = system::names_in(lower.as_fd()).map_err(|e| fail(path, "cannot list", e))?;
    for name in names {
        let len = path.len();
        path.push(b'/');
        path.extend_from_slice(name.as_bytes());
        let lower = stack.last().and_then(|l| l.lower.as_ref()).expect("listed");
        let child = system::stat_name_at(lower, &name).map_err(|e| fail(path, "cannot stat", e))?;
        if caller.mapped(&child) {
            // Overlayfs copies it (and a directory's entries of the
            // caller's) itself, once the directory above has a copy.
            if caller.exposed(stack) {
                ensure(stack, path, account)?;
            }
        }
        if child.is_dir() {
            directory(caller, stack, name, child, path, account)?;
        } else if !caller.mapped(&child)
            && needs_copy(caller, &child, dir_writable)
            && ensure(stack, path, account)?
        {
            let l = stack.last().expect("the walk's path is never empty");
            if let (Some(low), Some(up)) = (l.lower.as_ref(), l.upper.as_ref()) {
                entry(
                    caller,
                    low.as_fd(),
                    up.as_fd(),
                    &name,
                    &child,
                    path,
                    account,
                )?;
            }
        }
        path.truncate(len);
    }
    Ok(())
}

fn needs_copy(caller: &CallerRights, st: &FileId, dir_writable: bool) -> bool {
    // A symlink's mode means nothing (always 0777).
    let mode = if st.is_symlink() { 0 } else { st.mode };
    need(caller, st.uid, st.gid, mode, dir_writable) == Need::Copy
}

/// A directory of the image: the caller's copy of it where one is needed
/// (it is of another owner or group and the caller owns it or may write
/// it, or something below needs one), then its entries.
fn directory(
    caller: &CallerRights,
    stack: &mut Vec<Level>,
    name: OsString,
    st: FileId,
    path: &mut Vec<u8>,
    account: &mut Account,
) -> Result<(), CopyError> {
    let rights = caller.rights_of(&st);
    let listable = rights & 5 == 5 && stack.len() < MAX_DEPTH;
    let lower = match listable {
        true => {
            let above = stack.last().and_then(|l| l.lower.as_ref()).expect("listed");
            Some(
                system::open_listable_dir(above, &name)
                    .map_err(|e| fail(path, "cannot open", e))?,
            )
        }
        false => None,
    };
    if !listable && rights & 1 == 1 {
        account.problems.push(format!(
            "{} ({}): you may enter it but {}; files in it cannot be changed in the writable layer",
            named(path),
            owner(&st),
            if rights & 4 == 4 {
                "it is too deep to copy"
            } else {
                "not list it"
            }
        ));
    }
    let own = !caller.mapped(&st) && (st.uid == caller.uid || rights & 2 != 0);
    stack.push(Level {
        name,
        st,
        lower,
        upper: None,
        made: false,
        dead: false,
    });
    let walked = (|| {
        if own {
            ensure(stack, path, account)?;
        }
        walk(caller, stack, path, account)
    })();
    let level = stack.pop().expect("pushed above");
    walked?;
    match (level.made, level.upper) {
        (true, Some(up)) => system::set_mode(up.as_fd(), caller.dir_copy_mode_of(&level.st))
            .map_err(|e| fail(path, "cannot set the mode of the layer's copy of", e)),
        _ => Ok(()),
    }
}

/// A file, symlink or other entry that needs the caller's copy.
fn entry(
    caller: &CallerRights,
    lower: BorrowedFd<'_>,
    upper: BorrowedFd<'_>,
    name: &OsStr,
    st: &FileId,
    path: &[u8],
    account: &mut Account,
) -> Result<(), CopyError> {
    let cannot = |why: &str| {
        format!(
            "{} ({}): {why}; in the writable layer it cannot be changed or renamed (it can be removed)",
            named(path),
            owner(st)
        )
    };
    let made = if st.is_regular() {
        if caller.rights_of(st) & 4 == 0 {
            account.problems.push(cannot(
                "you may not read it, so no copy of yours can be made",
            ));
            return Ok(());
        }
        system::copy_file_named(lower, upper, name, st, caller.copy_mode_of(st)).map(|n| {
            account.bytes += n;
        })
    } else if st.is_symlink() {
        system::copy_symlink_named(lower, upper, name)
    } else if matches!(st.mode & 0o170000, 0o010000 | 0o140000) {
        // A FIFO or a socket: the caller may make one.
        system::make_special_named(upper, name, st.mode & 0o170000, caller.copy_mode_of(st))
    } else {
        account.problems.push(cannot(&format!(
            "a {} of another owner cannot be made as yours",
            st.kind()
        )));
        return Ok(());
    };
    match made {
        Ok(()) => {
            account.files += 1;
            Ok(())
        }
        // The layer holds the caller's own version, or a whiteout.
        Err(Error::EXIST) => Ok(()),
        Err(e) => Err(CopyError::Copy(named(path), e)),
    }
}

#[cfg(test)]
#[path = "copies_tests.rs"]
mod tests;
