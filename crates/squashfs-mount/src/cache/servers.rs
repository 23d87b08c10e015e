//! The servers of evicted FUSE instances. Evicting unmounts the cache's
//! copy; the server is ended only once the kernel says nothing uses its
//! file system any more (no mount and no open file, in any namespace), and
//! only after the cache's lock is released: no server whose mount is in use
//! is ever killed, whatever a scan of /proc saw, and nobody waits for this.
//! A server still in use keeps serving, and exits by itself when its last
//! mount goes (one its user stopped stays their own process). See
//! doc/cache.md, "Eviction".

use std::os::fd::{AsFd, OwnedFd};

use super::meta::{Kind, Meta};
use super::store::Store;
use super::CacheError;
use crate::privilege::AsRoot;
use crate::system::{self, Error, SysResult};

/// Where the cache namespace keeps its fusectl mount (`list_entries`
/// skips names that start with a dot).
const FUSE_CONTROL: &str = "/.fusectl";

impl Store {
    /// Ends the servers of the evicted FUSE instances among `evicted` whose
    /// connection the kernel no longer has. Call without the cache's lock.
    pub(super) fn end_servers<'a>(&self, _root: &AsRoot, evicted: impl Iterator<Item = &'a Meta>) {
        let fuse: Vec<(u64, u32, u64)> = evicted
            .filter_map(|m| match m.kind {
                Kind::Fuse { pid, started } => Some((m.device, pid, started)),
                Kind::Kernel { .. } => None,
            })
            .collect();
        if fuse.is_empty() {
            return;
        }
        let gone = self.visit(false, |_| {
            let control = fuse_control().map_err(CacheError::system("cannot mount fusectl"))?;
            Ok(fuse
                .iter()
                .filter(|(dev, ..)| system::fuse_connection_in(control.as_fd(), *dev) == Ok(false))
                .map(|&(_, pid, started)| (pid, started))
                .collect::<Vec<_>>())
        });
        // Where the kernel cannot be asked, no server is ended (it exits by
        // itself once unused, unless its user stopped it).
        for (pid, started) in gone.unwrap_or_default() {
            let _ = system::kill_process(pid, started);
        }
    }
}

/// The cache namespace's fusectl mount, made the first time. Keeping it
/// mounted keeps the machine's one fusectl superblock alive, so a lookup
/// costs one `fstatat` and not a new superblock filled with a directory
/// for every FUSE connection on the machine (which any user can make by
/// the thousand).
fn fuse_control() -> SysResult<OwnedFd> {
    let here = system::working_dir();
    let is_control = |fd: &OwnedFd| {
        system::filesystem_type(fd.as_fd()).is_ok_and(|t| t == system::FUSECTL_MAGIC)
    };
    match system::open_dir_nofollow(here, FUSE_CONTROL) {
        Ok(fd) if is_control(&fd) => return Ok(fd),
        Ok(_) => {}
        Err(Error::NOENT) => match system::make_dir(here, FUSE_CONTROL, 0o700) {
            Ok(()) | Err(Error::EXIST) => {}
            Err(e) => return Err(e),
        },
        Err(e) => return Err(e),
    }
    let target = system::open_dir_nofollow(here, FUSE_CONTROL)?;
    system::attach_mount(system::fuse_control_mount()?.as_fd(), target.as_fd())?;
    let fd = system::open_dir_nofollow(here, FUSE_CONTROL)?;
    if is_control(&fd) {
        Ok(fd)
    } else {
        Err(Error::NOTDIR)
    }
}
