//! The FUSE path: an image the site policy does not trust for the kernel's
//! squashfs driver is served by `squashfs-mount-fuse`, a userspace reader
//! that runs as the caller in every way (credentials, resource limits, not
//! dumpable; never root unless the caller is), on a `/dev/fuse` the caller
//! opened, reading the fd the caller opened. The mount is made here
//! (read-only, nosuid, nodev, `default_permissions` so that the kernel
//! checks modes as for the kernel path, `allow_other` so that overlayfs and
//! root's lookups of nested mount points reach it, type
//! `fuse.squashfs-mount` with an opaque source; it lives in the command's
//! private namespace only). The server lives exactly as long as the mount:
//! when the last reference to it goes (the command's namespace ends) its
//! connection ends and it exits; it also exits when the process it watches
//! (the launch, which becomes the command) does.

use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::config::names::{self, FileNames};
use crate::config::Policy;
use crate::mounts::fuse_log::{Detached, LogError, LOG_DIR};
use crate::mounts::image::{self, Image};
use crate::privilege::{ActingAsCaller, AsRoot, Caller};
use crate::system::error::Failure;
use crate::system::rlimits::CallerLimits;
use crate::system::{self, FsContext, Helper};

/// The server's file name, installed in `<prefix>/lib/squashfs-mount/`.
pub const SERVER_NAME: &str = "squashfs-mount-fuse";
/// How long a server may take to check its image and answer.
const READY_TIMEOUT_MS: i32 = 30_000;

/// What went wrong on the FUSE path.
#[derive(Debug)]
pub enum FuseError {
    /// The server is not installed where it is looked for (an image's
    /// path, for the message).
    NotInstalled(OsString),
    /// The server program (as given) could not be opened.
    ServerOpen(String, system::Error),
    ServerStat(String, system::Error),
    /// Started as root, it must be root's alone; why it is not.
    ServerUnsafe(String, String),
    /// /dev/fuse cannot be opened as the caller, and what to do.
    Device(system::Error, String),
    /// A step that failed (fsopen, fsconfig, pipe, pidfd, the start).
    Step(String, system::Error),
    Refused(system::Refused),
    NoAnswer,
    /// The server's own refusal of the image.
    ServerSays(String),
    /// The server (its path) did not start.
    NotStarted(OsString),
    /// The servers' log (cached instances) cannot be opened.
    Log(system::Error),
    LogDirUnsafe,
}

impl fmt::Display for FuseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FuseError::NotInstalled(image) => write!(
                f,
                "{}: the site policy serves this image through FUSE, but {SERVER_NAME} is not installed",
                image.to_string_lossy()
            ),
            FuseError::ServerOpen(shown, e) => write!(
                f,
                "FUSE path: the server {shown} cannot be opened ({e}); install {SERVER_NAME} there (make install)"
            ),
            FuseError::ServerStat(shown, e) => {
                write!(f, "FUSE path: the server {shown} cannot be examined ({e})")
            }
            FuseError::ServerUnsafe(shown, why) => write!(
                f,
                "FUSE path: the server {shown} is not safe to start: it must be an executable file that only root can change, in directories only root can change ({why}); reinstall squashfs-mount (make install)"
            ),
            FuseError::Device(e, what) => write!(
                f,
                "the FUSE path needs /dev/fuse, which cannot be opened ({e}): {what}"
            ),
            FuseError::Step(what, e) => write!(f, "FUSE path: {what}: {e}"),
            FuseError::Refused(r) => write!(
                f,
                "FUSE path: the kernel refused the FUSE mount: {}",
                r.with_log()
            ),
            FuseError::NoAnswer => write!(
                f,
                "FUSE path: the server did not answer within {} s; is the image on a file system that hangs?",
                READY_TIMEOUT_MS / 1000
            ),
            FuseError::ServerSays(why) => f.write_str(why),
            FuseError::Log(e) => write!(
                f,
                "FUSE path: cannot open the servers' log in {LOG_DIR}: {e}"
            ),
            FuseError::LogDirUnsafe => write!(
                f,
                "FUSE path: {LOG_DIR} is not a directory owned by root that only root can write"
            ),
            FuseError::NotStarted(server) => write!(
                f,
                "FUSE path: the server {} did not start (its message, if any, is above); the image is served in userspace because the site policy does not let the kernel mount it (see squashfs-mount --policy); check that {SERVER_NAME} is installed there (make install)",
                server.to_string_lossy()
            ),
        }
    }
}

