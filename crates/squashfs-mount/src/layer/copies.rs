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
//! - every directory of the image (overlayfs then never copies one up),
//!   the caller's, with the rights the caller has on the image's
//!   directory in its owner bits (a root 0755 directory becomes the
//!   caller's 0555: nothing can be made in it, as without a layer);
//! - a copy of every file or symlink the overlay might have to copy up
//!   and cannot (owner or group not the caller's uid and primary gid):
//!   one the caller owns (and may chmod), may write, or may rename or
//!   remove (its directory is writable by the caller); with the same
//!   rights in its owner bits (a root 0644 file in a directory the caller
//!   may write becomes the caller's 0444: writing it is still refused).
//!
//! Rights are judged as the kernel judges them without a layer: owner
//! bits when the caller owns the entry, else group bits when its group
//! is one of the caller's, else the others' bits. Group and other bits of
//! the copies are the image's without write. Nothing is copied that the
//! caller cannot read; such a case is named in one line. Once a
//! sub-layer is complete a mark (`DIR/<n>/copied`) spares later launches
//! the walk; a name present in the upper directory (the caller's change,
//! or a whiteout) is never replaced, and nothing is made below an opaque
//! directory or a removed one.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::system::{self, Error, FileId};

/// Who the caller is, for judging rights.
pub struct Caller {
    pub uid: u32,
    /// The primary (effective) gid: mapped in the layer's namespace.
    pub gid: u32,
    /// Every group of the caller's (the primary among them).
    pub groups: Vec<u32>,
}

impl Caller {
    /// The current process's ids.
    pub fn current() -> Caller {
        let uid = system::effective_uid().as_raw();
        let gid = system::res_gid().map(|g| g.1.as_raw()).unwrap_or(u32::MAX);
        let mut groups: Vec<u32> = system::supplementary_groups()
            .unwrap_or_default()
            .iter()
            .map(|g| g.as_raw())
            .collect();
        groups.push(gid);
        Caller { uid, gid, groups }
    }

    /// The caller's rights (rwx as 0..=7) on an entry with this owner,
    /// group and mode, as the kernel's permission check judges them.
    pub fn rights(&self, uid: u32, gid: u32, mode: u32) -> u32 {
        if uid == self.uid {
            (mode >> 6) & 7
        } else if self.groups.contains(&gid) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    }

    fn rights_of(&self, st: &FileId) -> u32 {
        self.rights(st.uid.as_raw(), st.gid.as_raw(), st.mode)
    }

    /// The mode of the caller's copy: the caller's rights as owner bits,
    /// the image's group and other bits without write; no set-id or
    /// sticky bit.
    pub fn copy_mode(&self, uid: u32, gid: u32, mode: u32) -> u32 {
        (self.rights(uid, gid, mode) << 6) | (mode & 0o055)
    }

