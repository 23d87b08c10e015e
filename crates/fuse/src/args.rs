//! The command line: `--help`'s text, the options of both forms, and
//! `--run-as` (read before anything else, see main.rs).

use std::ffi::OsString;
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: squashfs-mount-fuse [--run-as UID:GID:GROUPS] --fuse-fd N --image-fd M --ready-fd R [--watch-pidfd P | --detached] [--log-fd L] [--threads T] [--cache-mem BYTES] [--owner UID:GID] [--name NAME]
       squashfs-mount-fuse --mount IMAGE DIR [--threads T] [--cache-mem BYTES] [-- COMMAND [ARGS...]]
       squashfs-mount-fuse [--run-as UID:GID:GROUPS] --report --log-fd L --watch-pidfd P --from BYTES --servers PID[,PID...]

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
  --cache-mem BYTES the caches of decompressed metadata, data blocks,
                    inodes and listings take about BYTES (at most twice
                    that; 0 or absent: 40 MiB, at least 64 KiB);
                    squashfs-mount gives each server of a launch its
                    share of 64 MiB, so 56 servers stay small; the
                    image's metadata, read ahead once the server is
                    ready, takes up to a quarter of BYTES more
  --owner UID:GID   show every file as owned by UID:GID (rootless mode: the
                    user namespace maps no other ids)
  --name NAME       the image's name in messages (default: the path of the
                    image descriptor, which other users cannot see)
It serves until the file system is unmounted or the watched process exits,
then exits 0. Nothing is printed unless the image turns out to be corrupt
(a detached server also logs one line when it starts and one when it
exits). Its memory use: VmRSS in /proc/PID/status.

--report is how squashfs-mount tells a launch that uses cached instances
about a corrupt image: it waits until the process of --watch-pidfd exits,
then writes to stderr, in one line, the first corruption that one of the
servers --servers wrote to the log --log-fd after byte --from, with the
log's path. Nothing otherwise.

The second form mounts IMAGE on DIR as an unprivileged user through
fusermount3 (Debian package fuse3), for development, tests and benchmarks.
Without COMMAND it serves in the foreground until 'fusermount3 -u DIR' or
SIGINT/SIGTERM/SIGHUP (it unmounts then; after SIGKILL, run
'fusermount3 -u DIR'). With COMMAND it runs it, unmounts, and exits with its
status.
";

/// What the command line asks for.
#[derive(Default)]
pub struct Args {
    pub fuse_fd: Option<i32>,
    pub image_fd: Option<i32>,
    pub ready_fd: Option<i32>,
    pub watch_pidfd: Option<i32>,
    pub detached: bool,
    pub log_fd: Option<i32>,
    pub threads: Option<usize>,
    /// `--cache-mem BYTES`: the reader's cache budget (None: its default).
    pub cache_bytes: Option<usize>,
    pub owner: Option<(u32, u32)>,
    pub name: Option<String>,
    pub mount: Option<(PathBuf, PathBuf)>,
    pub command: Vec<OsString>,
    /// `--report`: the launch's reporter, not a server.
    pub report: bool,
    /// `--from BYTES` (`--report`): where the launch's part of the log
    /// starts.
    pub from: u64,
    /// `--servers PID,...` (`--report`): the servers of its instances.
    pub servers: Vec<u32>,
    /// `--help` or `--version`: print this and exit 0.
    pub print: Option<String>,
}