crate::error_kind!(FuseError);

impl From<LogError> for FuseError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::Open(e) => FuseError::Log(e),
            LogError::Unsafe => FuseError::LogDirUnsafe,
        }
    }
}

/// The server program of a launch, pinned as an fd: every server of the
/// launch is executed from that very file.
pub struct Server {
    pub(super) fd: OwnedFd,
    path: OsString,
}

impl Server {
    /// Opens the server `path` as the caller. When it will be started as
    /// root (`as_root`: it then drops to the caller by itself), only root
    /// may be able to change it or any directory on its path (the same
    /// judgement as for an image, with root the only trusted owner): a
    /// server in a user's directory (a hard link to the setuid binary
    /// there, say) is refused.
    pub(crate) fn pin(
        _as_caller: &impl ActingAsCaller,
        path: &OsStr,
        as_root: bool,
    ) -> Result<Server, Failure> {
        let shown = || path.to_string_lossy().into_owned();
        let fd = system::open_program(path)
            .map_err(|e| Failure::new(FuseError::ServerOpen(shown(), e)))?;
        let id = system::fstat(fd.as_fd())
            .map_err(|e| Failure::new(FuseError::ServerStat(shown(), e)))?;
        if as_root {
            let real = system::path_of_fd(fd.as_fd()).unwrap_or_else(|_| path.to_owned());
            let route = Policy::default().route(&image::provenance_of(fd.as_fd(), &real, &id));
            if !route.kernel || !id.is_regular() || id.mode & 0o111 == 0 {
                return Err(Failure::new(FuseError::ServerUnsafe(shown(), route.reason)));
            }
        }
        Ok(Server {
            fd,
            path: path.to_owned(),
        })
    }
}

/// What the caches of one launch's servers take in all: each of its `n`
/// servers gets a share (at most the 40 MiB one server alone would get,
/// at least 512 KiB), so a launch of 56 images starts 56 small servers. A
/// scan needs little of it: the kernel caches what the servers answer.
const LAUNCH_CACHE_BYTES: u64 = 64 << 20;

/// The cache budget of each of `n` servers started by one launch.
pub(crate) fn cache_share(n: usize) -> u64 {
    (LAUNCH_CACHE_BYTES / (n.max(1) as u64)).clamp(512 << 10, 40 << 20)
}

/// How a launch starts its servers.
pub struct Launcher<'a> {
    pub server: &'a Server,
    pub caller: &'a Caller,
    /// The server starts as root and becomes the caller by itself (setuid
    /// tool, Slurm plugin); false in rootless mode, where it already is.
    pub drop_to_caller: bool,
    /// Every file shows as owned by the caller (`--owner`): rootless mode
    /// (its user namespace maps no other id).
    pub show_as_caller: bool,
    pub threads: u32,
    /// The server's cache budget (`--cache-mem`), [`cache_share`].
    pub cache_bytes: u64,
    /// The caller's resource limits, which the server gets back.
    pub limits: Option<&'a CallerLimits>,
    /// Servers of cached instances: the user's log (see [`LOG_DIR`]). They
    /// outlive the launch (`--detached`: no watched process, standard
    /// descriptors on /dev/null) and exit when their mount is gone.
    pub detached: Option<&'a Detached>,
}

/// A server started, not yet confirmed ready.
pub struct Starting {
    ready: OwnedFd,
    subject: String,
    /// The server's pidfd.
    server: OwnedFd,
}

impl Starting {
    /// The server `server` (a pidfd) answers on `ready` about `subject`.
    pub(crate) fn new(ready: OwnedFd, subject: &str, server: OwnedFd) -> Starting {
        Starting {
            ready,
            subject: subject.to_string(),
            server,
        }
    }
}

/// Opens /dev/fuse as the caller: a site that restricts FUSE (mode 0600,
/// a group) restricts it for this tool too.
pub(crate) fn open_device(
    _as_caller: &impl ActingAsCaller,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    system::open_fuse_device()
        .map_err(|e| Failure::about(subject, FuseError::Device(e, device_problem(e))))
}

