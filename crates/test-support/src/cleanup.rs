//! Removing what tests made at the end of the process ([`at_exit`]); what
//! killed earlier runs left is `stale.rs`'s.
//!
//! Everything a suite makes in /tmp is named `sqfsmnt-it-<pid>...` (or
//! `sqfsmnt-slurm-<pid>-...` for clusters), so a later run recognises it by a
//! pid that no longer runs.

use std::sync::{Mutex, Once};

type Job = Box<dyn FnOnce() + Send>;

static AT_EXIT: Mutex<Vec<Job>> = Mutex::new(Vec::new());
static REGISTER: Once = Once::new();

extern "C" fn run_at_exit() {
    let jobs = std::mem::take(&mut *AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()));
    for job in jobs.into_iter().rev() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

/// Runs `job` when the process exits normally (the test harness returns
/// from `main` or calls `exit`, also after failed tests), last registered
/// first. A process killed by a signal leaves its things to `stale_once`
/// of the next run.
pub fn at_exit(job: impl FnOnce() + Send + 'static) {
    REGISTER.call_once(|| {
        // SAFETY: `run_at_exit` is an `extern "C" fn()` with no arguments that
        // lives for the whole program, as atexit(3) requires.
        unsafe {
            libc::atexit(run_at_exit);
        }
    });
    AT_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(job));
}

/// The directory of this process named `sqfsmnt-it-<pid>-<what>` in /tmp.
pub fn run_dir(what: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/sqfsmnt-it-{}-{what}", std::process::id()))
}