/// A command line that cannot be served, in the words the server prints.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgError {
    /// The option needs a value.
    NeedsValue(&'static str),
    /// The option's value is not a descriptor number.
    NotDescriptor(&'static str, String),
    TooManyThreads(i32),
    NeedsOwner,
    NotOwner(String),
    RunAsFirst,
    NeedsMount,
    NoCommand,
    Unknown(String),
    NeedsRunAs,
    NotRunAs(String),
    /// `--from` or `--servers` without a number (list).
    NotNumbers(&'static str, String),
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::NeedsValue(opt) => write!(f, "{opt} needs a value"),
            ArgError::NotDescriptor(opt, v) => write!(f, "{opt}: not a descriptor number: {v}"),
            ArgError::TooManyThreads(n) => write!(f, "--threads: {n} is more than 64"),
            ArgError::NeedsOwner => f.write_str("--owner needs UID:GID"),
            ArgError::NotOwner(v) => write!(f, "--owner: not UID:GID: {v}"),
            ArgError::RunAsFirst => f.write_str("--run-as must come first"),
            ArgError::NeedsMount => f.write_str("--mount needs IMAGE and DIR"),
            ArgError::NoCommand => f.write_str("no command after --"),
            ArgError::Unknown(a) => write!(f, "unknown argument {a}"),
            ArgError::NeedsRunAs => f.write_str("--run-as needs UID:GID:GROUPS"),
            ArgError::NotRunAs(spec) => write!(f, "--run-as: not UID:GID:GROUPS: {spec}"),
            ArgError::NotNumbers(opt, v) => write!(f, "{opt}: not a number (list): {v}"),
        }
    }
}

impl std::error::Error for ArgError {}

/// A descriptor number, the value of `opt`.
fn number(v: Option<OsString>, opt: &'static str) -> Result<i32, ArgError> {
    let v = v.ok_or(ArgError::NeedsValue(opt))?;
    v.to_str()
        .and_then(|s| s.parse::<i32>().ok())
        .filter(|&n| n >= 0)
        .ok_or_else(|| ArgError::NotDescriptor(opt, v.to_string_lossy().into_owned()))
}

/// `--owner UID:GID`.
fn owner(v: Option<OsString>) -> Result<(u32, u32), ArgError> {
    let v = v.ok_or(ArgError::NeedsOwner)?;
    let v = v.to_string_lossy();
    v.split_once(':')
        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)))
        .ok_or_else(|| ArgError::NotOwner(v.into_owned()))
}

/// `--threads T`: at most 64; 0 is the default.
fn threads(v: Option<OsString>) -> Result<Option<usize>, ArgError> {
    let n = number(v, "--threads")?;
    if n > 64 {
        return Err(ArgError::TooManyThreads(n));
    }
    Ok(usize::try_from(n).ok().filter(|&n| n > 0))
}

/// `--cache-mem BYTES`: 0 is the default; at least 64 KiB.
fn cache_bytes(v: Option<OsString>) -> Result<Option<usize>, ArgError> {
    let n: u64 = match numbers(v, "--cache-mem")?[..] {
        [n] => n,
        _ => return Err(ArgError::NeedsValue("--cache-mem")),
    };
    Ok((n > 0).then(|| usize::try_from(n.max(64 << 10)).unwrap_or(usize::MAX)))
}

/// `--from BYTES` or `--servers PID,...`: numbers separated by commas.
fn numbers<T: std::str::FromStr>(
    v: Option<OsString>,
    opt: &'static str,
) -> Result<Vec<T>, ArgError> {
    let v = v.ok_or(ArgError::NeedsValue(opt))?;
    let v = v.to_string_lossy();
    v.split(',')
        .map(|n| n.parse().ok())
        .collect::<Option<Vec<T>>>()
        .ok_or_else(|| ArgError::NotNumbers(opt, v.to_string()))
}