/// Why /dev/fuse did not open for the caller (`e`), and what to do.
pub(crate) fn device_problem(e: system::Error) -> String {
    match e {
        system::Error::ACCESS | system::Error::PERM => {
            let who = system::stat_following(system::working_dir(), "/dev/fuse")
                .map(|st| {
                    format!(
                        " (mode {:04o}, owner {}, group {})",
                        st.mode & 0o7777,
                        names::user_value(&FileNames::default(), st.uid),
                        names::group_value(&FileNames::default(), st.gid)
                    )
                })
                .unwrap_or_default();
            format!("this site does not let you use FUSE{who}; images the site policy does not trust for the kernel need it: ask your administrator for access to /dev/fuse, or for the image to be installed where the policy trusts it (squashfs-mount --policy IMAGE says why it does not)")
        }
        system::Error::NOENT | system::Error::NODEV | system::Error::NXIO => {
            "the fuse module is not loaded; ask your administrator".into()
        }
        _ => "ask your administrator".into(),
    }
}

/// A detached FUSE mount (read-only, nosuid, nodev) on the connection
/// `device`, of type `fuse.squashfs-mount` and with an opaque source: its
/// mountinfo line names no image. Needs CAP_SYS_ADMIN over the current
/// mount namespace (root, or the rootless user namespace).
fn fuse_mount(device: BorrowedFd<'_>, caller: &Caller, subject: &str) -> Result<OwnedFd, Failure> {
    let fail = |what: &str, e: system::Error| {
        Failure::about(subject, FuseError::Step(what.to_string(), e))
    };
    let ctx = FsContext::open("fuse").map_err(|e| fail("fsopen(fuse)", e))?;
    for (key, value) in [
        ("fd", device.as_raw_fd().to_string()),
        ("rootmode", "40000".to_string()),
        ("user_id", caller.uid.to_string()),
        ("group_id", caller.gid.to_string()),
        ("max_read", (1u32 << 20).to_string()),
        ("subtype", system::OUR_FUSE_SUBTYPE.to_string()),
        ("source", system::OUR_FUSE_SUBTYPE.to_string()),
    ] {
        ctx.set_string(key, OsStr::new(&value))
            .map_err(|e| fail(&format!("fuse {key}"), e))?;
    }
    // "ro" makes the superblock read-only, not only the mount: otherwise
    // every READDIR the kernel sends marks the directory's atime stale, and
    // the next stat of it asks the server (GETATTR) even though the
    // attributes are cached for a year: a cached instance's second scan of
    // a dataset cost one request per directory (issue 30).
    for flag in ["default_permissions", "allow_other", "ro"] {
        ctx.set_flag(flag)
            .map_err(|e| fail(&format!("fuse {flag}"), e))?;
    }
    ctx.create()
        .map_err(|r| Failure::about(subject, FuseError::Refused(r)))?;
    ctx.mount(system::safe_mount_attributes())
        .map_err(|e| fail("fsmount(fuse)", e))
}

/// The server's arguments: no image path (they are world-readable in
/// /proc/PID/cmdline); it finds the image's name from the fd it is given.
fn server_argv(l: &Launcher<'_>) -> Vec<CString> {
    let arg = |s: &str| CString::new(s).unwrap_or_default();
    let caller = l.caller;
    let mut argv = program_argv(l);
    for (opt, value) in [("--fuse-fd", "3"), ("--image-fd", "4"), ("--ready-fd", "5")] {
        argv.extend([arg(opt), arg(value)]);
    }
    match l.detached {
        Some(_) => argv.extend([arg("--detached"), arg("--log-fd"), arg("6")]),
        None => argv.extend([arg("--watch-pidfd"), arg("6")]),
    }
    argv.extend([arg("--threads"), arg(&l.threads.to_string())]);
    argv.extend([arg("--cache-mem"), arg(&l.cache_bytes.to_string())]);
    if l.show_as_caller {
        // Rootless: the user namespace maps the caller's ids only; the
        // image's others would show as nobody. The caller can read every
        // byte of the image anyway.
        argv.push(arg("--owner"));
        argv.push(arg(&format!("{}:{}", caller.uid, caller.gid)));
    }
    argv
}

