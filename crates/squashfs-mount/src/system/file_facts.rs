//! What a file is and who may write it: stat (plain and cached), the
//! kernel's access check, POSIX ACLs and extended attributes, mount ids.
//! Looked at through pinned fds; nothing here opens a user's path.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use rustix::fs::CWD;
use rustix::io::Errno;

use super::ids::{Gid, Uid};
use super::SysResult;

pub(crate) fn fstat(fd: BorrowedFd<'_>) -> SysResult<FileId> {
    file_id(&rustix::fs::fstat(fd)?)
}

/// File metadata the tool relies on (from `fstat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub size: u64,
    pub nlink: u64,
    pub uid: Uid,
    pub gid: Gid,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub rdev: u64,
}

impl FileId {
    pub(crate) fn is_regular(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
    pub(crate) fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
    pub(crate) fn is_symlink(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFLNK
    }
    pub(crate) fn kind(&self) -> &'static str {
        match self.mode & libc::S_IFMT {
            libc::S_IFREG => "regular file",
            libc::S_IFDIR => "directory",
            libc::S_IFIFO => "FIFO",
            libc::S_IFSOCK => "socket",
            libc::S_IFBLK => "block device",
            libc::S_IFCHR => "character device",
            libc::S_IFLNK => "symbolic link",
            _ => "special file",
        }
    }
}

/// Filesystem magic (statfs f_type) of the filesystem holding `fd`.
pub(crate) fn filesystem_type(fd: BorrowedFd<'_>) -> SysResult<u64> {
    Ok(rustix::fs::fstatfs(fd)?.f_type as u64)
}

fn file_id(st: &rustix::fs::Stat) -> SysResult<FileId> {
    Ok(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
        nlink: st.st_nlink,
        uid: super::ids::kernel_uid(st.st_uid)?,
        gid: super::ids::kernel_gid(st.st_gid)?,
        mtime: (st.st_mtime, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime, st.st_ctime_nsec as i64),
        rdev: st.st_rdev,
    })
}

/// fstatat without following a symlink in the last component.
pub(crate) fn stat_at<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    stat_name_at(dir, OsStr::new(path))
}

/// [`stat_at`] for a name that need not be UTF-8.
pub(crate) fn stat_name_at<Fd: AsFd>(dir: Fd, path: &OsStr) -> SysResult<FileId> {
    let st = rustix::fs::statat(dir, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    file_id(&st)
}

/// fstatat following symlinks (e.g. the magic links in `/proc/<pid>/ns`).
pub(crate) fn stat_following<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    let st = rustix::fs::statat(dir, path, rustix::fs::AtFlags::empty())?;
    file_id(&st)
}

