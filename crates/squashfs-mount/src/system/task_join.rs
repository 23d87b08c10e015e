//! `--join`: what the tasks of a Slurm step need to find the task that
//! mounted and join its namespaces. No object is shared: a task looks at
//! other processes through /proc (only its own user's are readable), joins
//! the namespaces of one by an fd of `/proc/<pid>`, and tells it so by a
//! queued signal, whose sender the kernel names.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;

use super::SysResult;

/// The queued (real-time) signal a task that joined sends the keeper.
pub(crate) fn join_signal() -> i32 {
    libc::SIGRTMIN() + 7
}

/// The numeric entries of /proc: every process this process can see.
pub(crate) fn process_ids() -> SysResult<Vec<u32>> {
    let dir = rustix::fs::openat(
        CWD,
        "/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let entry = entry?;
        if let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() {
            out.push(pid);
        }
    }
    Ok(out)
}

/// `/proc/<pid>` as a directory fd: what is read through it is about that
/// process, or fails (ESRCH) once it has exited, even if its pid is reused.
pub(crate) fn open_process(pid: u32) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        format!("/proc/{pid}"),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// The namespace `kind` ("user", "mnt") of the process whose /proc
/// directory is `proc_dir`: the kernel lets only those who may inspect the
/// process (its own user, while it is dumpable) open it.
pub(crate) fn open_namespace_of(proc_dir: BorrowedFd<'_>, kind: &str) -> SysResult<OwnedFd> {
    rustix::fs::openat(
        proc_dir,
        format!("ns/{kind}"),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// A pidfd for `pid` (pidfd_open).
pub(crate) fn open_pidfd(pid: u32) -> SysResult<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid as i32).ok_or(Errno::SRCH)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
}

/// Sends [`join_signal`] to the process of `pidfd`.
pub(crate) fn send_join_signal(pidfd: BorrowedFd<'_>) -> SysResult<()> {
    // SAFETY: pidfd_send_signal with a null siginfo (the kernel fills in
    // the sender) and no flags; `pidfd` is an open fd for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            join_signal(),
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(())
}

/// Blocks [`join_signal`] and returns a signalfd that reads it.
pub(crate) fn join_signal_fd() -> SysResult<OwnedFd> {
    // SAFETY: the sigset is a local value, initialised by sigemptyset
    // before use; sigprocmask and signalfd only read it. signalfd returns
    // a new fd that nothing else owns.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, join_signal());
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(super::last_errno());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(super::last_errno());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// One signal read from a signalfd: the sender's pid and real uid.
pub(crate) fn read_join_signal(fd: BorrowedFd<'_>) -> SysResult<(u32, super::Uid)> {
    // SAFETY: signalfd_siginfo is plain data; zeroed is a valid value.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    let n = super::retry(|| {
        // SAFETY: read writes at most `size` bytes into `info`, which is
        // exactly that large and exclusively borrowed for the call.
        let rc = unsafe {
            libc::read(
                fd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        if rc < 0 {
            Err(super::last_errno())
        } else {
            Ok(rc as usize)
        }
    })?;
    if n != size {
        return Err(Errno::IO);
    }
    let uid = super::Uid::checked(info.ssi_uid).ok_or(Errno::INVAL)?;
    Ok((info.ssi_pid, uid))
}

/// Waits until at least one of `fds` is readable (a pidfd: its process
/// has exited); which ones are.
pub(crate) fn wait_any_readable(fds: &[BorrowedFd<'_>]) -> SysResult<Vec<bool>> {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    super::retry(|| poll(&mut polled, None))?;
    Ok(polled.iter().map(|p| !p.revents().is_empty()).collect())
}

/// Names this process `name` (its comm, as `ps` and `pgrep -x` show it).
pub(crate) fn set_process_name(name: &CStr) -> SysResult<()> {
    rustix::thread::set_name(name)
}

/// The inode of the nsfs file `ns`: the namespace's identity.
pub(crate) fn namespace_id(ns: BorrowedFd<'_>) -> SysResult<u64> {
    Ok(super::fstat(ns)?.ino)
}

/// A pipe, both ends close-on-exec: (read, write).
pub(crate) fn pipe() -> SysResult<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
}

/// A copy of `fd` that a program this process executes inherits (no
/// close-on-exec); closed when the copy is dropped.
pub(crate) fn inheritable_copy(fd: BorrowedFd<'_>) -> SysResult<OwnedFd> {
    let copy = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
    rustix::io::fcntl_setfd(&copy, rustix::io::FdFlags::empty())?;
    Ok(copy)
}

/// Moves `keep` to fds 3, 4, ... (in order) and closes every fd above
/// them: a process that outlives the task must hold none of what it
/// inherited (its fds 0-2 are /dev/null already). Returns the moved fds.
pub(crate) fn keep_only(keep: Vec<OwnedFd>) -> SysResult<Vec<OwnedFd>> {
    // First above every fd kept, then down to 3, 4, ...: no copy lands on
    // a kept fd not yet moved.
    let high = keep.iter().map(|f| f.as_raw_fd()).max().unwrap_or(3) + 1;
    let mut parked = Vec::new();
    for fd in keep {
        parked.push(rustix::io::fcntl_dupfd_cloexec(&fd, high)?);
    }
    let mut out = Vec::new();
    for (i, fd) in parked.into_iter().enumerate() {
        let target = 3 + i as i32;
        // SAFETY: dup2 onto `target`, which is either closed or an fd
        // inherited at start that nothing in this process uses (the
        // originals were copied above `high` first).
        if unsafe { libc::dup2(fd.as_raw_fd(), target) } < 0 {
            return Err(super::last_errno());
        }
        // SAFETY: `target` was just made a copy that only this value owns.
        let moved = unsafe { OwnedFd::from_raw_fd(target) };
        rustix::io::fcntl_setfd(&moved, rustix::io::FdFlags::CLOEXEC)?;
        out.push(moved);
    }
    let first_free = 3 + out.len() as u32;
    // SAFETY: close_range closes the fds above those kept; nothing in this
    // process refers to them (the originals and the parked copies were
    // closed when their owners were dropped above).
    if unsafe { libc::syscall(libc::SYS_close_range, first_free, u32::MAX, 0u32) } < 0 {
        return Err(super::last_errno());
    }
    Ok(out)
}

/// A pidfd for this process's parent, or None when the parent changed
/// meanwhile (it exited).
pub(crate) fn parent_pidfd() -> Option<OwnedFd> {
    let parent = parent_pid();
    let fd = open_pidfd(parent).ok()?;
    (parent_pid() == parent).then_some(fd)
}

/// This process's parent's pid (0 when it has none in this pid namespace).
pub(crate) fn parent_pid() -> u32 {
    rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32)
}
