//! Loud skips, and the questions that decide them.

use std::io::Write;
use std::process::Command;

/// Says that a test (or part of one) was skipped, on the real standard
/// error: the test harness captures `eprintln!` of passing tests, a write
/// to `std::io::stderr()` it does not.
pub fn loud_skip(msg: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {msg} ***\n");
}

/// Whether this process runs with effective uid 0.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether `program` is found in `PATH`.
pub fn have(program: &str) -> bool {
    crate::cmd::try_run(Command::new("sh").args(["-c", &format!("command -v {program}")]))
        .is_some_and(|r| r.success())
}