impl Args {
    /// The options after the program's name (`--run-as` and its value, when
    /// first, are skipped: [`run_as`] reads them).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, ArgError> {
        let mut a = Args::default();
        let mut it = args.into_iter().peekable();
        if it.peek().is_some_and(|a| a == "--run-as") {
            it.nth(1);
        }
        while let Some(arg) = it.next() {
            match arg.to_str().unwrap_or("") {
                "--fuse-fd" => a.fuse_fd = Some(number(it.next(), "--fuse-fd")?),
                "--image-fd" => a.image_fd = Some(number(it.next(), "--image-fd")?),
                "--ready-fd" => a.ready_fd = Some(number(it.next(), "--ready-fd")?),
                "--watch-pidfd" => a.watch_pidfd = Some(number(it.next(), "--watch-pidfd")?),
                "--detached" => a.detached = true,
                "--report" => a.report = true,
                "--from" => {
                    a.from = match numbers(it.next(), "--from")?[..] {
                        [n] => n,
                        _ => return Err(ArgError::NeedsValue("--from")),
                    }
                }
                "--servers" => a.servers = numbers(it.next(), "--servers")?,
                "--log-fd" => a.log_fd = Some(number(it.next(), "--log-fd")?),
                "--threads" => a.threads = threads(it.next())?,
                "--cache-mem" => a.cache_bytes = cache_bytes(it.next())?,
                "--owner" => a.owner = Some(owner(it.next())?),
                "--run-as" => return Err(ArgError::RunAsFirst),
                "--name" => {
                    let name = it.next().ok_or(ArgError::NeedsValue("--name"))?;
                    a.name = Some(name.to_string_lossy().into_owned());
                }
                "--mount" => {
                    let image = it.next().ok_or(ArgError::NeedsMount)?;
                    let dir = it.next().ok_or(ArgError::NeedsMount)?;
                    a.mount = Some((image.into(), dir.into()));
                }
                "--" => {
                    a.command = it.by_ref().collect();
                    if a.command.is_empty() {
                        return Err(ArgError::NoCommand);
                    }
                }
                "-h" | "--help" => a.print = Some(USAGE.to_string()),
                "-V" | "--version" => {
                    a.print = Some(format!(
                        "squashfs-mount-fuse {}\n",
                        env!("CARGO_PKG_VERSION")
                    ))
                }
                _ => return Err(ArgError::Unknown(arg.to_string_lossy().into_owned())),
            }
            if a.print.is_some() {
                break;
            }
        }
        Ok(a)
    }
}

/// `--run-as UID:GID:GROUPS`, when it is the first option: the uid, the
/// gid and the groups to become.
pub fn run_as(
    args: impl IntoIterator<Item = OsString>,
) -> Result<Option<(u32, u32, Vec<u32>)>, ArgError> {
    let mut args = args.into_iter();
    if args.next().is_none_or(|a| a != "--run-as") {
        return Ok(None);
    }
    let spec = args.next().ok_or(ArgError::NeedsRunAs)?;
    let spec = spec.to_string_lossy();
    let bad = || ArgError::NotRunAs(spec.to_string());
    let mut parts = spec.splitn(3, ':');
    let mut id = || parts.next().and_then(|v| v.parse::<u32>().ok());
    let (uid, gid) = (id().ok_or_else(bad)?, id().ok_or_else(bad)?);
    let groups = parts.next().ok_or_else(bad)?;
    let groups: Vec<u32> = groups
        .split(',')
        .filter(|g| !g.is_empty())
        .map(|g| g.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    Ok(Some((uid, gid, groups)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_and_their_sentences() {
        let a = Args::parse(args(&[
            "--run-as",
            "1:2:",
            "--fuse-fd",
            "3",
            "--threads",
            "0",
        ]))
        .unwrap();
        assert_eq!((a.fuse_fd, a.threads), (Some(3), None));
        let e = |v: &[&str]| Args::parse(args(v)).err().unwrap().to_string();
        assert_eq!(
            e(&["--fuse-fd", "x"]),
            "--fuse-fd: not a descriptor number: x"
        );
        assert_eq!(e(&["--threads", "65"]), "--threads: 65 is more than 64");
        assert_eq!(e(&["--owner", "1"]), "--owner: not UID:GID: 1");
        assert_eq!(e(&["--x"]), "unknown argument --x");
        assert_eq!(e(&["--"]), "no command after --");
        assert_eq!(
            e(&["--servers", "1,x"]),
            "--servers: not a number (list): 1,x"
        );
        let a = Args::parse(args(&["--report", "--from", "12", "--servers", "5,6"])).unwrap();
        assert_eq!((a.report, a.from, a.servers), (true, 12, vec![5, 6]));
        assert_eq!(
            run_as(args(&["--run-as", "1:2:3,4"])).unwrap(),
            Some((1, 2, vec![3, 4]))
        );
        assert_eq!(
            run_as(args(&["--run-as", "1:x:"])).unwrap_err().to_string(),
            "--run-as: not UID:GID:GROUPS: 1:x:"
        );
    }
}
