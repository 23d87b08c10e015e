//! The caller's FUSE log and what reads it: the servers of cached FUSE
//! instances have no terminal, so they write to a per-user log that root
//! keeps (root's file in a root-owned directory, readable by its user
//! through an ACL entry), and a launch that attaches cached instances
//! starts a reporter that, when the launch exits, tells the launch's
//! stderr the first corruption those servers logged (doc/fuse.md).

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use super::fuse::{program_argv, FuseError, Launcher};
use crate::config::acl;
use crate::privilege::{AsRoot, Caller};
use crate::system::{self, Helper};

/// Where the servers of cached FUSE instances write their messages: one
/// file per user (`<uid>.log`, root's, mode [`LOG_MODE`]: its user may
/// read it through an ACL entry, nobody but root may write it) in a
/// root-owned directory that lets users reach their file but not list
/// the others.
pub const LOG_DIR: &str = "/run/squashfs-mount-fuse";
/// A user's log: root's, its user may read it (ACL), nobody else.
pub const LOG_MODE: u32 = 0o640;
/// A user's log is emptied when a launch finds it larger than this; its
/// servers empty it before a line would make it larger (the server's
/// `log::FILE_LIMIT`, the same size).
const LOG_LIMIT: u64 = 1 << 20;

/// What the servers of cached instances are given.
pub struct Detached {
    pub(super) log: OwnedFd,
    pub(super) null: OwnedFd,
}

/// [`LOG_DIR`], checked: a directory of root's that nobody else can
/// write.
fn log_dir(dir: Result<OwnedFd, system::Error>) -> Result<OwnedFd, FuseError> {
    let dir = dir.map_err(FuseError::Log)?;
    let st = system::fstat(dir.as_fd()).map_err(FuseError::Log)?;
    if !st.is_dir() || !st.uid.is_root() || st.mode & 0o022 != 0 {
        return Err(FuseError::LogDirUnsafe);
    }
    Ok(dir)
}

impl Detached {
    /// The caller's log in [`LOG_DIR`] (the directory too, if missing),
    /// opened by root for appending: root's file, made by root with mode
    /// 0600 and an ACL that lets the caller read it ([`LOG_MODE`] then),
    /// emptied beyond [`LOG_LIMIT`]. The caller can neither write it nor
    /// fill `/run` with it; the servers get this descriptor and keep it
    /// within the limit themselves.
    pub fn create(_root: &AsRoot, caller: &Caller) -> Result<Detached, FuseError> {
        let dir = log_dir(system::open_or_create_dir(LOG_DIR, 0o711))?;
        let name = format!("{}.log", caller.uid);
        let log = system::open_root_log(dir.as_fd(), &name, 0o600).map_err(FuseError::Log)?;
        // Without POSIX ACLs on /run the log stays root's alone (0600).
        let mode = match system::set_access_acl(log.as_fd(), &acl::read_only_for(caller.uid)) {
            Ok(()) => LOG_MODE,
            Err(system::Error::OPNOTSUPP) => 0o600,
            Err(e) => return Err(FuseError::Log(e)),
        };
        let st = system::fstat(log.as_fd()).map_err(FuseError::Log)?;
        if st.mode & 0o7777 != mode {
            return Err(FuseError::LogDirUnsafe);
        }
        Detached::with(log)
    }

    fn with(log: OwnedFd) -> Result<Detached, FuseError> {
        if system::fstat(log.as_fd()).is_ok_and(|st| st.size > LOG_LIMIT) {
            let _ = system::truncate(log.as_fd());
        }
        let null = system::open_null().map_err(FuseError::Log)?;
        Ok(Detached { log, null })
    }

    /// /dev/null for both (the engine's unit tests).
    #[cfg(test)]
    pub fn stand_in() -> Detached {
        let null = || system::open_null().expect("/dev/null");
        Detached {
            log: null(),
            null: null(),
        }
    }
}

/// Starts the launch's reporter (`squashfs-mount-fuse --report`, started
/// and dropping to the caller as a server does): once the launch (then
/// its command) exits, it writes to the launch's stderr, in one line, the
/// first corruption that `servers` (those of its cached instances, which
/// have no stderr) wrote to the caller's log from now on, with the log's
/// path. It holds the caller's log, a pidfd of the launch and the launch's
/// stderr; stdin and stdout are /dev/null. Returns its pidfd.
pub fn start_reporter(
    _root: &AsRoot,
    l: &Launcher<'_>,
    d: &Detached,
    servers: &[u32],
) -> Result<OwnedFd, FuseError> {
    let fail = |what: &'static str| move |e| FuseError::Step(what.to_string(), e);
    let from = system::fstat(d.log.as_fd()).map_err(FuseError::Log)?.size;
    let watch = system::own_pidfd().map_err(fail("pidfd_open"))?;
    let arg = |s: &str| CString::new(s).unwrap_or_default();
    let list: Vec<String> = servers.iter().map(u32::to_string).collect();
    let mut argv = program_argv(l);
    for (opt, value) in [
        ("--report", None),
        ("--log-fd", Some("3".to_string())),
        ("--watch-pidfd", Some("4".to_string())),
        ("--from", Some(from.to_string())),
        ("--servers", Some(list.join(","))),
    ] {
        argv.push(arg(opt));
        argv.extend(value.map(|v| arg(&v)));
    }
    let keep = [
        (d.null.as_fd(), 0),
        (d.null.as_fd(), 1),
        (d.log.as_fd(), 3),
        (watch.as_fd(), 4),
    ];
    system::spawn_detached(&Helper {
        program: l.server.fd.as_fd(),
        argv: &argv,
        keep: &keep,
        as_root: l.drop_to_caller,
        limits: l.limits,
        as_user: None,
    })
    .map_err(fail("starting the FUSE report"))
}