    fn copy_mode_of(&self, st: &FileId) -> u32 {
        self.copy_mode(st.uid.as_raw(), st.gid.as_raw(), st.mode)
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
pub fn need(caller: &Caller, uid: u32, gid: u32, mode: u32, dir_writable: bool) -> Need {
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

/// Copies what `lower` (the image's mount, opened for listing; `st` its
/// stat) needs into `upper` (its sub-layer's upper directory), as the
/// caller. `shown` names `lower` in messages.
pub fn copy_tree(
    caller: &Caller,
    lower: BorrowedFd<'_>,
    st: &FileId,
    upper: BorrowedFd<'_>,
    shown: &OsStr,
    account: &mut Account,
) -> Result<(), String> {
    let mut path = shown.as_bytes().to_vec();
    walk(caller, lower, st, upper, &mut path, 0, account)?;
    system::set_mode(upper, caller.copy_mode_of(st)).map_err(|e| {
        format!(
            "cannot set the mode of the layer's top directory for {}: {e}",
            shown.to_string_lossy()
        )
    })
}

fn named(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

fn owner(st: &FileId) -> String {
    format!("owner uid {}, group gid {}", st.uid, st.gid)
}

fn walk(
    caller: &Caller,
    lower: BorrowedFd<'_>,
    st: &FileId,
    upper: BorrowedFd<'_>,
    path: &mut Vec<u8>,
    depth: usize,
    account: &mut Account,
) -> Result<(), String> {
    let fail = |path: &[u8], what: &str, e: Error| format!("{what} {}: {e}", named(path));
    let dir_writable = caller.rights_of(st) & 3 == 3;
    let names = system::names_in(lower).map_err(|e| fail(path, "cannot list", e))?;
    for name in names {
        let len = path.len();
        path.push(b'/');
        path.extend_from_slice(name.as_bytes());
        let child = system::stat_name_at(lower, &name).map_err(|e| fail(path, "cannot stat", e))?;
        // A symlink's mode means nothing (always 0777).
        let mode = if child.is_symlink() { 0 } else { child.mode };
        if child.is_dir() {
            directory(caller, lower, upper, &name, &child, path, depth, account)?;
        } else if need(
            caller,
            child.uid.as_raw(),
            child.gid.as_raw(),
            mode,
            dir_writable,
        ) == Need::Copy
        {
            entry(caller, lower, upper, &name, &child, path, account)?;
        }
        path.truncate(len);
    }
    Ok(())
}

/// A directory of the image: the caller's directory in `upper` (made now,
/// or there already and neither opaque nor replaced), then its entries.
#[allow(clippy::too_many_arguments)]
fn directory(
    caller: &Caller,
    lower: BorrowedFd<'_>,
    upper: BorrowedFd<'_>,
    name: &OsString,
    st: &FileId,
    path: &mut Vec<u8>,
    depth: usize,
    account: &mut Account,
) -> Result<(), String> {
    let fail = |path: &[u8], what: &str, e: Error| format!("{what} {}: {e}", named(path));
    let made = match system::make_dir_named(upper, name, 0o700) {
        Ok(()) => true,
        Err(Error::EXIST) => false,
        Err(e) => return Err(fail(path, "cannot make the layer's copy of", e)),
    };
    let up = match system::open_listable_dir(upper, name) {
        Ok(fd) => fd,
        // Replaced by a file or removed (a whiteout) in the layer.
        Err(Error::NOTDIR | Error::LOOP) if !made => return Ok(()),
        Err(e) => return Err(fail(path, "cannot open the layer's copy of", e)),
    };
    if !made && system::is_opaque_dir(up.as_fd()) {
        return Ok(());
    }
    if made {
        account.dirs += 1;
    }
    let listable = caller.rights_of(st) & 5 == 5;
    if listable && depth < MAX_DEPTH {
        let low: OwnedFd =
            system::open_listable_dir(lower, name).map_err(|e| fail(path, "cannot open", e))?;
        walk(
            caller,
            low.as_fd(),
            st,
            up.as_fd(),
            path,
            depth + 1,
            account,
        )?;
    } else if caller.rights_of(st) & 1 == 1 {
        account.problems.push(format!(
            "{} ({}): you may enter it but {}; files in it cannot be changed in the writable layer",
            named(path),
            owner(st),
            if listable {
                "it is too deep to copy"
            } else {
                "not list it"
            }
        ));
    }
    if made {
        system::set_mode(up.as_fd(), caller.copy_mode_of(st))
            .map_err(|e| fail(path, "cannot set the mode of the layer's copy of", e))?;
    }
    Ok(())
}

/// A file, symlink or other entry that needs the caller's copy.
fn entry(
    caller: &Caller,
    lower: BorrowedFd<'_>,
    upper: BorrowedFd<'_>,
    name: &OsStr,
    st: &FileId,
    path: &[u8],
    account: &mut Account,
) -> Result<(), String> {
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
        Err(e) => Err(format!(
            "cannot copy {} into the writable layer: {e}",
            named(path)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Caller {
        Caller {
            uid: 1000,
            gid: 1000,
            groups: vec![1000, 500],
        }
    }

    #[test]
    fn rights_as_the_kernel_judges_them() {
        let c = me();
        assert_eq!(c.rights(1000, 0, 0o604), 6);
        assert_eq!(c.rights(0, 500, 0o664), 6);
        assert_eq!(c.rights(0, 500, 0o606), 0, "group bits, not the others'");
        assert_eq!(c.rights(0, 0, 0o644), 4);
        assert_eq!(c.rights(0, 0, 0o666), 6);
        assert_eq!(c.rights(7, 7, 0o777), 7);
        assert_eq!(c.copy_mode(0, 0, 0o4755), 0o555);
        assert_eq!(c.copy_mode(0, 500, 0o2775), 0o755);
        assert_eq!(c.copy_mode(0, 0, 0o1777), 0o755);
        assert_eq!(c.copy_mode(0, 0, 0o644), 0o444);
    }

    #[test]
    fn what_needs_a_copy() {
        let c = me();
        // Overlayfs copies the caller's own (uid and primary gid) itself.
        assert_eq!(need(&c, 1000, 1000, 0o644, true), Need::Nothing);
        // The caller's with another group: may chmod it.
        assert_eq!(need(&c, 1000, 0, 0o444, false), Need::Copy);
        assert_eq!(need(&c, 0, 500, 0o664, false), Need::Copy);
        assert_eq!(need(&c, 0, 500, 0o644, false), Need::Nothing);
        assert_eq!(need(&c, 0, 0, 0o666, false), Need::Copy);
        assert_eq!(need(&c, 0, 0, 0o644, false), Need::Nothing);
        // In a directory the caller may write: may be renamed or removed.
        assert_eq!(need(&c, 0, 0, 0o644, true), Need::Copy);
        assert_eq!(need(&c, 7, 7, 0o600, true), Need::Copy);
    }
}
