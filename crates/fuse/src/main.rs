//! squashfs-mount-fuse: serves one SquashFS image, read-only, over a FUSE
//! connection that squashfs-mount created (or, with `--mount`, that
//! fusermount3 creates). Runs with the caller's credentials; never mounts
//! anything itself in the first form. See `--help` and doc/fuse.md.
#![deny(unsafe_code)]

use squashfs_mount_fuse::args::{self, Args, USAGE};
use squashfs_mount_fuse::mount::MountError;
use squashfs_mount_fuse::process::{self, describe, start_workers};
use squashfs_mount_fuse::{log, mount, server, sys};

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use squashfs_reader::{Archive, FileSource, FormatError, ReadAhead};

use server::Fs;

/// The image file, its metadata read ahead (see `process::read_ahead`).
type ImageSource = ReadAhead<FileSource>;
type FileFs = Fs<ImageSource>;

/// The reader's cache budget: `--cache-mem`, else its default.
fn cache_budget(a: &Args) -> usize {
    a.cache_bytes
        .unwrap_or(squashfs_reader::archive::DEFAULT_CACHE_BYTES)
}

/// Says `what` about the command line, with the usage; exit status 2.
fn usage_error(what: &str) -> ExitCode {
    eprintln!("squashfs-mount-fuse: {what}\n\n{USAGE}");
    ExitCode::from(2)
}

/// The descriptors of the first form, each adopted once.
struct Fds {
    fuse: OwnedFd,
    image: File,
    ready: File,
    watch: Option<OwnedFd>,
    log: Option<OwnedFd>,
    /// Their numbers (what a detached server keeps).
    numbers: Vec<i32>,
}

/// Adopts the descriptors `a` names, or says why not (exit status 2).
fn adopt_fds(a: &Args) -> Result<Fds, ExitCode> {
    let (Some(fuse), Some(image), Some(ready)) = (a.fuse_fd, a.image_fd, a.ready_fd) else {
        return Err(usage_error(
            "--fuse-fd, --image-fd and --ready-fd are required (or --mount)",
        ));
    };
    if a.detached && a.watch_pidfd.is_some() {
        return Err(usage_error(
            "--detached and --watch-pidfd exclude each other",
        ));
    }
    let mut numbers = vec![fuse, image, ready];
    numbers.extend(a.watch_pidfd);
    numbers.extend(a.log_fd);
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != numbers.len() {
        eprintln!("squashfs-mount-fuse: the descriptor numbers must differ");
        return Err(ExitCode::from(2));
    }
    let adopt = |n, what| {
        sys::adopt_fd(n, what).map_err(|e| {
            eprintln!("squashfs-mount-fuse: {e}");
            ExitCode::from(2)
        })
    };
    Ok(Fds {
        ready: File::from(adopt(ready, "--ready-fd")?),
        fuse: adopt(fuse, "--fuse-fd")?,
        image: File::from(adopt(image, "--image-fd")?),
        watch: a
            .watch_pidfd
            .map(|n| adopt(n, "--watch-pidfd"))
            .transpose()?,
        log: a.log_fd.map(|n| adopt(n, "--log-fd")).transpose()?,
        numbers,
    })
}

/// Opens the image and answers on `ready`: `ready`, or `error` and why.
fn open_image(image: File, mut ready: File, cache: usize) -> Option<Archive<ImageSource>> {
    let archive = FileSource::new(image)
        .map_err(|e| FormatError::Io(e.to_string()))
        .and_then(|src| Archive::open_with_cache(ReadAhead::new(src), cache));
    let answer = match &archive {
        Ok(_) => process::room_for_threads().map_err(|e| e.to_string()),
        Err(e) => Err(describe(e)),
    };
    // Started as root for its user, this process was not counted against
    // the user's process limit when it was forked: its first thread is
    // (room_for_threads).
    let line = match &answer {
        Ok(()) => "ready\n".to_string(),
        Err(why) => format!("error {why}\n"),
    };
    if ready.write_all(line.as_bytes()).is_err() || answer.is_err() {
        return None;
    }
    archive.ok()
}

