//! squashfs-mount-fuse: serves one SquashFS image, read-only, over a FUSE
//! connection that squashfs-mount created (or, with `--mount`, that
//! fusermount3 creates). Runs with the caller's credentials; never mounts
//! anything itself in the first form. See `--help` and doc/fuse.md.
#![deny(unsafe_code)]

use squashfs_mount_fuse::{log, mount, server, sys, workers};

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use squashfs_reader::{Archive, FileSource, FormatError};

use server::{End, Fs};
use workers::Pool;

type FileFs = Fs<FileSource>;

const USAGE: &str = "\
usage: squashfs-mount-fuse [--run-as UID:GID:GROUPS] --fuse-fd N --image-fd M --ready-fd R [--watch-pidfd P | --detached] [--log-fd L] [--threads T] [--owner UID:GID] [--name NAME]
       squashfs-mount-fuse --mount IMAGE DIR [--threads T] [-- COMMAND [ARGS...]]

Serves a SquashFS image read-only over FUSE, in userspace, with the
credentials it is started with. Safe on corrupt or hostile images: every
structure is checked; corruption makes the affected operations fail with EIO.

The first form is how squashfs-mount runs it (installed as
<prefix>/lib/squashfs-mount/squashfs-mount-fuse): squashfs-mount creates the
FUSE mount and passes the inherited descriptors:
  --run-as U:G:GS   first, when started as root: become uid U, gid G and
                    groups GS (comma-separated) for good, not dumpable,
                    with no_new_privs, before anything else
  --fuse-fd N       the /dev/fuse descriptor of the mount
  --image-fd M      the image, opened for reading
  --ready-fd R      receives one line once the image is checked: 'ready' or
                    'error <what is wrong and what to do>' (then exit 1)
  --watch-pidfd P   a pidfd; the server exits when that process exits
  --detached        outlive the launch that started it (a cached instance):
                    no --watch-pidfd; it starts a new session, replaces
                    stdin, stdout and stderr with /dev/null, closes every
                    other descriptor but the ones named here, and exits
                    when the mount is gone or on SIGTERM (also SIGINT,
                    SIGHUP); messages go to --log-fd, else to the system
                    log (/dev/log, if there is one)
  --log-fd L        write messages to L (one line each, with the time and
                    the server's pid), not to stderr; made O_APPEND,
                    emptied before a line would take it past 1 MiB, and
                    the only file the server may write (RLIMIT_FSIZE)
  --threads T       at most T worker threads (0 or absent: the number of
                    CPUs, 2..8); one at first, more only while requests
                    queue up
  --owner UID:GID   show every file as owned by UID:GID (rootless mode: the
                    user namespace maps no other ids)
  --name NAME       the image's name in messages (default: the path of the
                    image descriptor, which other users cannot see)
It serves until the file system is unmounted or the watched process exits,
then exits 0. Nothing is printed unless the image turns out to be corrupt
(a detached server also logs one line when it starts and one when it
exits). Its memory use: VmRSS in /proc/PID/status.

The second form mounts IMAGE on DIR as an unprivileged user through
fusermount3 (Debian package fuse3), for development, tests and benchmarks.
Without COMMAND it serves in the foreground until 'fusermount3 -u DIR' or
SIGINT/SIGTERM/SIGHUP (it unmounts then; after SIGKILL, run
'fusermount3 -u DIR'). With COMMAND it runs it, unmounts, and exits with its
status.
";

