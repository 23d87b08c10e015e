//! Running commands: with a time limit, and reading what they said.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The time limit of [`run`] and [`must`].
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(120);

/// Runs `cmd` (stdin from /dev/null, stdout and stderr captured) in a
/// process group of its own; if it takes longer than `limit`, kills that
/// group and panics naming the command.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if started.elapsed() > limit {
            kill_group(child.id());
            let _ = child.wait();
            let (o, e) = (
                t_out.join().unwrap_or_default(),
                t_err.join().unwrap_or_default(),
            );
            panic!(
                "{cmd:?} did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&o),
                String::from_utf8_lossy(&e)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The group's other members (e.g. a daemonised grandchild) may still
    // hold the pipes: do not wait for them forever.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(t_out.is_finished() && t_err.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !(t_out.is_finished() && t_err.is_finished()) {
        kill_group(child.id());
    }
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// SIGKILL to the process group `pgid`.
pub fn kill_group(pgid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// [`run_with_timeout`] with [`DEFAULT_LIMIT`], as a [`Run`].
pub fn run(cmd: &mut Command) -> Run {
    Run(run_with_timeout(cmd, DEFAULT_LIMIT))
}

/// Runs `cmd` and panics (with its output) unless it succeeds.
#[track_caller]
pub fn ok(cmd: &mut Command) -> Output {
    let o = run_with_timeout(cmd, DEFAULT_LIMIT);
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A shell command line (as the current user).
pub fn sh(script: &str) -> Run {
    run(Command::new("sh").args(["-c", script]))
}

/// A setup step that must succeed.
#[track_caller]
pub fn must(script: &str) {
    let r = sh(script);
    assert!(
        r.0.status.success(),
        "setup command failed: {script}\n{}{}",
        r.stdout(),
        r.stderr()
    );
}

/// What a command did.
pub struct Run(pub Output);

impl Run {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.0.status.code()
    }
    pub fn success(&self) -> bool {
        self.0.status.success()
    }
    /// Panics unless the command succeeded.
    #[track_caller]
    pub fn ok(&self) -> &Self {
        assert!(
            self.0.status.success(),
            "expected success, got {:?}\nstdout: {}\nstderr: {}",
            self.0.status,
            self.stdout(),
            self.stderr()
        );
        self
    }
    /// Refused by squashfs-mount itself: exit 1, one line on stderr that
    /// contains every word of `needles`, and no internal error.
    #[track_caller]
    pub fn refused(&self, needles: &[&str]) -> &Self {
        let err = self.stderr();
        assert_eq!(
            self.code(),
            Some(1),
            "expected exit 1\nstdout: {}\nstderr: {err}",
            self.stdout()
        );
        assert!(!err.contains("internal error"), "panic: {err}");
        assert!(err.starts_with("squashfs-mount: "), "stderr: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "more than one line: {err}"
        );
        for n in needles {
            assert!(err.contains(n), "stderr lacks {n:?}: {err}");
        }
        self
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}\nstdout: {}\nstderr: {}",
            self.0.status,
            self.stdout(),
            self.stderr()
        )
    }
}

/// Polls `cond` every 20 ms for up to `limit`; panics naming `what` when
/// it never holds.
#[track_caller]
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
