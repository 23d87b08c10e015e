//! The server as a process: how many workers it starts, whether it may
//! start any, detaching from the launch (`--detached`), where its messages
//! go, and how it ends when its connection does.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use squashfs_reader::table::Source;
use squashfs_reader::{FormatError, ReadAhead};

use crate::server::{End, Fs};
use crate::workers::{self, Pool};
use crate::{log, sys};

/// What `error ...` says: what is wrong and what to do.
pub fn describe(e: &FormatError) -> String {
    let s = match e {
        FormatError::Corrupt { .. } => {
            format!("{e}; the image is damaged: copy it again or rebuild it with mksquashfs")
        }
        FormatError::Io(_) => {
            format!("the image cannot be read ({e}); check the file and the disk")
        }
        _ => e.to_string(),
    };
    s.replace('\n', " ")
}

/// At most `wanted` worker threads, else the number of CPUs (2..8).
pub fn threads(wanted: Option<usize>) -> usize {
    wanted.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8)
    })
}

/// Starts the workers (at most `n`) on `dev`. A worker that sees the
/// connection end exits the process with status 0, unless `stay` (then
/// the main thread decides).
pub fn start_workers<S: Source + Send + Sync + 'static>(
    fs: Arc<Fs<S>>,
    dev: OwnedFd,
    n: usize,
    stay: bool,
) {
    let on_end: workers::OnEnd = if stay { end_stay } else { end_exit };
    Pool::start(fs, dev, n, on_end);
}

/// What the read-ahead may hold: a quarter of the server's cache budget
/// (`--cache-mem`), on top of it: 10 MiB for a server alone, 4 MiB for
/// each of a launch's 4 (squashfs-mount shares 64 MiB among a launch's
/// servers), 0.29 MiB for each of 56.
pub fn read_ahead_budget(cache_bytes: usize) -> usize {
    cache_bytes / 4
}

/// Reads the image's metadata region ahead, in a thread of its own, while
/// the workers answer requests: at most [`read_ahead_budget`] bytes, in
/// large sequential reads, held until the server exits (see
/// `squashfs_reader::readahead`). Nothing is read ahead if the thread
/// cannot start; a failed read ends it (the requests that need those
/// bytes read them and report it).
pub fn read_ahead<S: Source + Send + Sync + 'static>(
    fs: Arc<Fs<ReadAhead<S>>>,
    cache_bytes: usize,
) {
    let region = fs.archive.metadata_region();
    if fs
        .archive
        .source()
        .plan(region, read_ahead_budget(cache_bytes))
        == 0
    {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("read-ahead".into())
        .spawn(move || {
            let _ = fs.archive.source().fill();
        });
}

/// The first worker to see the end says so and ends the process; the
/// others (who may see the same end at the same moment) wait for it, so
/// that the last message is written once.
fn first_to_end() {
    static ENDING: AtomicBool = AtomicBool::new(false);
    if ENDING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

fn end_failed(e: rustix::io::Errno, name: &str) -> ! {
    first_to_end();
    log::message(
        log::Level::Error,
        &format!("squashfs-mount: {name}: the FUSE connection failed: {e}"),
    );
    std::process::exit(1)
}

fn end_exit(end: End, name: &str) {
    match end {
        End::Unmounted => {
            first_to_end();
            if DETACHED.load(Ordering::Relaxed) {
                log::message(
                    log::Level::Info,
                    &format!("{name}: the mount is gone; exiting"),
                );
            }
            std::process::exit(0)
        }
        End::Failed(e) => end_failed(e, name),
    }
}

fn end_stay(end: End, name: &str) {
    if let End::Failed(e) = end {
        end_failed(e, name)
    }
}

/// Why the server cannot start its first thread.
#[derive(Debug)]
pub enum ThreadError {
    /// The user's RLIMIT_NPROC is reached (its value, or "unlimited").
    AtLimit(String),
    Other(std::io::Error),
}

impl std::fmt::Display for ThreadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadError::AtLimit(limit) => write!(
                f,
                "cannot start a FUSE server for you: your processes and threads are at your limit (ulimit -u, {limit}); end some of them, or ask for a higher limit"
            ),
            ThreadError::Other(e) => write!(f, "cannot start a FUSE server: {e}"),
        }
    }
}

impl std::error::Error for ThreadError {}

/// Whether this process may start a thread (its first worker needs one):
/// the kernel checks the user's RLIMIT_NPROC (processes and threads of
/// the real uid) as for any fork of theirs; a server beyond it says so
/// instead of answering ready and ending at its first worker.
pub fn room_for_threads() -> Result<(), ThreadError> {
    match std::thread::Builder::new().spawn(|| {}) {
        Ok(probe) => {
            let _ = probe.join();
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Nproc).current;
            let limit = limit.map_or("unlimited".to_string(), |n| n.to_string());
            Err(ThreadError::AtLimit(limit))
        }
        Err(e) => Err(ThreadError::Other(e)),
    }
}

/// Set once a detached server has detached (for its last message).
static DETACHED: AtomicBool = AtomicBool::new(false);

/// `--detached`: keeps only the named descriptors, stdin, stdout and
/// stderr on /dev/null, a session of its own. Exits 2 on failure (with a
/// message on stderr, before it is replaced).
pub fn detach(keep: &[i32]) {
    let fail = |what: String| -> ! {
        eprintln!("squashfs-mount-fuse: --detached: {what}");
        std::process::exit(2)
    };
    if let Err(e) = sys::close_all_but(keep) {
        fail(e.to_string());
    }
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .unwrap_or_else(|e| fail(format!("cannot open /dev/null: {e}")));
    for (n, r) in [
        (0, rustix::stdio::dup2_stdin(&null)),
        (1, rustix::stdio::dup2_stdout(&null)),
        (2, rustix::stdio::dup2_stderr(&null)),
    ] {
        if let Err(e) = r {
            fail(format!("cannot replace descriptor {n} with /dev/null: {e}"));
        }
    }
    // Not in the launch's session or process group: its terminal's
    // signals (hangup, ^C) do not reach the server. Fails only if this
    // process already leads a group, which is then its own.
    let _ = rustix::process::setsid();
    DETACHED.store(true, Ordering::Relaxed);
}

/// Where messages go: `--log-fd` (made O_APPEND, so that servers sharing
/// a log file keep whole lines), else the system log when detached, else
/// stderr.
pub fn choose_log(log_fd: Option<OwnedFd>, detached: bool) {
    if let Some(fd) = log_fd {
        if let Ok(fl) = rustix::fs::fcntl_getfl(&fd) {
            let _ = rustix::fs::fcntl_setfl(&fd, fl | rustix::fs::OFlags::APPEND);
        }
        log::set(log::Sink::File(File::from(fd)));
    } else if detached {
        log::set(log::Sink::Syslog(log::SYSLOG_SOCKET.into()));
    }
}
