//! Opening, reading, writing and listing files: every `open` of the tool.
//! Paths given by users are opened only by the functions that say so, and
//! only ever as the caller (see `privilege`).
#![allow(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

use super::{fstat, SysResult};

/// A copy of `fd` (the same open file description: a lock on it stays
/// held while either is open), close-on-exec.
pub(crate) fn private_copy(fd: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(fd, 3)
}

/// Opens an image for reading: never blocks on a FIFO, never becomes a
/// controlling terminal, closed on exec.
pub(crate) fn open_image(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// Resolves `path` (following symlinks, as any lookup by the caller would)
/// to a directory and pins it as an O_PATH fd.
pub(crate) fn open_directory_path(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Like [`open_directory_path`], but never through a magic link of /proc
/// (`/proc/self/fd/N`, `/dev/fd/N`, `/proc/<pid>/cwd`): those lead into
/// what this process holds open, past the search permissions of the
/// directories above it. ELOOP for such a path (as for a symlink loop).
pub(crate) fn open_directory_path_no_magic(path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_MAGICLINKS,
    )
}

/// mkdir(2) of `path`'s last component with `mode`, in its parent
/// resolved as [`open_directory_path_no_magic`] resolves; Ok(false) when
/// it exists already (or names no new entry: `/`, `..`).
pub(crate) fn make_directory_path_no_magic(path: &OsStr, mode: u32) -> SysResult<bool> {
    let path = std::path::Path::new(path);
    let Some(name) = path.file_name() else {
        return Ok(false);
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.as_os_str(),
        _ => OsStr::new("."),
    };
    let parent = open_directory_path_no_magic(parent)?;
    match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(mode)) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads exactly `buf.len()` bytes at offset 0 unless the file is shorter;
/// returns how many were read.
pub(crate) fn read_head(fd: BorrowedFd<'_>, buf: &mut [u8]) -> SysResult<usize> {
    read_at(fd, 0, buf)
}

/// Reads exactly `buf.len()` bytes at `offset` unless the file ends first;
/// returns how many were read.
pub(crate) fn read_at(fd: BorrowedFd<'_>, offset: u64, buf: &mut [u8]) -> SysResult<usize> {
    super::fill(fd, buf, super::Position::At(offset), |_| false)
}

/// Where `fd` really is, as the kernel names it in this mount namespace
/// (`/proc/self/fd/N`). This is the kernel's answer about an fd we hold, not
/// a lookup of a user-supplied string.
pub(crate) fn path_of_fd(fd: BorrowedFd<'_>) -> SysResult<OsString> {
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

/// The current working directory as a directory fd for the `*_at`
/// functions below (AT_FDCWD).
pub(crate) fn working_dir() -> BorrowedFd<'static> {
    CWD
}

/// Creates the directory `path` (absolute, root's own path) with `mode`
/// unless it exists, then opens it without following a symlink in its last
/// component. The caller judges owner and mode from `fstat`.
pub(crate) fn open_or_create_dir(path: &str, mode: u32) -> SysResult<OwnedFd> {
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
pub(crate) fn ensure_mode(fd: BorrowedFd<'_>, mode: u32) -> SysResult<()> {
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
pub(crate) fn open_dir_nofollow<Fd: AsFd, P: AsRef<OsStr>>(dir: Fd, path: P) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path.as_ref(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `path` relative to `dir` as an O_PATH fd (any file type), refusing
/// a symlink in the last component.
pub(crate) fn open_path_nofollow<Fd: AsFd, P: AsRef<OsStr>>(
    dir: Fd,
    path: P,
) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path.as_ref(),
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `path` relative to `dir` for reading: no symlink in the last
/// component, never blocks on a FIFO.
pub(crate) fn open_read_nofollow<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

/// Opens (creating with `mode` if missing) the lock file `name` in `dir`.
/// The file has exactly `mode` afterwards (see [`ensure_mode`]).
pub(crate) fn open_lock_file<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<OwnedFd> {
    open_with_mode(
        dir,
        name,
        OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        mode,
    )
}

/// Creates the empty file `name` in `dir` with `mode` unless it exists;
/// it has exactly `mode` afterwards (see [`ensure_mode`]).
pub(crate) fn create_file_if_missing<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<()> {
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
pub(crate) fn make_dir<Fd: AsFd>(dir: Fd, path: &str, mode: u32) -> SysResult<()> {
    rustix::fs::mkdirat(&dir, path, Mode::from_raw_mode(mode))?;
    ensure_mode(open_dir_nofollow(&dir, path)?.as_fd(), mode)
}

pub(crate) fn remove_dir<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    rustix::fs::unlinkat(dir, path, rustix::fs::AtFlags::REMOVEDIR)
}

pub(crate) fn remove_file<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
    rustix::fs::unlinkat(dir, path, rustix::fs::AtFlags::empty())
}

pub(crate) fn rename<Fd: AsFd>(dir: Fd, from: &str, to: &str) -> SysResult<()> {
    rustix::fs::renameat(&dir, from, &dir, to)
}

/// Writes `bytes` to the new file `path` (must not exist) with `mode`.
pub(crate) fn write_new_file<Fd: AsFd>(
    dir: Fd,
    path: &str,
    bytes: &[u8],
    mode: u32,
) -> SysResult<()> {
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
pub(crate) fn read_file_at<Fd: AsFd>(
    dir: Fd,
    path: &str,
    limit: usize,
) -> SysResult<(Vec<u8>, bool)> {
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

/// Sets the modification time of `path` relative to `dir` to now.
pub(crate) fn touch<Fd: AsFd>(dir: Fd, path: &str) -> SysResult<()> {
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
pub(crate) fn list_dir<Fd: AsFd>(
    dir: Fd,
    path: &str,
    limit: usize,
) -> SysResult<(Vec<OsString>, bool)> {
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

/// The target of the symbolic link `path` (e.g. a /proc fd link).
pub(crate) fn read_link(path: &str) -> SysResult<Vec<u8>> {
    Ok(rustix::fs::readlinkat(CWD, path, Vec::new())?.into_bytes())
}

/// Opens root's log `name` in `dir` (a directory of root's) for appending
/// and reading (a launch's reporter reads what its servers wrote), no
/// symlink followed, made with `mode` when missing. Whatever is there
/// that is not a regular file of root's with one link (a log an older
/// version gave its user) is removed first. The caller checks the mode.
pub(crate) fn open_root_log<Fd: AsFd>(dir: Fd, name: &str, mode: u32) -> SysResult<OwnedFd> {
    let dir = dir.as_fd();
    let flags = OFlags::RDWR | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC;
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

/// Empties the file `fd` (open for writing).
pub(crate) fn truncate(fd: BorrowedFd<'_>) -> SysResult<()> {
    rustix::fs::ftruncate(fd, 0)
}

/// Opens /dev/null for reading and writing.
pub(crate) fn open_null() -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        "/dev/null",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Whether `path` (symlinks followed) is a regular file with an execute
/// bit: a program that could be run.
pub(crate) fn is_executable_file(path: &OsStr) -> bool {
    rustix::fs::statat(CWD, path, rustix::fs::AtFlags::empty()).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
            && st.st_mode & 0o111 != 0
    })
}
