//! Starting a helper program (the FUSE server), detached from the launch:
//! fork, fork again (so the command, which the launch becomes by exec,
//! never has it as a child to reap), set the caller's resource limits and
//! root's ids in the grandchild, and exec the pinned program by fd (it
//! becomes the caller by itself, first thing: `squashfs-mount-fuse
//! --run-as`). Works from a single-threaded process and from one thread of
//! a multi-threaded one (slurmstepd): between fork and exec only raw
//! system calls run, no allocation, no lock.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::io::Errno;

use super::rlimits::CallerLimits;
use super::{Gid, SysResult, Uid};

/// A pipe: (read end, write end), both close-on-exec.
pub(crate) fn pipe() -> SysResult<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
}

/// A pidfd of this process (it stays valid across the exec of the
/// command; it becomes readable when the process exits).
pub(crate) fn own_pidfd() -> SysResult<OwnedFd> {
    rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
}

/// Reads what is available from `fd` (at most `limit` bytes, until EOF).
pub(crate) fn read_some(fd: BorrowedFd<'_>, limit: usize) -> SysResult<Vec<u8>> {
    let mut out = vec![0u8; limit];
    let done = super::fill(fd, &mut out, super::Position::Current, |read| {
        read.contains(&b'\n')
    })?;
    out.truncate(done);
    Ok(out)
}

/// How a helper is started by [`spawn_detached`].
pub struct Helper<'a> {
    /// The program, pinned as an fd and executed by that fd (execveat).
    pub program: BorrowedFd<'a>,
    pub argv: &'a [CString],
    /// Fds placed at the numbers given (3, 4, ...); everything else is
    /// closed.
    pub keep: &'a [(BorrowedFd<'a>, RawFd)],
    /// Executed with all ids root and no supplementary group (it drops to
    /// the caller by itself, first thing); otherwise with the current
    /// credentials (rootless mode).
    pub as_root: bool,
    /// Resource limits set before the exec (the caller's).
    pub limits: Option<&'a CallerLimits>,
    /// Executed as this user (uid, gid, supplementary groups: all ids set,
    /// from root's), instead of `as_root`'s root.
    pub as_user: Option<(Uid, Gid, &'a [Gid])>,
}

/// What the forked processes use, prepared before fork: nothing is
/// allocated after it.
struct Prepared {
    argv: Vec<*const libc::c_char>,
    env: [*const libc::c_char; 1],
    /// (source, target) fds; the program's fd last, at `first_free`.
    keep: Vec<(RawFd, RawFd)>,
    first_free: RawFd,
    limits: Vec<(libc::c_int, libc::rlimit64)>,
    as_root: bool,
    as_user: Option<(libc::uid_t, libc::gid_t, Vec<libc::gid_t>)>,
}

impl Prepared {
    fn new(h: &Helper<'_>) -> Prepared {
        let mut argv: Vec<*const libc::c_char> = h.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut keep: Vec<(RawFd, RawFd)> = h
            .keep
            .iter()
            .map(|(fd, at)| (fd.as_raw_fd(), *at))
            .collect();
        let first_free = keep.iter().map(|(_, at)| at + 1).max().unwrap_or(3);
        keep.push((h.program.as_raw_fd(), first_free));
        Prepared {
            argv,
            env: [std::ptr::null()],
            keep,
            first_free,
            limits: h.limits.map(CallerLimits::raw).unwrap_or_default(),
            as_root: h.as_root,
            as_user: h.as_user.map(|(u, g, gs)| {
                let groups = gs.iter().map(|g| g.as_raw()).collect();
                (u.as_raw(), g.as_raw(), groups)
            }),
        }
    }
}

/// Starts the helper `h`, detached (double fork: the command, which the
/// launch becomes by exec, never has it as a child to reap), with an
/// empty environment and no_new_privs. Returns a pidfd of the helper once
/// the intermediate child has exited; the helper's own failure to start
/// shows as EOF on a pipe it was given.
pub(crate) fn spawn_detached(h: &Helper<'_>) -> SysResult<OwnedFd> {
    let p = Prepared::new(h);
    // The intermediate child sends the helper's pid on `pid`, then waits
    // for EOF on `ack`: until then the helper is its child (alive or a
    // zombie), so the pid cannot name another process when the pidfd is
    // opened. (The helper closes its copies of both pipes first thing.)
    let (pid_read, pid_write) = pipe()?;
    let (ack_read, ack_write) = pipe()?;
    let ends = [
        pid_read.as_raw_fd(),
        pid_write.as_raw_fd(),
        ack_read.as_raw_fd(),
        ack_write.as_raw_fd(),
    ];
    // SAFETY: fork duplicates only the calling thread. The child runs only
    // async-signal-safe raw system calls on memory prepared above (no
    // allocation, no lock, no Rust std I/O) and ends in execve or _exit.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(super::last_errno());
    }
    if child == 0 {
        // SAFETY: in the forked child: raw system calls only (see above).
        unsafe { intermediate(&p, ends) }
    }
    drop((pid_write, ack_read));
    let helper = read_pid(pid_read.as_fd());
    let pidfd = helper.and_then(|pid| {
        let pid = rustix::process::Pid::from_raw(pid).ok_or(Errno::SRCH)?;
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
    });
    // EOF, not a byte: a write to a pipe whose reader is gone would raise
    // SIGPIPE, which slurmstepd may not ignore.
    drop(ack_write);
    super::process::reap(child);
    pidfd
}

