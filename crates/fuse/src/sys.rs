//! The server's system calls beyond plain I/O: becoming the caller when
//! started as root, adopting inherited file descriptors, the
//! FUSE_DEV_IOC_CLONE ioctl, waiting for SIGINT, SIGTERM or SIGHUP
//! (`--mount` and `--detached`), and closing inherited descriptors
//! (`--detached`). The crate's only `unsafe` code is here
//! (`#![deny(unsafe_code)]` in lib.rs and main.rs).
#![allow(unsafe_code)]

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};

use rustix::io::{fcntl_getfd, fcntl_setfd, Errno, FdFlags};

/// A system step that failed, in the words the server prints.
#[derive(Debug)]
pub enum SysError {
    /// An option's descriptor number is negative.
    InvalidFd(String, RawFd),
    /// An option's descriptor is not open.
    NotOpen(String, RawFd, Errno),
    /// A call (named, with the option it served) and the kernel's answer.
    Call(String, Errno),
    /// A call whose answer came as an I/O error (libc's errno).
    Os(&'static str, std::io::Error),
    /// The ids, groups, capabilities or flags after the switch are not
    /// what [`become_user`] set.
    NotTheCaller,
}

impl std::fmt::Display for SysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SysError::InvalidFd(what, n) => write!(f, "{what}: invalid file descriptor {n}"),
            SysError::NotOpen(what, n, e) => {
                write!(f, "{what}: file descriptor {n} is not open ({e})")
            }
            SysError::Call(what, e) => write!(f, "{what}: {e}"),
            SysError::Os(what, e) => write!(f, "{what}: {e}"),
            SysError::NotTheCaller => f.write_str(
                "the server's credentials are not the caller's after the switch; refusing to serve",
            ),
        }
    }
}

impl std::error::Error for SysError {}

fn call(what: &str) -> impl Fn(Errno) -> SysError + '_ {
    move |e| SysError::Call(what.to_string(), e)
}

/// Takes ownership of descriptor `n`, inherited from the parent; fails if it
/// is not open. Marks it close-on-exec. Callers must not adopt one number
/// twice (main checks that the numbers differ).
pub fn adopt_fd(n: RawFd, what: &str) -> Result<OwnedFd, SysError> {
    if n < 0 {
        return Err(SysError::InvalidFd(what.to_string(), n));
    }
    // SAFETY: `n` is only borrowed for the duration of this fcntl, which
    // fails with EBADF (and touches nothing) if it is not open.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
    let flags = fcntl_getfd(borrowed).map_err(|e| SysError::NotOpen(what.to_string(), n, e))?;
    // SAFETY: `n` is open (checked above), was passed to this process on
    // its command line to be used by it, and is adopted exactly once, so
    // the OwnedFd is its only owner.
    let fd = unsafe { OwnedFd::from_raw_fd(n) };
    fcntl_setfd(&fd, flags | FdFlags::CLOEXEC).map_err(call(&format!("{what}: fcntl")))?;
    Ok(fd)
}

/// FUSE_DEV_IOC_CLONE = _IOR(229, 0, uint32_t).
const FUSE_DEV_IOC_CLONE: rustix::ioctl::Opcode = rustix::ioctl::opcode::read::<u32>(229, 0);

/// A new /dev/fuse descriptor attached to the same connection as `session`
/// (its own request processing queue), or `None` if /dev/fuse cannot be
/// opened or the kernel refuses.
pub fn clone_fuse_fd(session: &OwnedFd) -> Option<OwnedFd> {
    use rustix::fs::{open, Mode, OFlags};
    let fd = open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let source = session.as_fd();
    let raw = u32::try_from(std::os::fd::AsRawFd::as_raw_fd(&source)).ok()?;
    // SAFETY: FUSE_DEV_IOC_CLONE takes a pointer to a u32 holding the
    // descriptor of an existing FUSE session; the Setter passes a pointer to
    // `raw`, which lives for the call.
    let setter = unsafe { rustix::ioctl::Setter::<FUSE_DEV_IOC_CLONE, u32>::new(raw) };
    // SAFETY: `fd` is an open /dev/fuse descriptor, the ioctl's argument
    // has the type the kernel expects (see above).
    unsafe { rustix::ioctl::ioctl(&fd, setter) }.ok()?;
    Some(fd)
}

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before
    // sigaddset adds valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, CORRUPT_SIGNAL] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// What a worker sends its own process when it found the image corrupt
