//! Signal dispositions: the tool changes two, and gives both back before
//! the command runs, so that the command gets the caller's dispositions
//! and mask (`nohup squashfs-mount ...` keeps SIGHUP ignored), as with
//! `env` or `sudo`.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// The caller's SIGPIPE disposition, kept by [`ignore_broken_pipe_signal`]
/// (SIG_DFL or SIG_IGN: the tool starts by exec, which resets handlers).
static CALLER_PIPE: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);

/// Ignores SIGPIPE while the tool runs: a message to a closed pipe fails
/// with EPIPE (ignored) instead of killing the process half-way.
/// [`CallerSignals::restore`] gives the command the caller's disposition.
pub(crate) fn ignore_broken_pipe_signal() {
    // SAFETY: installing SIG_IGN needs no handler code; signal() returns
    // the previous disposition, a plain value.
    let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    if before != libc::SIG_ERR {
        CALLER_PIPE.store(before, Ordering::Relaxed);
    }
}

/// What the caller had for the signals the tool changes.
#[derive(Debug)]
pub struct CallerSignals {
    /// None: SIGXFSZ was not changed.
    file_size: Option<libc::sighandler_t>,
}

/// Ignores SIGXFSZ (which RLIMIT_FSIZE raises): the privileged phase must
/// not be stopped half-way by a limit the caller set. Returns the caller's
/// disposition, for [`CallerSignals::restore`].
pub(crate) fn ignore_file_size_signal() -> CallerSignals {
    // SAFETY: installing SIG_IGN needs no handler code; signal() returns
    // the previous disposition, a plain value.
    let file_size = unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    CallerSignals {
        file_size: Some(if file_size == libc::SIG_ERR {
            libc::SIG_DFL
        } else {
            file_size
        }),
    }
}

impl CallerSignals {
    /// The dispositions of a launch that changed nothing.
    pub(crate) fn unchanged() -> CallerSignals {
        CallerSignals { file_size: None }
    }

    /// Before exec: SIGXFSZ and SIGPIPE as the caller had them (SIGPIPE
    /// was ignored since start, see [`ignore_broken_pipe_signal`]). Every
    /// other disposition and the signal mask were never changed.
    pub(crate) fn restore(&self) {
        // SAFETY: installing SIG_DFL, SIG_IGN or the caller's previous
        // disposition (the tool installs no handler of its own, so that
        // is SIG_DFL or SIG_IGN) needs no handler code.
        unsafe {
            if let Some(file_size) = self.file_size {
                libc::signal(libc::SIGXFSZ, file_size);
            }
            libc::signal(libc::SIGPIPE, CALLER_PIPE.load(Ordering::Relaxed));
        }
    }
}

/// Makes `command` start with the caller's SIGPIPE disposition: Rust's
/// `Command` sets SIGPIPE to the default in the child just before exec
/// (it assumes its own runtime ignored it), after which the hooks given to
/// `pre_exec` run; this hook sets the caller's disposition again.
pub(crate) fn keep_callers_pipe_signal(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let caller = CALLER_PIPE.load(Ordering::Relaxed);
    // SAFETY: the hook runs in the child between fork (or vfork) and exec;
    // it only calls signal(2) with SIG_DFL or SIG_IGN (a plain value, no
    // handler code), which is async-signal-safe, and touches no memory
    // but its captured integer.
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGPIPE, caller);
            Ok(())
        });
    }
}

/// The terminal's stop signals (^Z, background reads and writes), which the
/// terminal sends to the foreground process group whoever its members are.
const JOB_CONTROL: [libc::c_int; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// The calling thread's signal mask before [`block_job_control`].
pub struct SignalMask(libc::sigset_t);

/// Blocks SIGTSTP, SIGTTIN and SIGTTOU for the calling thread (a stop that
/// arrives meanwhile waits until [`SignalMask::restore`]). Returns the mask
/// before.
pub(crate) fn block_job_control() -> super::SysResult<SignalMask> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before
    // sigaddset and pthread_sigmask read it; `old` is written by
    // pthread_sigmask before it is read. No handler is involved.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        for s in JOB_CONTROL {
            libc::sigaddset(&mut block, s);
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        if rc != 0 {
            return Err(rustix::io::Errno::from_raw_os_error(rc));
        }
        Ok(SignalMask(old))
    }
}

impl SignalMask {
    /// Gives the calling thread this mask again.
    pub(crate) fn restore(&self) {
        // SAFETY: the set was filled by pthread_sigmask in
        // `block_job_control`; a null old-set pointer is allowed.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}