/// The helper's pid, as the intermediate child sends it.
fn read_pid(fd: BorrowedFd<'_>) -> SysResult<i32> {
    let mut buf = [0u8; 4];
    if super::fill(fd, &mut buf, super::Position::Current, |_| false)? < buf.len() {
        return Err(Errno::CHILD);
    }
    Ok(i32::from_ne_bytes(buf))
}

/// The intermediate child: forks the helper, sends its pid, waits for EOF
/// on the ack pipe (the parent has the pidfd) and exits. `ends`: the pid
/// pipe's read and write ends, the ack pipe's read and write ends.
///
/// # Safety
/// Only in a child just forked: raw system calls on prepared memory.
unsafe fn intermediate(p: &Prepared, ends: [RawFd; 4]) -> ! {
    let [pid_read, pid_write, ack_read, ack_write] = ends;
    // SAFETY: closing fds this process owns.
    unsafe {
        libc::close(pid_read);
        libc::close(ack_write);
    }
    // SAFETY: fork in a single-threaded child.
    let helper = unsafe { libc::fork() };
    if helper == 0 {
        // SAFETY: the helper: closes the pipes, then `exec_helper` (raw
        // calls only).
        unsafe {
            libc::close(pid_write);
            libc::close(ack_read);
            exec_helper(p)
        }
    }
    if helper > 0 {
        let pid = helper.to_ne_bytes();
        let mut byte = 0u8;
        // SAFETY: write and read on fds this process owns, with buffers of
        // the lengths given.
        unsafe {
            libc::write(pid_write, pid.as_ptr().cast(), pid.len());
            while libc::read(ack_read, (&raw mut byte).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
        }
    }
    // SAFETY: ends the intermediate child.
    unsafe { libc::_exit(0) }
}

/// The helper: fds into place, the caller's limits, root's ids (or a
/// user's, or as is), no_new_privs, exec by fd.
///
/// # Safety
/// Only in a child just forked: raw system calls on prepared memory.
unsafe fn exec_helper(p: &Prepared) -> ! {
    // SAFETY: raw system calls on fds this process owns and on the
    // prepared arrays, which outlive them.
    unsafe {
        // Sources are first duplicated above every target, so that no
        // target overwrites a source still needed.
        let mut moved: [RawFd; 16] = [-1; 16];
        for (i, (src, _)) in p.keep.iter().enumerate().take(16) {
            moved[i] = libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, p.first_free + 16);
            if moved[i] < 0 {
                libc::_exit(126);
            }
        }
        for (i, (_, at)) in p.keep.iter().enumerate().take(16) {
            // The program's fd stays close-on-exec.
            let flags = if *at == p.first_free {
                libc::O_CLOEXEC
            } else {
                0
            };
            if libc::dup3(moved[i], *at, flags) < 0 {
                libc::_exit(126);
            }
        }
        libc::syscall(
            libc::SYS_close_range,
            (p.first_free + 1) as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
        for (resource, limit) in &p.limits {
            if libc::prlimit64(0, *resource as _, limit, std::ptr::null_mut()) != 0 {
                libc::_exit(126);
            }
        }
        if p.as_root
            && (libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
                || libc::syscall(libc::SYS_setresgid, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_setresuid, 0, 0, 0) != 0)
        {
            libc::_exit(126);
        }
        if let Some((uid, gid, groups)) = &p.as_user {
            // From root's effective ids: groups, then gids, then uids.
            if libc::syscall(libc::SYS_setresuid, -1, 0, -1) != 0
                || libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0
                || libc::syscall(libc::SYS_setresgid, *gid, *gid, *gid) != 0
                || libc::syscall(libc::SYS_setresuid, *uid, *uid, *uid) != 0
            {
                libc::_exit(126);
            }
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            libc::_exit(126);
        }
        libc::syscall(
            libc::SYS_execveat,
            p.first_free,
            c"".as_ptr(),
            p.argv.as_ptr(),
            p.env.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
        libc::_exit(127)
    }
}

/// Opens the program `path` for [`Helper::program`]: an O_PATH fd (it
/// needs no read permission), the path followed as the current
/// credentials' lookup would.
pub(crate) fn open_program(path: &std::ffi::OsStr) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        rustix::fs::CWD,
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
}

/// Opens /dev/fuse (a new FUSE connection).
pub(crate) fn open_fuse_device() -> SysResult<OwnedFd> {
    use rustix::fs::{Mode, OFlags, CWD};
    rustix::fs::openat(
        CWD,
        "/dev/fuse",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
}