fn serve_fds(a: Args) -> ExitCode {
    let fds = match adopt_fds(&a) {
        Ok(fds) => fds,
        Err(code) => return code,
    };
    // The image's path for messages, from the kernel, not the command
    // line (which every user can read).
    let name = a.name.clone().unwrap_or_else(|| {
        std::fs::read_link(format!("/proc/self/fd/{}", fds.numbers[1]))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "image".into())
    });
    if a.detached {
        process::detach(&fds.numbers);
    }
    if fds.log.is_some() {
        // The log is the only file this server writes: the kernel keeps
        // it within its limit, before any input is read.
        if let Err(e) = sys::cap_file_size(log::FILE_LIMIT + 4096) {
            eprintln!("squashfs-mount-fuse: {e}");
            return ExitCode::from(2);
        }
    }
    process::choose_log(fds.log, a.detached);
    let cache = cache_budget(&a);
    let Some(archive) = open_image(fds.image, fds.ready, cache) else {
        return ExitCode::from(1);
    };
    let n = process::threads(a.threads);
    let mut fs = Fs::new(archive, name.clone());
    fs.owner = a.owner;
    if a.detached {
        serve_detached(fs, fds.fuse, n, cache)
    }
    let fs = Arc::new(fs);
    start_workers(fs.clone(), fds.fuse, n, false);
    process::read_ahead(fs, cache);
    match fds.watch {
        Some(pidfd) => watch(pidfd),
        None => loop {
            std::thread::park();
        },
    }
}

/// A detached server: serves until the mount is gone (a worker then ends
/// the process) or a termination signal.
fn serve_detached(mut fs: FileFs, fuse: OwnedFd, n: usize, cache: usize) -> ! {
    let name = fs.name.clone();
    // A cached instance: once its image is found corrupt, squashfs-mount
    // must not reuse it.
    fs.on_corrupt = Some(sys::mark_corrupt);
    // Blocked before the workers start, so that they inherit the mask
    // and only this thread takes the signal.
    sys::block_termination();
    log::message(
        log::Level::Info,
        &format!("{name}: serving (at most {n} threads)"),
    );
    let fs = Arc::new(fs);
    start_workers(fs.clone(), fuse, n, false);
    process::read_ahead(fs, cache);
    let sig = sys::wait_termination();
    log::message(
        log::Level::Info,
        &format!("{name}: {sig}; exiting (the mount stays until it is unmounted; its users get ENOTCONN)"),
    );
    std::process::exit(0)
}

/// Exits (status 0) when the process of `pidfd` does.
fn watch(pidfd: OwnedFd) -> ! {
    loop {
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
    }
}

/// How `--mount` is mounted: directly (root), or through fusermount3 (its
/// socket and process).
type Helper = Option<(OwnedFd, std::process::Child)>;

/// Mounts `dir` for `--mount`: root with a command mounts directly (no
/// helper process, as libfuse does for root); otherwise fusermount3.
fn mount_for(dir: &Path, shown: &str, direct: bool) -> Result<(OwnedFd, Helper), MountError> {
    if direct {
        let fd = mount::direct_mount(dir, shown, server::MAX_READ)?;
        Ok((fd, None))
    } else {
        let (fd, keep, child) = mount::fusermount(dir, shown, server::MAX_READ)?;
        Ok((fd, Some((keep, child))))
    }
}

