//! Where a privileged case's time goes, when asked: with
//! `SQFSMNT_TEST_TIMES=<file>` in the environment, [`crate::case`] appends
//! one line per case to `<file>`: the test's name, then each phase and its
//! seconds (`wait` for the serialising lock and the installation, `setup`
//! the user and the cache, `body` the case itself, `teardown` the checks
//! and the user's removal). doc/architecture.md ("Where the minutes of
//! `make test` go") is measured with it. Nothing is written otherwise.

use std::io::Write;
use std::time::Instant;

/// The phases of one case, written when dropped (also when it panics).
pub struct CaseTimes {
    file: Option<std::path::PathBuf>,
    last: Instant,
    phases: Vec<(&'static str, f64)>,
}

impl CaseTimes {
    pub fn start() -> CaseTimes {
        CaseTimes {
            file: std::env::var_os("SQFSMNT_TEST_TIMES").map(Into::into),
            last: Instant::now(),
            phases: Vec::new(),
        }
    }

    /// Ends the phase `name`.
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases
            .push((name, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }
}

impl Drop for CaseTimes {
    fn drop(&mut self) {
        let Some(file) = self.file.take() else {
            return;
        };
        self.mark(if std::thread::panicking() {
            "teardown(failed)"
        } else {
            "teardown"
        });
        let mut line = std::thread::current().name().unwrap_or("?").to_string();
        for (name, secs) in &self.phases {
            line += &format!(" {name}={secs:.3}");
        }
        line.push('\n');
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
