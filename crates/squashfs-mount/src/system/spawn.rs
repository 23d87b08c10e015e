//! Starting a helper program (the FUSE server) as the caller, detached
//! from the launch: fork, fork again (so the command, which the launch
//! becomes by exec, never has it as a child to reap), drop every privilege
//! in the grandchild, and exec. Works from a single-threaded process and
//! from one thread of a multi-threaded one (slurmstepd): between fork and
//! exec only raw system calls run, no allocation, no lock.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::io::Errno;

use super::{Gid, SysResult, Uid};

/// Who the helper runs as: all ids and the groups. `None` keeps the
/// current ones (rootless mode: already the caller).
pub struct RunAs<'a> {
    pub uid: Uid,
    pub gid: Gid,
    pub groups: &'a [Gid],
}

/// A pipe: (read end, write end), both close-on-exec.
pub fn pipe() -> SysResult<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
}

/// A pidfd of this process (it stays valid across the exec of the
/// command; it becomes readable when the process exits).
pub fn own_pidfd() -> SysResult<OwnedFd> {
    rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
}

/// Waits up to `timeout_ms` for `fd` to be readable; false on timeout.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> SysResult<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let t = Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    };
    loop {
        match poll(&mut fds, Some(&t)) {
            Ok(n) => return Ok(n > 0),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Reads what is available from `fd` (at most `limit` bytes, until EOF).
pub fn read_some(fd: BorrowedFd<'_>, limit: usize) -> SysResult<Vec<u8>> {
    let mut out = vec![0u8; limit];
    let mut done = 0;
    while done < limit {
        match rustix::io::read(fd, &mut out[done..]) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                if out[..done].contains(&b'\n') {
                    break;
                }
            }
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    out.truncate(done);
    Ok(out)
}

/// Starts `program` with `argv` and `env`, the fds `keep` placed at the fd
/// numbers given (3, 4, ...; everything else closed), as `run_as`, with
/// no_new_privs, detached (double fork). Returns once the intermediate
/// child has exited; the helper's own failure to start shows as EOF on a
/// pipe it was given.
pub fn spawn_detached(
    program: &CString,
    argv: &[CString],
    env: &[CString],
    keep: &[(BorrowedFd<'_>, RawFd)],
    run_as: Option<RunAs<'_>>,
) -> SysResult<()> {
    // Everything the child needs, prepared before fork (no allocation after).
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let keep: Vec<(RawFd, RawFd)> = keep.iter().map(|(fd, at)| (fd.as_raw_fd(), *at)).collect();
    let first_free = keep.iter().map(|(_, at)| at + 1).max().unwrap_or(3);
    let ids = run_as.map(|r| {
        (
            r.uid.as_raw(),
            r.gid.as_raw(),
            r.groups.iter().map(|g| g.as_raw()).collect::<Vec<u32>>(),
        )
    });

    // SAFETY: fork duplicates only the calling thread. The child runs only
    // async-signal-safe raw system calls on memory prepared above (no
    // allocation, no lock, no Rust std I/O) and ends in execve or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(super::last_errno());
    }
    if pid == 0 {
        // SAFETY: as above: in the forked child, only raw system calls.
        unsafe {
            if libc::fork() != 0 {
                // The intermediate child (or fork failed): done.
                libc::_exit(0);
            }
            // The grandchild: move the fds into place. Sources are first
            // duplicated above the targets so that no target overwrites a
            // source still needed.
            let mut moved: [RawFd; 16] = [-1; 16];
            for (i, (src, _)) in keep.iter().enumerate().take(16) {
                moved[i] = libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, first_free + 16);
                if moved[i] < 0 {
                    libc::_exit(126);
                }
            }
            for (i, (_, at)) in keep.iter().enumerate().take(16) {
                if libc::dup2(moved[i], *at) < 0 {
                    libc::_exit(126);
                }
            }
            libc::syscall(
                libc::SYS_close_range,
                first_free as libc::c_uint,
                libc::c_uint::MAX,
                0 as libc::c_uint,
            );
            if let Some((uid, gid, groups)) = &ids {
                if libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0
                    || libc::syscall(libc::SYS_setresgid, *gid, *gid, *gid) != 0
                    || libc::syscall(libc::SYS_setresuid, *uid, *uid, *uid) != 0
                {
                    libc::_exit(126);
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                libc::_exit(126);
            }
            libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the intermediate child we just forked; `status` is
    // a valid out-pointer.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    Ok(())
}

/// Opens /dev/fuse (a new FUSE connection).
pub fn open_fuse_device() -> SysResult<OwnedFd> {
    use rustix::fs::{Mode, OFlags, CWD};
    rustix::fs::openat(
        CWD,
        "/dev/fuse",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
}