/// The program's name, and `--run-as` when it starts as root.
pub(super) fn program_argv(l: &Launcher<'_>) -> Vec<CString> {
    let arg = |s: &str| CString::new(s).unwrap_or_default();
    let caller = l.caller;
    let mut argv = vec![arg(SERVER_NAME)];
    if l.drop_to_caller {
        let groups: Vec<String> = caller.groups.iter().map(ToString::to_string).collect();
        argv.push(arg("--run-as"));
        argv.push(arg(&format!(
            "{}:{}:{}",
            caller.uid,
            caller.gid,
            groups.join(",")
        )));
    }
    argv
}

/// Makes a FUSE mount for `image` on the connection `device` (opened as
/// the caller, [`open_device`]) and starts its server, which becomes the
/// caller with the caller's resource limits before it reads anything.
pub(crate) fn instance(
    _root: &AsRoot,
    image: &Image,
    device: OwnedFd,
    l: &Launcher<'_>,
    subject: &str,
) -> Result<(OwnedFd, Starting), Failure> {
    let fail = |what: &str, e: system::Error| {
        Failure::about(subject, FuseError::Step(what.to_string(), e))
    };
    let mount = fuse_mount(device.as_fd(), l.caller, subject)?;
    let (ready_read, ready_write) = system::pipe().map_err(|e| fail("pipe", e))?;
    let argv = server_argv(l);
    let mut keep = vec![
        (device.as_fd(), 3),
        (image.fd.as_fd(), 4),
        (ready_write.as_fd(), 5),
    ];
    let watch;
    match l.detached {
        // A server that outlives the launch holds none of its descriptors:
        // not even the caller's stdout (`out=$(squashfs-mount ...)` would
        // wait for it).
        Some(d) => keep.extend([
            (d.null.as_fd(), 0),
            (d.null.as_fd(), 1),
            (d.null.as_fd(), 2),
            (d.log.as_fd(), 6),
        ]),
        None => {
            watch = system::own_pidfd().map_err(|e| fail("pidfd_open", e))?;
            keep.push((watch.as_fd(), 6));
        }
    }
    let server = system::spawn_detached(&Helper {
        program: l.server.fd.as_fd(),
        argv: &argv,
        keep: &keep,
        as_root: l.drop_to_caller,
        limits: l.limits,
        as_user: None,
    })
    .map_err(|e| fail("starting the FUSE server", e))?;
    drop(ready_write);
    Ok((mount, Starting::new(ready_read, subject, server)))
}

/// Waits for each server's answer: `ready`, or the reason it refused the
/// image (corrupt, truncated...), or that it could not start. Returns the
/// servers' pidfds.
pub(crate) fn wait_ready(
    starting: Vec<Starting>,
    server: &Server,
) -> Result<Vec<OwnedFd>, Failure> {
    let mut servers = Vec::with_capacity(starting.len());
    for s in starting {
        let answered = system::wait_readable(s.ready.as_fd(), READY_TIMEOUT_MS).map_err(|e| {
            Failure::about(
                &s.subject,
                FuseError::Step("waiting for the server".into(), e),
            )
        })?;
        if !answered {
            return Err(Failure::about(&s.subject, FuseError::NoAnswer));
        }
        let line = system::read_some(s.ready.as_fd(), 4096).unwrap_or_default();
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end();
        if line == "ready" {
            servers.push(s.server);
            continue;
        }
        if let Some(why) = line.strip_prefix("error ") {
            return Err(Failure::about(
                &s.subject,
                FuseError::ServerSays(why.to_string()),
            ));
        }
        return Err(Failure::about(
            &s.subject,
            FuseError::NotStarted(server.path.clone()),
        ));
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::cache_share;

    #[test]
    fn servers_of_one_launch_share_the_cache_budget() {
        assert_eq!(cache_share(1), 40 << 20);
        assert_eq!(cache_share(0), 40 << 20);
        // 56 images (the dataset study's collection): about 1.1 MiB each.
        assert_eq!(cache_share(56), (64 << 20) / 56);
        assert_eq!(cache_share(500), 512 << 10);
    }
}
