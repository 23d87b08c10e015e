//! Opening, reading, writing and listing files: every `open` of the tool.
//! Paths given by users are opened only by the functions that say so, and
//! only ever as the caller (see `privilege`).
#![allow(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;

use super::{FileId, Gid, SysResult, Uid};

pub fn fstat(fd: BorrowedFd<'_>) -> SysResult<FileId> {
    Ok(file_id(&rustix::fs::fstat(fd)?))
}

/// Filesystem magic (statfs f_type) of the filesystem holding `fd`.
pub fn filesystem_type(fd: BorrowedFd<'_>) -> SysResult<u64> {
    Ok(rustix::fs::fstatfs(fd)?.f_type as u64)
}

/// Opens an image for reading: never blocks on a FIFO, never becomes a
/// controlling terminal, closed on exec.
pub fn open_image(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// Resolves `path` (following symlinks, as any lookup by the caller would)
/// to a directory and pins it as an O_PATH fd.
pub fn open_directory_path(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Reads exactly `buf.len()` bytes at offset 0 unless the file is shorter;
/// returns how many were read.
pub fn read_head(fd: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<usize> {
    read_at(fd, 0, buf)
}

/// Reads exactly `buf.len()` bytes at `offset` unless the file ends first;
/// returns how many were read.
pub fn read_at(fd: BorrowedFd<'_>, offset: u64, buf: &mut [u8]) -> SysResult<usize> {
    super::fill(fd, buf, super::Position::At(offset), |_| false)
}

/// Where `fd` really is, as the kernel names it in this mount namespace
/// (`/proc/self/fd/N`). This is the kernel's answer about an fd we hold, not
/// a lookup of a user-supplied string.
pub fn path_of_fd(fd: BorrowedFd<'_>) -> SysResult<OsString> {
    let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let target = rustix::fs::readlinkat(CWD, link.as_str(), Vec::new())?;
    Ok(OsString::from_vec(target.into_bytes()))
}

/// chdir(2) by path (as the caller: see `engine::reenter_working_directory`).
pub fn change_dir(path: &OsStr) -> SysResult<()> {
    rustix::process::chdir(path)
}

/// The current working directory.
pub fn current_dir() -> SysResult<OsString> {
    let cwd = rustix::process::getcwd(Vec::new())?;
    Ok(OsString::from_vec(cwd.into_bytes()))
}

pub fn read_small_file(path: &str, limit: usize) -> SysResult<Vec<u8>> {
    let fd = rustix::fs::openat(CWD, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut out = vec![0u8; limit];
    let done = super::fill(fd.as_fd(), &mut out, super::Position::Current, |_| false)?;
    out.truncate(done);
    Ok(out)
}

/// The current working directory as a directory fd for the `*_at`
/// functions below (AT_FDCWD).
pub fn working_dir() -> BorrowedFd<'static> {
    CWD
}

/// Creates the directory `path` (absolute, root's own path) with `mode`
/// unless it exists, then opens it without following a symlink in its last
/// component. The caller judges owner and mode from `fstat`.
pub fn open_or_create_dir(path: &str, mode: u32) -> SysResult<OwnedFd> {
    match rustix::fs::mkdirat(CWD, path, Mode::from_raw_mode(mode)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    let fd = open_dir_nofollow(CWD, path)?;
    ensure_mode(fd.as_fd(), mode)?;
    Ok(fd)
}

/// Gives the file `fd` exactly the permission bits `mode`, when it has
/// others and belongs to the effective user: what the tool creates gets
/// its mode from the tool alone, never from a umask (the root phase's
/// is 077) or from an earlier version that created it under a caller's
/// umask (repaired here). EPERM when it is another's, or the change did
/// not take.
pub fn ensure_mode(fd: BorrowedFd<'_>, mode: u32) -> SysResult<()> {
    let st = fstat(fd)?;
    if st.mode & 0o7777 == mode {
        return Ok(());
    }
    if st.uid != super::effective_uid() {
        return Err(Errno::PERM);
    }
    let m = Mode::from_raw_mode(mode);
    match rustix::fs::fchmod(fd, m) {
        // An O_PATH fd: fchmodat2 with an empty path changes the inode the
        // fd pins (Linux 6.6; it works where no /proc is mounted, as in the
        // cache namespace); before it, the fd's /proc/self/fd link does.
        Err(Errno::BADF) => match chmod_pinned(fd, mode) {
            Err(Errno::NOSYS) => rustix::fs::chmodat(
                CWD,
                format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(),
                m,
                rustix::fs::AtFlags::empty(),
            )?,
            other => other?,
        },
        other => other?,
    }
    if fstat(fd)?.mode & 0o7777 != mode {
        return Err(Errno::PERM);
    }
    Ok(())
}

/// fchmodat2(fd, "", mode, AT_EMPTY_PATH): the mode of the file `fd`
/// pins, also for an O_PATH fd.
fn chmod_pinned(fd: BorrowedFd<'_>, mode: u32) -> SysResult<()> {
    // SAFETY: fchmodat2 reads the empty, NUL-terminated path we pass (a
    // static C string) and takes the other arguments by value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            fd.as_raw_fd(),
            c"".as_ptr(),
            mode as libc::c_uint,
            libc::AT_EMPTY_PATH,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(super::last_errno())
    }
}

/// Opens `name` in `dir` with `flags` (creating it with exactly `mode`);
/// an existing file of ours whose mode shuts us out (made under another
/// umask) is given `mode` and opened again.
fn open_with_mode<Fd: AsFd>(dir: Fd, name: &str, flags: OFlags, mode: u32) -> SysResult<OwnedFd> {
    let open = || rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(mode));
    let fd = match open() {
        Err(Errno::ACCESS) => {
            let path = open_path_nofollow(&dir, name)?;
            ensure_mode(path.as_fd(), mode)?;
            open()?
        }
        other => other?,
    };
    ensure_mode(fd.as_fd(), mode)?;
    Ok(fd)
}

/// Opens an existing directory `path` relative to `dir` as an O_PATH fd,
/// refusing a symlink in the last component.
pub fn open_dir_nofollow<Fd: AsFd, P: AsRef<OsStr>>(dir: Fd, path: P) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path.as_ref(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `path` relative to `dir` as an O_PATH fd (any file type), refusing
/// a symlink in the last component.
pub fn open_path_nofollow<Fd: AsFd, P: AsRef<OsStr>>(dir: Fd, path: P) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path.as_ref(),
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `path` relative to `dir` for reading: no symlink in the last
/// component, never blocks on a FIFO.
pub fn open_read_nofollow<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// Opens (creating with `mode` if missing) the lock file `name` in `dir`.
/// The file has exactly `mode` afterwards (see [`ensure_mode`]).
pub fn open_lock_file<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<OwnedFd> {
    open_with_mode(
        dir,
        name,
        OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        mode,
    )
}

/// Creates the empty file `name` in `dir` with `mode` unless it exists;
/// it has exactly `mode` afterwards (see [`ensure_mode`]).
pub fn create_file_if_missing<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<()> {
    open_with_mode(
        dir,
        name,
        OFlags::CREATE | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        mode,
    )
    .map(drop)
}

/// Makes the directory `path` in `dir` with exactly `mode` (whatever the
/// umask); EEXIST if it exists.
pub fn make_dir<Fd: AsFd>(dir: Fd, path: &str, mode: u32) -> SysResult<()> {
    rustix::fs::mkdirat(&dir, path, Mode::from_raw_mode(mode))?;
    ensure_mode(open_dir_nofollow(&dir, path)?.as_fd(), mode)
}

pub fn remove_dir<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    rustix::fs::unlinkat(dir, path, rustix::fs::AtFlags::REMOVEDIR)
}

pub fn remove_file<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    rustix::fs::unlinkat(dir, path, rustix::fs::AtFlags::empty())
}

pub fn rename<Fd: AsFd>(dir: Fd, from: &str, to: &str) -> SysResult<()> {
    rustix::fs::renameat(&dir, from, &dir, to)
}

/// Writes `bytes` to the new file `path` (must not exist) with `mode`.
pub fn write_new_file<Fd: AsFd>(dir: Fd, path: &str, bytes: &[u8], mode: u32) -> SysResult<()> {
    let fd = rustix::fs::openat(
        dir,
        path,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    ensure_mode(fd.as_fd(), mode)?;
    let mut done = 0;
    while done < bytes.len() {
        match super::retry(|| rustix::io::write(&fd, &bytes[done..]))? {
            0 => return Err(Errno::IO),
            n => done += n,
        }
    }
    Ok(())
}

/// Reads at most `limit` bytes of `path` relative to `dir` (no symlink in
/// the last component); the flag tells whether the file was longer.
pub fn read_file_at<Fd: AsFd>(dir: Fd, path: &str, limit: usize) -> SysResult<(Vec<u8>, bool)> {
    let fd = rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let mut out = vec![0u8; limit.saturating_add(1)];
    let done = super::fill(fd.as_fd(), &mut out, super::Position::Current, |_| false)?;
    let longer = done > limit;
    out.truncate(done.min(limit));
    Ok((out, longer))
}

fn file_id(st: &rustix::fs::Stat) -> FileId {
    FileId {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
        nlink: st.st_nlink,
        uid: super::Uid::from_raw(st.st_uid),
        gid: super::Gid::from_raw(st.st_gid),
        mtime: (st.st_mtime, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime, st.st_ctime_nsec as i64),
        rdev: st.st_rdev,
    }
}

/// fstatat without following a symlink in the last component.
pub fn stat_at<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    stat_name_at(dir, OsStr::new(path))
}

/// [`stat_at`] for a name that need not be UTF-8.
pub fn stat_name_at<Fd: AsFd>(dir: Fd, path: &OsStr) -> SysResult<FileId> {
    let st = rustix::fs::statat(dir, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(file_id(&st))
}

/// fstatat following symlinks (e.g. the magic links in /proc/<pid>/ns).
pub fn stat_following<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
    let st = rustix::fs::statat(dir, path, rustix::fs::AtFlags::empty())?;
    Ok(file_id(&st))
}

/// Sets the modification time of `path` relative to `dir` to now.
pub fn touch<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    use rustix::fs::{Timespec, Timestamps, UTIME_NOW};
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: UTIME_NOW,
    };
    rustix::fs::utimensat(
        dir,
        path,
        &Timestamps {
            last_access: now,
            last_modification: now,
        },
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
}