/// Whether the effective ids (the caller's, while acting as the caller)
/// may write the file or directory `fd` refers to (faccessat2 with
/// AT_EACCESS: mode bits, ACLs, read-only mounts all count).
pub(crate) fn may_write(fd: BorrowedFd<'_>) -> SysResult<bool> {
    match access(fd, libc::W_OK) {
        Ok(()) => Ok(true),
        Err(Errno::ACCESS) | Err(Errno::ROFS) | Err(Errno::TXTBSY) => Ok(false),
        // EPERM: an immutable file, or a seccomp filter that answers the
        // call with EPERM (some container runtimes). The safe reading is
        // "writable" (the image then goes to FUSE, never wrongly to the
        // kernel).
        Err(Errno::PERM) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Whether the effective ids may make an entry in the directory `fd`
/// refers to (write and search permission, ACLs, read-only mounts): Ok,
/// or the error a mkdir there would meet (EACCES, EROFS).
pub(crate) fn may_create_in(fd: BorrowedFd<'_>) -> SysResult<()> {
    access(fd, libc::W_OK | libc::X_OK)
}

/// Whether the effective ids may list and search the directory `fd`
/// refers to (read and execute permission, ACLs included). Anything but a
/// clear yes is a no.
pub(crate) fn may_list(fd: BorrowedFd<'_>) -> SysResult<bool> {
    match access(fd, libc::R_OK | libc::X_OK) {
        Ok(()) => Ok(true),
        Err(Errno::ACCESS) | Err(Errno::PERM) => Ok(false),
        Err(e) => Err(e),
    }
}

/// faccessat2(fd, "", mode, AT_EACCESS | AT_EMPTY_PATH): the access check
/// of the effective ids on the very inode `fd` refers to.
fn access(fd: BorrowedFd<'_>, mode: libc::c_int) -> SysResult<()> {
    use rustix::fs::{Access, AtFlags};
    // rustix's accessat takes no AT_EMPTY_PATH, hence the raw call.
    // SAFETY: the path is a valid NUL-terminated empty string that the
    // kernel only reads; `fd` is a descriptor borrowed for the call; the
    // other arguments are plain integers. faccessat2 changes nothing.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_faccessat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode,
            libc::AT_EACCESS | libc::AT_EMPTY_PATH,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    match super::last_errno() {
        // Kernels before 5.8 (no faccessat2): through the fd's magic
        // link, which resolves to the same inode (a /proc lookup, about
        // 5 us, where the call above takes 0.5 us).
        Errno::NOSYS | Errno::INVAL => {}
        e => return Err(e),
    }
    let link = format!("/proc/thread-self/fd/{}", fd.as_raw_fd());
    let want = Access::from_bits_truncate(mode as u32);
    rustix::fs::accessat(CWD, link.as_str(), want, AtFlags::EACCESS)
}

/// The POSIX access ACL (`system.posix_acl_access`) of the inode `fd`
/// refers to, an O_PATH fd too; None when it has none (or the file system
/// has no ACLs). ERANGE when it is larger than 4 KiB. For a `directory`
/// (the O_PATH fds of a path walk, which fgetxattr refuses), the lookup
/// of "." in it comes first (getxattrat, Linux 6.13): one call instead of
/// a refused one and then that.
pub(crate) fn access_acl(fd: BorrowedFd<'_>, directory: bool) -> SysResult<Option<Vec<u8>>> {
    const NAME: &std::ffi::CStr = c"system.posix_acl_access";
    let mut buf = vec![0u8; 4096];
    let first = match directory {
        true => xattr_at(fd, c".", NAME, &mut buf),
        false => Err(Errno::NOSYS),
    };
    let got = match first {
        Err(Errno::NOSYS | Errno::NOTDIR) => match rustix::fs::fgetxattr(fd, NAME, &mut buf[..]) {
            // An O_PATH fd: for a directory, the lookup of "." in it;
            // otherwise, or before Linux 6.13, through the fd's magic
            // link, which resolves to the same inode (a /proc lookup).
            Err(Errno::BADF) => match xattr_at(fd, c".", NAME, &mut buf) {
                Err(Errno::NOSYS | Errno::NOTDIR) => {
                    let link = format!("/proc/thread-self/fd/{}", fd.as_raw_fd());
                    rustix::fs::getxattr(link.as_str(), NAME, &mut buf[..])
                }
                other => other,
            },
            other => other,
        },
        other => other,
    };
    match got {
        Ok(n) => {
            buf.truncate(n);
            Ok(Some(buf))
        }
        Err(Errno::NODATA | Errno::NOTSUP) => Ok(None),
        Err(e) => Err(e),
    }
}

/// getxattrat(dir, path, AT_SYMLINK_NOFOLLOW, name) (Linux 6.13): the
/// attribute `name` of `path` relative to `dir` (an O_PATH fd will do).
fn xattr_at(
    dir: BorrowedFd<'_>,
    path: &std::ffi::CStr,
    name: &std::ffi::CStr,
    buf: &mut [u8],
) -> SysResult<usize> {
    /// The syscall's number (the same on every architecture but alpha).
    const SYS_GETXATTRAT: libc::c_long = 464;
    #[repr(C)]
    struct XattrArgs {
        value: u64,
        size: u32,
        flags: u32,
    }
    let mut args = XattrArgs {
        value: buf.as_mut_ptr() as u64,
        size: buf.len() as u32,
        flags: 0,
    };
    // SAFETY: the path and name are valid NUL-terminated strings the kernel
    // only reads; `args` points to `buf`, writable for `args.size` bytes,
    // and both outlive the call; `dir` is borrowed for it.
    let rc = unsafe {
        libc::syscall(
            SYS_GETXATTRAT,
            dir.as_raw_fd(),
            path.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            name.as_ptr(),
            &raw mut args,
            std::mem::size_of::<XattrArgs>(),
        )
    };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(rc as usize)
}

/// The id of the mount `fd` is on (statx STATX_MNT_ID), as in mountinfo's
/// first field.
pub(crate) fn mount_id(fd: BorrowedFd<'_>) -> SysResult<u64> {
    use rustix::fs::{AtFlags, StatxFlags};
    let st = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, StatxFlags::MNT_ID)?;
    if st.stx_mask & StatxFlags::MNT_ID.bits() == 0 {
        return Err(Errno::NOSYS);
    }
    Ok(st.stx_mnt_id)
}

/// Sets the extended attribute `name` of `path` (relative to the current
/// directory; no symlink followed) to `value`. Unlike a file's contents,
/// an attribute is not limited by the caller's RLIMIT_FSIZE.
pub(crate) fn set_attribute(path: &str, name: &str, value: &[u8]) -> SysResult<()> {
    rustix::fs::lsetxattr(path, name, value, rustix::fs::XattrFlags::empty())
}

/// The extended attribute `name` of `path` (no symlink followed), at most
/// `limit` bytes; None when it is not set.
pub(crate) fn attribute(path: &str, name: &str, limit: usize) -> SysResult<Option<Vec<u8>>> {
    // Records are a few hundred bytes: a small buffer first (a large one
    // is zeroed page by page in a process that has just started), the
    // whole limit only when the value does not fit (ERANGE).
    let mut size = limit.min(1024);
    loop {
        let mut buf = vec![0u8; size];
        match rustix::fs::lgetxattr(path, name, &mut buf[..]) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(Some(buf));
            }
            Err(Errno::RANGE) if size < limit => size = limit,
            Err(Errno::NODATA) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Sets the extended attribute `name` of the open file `fd` to `value`
/// (not limited by the caller's RLIMIT_FSIZE; replaced as a whole: a
/// reader sees the old value or the new one).
pub(crate) fn set_fd_attribute(fd: BorrowedFd<'_>, name: &str, value: &[u8]) -> SysResult<()> {
    rustix::fs::fsetxattr(fd, name, value, rustix::fs::XattrFlags::empty())
}

/// The extended attribute `name` of the open file `fd`, at most 256
/// bytes; None when it is not set.
pub(crate) fn fd_attribute(fd: BorrowedFd<'_>, name: &str) -> SysResult<Option<Vec<u8>>> {
    let mut buf = vec![0u8; 256];
    match rustix::fs::fgetxattr(fd, name, &mut buf[..]) {
        Ok(n) => {
            buf.truncate(n);
            Ok(Some(buf))
        }
        Err(Errno::NODATA) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `fstat` from what the kernel has cached (statx AT_STATX_DONT_SYNC):
/// on a FUSE mount no request goes to its server, so a stopped or hostile
/// server cannot stall the caller (a lock holder, say).
pub(crate) fn fstat_cached(fd: BorrowedFd<'_>) -> SysResult<FileId> {
    stat_cached(fd, "", rustix::fs::AtFlags::EMPTY_PATH)
}

/// [`fstat_cached`] of `path` relative to `dir` (no symlink followed in
/// the last component).
pub(crate) fn stat_at_cached<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    stat_cached(dir.as_fd(), path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
}

fn stat_cached(dir: BorrowedFd<'_>, path: &str, flags: rustix::fs::AtFlags) -> SysResult<FileId> {
    use rustix::fs::StatxFlags;
    let st = rustix::fs::statx(
        dir,
        path,
        flags | rustix::fs::AtFlags::STATX_DONT_SYNC,
        StatxFlags::BASIC_STATS,
    )?;
    let dev = |maj: u32, min: u32| rustix::fs::makedev(maj, min);
    Ok(FileId {
        dev: dev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        mode: u32::from(st.stx_mode),
        size: st.stx_size,
        nlink: u64::from(st.stx_nlink),
        uid: super::ids::kernel_uid(st.stx_uid)?,
        gid: super::ids::kernel_gid(st.stx_gid)?,
        mtime: (st.stx_mtime.tv_sec, i64::from(st.stx_mtime.tv_nsec)),
        ctime: (st.stx_ctime.tv_sec, i64::from(st.stx_ctime.tv_nsec)),
        rdev: dev(st.stx_rdev_major, st.stx_rdev_minor),
    })
}

/// Sets the POSIX access ACL of the file `fd` (`system.posix_acl_access`,
/// bytes as `acl::read_only_for` makes them); the kernel sets the mode's
/// group bits to the ACL's mask. Needs the file's owner.
pub(crate) fn set_access_acl(fd: BorrowedFd<'_>, acl: &[u8]) -> SysResult<()> {
    rustix::fs::fsetxattr(
        fd,
        "system.posix_acl_access",
        acl,
        rustix::fs::XattrFlags::empty(),
    )
}
