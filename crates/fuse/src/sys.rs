//! The few operations that need `unsafe`: adopting inherited file
//! descriptors, the FUSE_DEV_IOC_CLONE ioctl, and waiting for SIGINT,
//! SIGTERM or SIGHUP in `--mount` mode. Everything else goes
//! through rustix's safe wrappers.

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};

use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};

/// Takes ownership of descriptor `n`, inherited from the parent; fails if it
/// is not open. Marks it close-on-exec. Callers must not adopt one number
/// twice (main checks that the numbers differ).
pub fn adopt_fd(n: RawFd, what: &str) -> Result<OwnedFd, String> {
    if n < 0 {
        return Err(format!("{what}: invalid file descriptor {n}"));
    }
    // SAFETY: `n` is only borrowed for the duration of this fcntl, which
    // fails with EBADF (and touches nothing) if it is not open.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
    let flags = fcntl_getfd(borrowed)
        .map_err(|e| format!("{what}: file descriptor {n} is not open ({e})"))?;
    // SAFETY: `n` is open (checked above), was passed to this process on
    // its command line to be used by it, and is adopted exactly once, so
    // the OwnedFd is its only owner.
    let fd = unsafe { OwnedFd::from_raw_fd(n) };
    fcntl_setfd(&fd, flags | FdFlags::CLOEXEC).map_err(|e| format!("{what}: fcntl: {e}"))?;
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
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and in threads
/// it starts afterwards), so that [`wait_termination`] receives them.
pub fn block_termination() {
    let set = termination_set();
    // SAFETY: `set` is an initialised signal set; a null old-set pointer is
    // allowed.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Waits until SIGINT, SIGTERM or SIGHUP arrives (they must be blocked).
pub fn wait_termination() {
    let set = termination_set();
    let mut sig = 0;
    // SAFETY: `set` is initialised and `sig` is a valid place for the
    // signal number.
    while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
}
