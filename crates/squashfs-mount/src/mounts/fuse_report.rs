//! The launch's reporter: once the launch (then its command) exits, it
//! tells the launch's stderr the first corruption the servers of its
//! cached FUSE instances wrote to the caller's log (`fuse_log.rs`;
//! doc/fuse.md).

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use super::fuse::{program_argv, FuseError, Launcher};
use super::fuse_log::Detached;
use crate::privilege::AsRoot;
use crate::system::{self, Helper};

/// Starts the launch's reporter (`squashfs-mount-fuse --report`, started
/// and dropping to the caller as a server does): once the launch (then
/// its command) exits, it writes to the launch's stderr, in one line, the
/// first corruption that `servers` (those of its cached instances, which
/// have no stderr) wrote to the caller's log from now on, with the log's
/// path. It holds the caller's log, a pidfd of the launch and the launch's
/// stderr; stdin and stdout are /dev/null. Returns its pidfd.
pub(crate) fn start_reporter(
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