struct Args {
    fuse_fd: Option<i32>,
    image_fd: Option<i32>,
    ready_fd: Option<i32>,
    watch_pidfd: Option<i32>,
    detached: bool,
    log_fd: Option<i32>,
    threads: Option<usize>,
    owner: Option<(u32, u32)>,
    name: Option<String>,
    mount: Option<(PathBuf, PathBuf)>,
    command: Vec<std::ffi::OsString>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        fuse_fd: None,
        image_fd: None,
        ready_fd: None,
        watch_pidfd: None,
        detached: false,
        log_fd: None,
        threads: None,
        owner: None,
        name: None,
        mount: None,
        command: Vec::new(),
    };
    let mut it = std::env::args_os().skip(1).peekable();
    // Done by `become_caller` before anything else.
    if it.peek().is_some_and(|a| a == "--run-as") {
        it.nth(1);
    }
    let num = |v: Option<std::ffi::OsString>, opt: &str| -> Result<i32, String> {
        let v = v.ok_or_else(|| format!("{opt} needs a value"))?;
        v.to_str()
            .and_then(|s| s.parse::<i32>().ok())
            .filter(|&n| n >= 0)
            .ok_or_else(|| format!("{opt}: not a descriptor number: {}", v.to_string_lossy()))
    };
    while let Some(arg) = it.next() {
        match arg.to_str().unwrap_or("") {
            "--fuse-fd" => a.fuse_fd = Some(num(it.next(), "--fuse-fd")?),
            "--image-fd" => a.image_fd = Some(num(it.next(), "--image-fd")?),
            "--ready-fd" => a.ready_fd = Some(num(it.next(), "--ready-fd")?),
            "--watch-pidfd" => a.watch_pidfd = Some(num(it.next(), "--watch-pidfd")?),
            "--detached" => a.detached = true,
            "--log-fd" => a.log_fd = Some(num(it.next(), "--log-fd")?),
            "--threads" => {
                let n = num(it.next(), "--threads")?;
                if n > 64 {
                    return Err(format!("--threads: {n} is more than 64"));
                }
                // 0: the default.
                a.threads = (n > 0).then_some(n as usize);
            }
            "--owner" => {
                let v = it.next().ok_or("--owner needs UID:GID")?;
                let v = v.to_string_lossy();
                let (u, g) = v
                    .split_once(':')
                    .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)))
                    .ok_or_else(|| format!("--owner: not UID:GID: {v}"))?;
                a.owner = Some((u, g));
            }
            "--run-as" => return Err("--run-as must come first".into()),
            "--name" => {
                a.name = Some(
                    it.next()
                        .ok_or("--name needs a value")?
                        .to_string_lossy()
                        .into_owned(),
                )
            }
            "--mount" => {
                let image = it.next().ok_or("--mount needs IMAGE and DIR")?;
                let dir = it.next().ok_or("--mount needs IMAGE and DIR")?;
                a.mount = Some((image.into(), dir.into()));
            }
            "--" => {
                a.command = it.by_ref().collect();
                if a.command.is_empty() {
                    return Err("no command after --".into());
                }
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            "-V" | "--version" => {
                println!("squashfs-mount-fuse {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {}", arg.to_string_lossy())),
        }
    }
    Ok(a)
}

/// What `error ...` says: what is wrong and what to do.
fn describe(e: &FormatError) -> String {
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

fn threads(a: &Args) -> usize {
    a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 8)
    })
}

/// Starts the workers (at most `n`) on `dev`. A worker that sees the
/// connection end exits the process with status 0, unless `stay` (then
/// the main thread decides).
fn start_workers(fs: Arc<FileFs>, dev: OwnedFd, n: usize, stay: bool) {
    let on_end: workers::OnEnd = if stay { end_stay } else { end_exit };
    Pool::start(fs, dev, n, on_end);
}

