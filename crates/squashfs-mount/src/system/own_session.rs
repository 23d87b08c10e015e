//! Root's work on what every user's launches share, run in a process of
//! its own session: out of the caller's scheduling reach (a session has
//! an autogroup of its own, whose nice value the caller's `echo 19 >
//! /proc/self/autogroup` does not touch) and out of the reach of the
//! caller's signals (real uid 0 from its first instruction on).
//!
//! The process is a `clone` of the launch that shares its memory and its
//! descriptor table (CLONE_VM | CLONE_FILES) and during whose whole life
//! the launch is suspended in the kernel (CLONE_VFORK), as with vfork: it
//! runs the work on a stack of its own as if the launch's thread ran it,
//! and what the work makes (descriptors, values) is the launch's when it
//! ends. It does not share the launch's credentials, fs_struct (working
//! directory, umask), mount namespace, session or scheduling: what it
//! changes there is its own and ends with it. The launch itself stays in
//! the caller's session (the command it becomes needs it); its wait here
//! is killable (a fatal signal ends it), and the work then still completes
//! and releases what it holds, and whatever it made goes with it. The
//! caller gives it real uid 0 before the clone (`OutOfReach`), so that the
//! process is born out of the caller's reach.
#![allow(unsafe_code)]

use std::ffi::c_void;

use rustix::io::Errno;

use super::SysResult;

/// Virtual size of the work's stack (mapped lazily, with a guard page
/// below it): the main thread's default.
const STACK_BYTES: usize = 8 << 20;

/// Why the work did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnSession {
    /// The process could not be made (clone, or its stack).
    Start(Errno),
    /// It could not leave the caller's reach (real uid, session,
    /// scheduling): the work was not run.
    Setup(&'static str, Errno),
    /// It ended before the work returned (a signal from root, or the work
    /// aborted): the memory it shares with the launch may be half-changed,
    /// so the launch must end at once (`exit_now`), touching nothing.
    Died(i32),
}

impl std::fmt::Display for OwnSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OwnSession::Start(e) => write!(f, "cannot start root's work in a session of its own: {e}"),
            OwnSession::Setup(what, e) => {
                write!(f, "root's work in a session of its own: {what} failed: {e}")
            }
            OwnSession::Died(status) => write!(
                f,
                "root's work in a session of its own ended before it was done (wait status {status:#x})"
            ),
        }
    }
}

