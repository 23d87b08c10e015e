//! What the prefetcher needs: a detached child of the launch, descriptors
//! closed, files opened beneath a directory and read.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

use super::SysResult;

/// Forks twice, so that the command the launch becomes by exec never has
/// the new process as a child (no SIGCHLD, nothing for it to reap).
/// Returns `Ok(true)` in the detached grandchild, `Ok(false)` in the
/// launch once the intermediate child is gone. Only for a process with a
/// single thread (checked: `Err(EBUSY)` otherwise), so that the child may
/// run ordinary code, and not a child subreaper (`Err(EBUSY)` too).
pub(crate) fn fork_detached() -> SysResult<bool> {
    if !super::is_single_threaded()? {
        return Err(Errno::BUSY);
    }
    // A launch that is a child subreaper (set by whoever exec'd it; the
    // flag survives exec) would adopt the grandchild: the command would
    // get its SIGCHLD and a zombie. Then no detached process.
    let mut subreaper: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int to the pointer, which
    // points at `subreaper`, alive for the call.
    if unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut subreaper as *mut libc::c_int,
        )
    } != 0
        || subreaper != 0
    {
        return Err(Errno::BUSY);
    }
    // SAFETY: the process has one thread (checked above), so the child is a
    // complete copy in which any code may run.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(super::last_errno());
    }
    if pid == 0 {
        // SAFETY: single-threaded child; fork again and let the
        // intermediate child end at once without running destructors.
        let second = unsafe { libc::fork() };
        if second != 0 {
            // SAFETY: _exit ends the intermediate child immediately.
            unsafe { libc::_exit(0) };
        }
        return Ok(true);
    }
    super::process::reap(pid);
    Ok(false)
}

/// Ends this process at once, without running destructors or flushing
/// buffers copied from the parent.
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no memory of ours.
    unsafe { libc::_exit(code) }
}

/// Points standard input, output and error at /dev/null and closes every
/// other descriptor but `keep`, so the process holds no pipe or terminal
/// of the command (a reader waiting for EOF is never delayed by it).
/// Returns `keep` (under a number of 3 or more).
pub(crate) fn detach_descriptors(keep: OwnedFd) -> SysResult<OwnedFd> {
    let null = rustix::fs::openat(
        CWD,
        "/dev/null",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for target in 0..3 {
        // SAFETY: dup2 onto the standard descriptors, which this process
        // owns; `null` stays open until the end of this function.
        if unsafe { libc::dup2(null.as_raw_fd(), target) } < 0 {
            return Err(super::last_errno());
        }
    }
    drop(null);
    let kept = rustix::io::fcntl_dupfd_cloexec(&keep, 3)?;
    drop(keep);
    let k = kept.as_raw_fd() as libc::c_uint;
    // A failure (a kernel without close_range, before 5.9) is an error:
    // the process must not keep the command's pipes open.
    // SAFETY: closes every descriptor from 3 up except the kept one; this
    // process (a forked child that ends with exit_now) never uses them
    // again, and the objects that owned them are never dropped.
    let closed = unsafe {
        (k == 3
            || libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                k - 1,
                0 as libc::c_uint,
            ) == 0)
            && libc::syscall(
                libc::SYS_close_range,
                k + 1,
                libc::c_uint::MAX,
                0 as libc::c_uint,
            ) == 0
    };
    if !closed {
        return Err(Errno::NOSYS);
    }
    Ok(kept)
}

/// Names this process (what ps and /proc/PID/comm show).
pub(crate) fn set_process_name(name: &std::ffi::CStr) -> SysResult<()> {
    rustix::thread::set_name(name)
}

/// Opens `path` for reading beneath the directory `dir` (never outside it
/// nor into another mount, no magic links, the last component not a symbolic link, no blocking on
/// FIFOs), close-on-exec.
pub(crate) fn open_beneath(dir: BorrowedFd<'_>, path: &OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat2(
        dir,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        // NO_XDEV: only the image's own files, never those of another
        // image mounted below it.
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
}

/// Reads from `fd` into `buf`: bytes read (0 at the end).
pub(crate) fn read_into<Fd: AsFd>(fd: Fd, buf: &mut [u8]) -> SysResult<usize> {
    super::retry(|| rustix::io::read(&fd, &mut *buf))
}
