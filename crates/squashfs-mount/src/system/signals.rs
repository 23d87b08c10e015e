//! Signal dispositions.
#![allow(unsafe_code)]

// ---------------------------------------------------------------------------
// Signals and exec
// ---------------------------------------------------------------------------

/// Resets every signal disposition to default and unblocks all signals, so
/// the command starts as if exec'd from a clean shell (the Rust runtime
/// ignores SIGPIPE; a caller may have blocked or ignored signals to disturb
/// us, which must not reach the command either... except that is theirs to
/// choose: we reset to defaults like a fresh process).
pub fn reset_signals() {
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: installing SIG_DFL needs no handler code; an invalid or
        // reserved signal number only makes signal() fail, which we ignore.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    // SAFETY: `set` is a properly initialised sigset_t local; sigprocmask
    // only reads it. The old-set pointer is null (not requested).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Ignores SIGXFSZ (which RLIMIT_FSIZE raises): the privileged phase must
/// not be stopped half-way by a limit the caller set. `reset_signals`
/// restores the default before the command runs.
pub fn ignore_file_size_signal() {
    // SAFETY: installing SIG_IGN needs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