/// ([`mark_corrupt`]); blocked with the termination signals, taken by the
/// main thread in [`wait_termination`].
const CORRUPT_SIGNAL: i32 = libc::SIGUSR1;

/// The name (comm) a server takes once it found its image corrupt:
/// squashfs-mount does not reuse a cached instance whose server has it
/// (its `fuse::CORRUPT_SERVER_NAME`). Only the process itself can set its
/// name; its user can send it the signal, which only stops the reuse of
/// their own instance.
pub const CORRUPT_NAME: &std::ffi::CStr = c"sqfsmnt-corrupt";

/// Marks this server as one whose image is corrupt: asks the main thread
/// (waiting in [`wait_termination`]) to take [`CORRUPT_NAME`], which is
/// the name `/proc/PID/stat` shows.
pub fn mark_corrupt() {
    // CORRUPT_SIGNAL, process-directed: every thread blocks it until the
    // main thread waits for it.
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::USR1);
}

/// Blocks SIGINT, SIGTERM and SIGHUP (and the corruption mark's signal) in
/// the calling thread (and in threads it starts afterwards), so that
/// [`wait_termination`] receives them.
pub fn block_termination() {
    let set = termination_set();
    // SAFETY: `set` is an initialised signal set; a null old-set pointer is
    // allowed.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Caps every file this process writes at `bytes` (RLIMIT_FSIZE, soft and
/// hard: it cannot be raised again without privilege) and ignores
/// SIGXFSZ, so that a write beyond fails with EFBIG instead of ending the
/// process. For a server whose only file is a log it was given: the log
/// cannot grow beyond, whatever the server is made to do.
pub fn cap_file_size(bytes: u64) -> Result<(), SysError> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    // SAFETY: installs SIG_IGN (no handler code runs) for SIGXFSZ; no other
    // thread is running yet.
    if unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(SysError::Os(
            "signal(SIGXFSZ)",
            std::io::Error::last_os_error(),
        ));
    }
    let cap = Rlimit {
        current: Some(bytes),
        maximum: Some(bytes),
    };
    setrlimit(Resource::Fsize, cap).map_err(call("setrlimit(RLIMIT_FSIZE)"))
}

/// Waits until SIGINT, SIGTERM or SIGHUP arrives (they must be blocked);
/// returns its name. The corruption mark's signal renames the process
/// ([`CORRUPT_NAME`]) on the way.
pub fn wait_termination() -> &'static str {
    let set = termination_set();
    loop {
        let mut sig = 0;
        // SAFETY: `set` is initialised and `sig` is a valid place for the
        // signal number.
        while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
        match sig {
            CORRUPT_SIGNAL => {
                let _ = rustix::thread::set_name(CORRUPT_NAME);
            }
            libc::SIGINT => return "SIGINT",
            libc::SIGHUP => return "SIGHUP",
            _ => return "SIGTERM",
        }
    }
}

/// Closes every descriptor except 0, 1, 2 and those in `keep` (a detached
/// server holds nothing else of the launch that started it).
pub fn close_all_but(keep: &[RawFd]) -> Result<(), SysError> {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .filter(|&fd| fd > 2)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut from = 3u32;
    for k in keep.into_iter().chain([u32::MAX]) {
        if k > from {
            // SAFETY: closes descriptors this process inherited and never
            // adopted: the only descriptors it owns at this point are
            // 0, 1, 2 and those in `keep`, which the ranges leave out.
            // Nothing else (no thread, no std object) holds one yet.
            let r = unsafe { libc::syscall(libc::SYS_close_range, from, k - 1, 0u32) };
            if r != 0 {
                return Err(SysError::Os("close_range", std::io::Error::last_os_error()));
            }
        }
        from = k.saturating_add(1);
    }
    Ok(())
}