/// What the launch and the work share while the work runs.
struct Shared<F, T> {
    work: Option<F>,
    setup: Setup,
    out: Option<T>,
    failed: Option<(&'static str, Errno)>,
}

/// The work's first function, on its own stack.
extern "C" fn entry<F: FnOnce() -> T, T>(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Shared<F, T>` of `run`, which lives on the
    // launch's stack until this process has ended (the launch is suspended
    // meanwhile: CLONE_VFORK), and nothing else touches it meanwhile.
    let shared = unsafe { &mut *(arg as *mut Shared<F, T>) };
    match (shared.setup)() {
        Ok(()) => {
            if let Some(work) = shared.work.take() {
                shared.out = Some(work());
            }
        }
        Err(e) => shared.failed = Some(e),
    }
    // SAFETY: _exit ends this process at once: no destructor, atexit
    // handler or stdio flush runs on the memory it shares with the launch.
    unsafe { libc::_exit(0) }
}

/// What the work's process does before the work: the system call that
/// failed, if one did.
pub type Setup = fn() -> Result<(), (&'static str, Errno)>;

/// The [`Setup`] of root's work: real uid 0 first (from then on the caller
/// can send it no signal), a session of its own (and with it an autogroup
/// of its own, at nice 0), then the root phase's scheduling (SCHED_OTHER,
/// nice 0, the default I/O priority, every CPU the process may use, the
/// default timer slack). Needs an effective uid of 0 and CAP_SYS_NICE.
pub(crate) fn leave_the_callers_reach() -> Result<(), (&'static str, Errno)> {
    super::set_real_uid(super::Uid::ROOT).map_err(|e| ("setresuid", e))?;
    rustix::process::setsid().map_err(|e| ("setsid", e))?;
    super::process_state::set_root_scheduling().map_err(|e| ("resetting the scheduling", e))?;
    super::process_state::set_default_timer_slack().map_err(|e| ("prctl(PR_SET_TIMERSLACK)", e))
}

/// Runs `work` in a process of its own after `setup` (in that process:
/// [`leave_the_callers_reach`] for root's work), and returns what it
/// returned. The launch is suspended until the work is done. `work` must
/// not end the process (it would end the work's process only, leaving the
/// shared memory as it was then).
pub(crate) fn in_own_session<T, F: FnOnce() -> T>(setup: Setup, work: F) -> Result<T, OwnSession> {
    let stack = Stack::map(STACK_BYTES).map_err(OwnSession::Start)?;
    let mut shared = Shared {
        work: Some(work),
        setup,
        out: None,
        failed: None,
    };
    let arg = &mut shared as *mut Shared<F, T> as *mut c_void;
    let flags = libc::CLONE_VM | libc::CLONE_FILES | libc::CLONE_VFORK | libc::SIGCHLD;
    // SAFETY: the child runs `entry` on `stack` (mapped, writable, its top
    // 16-byte aligned, unmapped only after the child has ended) with `arg`
    // pointing at `shared`, alive on this stack frame until after the
    // child has ended: with CLONE_VFORK this thread is suspended until the
    // child exits, so the child is the only one to run this thread's code
    // and touch its memory meanwhile (sharing its thread-local storage as
    // this thread's continuation would). CLONE_FILES shares descriptors;
    // no CLONE_FS, CLONE_SIGHAND or CLONE_THREAD: the child's working
    // directory, signal dispositions and thread group are its own.
    let pid = unsafe { libc::clone(entry::<F, T>, stack.top(), flags, arg) };
    if pid < 0 {
        return Err(OwnSession::Start(super::last_errno()));
    }
    let status = reap_status(pid);
    drop(stack);
    // SAFETY: the child has ended (reaped above); `shared` is ours again.
    // Read through the pointer the child was given, which the compiler
    // knows escaped into `clone`.
    let shared = unsafe { &mut *(arg as *mut Shared<F, T>) };
    if let Some((what, e)) = shared.failed.take() {
        return Err(OwnSession::Setup(what, e));
    }
    match shared.out.take() {
        Some(out) if status == 0 => Ok(out),
        _ => Err(OwnSession::Died(status)),
    }
}

/// Waits for the child `pid` and reaps it: its wait status.
fn reap_status(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: waits for a child of this process; `status` is a valid
    // out-pointer for the call.
    while unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } < 0 {
        if super::last_errno() != Errno::INTR {
            return -1;
        }
    }
    status
}

/// A private anonymous mapping used as a stack, with a guard page at its
/// low end.
struct Stack {
    base: *mut c_void,
    len: usize,
}

impl Stack {
    fn map(len: usize) -> SysResult<Stack> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched. MAP_NORESERVE: pages are committed only when used.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(super::last_errno());
        }
        let stack = Stack { base, len };
        // SAFETY: the first page of the mapping made above; a fault there
        // (stack overflow) ends the child instead of running into other
        // memory.
        if unsafe { libc::mprotect(base, 4096, libc::PROT_NONE) } != 0 {
            return Err(super::last_errno());
        }
        Ok(stack)
    }

    /// The initial stack pointer: the high end (stacks grow down), 16-byte
    /// aligned (the mapping is page-aligned).
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, as `clone` expects.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`, once, after
        // the child that used it has ended.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_setup() -> Result<(), (&'static str, Errno)> {
        Ok(())
    }

    #[test]
    fn the_work_runs_in_another_process_sharing_memory_and_descriptors() {
        let me = std::process::id();
        let mut seen = Vec::new();
        let (pid, fd) = in_own_session(no_setup, || {
            seen.push(1);
            let fd = rustix::fs::openat(
                rustix::fs::CWD,
                "/",
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .expect("open /");
            (std::process::id(), fd)
        })
        .expect("the work");
        assert_ne!(pid, me, "it ran in another process");
        assert_eq!(seen, [1], "what it changed is ours");
        // Its descriptor is in our table.
        assert!(rustix::fs::fstat(&fd).is_ok());
    }

    #[test]
    fn a_setup_that_fails_runs_no_work() {
        fn fails() -> Result<(), (&'static str, Errno)> {
            Err(("setup", Errno::PERM))
        }
        let mut ran = false;
        let r = in_own_session(fails, || ran = true);
        assert_eq!(r, Err(OwnSession::Setup("setup", Errno::PERM)));
        assert!(!ran);
    }
}