/// Names in the directory `path` relative to `dir` (without `.` and `..`),
/// at most `limit` of them; the flag tells whether there were more.
pub fn list_dir<Fd: AsFd>(dir: Fd, path: &str, limit: usize) -> SysResult<(Vec<OsString>, bool)> {
    let fd = rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    let mut d = rustix::fs::Dir::read_from(&fd)?;
    while let Some(e) = d.read() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if names.len() == limit {
            return Ok((names, true));
        }
        names.push(OsString::from_vec(name.to_vec()));
    }
    Ok((names, false))
}

/// The bytes of a path.
pub fn as_bytes(s: &OsStr) -> &[u8] {
    s.as_bytes()
}

/// Whether the effective ids (the caller's, while acting as the caller)
/// may write the file or directory `fd` refers to (faccessat2 with
/// AT_EACCESS: mode bits, ACLs, read-only mounts all count).
pub fn may_write(fd: BorrowedFd<'_>) -> SysResult<bool> {
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
pub fn may_create_in(fd: BorrowedFd<'_>) -> SysResult<()> {
    access(fd, libc::W_OK | libc::X_OK)
}

/// Whether the effective ids may list and search the directory `fd`
/// refers to (read and execute permission, ACLs included). Anything but a
/// clear yes is a no.
pub fn may_list(fd: BorrowedFd<'_>) -> SysResult<bool> {
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
/// has no ACLs). ERANGE when it is larger than 4 KiB.
pub fn access_acl(fd: BorrowedFd<'_>) -> SysResult<Option<Vec<u8>>> {
    const NAME: &std::ffi::CStr = c"system.posix_acl_access";
    let mut buf = vec![0u8; 4096];
    let got = match rustix::fs::fgetxattr(fd, NAME, &mut buf[..]) {
        // An O_PATH fd: for a directory, the lookup of "." in it
        // (getxattrat, Linux 6.13); otherwise, or before, through the fd's
        // magic link, which resolves to the same inode (a /proc lookup).
        Err(Errno::BADF) => match xattr_at(fd, c".", NAME, &mut buf) {
            Err(Errno::NOSYS | Errno::NOTDIR) => {
                let link = format!("/proc/thread-self/fd/{}", fd.as_raw_fd());
                rustix::fs::getxattr(link.as_str(), NAME, &mut buf[..])
            }
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
pub fn mount_id(fd: BorrowedFd<'_>) -> SysResult<u64> {
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
pub fn set_attribute(path: &str, name: &str, value: &[u8]) -> SysResult<()> {
    rustix::fs::lsetxattr(path, name, value, rustix::fs::XattrFlags::empty())
}

/// The extended attribute `name` of `path` (no symlink followed), at most
/// `limit` bytes; None when it is not set.
pub fn attribute(path: &str, name: &str, limit: usize) -> SysResult<Option<Vec<u8>>> {
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

/// `fstat` from what the kernel has cached (statx AT_STATX_DONT_SYNC):
/// on a FUSE mount no request goes to its server, so a stopped or hostile
/// server cannot stall the caller (a lock holder, say).
pub fn fstat_cached(fd: BorrowedFd<'_>) -> SysResult<FileId> {
    stat_cached(fd, "", rustix::fs::AtFlags::EMPTY_PATH)
}

/// [`fstat_cached`] of `path` relative to `dir` (no symlink followed in
/// the last component).
pub fn stat_at_cached<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<FileId> {
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
        uid: Uid::from_raw(st.stx_uid),
        gid: Gid::from_raw(st.stx_gid),
        mtime: (st.stx_mtime.tv_sec, i64::from(st.stx_mtime.tv_nsec)),
        ctime: (st.stx_ctime.tv_sec, i64::from(st.stx_ctime.tv_nsec)),
        rdev: dev(st.stx_rdev_major, st.stx_rdev_minor),
    })
}

/// The target of the symbolic link `path` (e.g. a /proc fd link).
pub fn read_link(path: &str) -> SysResult<Vec<u8>> {
    Ok(rustix::fs::readlinkat(CWD, path, Vec::new())?.into_bytes())
}

/// Opens root's log `name` in `dir` (a directory of root's) for appending,
/// no symlink followed, made with `mode` when missing. Whatever is there
/// that is not a regular file of root's with one link (a log an older
/// version gave its user) is removed first. The caller checks the mode.
pub fn open_root_log<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<OwnedFd> {
    let dir = dir.as_fd();
    let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let roots = |st: &super::FileId| st.is_regular() && st.uid.is_root() && st.nlink == 1;
    match super::stat_at(dir, name) {
        Ok(st) if !roots(&st) => rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty())?,
        _ => {}
    }
    let fd = match rustix::fs::openat(
        dir,
        name,
        flags | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(mode),
    ) {
        Err(Errno::EXIST) => rustix::fs::openat(dir, name, flags, Mode::empty())?,
        other => other?,
    };
    if !roots(&super::fstat(fd.as_fd())?) {
        return Err(Errno::PERM);
    }
    // The mode asked for, whatever the umask made of it (root owns it).
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
    Ok(fd)
}

/// Sets the POSIX access ACL of the file `fd` (`system.posix_acl_access`,
/// bytes as `acl::read_only_for` makes them); the kernel sets the mode's
/// group bits to the ACL's mask. Needs the file's owner.
pub fn set_access_acl(fd: BorrowedFd<'_>, acl: &[u8]) -> SysResult<()> {
    rustix::fs::fsetxattr(
        fd,
        "system.posix_acl_access",
        acl,
        rustix::fs::XattrFlags::empty(),
    )
}

/// Empties the file `fd` (open for writing).
pub fn truncate(fd: BorrowedFd<'_>) -> SysResult<()> {
    rustix::fs::ftruncate(fd, 0)
}

/// Opens /dev/null for reading and writing.
pub fn open_null() -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        "/dev/null",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Whether `path` (symlinks followed) is a regular file with an execute
/// bit: a program that could be run.
pub fn is_executable_file(path: &OsStr) -> bool {
    rustix::fs::statat(CWD, path, rustix::fs::AtFlags::empty()).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
            && st.st_mode & 0o111 != 0
    })
}