/// Becomes `uid`:`gid` with `groups` for good, from root, before anything
/// else runs (squashfs-mount starts the server as root, so that the caller
/// can never trace it, write its memory or take its /dev/fuse descriptor):
/// not dumpable first; every id change makes the process as dumpable as
/// fs.suid_dumpable says (1: dumpable), so the saved uid stays root (which
/// alone denies the caller ptrace) until it is not dumpable again. Then no
/// capability, no_new_privs, and all of it verified. The process must be
/// single-threaded (the calls are per thread).
pub fn become_user(uid: u32, gid: u32, groups: &[u32]) -> Result<(), SysError> {
    use rustix::process::{set_dumpable_behavior, DumpableBehavior, Gid, Uid};
    use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
    let step = |what: &str, r: rustix::io::Result<()>| r.map_err(call(what));
    let (u, g) = (Uid::from_raw(uid), Gid::from_raw(gid));
    let gids: Vec<Gid> = groups.iter().map(|&g| Gid::from_raw(g)).collect();
    let not_dumpable = || set_dumpable_behavior(DumpableBehavior::NotDumpable);
    step("prctl(PR_SET_DUMPABLE)", not_dumpable())?;
    step("setgroups", set_thread_groups(&gids))?;
    step("setresgid", set_thread_res_gid(g, g, g))?;
    step("setresuid", set_thread_res_uid(u, u, Uid::ROOT))?;
    step("prctl(PR_SET_DUMPABLE)", not_dumpable())?;
    step("setresuid", set_thread_res_uid(u, u, u))?;
    step("capset", clear_capabilities())?;
    step(
        "prctl(PR_SET_NO_NEW_PRIVS)",
        rustix::thread::set_no_new_privs(true),
    )?;
    verify_user(uid, gid, groups)
}

fn clear_capabilities() -> rustix::io::Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
}

/// Checks what [`become_user`] did: all ids, the groups, no capability,
/// not dumpable, no_new_privs.
fn verify_user(uid: u32, gid: u32, groups: &[u32]) -> Result<(), SysError> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    let (mut rg, mut eg, mut sg) = (0, 0, 0);
    // SAFETY: getresuid and getresgid write three ids each through valid,
    // exclusive pointers to locals; they have no other effect.
    let rc = unsafe {
        libc::getresuid(&mut r, &mut e, &mut s) | libc::getresgid(&mut rg, &mut eg, &mut sg)
    };
    let mut have: Vec<u32> = rustix::process::getgroups()
        .map_err(call("getgroups"))?
        .iter()
        .map(|g| g.as_raw())
        .collect();
    let mut want = groups.to_vec();
    have.sort_unstable();
    want.sort_unstable();
    let caps = rustix::thread::capabilities(None).map_err(call("capget"))?;
    let ok = rc == 0
        && [r, e, s] == [uid; 3]
        && [rg, eg, sg] == [gid; 3]
        && have == want
        && caps.permitted.is_empty()
        && caps.effective.is_empty()
        && rustix::process::dumpable_behavior().ok()
            == Some(rustix::process::DumpableBehavior::NotDumpable)
        && rustix::thread::no_new_privs().unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(SysError::NotTheCaller)
    }
}

/// Names the process (its comm, 15 bytes at most) whatever the kernel
/// made of an exec by fd: a server, or a launch's reporter (`--report`),
/// which is not counted among the servers.
pub fn set_process_name(reporter: bool) {
    let name = if reporter {
        REPORTER_NAME
    } else {
        c"squashfs-mount-"
    };
    let _ = rustix::thread::set_name(name);
}

/// The name of a launch's reporter (`--report`).
pub const REPORTER_NAME: &std::ffi::CStr = c"sqfsmnt-report";

/// The reporter outlives the command that the terminal's ^C or ^\ ends:
/// it ignores SIGINT and SIGQUIT, so that it still reports.
pub fn ignore_keyboard_signals() -> Result<(), SysError> {
    for sig in [libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: installs SIG_IGN (no handler code runs) for a valid
        // signal number; no other thread is running.
        if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
            return Err(SysError::Os("signal", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}
