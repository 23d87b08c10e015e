//! Running commands: with a time limit, and reading what they said.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The time limit of [`run`] and [`must`].
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(120);

/// Runs `cmd` (stdin from /dev/null, stdout and stderr captured) in a
/// process group of its own; if it takes longer than `limit`, kills that
/// group and panics naming the command. The wait ends when the command
/// does (its pidfd), not at the next tick of a poll.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Output {
    let child = start(cmd, true).unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    finish(&format!("{cmd:?}"), child, limit, false)
}

/// [`run`], or `None` when the command cannot be started (a tool that is
/// not installed).
pub fn try_run(cmd: &mut Command) -> Option<Run> {
    let child = start(cmd, true).ok()?;
    let out = finish(&format!("{cmd:?}"), child, DEFAULT_LIMIT, false);
    Some(Run::of(cmd, out))
}

/// Starts `cmd` as [`run`] does, without waiting: for commands that run
/// side by side. [`Started::wait`] gives its [`Run`]. It stays in the
/// test's process group: a group of its own would be orphaned when it
/// ends, and the kernel would then wake (SIGHUP, SIGCONT) any member a
/// test stopped.
pub fn spawn(cmd: &mut Command) -> Started {
    let child = start(cmd, false).unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    Started {
        child,
        what: format!("{cmd:?}"),
    }
}

/// A command started by [`spawn`].
pub struct Started {
    child: std::process::Child,
    what: String,
}

impl Started {
    /// Its process id (and process group id).
    pub fn id(&self) -> u32 {
        self.child.id()
    }
    /// What it did, once it ends (within [`DEFAULT_LIMIT`], or the
    /// command is killed and this panics). Its stdout and stderr must
    /// close with it: a process it left holding them fails this (as a
    /// wait for the pipes' end would have hung).
    pub fn wait(self) -> Run {
        let out = finish(&self.what, self.child, DEFAULT_LIMIT, true);
        Run(out, self.what)
    }
}

/// `cmd` started with stdin from /dev/null, stdout and stderr piped, in a
/// process group of its own when `own_group`.
fn start(cmd: &mut Command, own_group: bool) -> std::io::Result<std::process::Child> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if own_group {
        cmd.process_group(0);
    }
    cmd.spawn()
}

/// The output of `child` (started from `cmd`), within `limit`.
/// `strict` is for a command [`spawn`] started (in the test's process
/// group, so no group is killed). With `strict`, a process the command left behind that still holds its
/// stdout or stderr 5 s after it ended is a failure (killed, then this
/// panics naming the command); else it is killed and the output so far
/// returned.
fn finish(cmd: &str, mut child: std::process::Child, limit: Duration, strict: bool) -> Output {
    let (tx, rx) = mpsc::channel::<()>();
    let reader = |mut from: Box<dyn Read + Send>, tx: mpsc::Sender<()>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = from.read_to_end(&mut v);
            let _ = tx.send(());
            v
        })
    };
    let t_out = reader(Box::new(child.stdout.take().expect("stdout")), tx.clone());
    let t_err = reader(Box::new(child.stderr.take().expect("stderr")), tx);
    if !crate::ends::wait_ended(&[child.id()], limit).is_empty() {
        if !strict {
            kill_group(child.id());
        }
        // (Not a group leader when started by `spawn`: `strict`.)
        let _ = child.kill();
        let _ = child.wait();
        // What it said so far; a process outside its group (one that made
        // a group of its own) may hold the pipes: not waited for.
        let _ = rx.recv_timeout(Duration::from_secs(2));
        let _ = rx.recv_timeout(Duration::from_secs(1));
        let said = |t: std::thread::JoinHandle<Vec<u8>>| {
            if t.is_finished() {
                t.join().unwrap_or_default()
            } else {
                b"(still held open by a process outside the command's group)".to_vec()
            }
        };
        let (o, e) = (said(t_out), said(t_err));
        panic!(
            "{cmd} did not finish within {limit:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&e)
        );
    }
    let status = child.wait().expect("wait");
    // The group's other members (e.g. a daemonised grandchild) may still
    // hold the pipes: do not wait for them forever.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut closed = 0;
    while closed < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(()) => closed += 1,
            Err(_) => {
                if !strict {
                    kill_group(child.id());
                }
                assert!(
                    !strict,
                    "{cmd} ended ({status}), but a process it left behind still held its stdout or stderr 5 s later"
                );
                break;
            }
        }
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
    run_for(cmd, DEFAULT_LIMIT)
}

/// [`run_with_timeout`] with `limit`, as a [`Run`] that names the command.
pub fn run_for(cmd: &mut Command, limit: Duration) -> Run {
    let out = run_with_timeout(cmd, limit);
    Run::of(cmd, out)
}

/// Runs `cmd` and panics (naming it, with its status and output) unless
/// it succeeds.
#[track_caller]
pub fn ok(cmd: &mut Command) -> Run {
    let r = run(cmd);
    r.ok();
    r
}

/// A shell command line (as the current user).
pub fn sh(script: &str) -> Run {
    run(Command::new("sh").args(["-c", script]))
}

/// A setup step that must succeed.
#[track_caller]
pub fn must(script: &str) {
    sh(script).ok();
}

/// What a command did (`.0`), and which command it was (`.1`, the
/// command line as `{:?}` shows it; empty when it is not known).
pub struct Run(pub Output, pub String);

impl Run {
    /// The output of `cmd`.
    pub fn of(cmd: &Command, out: Output) -> Run {
        Run(out, format!("{cmd:?}"))
    }
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
    /// Panics unless the command succeeded, naming it, its status, its
    /// stdout and its stderr.
    #[track_caller]
    pub fn ok(&self) -> &Self {
        assert!(self.success(), "expected success: {self:?}");
        self
    }
    /// [`Run::ok`], with `what` (the step, in the test's words) first in
    /// the message.
    #[track_caller]
    pub fn ok_as(&self, what: &str) -> &Self {
        assert!(self.success(), "{what}: expected success: {self:?}");
        self
    }
    /// Panics unless the command succeeded with nothing on stderr.
    #[track_caller]
    pub fn quiet(&self) -> &Self {
        assert!(
            self.success() && self.0.stderr.is_empty(),
            "expected a quiet success: {self:?}"
        );
        self
    }
    /// Panics if the command succeeded.
    #[track_caller]
    pub fn fails(&self) -> &Self {
        assert!(!self.success(), "expected a failure: {self:?}");
        self
    }
    /// Refused by squashfs-mount itself: exit 1, one line on stderr that
    /// contains every word of `needles`, and no internal error.
    #[track_caller]
    pub fn refused(&self, needles: &[&str]) -> &Self {
        let err = self.stderr();
        assert_eq!(self.code(), Some(1), "expected exit 1: {self:?}");
        assert!(!err.contains("internal error"), "panic: {self:?}");
        assert!(err.starts_with("squashfs-mount: "), "{self:?}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "more than one line: {self:?}"
        );
        for n in needles {
            assert!(err.contains(n), "stderr lacks {n:?}: {self:?}");
        }
        self
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.1.is_empty() {
            writeln!(f, "{}", self.1)?;
        }
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
