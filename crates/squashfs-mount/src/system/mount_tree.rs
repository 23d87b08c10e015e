//! Trees of mounts: recursive clones of a directory with its submounts
//! (bind mounts), mount attributes of a whole tree (mount_setattr), and
//! the entries the tool makes inside a tmpfs of its own (directories,
//! empty files and symlinks to attach clones onto). No paths of users:
//! users' directories arrive as fds opened as the caller.
#![allow(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mount::{MountAttrFlags, OpenTreeFlags};

use super::{Gid, SysResult, Uid};

/// open_tree(2) with OPEN_TREE_CLONE | AT_RECURSIVE: a detached copy of
/// the directory `fd` refers to and every mount below it (what `mount
/// --rbind` makes), each with the flags it has (a read-only mount stays
/// read-only). The copy's propagation is its source's until
/// [`set_tree_attributes`] makes it a slave.
pub(crate) fn clone_tree(fd: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    rustix::mount::open_tree(
        fd,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::AT_RECURSIVE,
    )
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// How [`set_tree_attributes`] changes the mounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttributeScope {
    /// Only the mount `fd` is the root of.
    Mount,
    /// That mount and every mount below it.
    Tree,
}

/// mount_setattr(2) on the mount `fd` is the root of (detached or
/// attached): adds the attributes `set` (flags are only ever added here,
/// never cleared) and, with `slave`, makes the mounts slaves of their peer
/// groups, so that nothing mounted on them propagates back to the mounts
/// they were cloned from, while mounts made there still propagate in.
pub(crate) fn set_tree_attributes(
    fd: BorrowedFd<'_>,
    set: MountAttrFlags,
    slave: bool,
    reach: AttributeScope,
) -> SysResult<()> {
    let attr = MountAttr {
        attr_set: u64::from(set.bits()),
        attr_clr: 0,
        propagation: if slave { libc::MS_SLAVE } else { 0 },
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if reach == AttributeScope::Tree {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: `attr` is a properly laid out `struct mount_attr` (four u64,
    // the kernel's MOUNT_ATTR_SIZE_VER0) that lives across the call and is
    // only read by the kernel, whose size we pass; the path is a valid
    // NUL-terminated empty string; `fd` is borrowed for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(super::last_errno())
    }
}

/// The target of the symlink `fd` (an O_PATH|O_NOFOLLOW fd of the link
/// itself) points to.
pub(crate) fn link_target(fd: BorrowedFd<'_>) -> SysResult<OsString> {
    let target = rustix::fs::readlinkat(fd, "", Vec::new())?;
    Ok(OsString::from_vec(target.into_bytes()))
}

/// Makes the symlink `name` -> `target` in the directory `dir` (in a
/// tmpfs the tool made).
pub(crate) fn make_symlink_in(dir: BorrowedFd<'_>, name: &OsStr, target: &OsStr) -> SysResult<()> {
    rustix::fs::symlinkat(target, dir, name)
}

/// Makes the empty file `name` (mode 0644) in the directory `dir` (in a
/// tmpfs the tool made) and returns it as an O_PATH fd, to attach a
/// mount onto.
pub(crate) fn make_file_in(dir: BorrowedFd<'_>, name: &OsStr) -> SysResult<OwnedFd> {
    drop(rustix::fs::openat(
        dir,
        name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?);
    let fd = open_entry(dir, name, OFlags::empty())?;
    super::ensure_mode(std::os::fd::AsFd::as_fd(&fd), 0o644)?;
    Ok(fd)
}

/// Makes the directory `name` (mode `mode`) in `dir` (in a tmpfs the tool
/// made) unless the tool made it already, and returns it as an O_PATH fd.
pub(crate) fn make_dir_in(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> SysResult<OwnedFd> {
    let made = match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode)) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(e) => return Err(e),
    };
    let fd = open_entry(dir, name, OFlags::DIRECTORY)?;
    if made {
        // mkdir's mode was narrowed by the root phase's umask.
        super::ensure_mode(std::os::fd::AsFd::as_fd(&fd), mode)?;
    }
    Ok(fd)
}

fn open_entry(dir: BorrowedFd<'_>, name: &OsStr, kind: OFlags) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC | kind,
        Mode::empty(),
    )
}

/// A fresh tmpfs as a detached mount (nosuid, nodev), its root directory
/// owned by `uid`:`gid` with `mode`, holding at most `inodes` inodes and
/// 1 MiB of data (directories, empty files and symlinks only).
pub(crate) fn small_tmpfs(uid: Uid, gid: Gid, mode: u32, inodes: usize) -> SysResult<OwnedFd> {
    let ctx = super::FsContext::open("tmpfs")?;
    for (key, value) in [
        ("size", "1m".to_string()),
        ("nr_inodes", inodes.to_string()),
        ("mode", format!("{:o}", mode & 0o1777)),
        ("uid", uid.to_string()),
        ("gid", gid.to_string()),
    ] {
        ctx.set_string(key, OsStr::new(&value))?;
    }
    ctx.create().map_err(|r| r.errno)?;
    ctx.mount(MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV)
}

/// No attribute added, for [`set_tree_attributes`] (propagation only).
pub(crate) fn no_attributes() -> MountAttrFlags {
    MountAttrFlags::empty()
}

/// Read-only, for [`set_tree_attributes`].
pub(crate) fn read_only() -> MountAttrFlags {
    MountAttrFlags::MOUNT_ATTR_RDONLY
}

/// nosuid, nodev for [`set_tree_attributes`].
pub(crate) fn nosuid_nodev() -> MountAttrFlags {
    MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV
}