/// Unmounts what [`mount_for`] mounted.
fn unmount(dir: &Path, helper: Helper) {
    match helper {
        None => mount::direct_unmount(dir),
        Some((keep, mut child)) => {
            // fusermount3's auto_unmount watcher only unmounts a dead
            // connection: unmount now, then let the watcher go.
            mount::fuseunmount(dir);
            drop(keep);
            let _ = child.wait();
        }
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
    let cache = cache_budget(&a);
    let archive = match FileSource::new(file)
        .map_err(|e| FormatError::Io(e.to_string()))
        .and_then(|src| Archive::open_with_cache(ReadAhead::new(src), cache))
    {
        Ok(ar) => ar,
        Err(e) => return fail(describe(&e)),
    };
    let direct = rustix::process::geteuid().is_root() && !a.command.is_empty();
    let (fuse, helper) = match mount_for(&dir, &shown, direct) {
        Ok(m) => m,
        Err(e) => return fail(e.to_string()),
    };
    let n = process::threads(a.threads);
    let fs = Arc::new(Fs::new(archive, shown.clone()));
    if a.command.is_empty() {
        // Served until `fusermount3 -u` (a worker then exits the process) or
        // until SIGINT/SIGTERM/SIGHUP, which unmount first: fusermount3's
        // auto_unmount watcher cannot look into a mount without allow_other,
        // so it would leave a dead mount behind. (SIGKILL still does.)
        sys::block_termination();
        start_workers(fs.clone(), fuse, n, false);
        process::read_ahead(fs, cache);
        sys::wait_termination();
        unmount(&dir, helper);
        return ExitCode::SUCCESS;
    }
    start_workers(fs.clone(), fuse, n, true);
    process::read_ahead(fs, cache);
    let status = std::process::Command::new(&a.command[0])
        .args(&a.command[1..])
        .status();
    unmount(&dir, helper);
    exit_code(status, &a.command[0])
}

/// The exit status of `--mount`'s command (128 + its signal), or 127/126
/// when it could not be run.
fn exit_code(
    status: std::io::Result<std::process::ExitStatus>,
    program: &std::ffi::OsStr,
) -> ExitCode {
    match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            let code = s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0));
            ExitCode::from(code.clamp(0, 255) as u8)
        }
        Err(e) => {
            eprintln!(
                "squashfs-mount-fuse: cannot run {}: {e}",
                program.to_string_lossy()
            );
            ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            })
        }
    }
}

/// `--report`: the launch's reporter (see `report`).
fn report(a: &Args) -> ExitCode {
    let (Some(log), Some(watch)) = (a.log_fd, a.watch_pidfd) else {
        return usage_error("--report needs --log-fd and --watch-pidfd");
    };
    if log == watch {
        eprintln!("squashfs-mount-fuse: the descriptor numbers must differ");
        return ExitCode::from(2);
    }
    if let Err(e) = sys::ignore_keyboard_signals() {
        eprintln!("squashfs-mount-fuse: {e}");
        return ExitCode::from(2);
    }
    let fds = sys::adopt_fd(log, "--log-fd")
        .and_then(|l| Ok((l, sys::adopt_fd(watch, "--watch-pidfd")?)));
    match fds {
        Ok((l, w)) => ExitCode::from(squashfs_mount_fuse::report::run(
            File::from(l),
            log,
            w,
            a.from,
            &a.servers,
        )),
        Err(e) => {
            eprintln!("squashfs-mount-fuse: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--run-as UID:GID:GROUPS` (only as the first argument): started as
/// root by squashfs-mount, become the caller before reading any input.
fn become_caller() -> Result<(), Box<dyn std::error::Error>> {
    if let Some((uid, gid, groups)) = args::run_as(std::env::args_os().skip(1))? {
        sys::become_user(uid, gid, &groups)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = become_caller() {
        eprintln!("squashfs-mount-fuse: {e}");
        return ExitCode::from(126);
    }
    let a = match Args::parse(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(e) => return usage_error(&e.to_string()),
    };
    sys::set_process_name(a.report);
    if let Some(text) = &a.print {
        print!("{text}");
        return ExitCode::SUCCESS;
    }
    if a.report {
        return report(&a);
    }
    match a.mount.clone() {
        Some((image, dir)) => serve_mount(a, image, dir),
        None => serve_fds(a),
    }
}