/// The first worker to see the end says so and ends the process; the
/// others (who may see the same end at the same moment) wait for it, so
/// that the last message is written once.
fn first_to_end() {
    static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if ENDING.swap(true, std::sync::atomic::Ordering::SeqCst) {
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
            if DETACHED.load(std::sync::atomic::Ordering::Relaxed) {
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

/// Whether this process may start a thread (its first worker needs one):
/// the kernel checks the user's RLIMIT_NPROC (processes and threads of
/// the real uid) as for any fork of theirs; a server beyond it says so
/// instead of answering ready and ending at its first worker.
fn room_for_threads() -> Result<(), String> {
    match std::thread::Builder::new().spawn(|| {}) {
        Ok(probe) => {
            let _ = probe.join();
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Nproc).current;
            let limit = limit.map_or("unlimited".to_string(), |n| n.to_string());
            Err(format!(
                "cannot start a FUSE server for you: your processes and threads are at your limit (ulimit -u, {limit}); end some of them, or ask for a higher limit"
            ))
        }
        Err(e) => Err(format!("cannot start a FUSE server: {e}")),
    }
}

/// Set once a detached server has detached (for its last message).
static DETACHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--detached`: keeps only the named descriptors, stdin, stdout and
/// stderr on /dev/null, a session of its own. Exits 2 on failure (with a
/// message on stderr, before it is replaced).
fn detach(keep: &[i32]) {
    let fail = |what: String| -> ! {
        eprintln!("squashfs-mount-fuse: --detached: {what}");
        std::process::exit(2)
    };
    if let Err(e) = sys::close_all_but(keep) {
        fail(e);
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
    DETACHED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Where messages go: `--log-fd` (made O_APPEND, so that servers sharing
/// a log file keep whole lines), else the system log when detached, else
/// stderr.
fn choose_log(log_fd: Option<OwnedFd>, detached: bool) {
    if let Some(fd) = log_fd {
        if let Ok(fl) = rustix::fs::fcntl_getfl(&fd) {
            let _ = rustix::fs::fcntl_setfl(&fd, fl | rustix::fs::OFlags::APPEND);
        }
        log::set(log::Sink::File(File::from(fd)));
    } else if detached {
        log::set(log::Sink::Syslog(log::SYSLOG_SOCKET.into()));
    }
}

fn serve_fds(a: Args) -> ExitCode {
    let (Some(fuse), Some(image), Some(ready)) = (a.fuse_fd, a.image_fd, a.ready_fd) else {
        eprintln!("squashfs-mount-fuse: --fuse-fd, --image-fd and --ready-fd are required (or --mount)\n\n{USAGE}");
        return ExitCode::from(2);
    };
    if a.detached && a.watch_pidfd.is_some() {
        eprintln!(
            "squashfs-mount-fuse: --detached and --watch-pidfd exclude each other\n\n{USAGE}"
        );
        return ExitCode::from(2);
    }
    let mut numbers = vec![fuse, image, ready];
    numbers.extend(a.watch_pidfd);
    numbers.extend(a.log_fd);
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != numbers.len() {
        eprintln!("squashfs-mount-fuse: the descriptor numbers must differ");
        return ExitCode::from(2);
    }
    let adopt = |n, what| {
        sys::adopt_fd(n, what).unwrap_or_else(|e| {
            eprintln!("squashfs-mount-fuse: {e}");
            std::process::exit(2)
        })
    };
    let ready = File::from(adopt(ready, "--ready-fd"));
    let fuse = adopt(fuse, "--fuse-fd");
    // The image's path for messages, from the kernel, not the command
    // line (which every user can read).
    let name = a.name.clone().unwrap_or_else(|| {
        std::fs::read_link(format!("/proc/self/fd/{image}"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "image".into())
    });
    let image = File::from(adopt(image, "--image-fd"));
    let watch = a.watch_pidfd.map(|n| adopt(n, "--watch-pidfd"));
    let log_fd = a.log_fd.map(|n| adopt(n, "--log-fd"));
    if a.detached {
        detach(&numbers);
    }
    if log_fd.is_some() {
        // The log is the only file this server writes: the kernel keeps
        // it within its limit, before any input is read.
        if let Err(e) = sys::cap_file_size(log::FILE_LIMIT + 4096) {
            eprintln!("squashfs-mount-fuse: {e}");
            return ExitCode::from(2);
        }
    }
    choose_log(log_fd, a.detached);
    let archive = FileSource::new(image)
        .map_err(|e| FormatError::Io(e.to_string()))
        .and_then(Archive::open);
    let mut ready = ready;
    let archive = match archive {
        Ok(ar) => ar,
        Err(e) => {
            let _ = ready.write_all(format!("error {}\n", describe(&e)).as_bytes());
            return ExitCode::from(1);
        }
    };
    // Started as root for its user, this process was not counted against
    // the user's process limit when it was forked: its first thread is.
    if let Err(why) = room_for_threads() {
        let _ = ready.write_all(format!("error {why}\n").as_bytes());
        return ExitCode::from(1);
    }
    if ready.write_all(b"ready\n").is_err() {
        return ExitCode::from(1);
    }
    drop(ready);
    let n = threads(&a);
    let mut fs = Fs::new(archive, name.clone());
    fs.owner = a.owner;
    if a.detached {
        // Blocked before the workers start, so that they inherit the mask
        // and only this thread takes the signal.
        sys::block_termination();
        log::message(
            log::Level::Info,
            &format!("{name}: serving (at most {n} threads)"),
        );
        start_workers(Arc::new(fs), fuse, n, false);
        let sig = sys::wait_termination();
        log::message(
            log::Level::Info,
            &format!("{name}: {sig}; exiting (the mount stays until it is unmounted; its users get ENOTCONN)"),
        );
        std::process::exit(0);
    }
    start_workers(Arc::new(fs), fuse, n, false);
    match watch {
        Some(pidfd) => loop {
            let mut p = [rustix::event::PollFd::new(
                &pidfd,
                rustix::event::PollFlags::IN,
            )];
            match rustix::event::poll(&mut p, None) {
                Ok(_) if !p[0].revents().is_empty() => std::process::exit(0),
                Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    eprintln!("squashfs-mount-fuse: cannot watch the process: {e}");
                    std::process::exit(1)
                }
            }
        },
        None => loop {
            std::thread::park();
        },
    }
}

fn serve_mount(a: Args, image: PathBuf, dir: PathBuf) -> ExitCode {
    let shown = image.display().to_string();
    let fail = |msg: String| -> ExitCode {
        eprintln!("squashfs-mount-fuse: {shown}: {msg}");
        ExitCode::from(1)
    };
    let file = match File::open(&image) {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot open it: {e}")),
    };
    let archive = match FileSource::new(file)
        .map_err(|e| FormatError::Io(e.to_string()))
        .and_then(Archive::open)
    {
        Ok(ar) => ar,
        Err(e) => return fail(describe(&e)),
    };
    // Root with a command mounts directly (no helper process, as libfuse
    // does for root); otherwise fusermount3.
    let direct = rustix::process::geteuid().is_root() && !a.command.is_empty();
    let (fuse, helper) = if direct {
        match mount::direct_mount(&dir, &shown, server::MAX_READ) {
            Ok(fd) => (fd, None),
            Err(e) => return fail(e),
        }
    } else {
        match mount::fusermount(&dir, &shown, server::MAX_READ) {
            Ok((fd, keep, child)) => (fd, Some((keep, child))),
            Err(e) => return fail(e),
        }
    };
    let n = threads(&a);
    if a.command.is_empty() {
        // Served until `fusermount3 -u` (a worker then exits the process) or
        // until SIGINT/SIGTERM/SIGHUP, which unmount first: fusermount3's
        // auto_unmount watcher cannot look into a mount without allow_other,
        // so it would leave a dead mount behind. (SIGKILL still does.)
        sys::block_termination();
        start_workers(Arc::new(Fs::new(archive, shown.clone())), fuse, n, false);
        sys::wait_termination();
        match helper {
            None => mount::direct_unmount(&dir),
            Some((keep, mut child)) => {
                mount::fuseunmount(&dir);
                drop(keep);
                let _ = child.wait();
            }
        }
        return ExitCode::SUCCESS;
    }
    start_workers(Arc::new(Fs::new(archive, shown.clone())), fuse, n, true);
    let status = std::process::Command::new(&a.command[0])
        .args(&a.command[1..])
        .status();
    match helper {
        None => mount::direct_unmount(&dir),
        Some((keep, mut child)) => {
            // fusermount3's auto_unmount watcher only unmounts a dead
            // connection: unmount now, then let the watcher go.
            mount::fuseunmount(&dir);
            drop(keep);
            let _ = child.wait();
        }
    }
    match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            let code = s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0));
            ExitCode::from(code.clamp(0, 255) as u8)
        }
        Err(e) => {
            eprintln!(
                "squashfs-mount-fuse: cannot run {}: {e}",
                a.command[0].to_string_lossy()
            );
            ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            })
        }
    }
}

/// `--run-as UID:GID:GROUPS` (only as the first argument): started as
/// root by squashfs-mount, become the caller before reading any input.
fn become_caller() -> Result<(), String> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != "--run-as") {
        return Ok(());
    }
    let spec = args.next().ok_or("--run-as needs UID:GID:GROUPS")?;
    let spec = spec.to_string_lossy();
    let bad = || format!("--run-as: not UID:GID:GROUPS: {spec}");
    let mut parts = spec.splitn(3, ':');
    let mut id = || parts.next().and_then(|v| v.parse::<u32>().ok());
    let (uid, gid) = (id().ok_or_else(bad)?, id().ok_or_else(bad)?);
    let groups = parts.next().ok_or_else(bad)?;
    let groups: Vec<u32> = groups
        .split(',')
        .filter(|g| !g.is_empty())
        .map(|g| g.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    sys::become_user(uid, gid, &groups)
}

fn main() -> ExitCode {
    if let Err(e) = become_caller() {
        eprintln!("squashfs-mount-fuse: {e}");
        return ExitCode::from(126);
    }
    sys::set_process_name();
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("squashfs-mount-fuse: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match a.mount.clone() {
        Some((image, dir)) => serve_mount(a, image, dir),
        None => serve_fds(a),
    }
}
