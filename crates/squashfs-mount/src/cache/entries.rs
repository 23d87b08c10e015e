//! The cache namespace's entries, as seen from inside it (every function
//! here runs in `Store::visit`, as root): reading, validating, cloning,
//! inserting and removing them.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::entry_names::is_entry_name;
use super::meta::{Identity, Kind, Meta, META_LIMIT};
use super::{CacheError, MARKER, META_ATTRIBUTE, SECRET_ATTRIBUTE, SHARED_ATTRIBUTE};
use crate::config::MAX_CACHE_ENTRIES;
use crate::system::{self, Error, Uid};

/// Directories of the host's mount namespace that work in the cache's
/// namespace needs (its root is a bare tmpfs): /dev, for the loop devices
/// of kernel instances; /proc, for the servers of FUSE instances. Opened
/// before a visit.
pub struct Host {
    pub dev: OwnedFd,
    pub proc: OwnedFd,
}

impl Host {
    pub(crate) fn open() -> Result<Host, CacheError> {
        let open = |d: &str| {
            system::open_dir_nofollow(system::working_dir(), d)
                .map_err(CacheError::system(format!("cannot open {d}")))
        };
        Ok(Host {
            dev: open("/dev")?,
            proc: open("/proc")?,
        })
    }

    /// Whether the FUSE server `pid` that started at `started` still runs,
    /// and whether it found its image corrupt.
    fn server(&self, pid: u32, started: u64) -> ServerState {
        match system::process_name_and_start_in(self.proc.as_fd(), &format!("{pid}/stat")) {
            Some((_, s)) if s != started => ServerState::Gone,
            Some((name, _)) if name == CORRUPT_SERVER => ServerState::Corrupt,
            Some(_) => ServerState::Runs,
            None => ServerState::Gone,
        }
    }

    /// Whether the FUSE server `pid` that started at `started` still runs
    /// and may serve more launches.
    fn server_runs(&self, pid: u32, started: u64) -> bool {
        self.server(pid, started) == ServerState::Runs
    }
}

/// The name a FUSE server takes once it found its image corrupt (the
/// server's `sys::CORRUPT_NAME`; only the server itself can set it): its
/// instance is not reused, and its entry counts as broken.
const CORRUPT_SERVER: &str = "sqfsmnt-corrupt";

/// What became of a cached instance's FUSE server.
#[derive(PartialEq, Eq)]
enum ServerState {
    Runs,
    /// It runs, but found its image corrupt.
    Corrupt,
    Gone,
}

/// One cached entry, as listed.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub meta: Option<Meta>,
    /// `meta` parses and `mnt` is a squashfs mount of its loop device.
    pub valid: bool,
    pub last_used: i64,
    /// A kernel instance another user than its maker cloned.
    pub shared: bool,
}

pub(super) fn path(name: &str, leaf: &str) -> String {
    if leaf.is_empty() {
        format!("/{name}")
    } else {
        format!("/{name}/{leaf}")
    }
}

/// Missing parts are fine (a half-made entry, or a stray file that an
/// earlier version of the tool left, where a path below it is no
/// directory).
fn ignore_missing(r: Result<(), Error>) -> Result<(), Error> {
    match r {
        Err(Error::NOENT) | Err(Error::NOTDIR) => Ok(()),
        other => other,
    }
}

/// Whether a clone is the record's instance: for a kernel instance a
/// read-only, nosuid, nodev squashfs mount of its loop device; for a FUSE
/// instance one on its device, asked without a request to its server
/// (which its user may have stopped: this runs under the cache's lock).
/// A clone that cannot be looked at is not.
fn is_recorded_instance(clone: &OwnedFd, meta: &Meta) -> bool {
    if let Kind::Fuse { .. } = meta.kind {
        return system::fstat_cached(clone.as_fd()).is_ok_and(|st| st.dev == meta.device);
    }
    let (Ok(st), Ok(magic), Ok(flags)) = (
        system::fstat(clone.as_fd()),
        system::filesystem_type(clone.as_fd()),
        system::mount_flags(clone.as_fd()),
    ) else {
        return false;
    };
    st.dev == meta.device && magic == system::SQUASHFS_MAGIC && flags == (true, true, true)
}

pub(super) fn read_secret(create: bool) -> Result<Option<[u8; 32]>, CacheError> {
    match system::attribute(MARKER, SECRET_ATTRIBUTE, 32) {
        Ok(Some(bytes)) if bytes.len() == 32 => return Ok(bytes.try_into().ok()),
        Ok(None) if create => {}
        Ok(None) => return Ok(None),
        _ => return Err(CacheError::SecretUnreadable),
    }
    // A namespace made by an earlier version has none yet.
    let secret = system::random_bytes::<32>().map_err(CacheError::system("getrandom"))?;
    system::set_attribute(MARKER, SECRET_ATTRIBUTE, &secret)
        .map_err(CacheError::system("cannot keep the cache's secret"))?;
    Ok(Some(secret))
}

/// The record of entry `name` (an extended attribute of its directory:
/// writing it is not limited by the caller's RLIMIT_FSIZE).
fn read_meta(name: &str) -> Option<Meta> {
    match system::attribute(&path(name, ""), META_ATTRIBUTE, META_LIMIT) {
        Ok(Some(bytes)) => Meta::decode(&bytes),
        _ => None,
    }
}

/// `copies` clones of entry `name`, for user `by`, if it is of the same
/// unchanged file `id` and still good: a kernel instance whose loop device
/// is still backed by that very file, or a FUSE instance of `fuse_user`
/// whose server still runs. Else none, and the entry's record when there
/// is one (to tell why). A kernel instance cloned for another user than
/// its maker is marked shared first (see [`SHARED_ATTRIBUTE`]).
pub(super) fn clones_of(
    name: &str,
    id: &Identity,
    (fuse_user, by): (Option<Uid>, Uid),
    copies: usize,
    host: &Host,
) -> (Vec<OwnedFd>, Option<Meta>) {
    let Some(meta) = read_meta(name).filter(|m| m.same_file(id)) else {
        return (Vec::new(), None);
    };
    let good = match meta.kind {
        Kind::Kernel { loop_number, .. } => {
            loop_backed_by(loop_number, &meta, id, host.dev.as_fd())
        }
        Kind::Fuse { pid, started } => match host.server(pid, started) {
            // Not reused, and nothing to say: the launch starts a fresh
            // instance, which replaces the entry (`Store::place`).
            ServerState::Corrupt => return (Vec::new(), None),
            s => fuse_user == Some(meta.uid) && s == ServerState::Runs,
        },
    };
    if !good {
        return (Vec::new(), Some(meta));
    }
    // Before any clone exists: an entry evicted later, while this clone
    // may hold its device, is known to be another user's too.
    if matches!(meta.kind, Kind::Kernel { .. })
        && by != meta.uid
        && system::set_attribute(&path(name, ""), SHARED_ATTRIBUTE, b"1").is_err()
    {
        return (Vec::new(), Some(meta));
    }
    let checked =
        |c: system::SysResult<OwnedFd>| c.ok().filter(|c| is_recorded_instance(c, &meta)).ok_or(());
    let Ok(out) = clones(name, copies)
        .map(checked)
        .collect::<Result<Vec<_>, ()>>()
    else {
        return (Vec::new(), Some(meta));
    };
    // Reuse takes no lock: the entry may have been evicted and made again
    // between the record's read and the clones. The clones are the
    // record's only if the record is still the one they were checked
    // against (it is set last when an entry is made).
    if read_meta(name).as_ref() != Some(&meta) {
        return (Vec::new(), Some(meta));
    }
    let _ = system::touch(system::working_dir(), &path(name, ""));
    (out, Some(meta))
}

/// The mode of an entry's directories.
const ENTRY_MODE: u32 = 0o700;

/// Whether loop device `number` is still the record's, backed by the file
/// `id`, read-only and autoclear.
fn loop_backed_by(number: u32, meta: &Meta, id: &Identity, dev: BorrowedFd<'_>) -> bool {
    let Ok(loop_dev) = system::open_loop_device(dev, number) else {
        return false;
    };
    if system::fstat(loop_dev.as_fd()).map(|s| s.rdev).ok() != Some(meta.device) {
        return false;
    }
    let Ok(info) = system::loop_status(loop_dev.as_fd()) else {
        return false;
    };
    let want = system::LO_FLAGS_READ_ONLY | system::LO_FLAGS_AUTOCLEAR;
    info.lo_device == id.dev && info.lo_inode == id.ino && info.lo_flags & want == want
}

fn read_entry(name: &str, host: &Host) -> Result<Option<Entry>, CacheError> {
    let here = system::working_dir();
    let dir = match system::stat_at(here, &path(name, "")) {
        Ok(d) => d,
        Err(Error::NOENT) => return Ok(None),
        Err(e) => {
            return Err(CacheError::System(
                format!("cannot stat cache entry {name}"),
                e,
            ))
        }
    };
    if dir.is_dir() && dir.mode & 0o7777 != ENTRY_MODE {
        // Made under a caller's umask by an earlier version: root could
        // neither reuse nor remove it. Root's own entry gets its mode back.
        if let Ok(fd) = system::open_dir_nofollow(here, path(name, "")) {
            let _ = system::ensure_mode(fd.as_fd(), ENTRY_MODE);
        }
    }
    let meta = if dir.is_dir() { read_meta(name) } else { None };
    let shared = meta
        .as_ref()
        .is_some_and(|m| matches!(m.kind, Kind::Kernel { .. }))
        && matches!(
            system::attribute(&path(name, ""), SHARED_ATTRIBUTE, 8),
            Ok(Some(_))
        );
    let last_used = dir.mtime.0;
    let valid = dir.is_dir()
        && is_entry_name(name.as_bytes())
        && meta
            .as_ref()
            .is_some_and(|m| instance_in_place(name, m, host));
    Ok(Some(Entry {
        name: name.to_string(),
        meta,
        valid,
        last_used,
        shared,
    }))
}

/// Whether entry `name` holds the instance `m` records: the kernel's
/// squashfs on its loop device, or a FUSE mount on its device whose server
/// runs (looked at without a request to that server).
fn instance_in_place(name: &str, m: &Meta, host: &Host) -> bool {
    let here = system::working_dir();
    match m.kind {
        Kind::Kernel { .. } => match system::open_dir_nofollow(here, path(name, "mnt")) {
            Ok(mnt) => {
                system::fstat(mnt.as_fd()).map(|s| s.dev).ok() == Some(m.device)
                    && system::filesystem_type(mnt.as_fd()).ok() == Some(system::SQUASHFS_MAGIC)
            }
            Err(_) => false,
        },
        Kind::Fuse { pid, started } => {
            system::stat_at_cached(here, &path(name, "mnt"))
                .map(|s| s.dev)
                .ok()
                == Some(m.device)
                && host.server_runs(pid, started)
        }
    }
}

/// Every name in the cache namespace's root but its own files: entries, and
/// anything else (left by a killed launch, or by an earlier version of the
/// tool), listed as broken so that collection removes it.
pub(super) fn list_entries(host: &Host) -> Result<Vec<Entry>, CacheError> {
    let (names, _) = system::list_dir(system::working_dir(), "/", MAX_CACHE_ENTRIES)
        .map_err(CacheError::system("cannot list the cache"))?;
    let mut out = Vec::new();
    for name in names {
        let name = name.as_bytes();
        if MARKER.as_bytes()[1..] == *name || name.contains(&b'/') || name.starts_with(b".") {
            continue;
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if let Some(e) = read_entry(&name, host)? {
            out.push(e);
        }
    }
    Ok(out)
}

/// Unmounts the instance of entry `name` (lazily: clones attached by running
/// launches keep the superblock and loop device until they exit) and removes
/// the entry. Missing parts are fine.
pub(super) fn remove_entry(name: &str) -> Result<(), CacheError> {
    let here = system::working_dir();
    let mnt = path(name, "mnt");
    for _ in 0..8 {
        match system::detach_mount(&mnt) {
            Ok(()) => continue,
            Err(Error::INVAL) | Err(Error::NOENT) | Err(Error::NOTDIR) => break,
            Err(e) => {
                return Err(CacheError::System(
                    format!("cannot unmount cache entry {name}"),
                    e,
                ))
            }
        }
    }
    // meta and meta.tmp: the record files of earlier versions.
    ignore_missing(system::remove_file(here, &path(name, "meta")))
        .and_then(|()| ignore_missing(system::remove_file(here, &path(name, "meta.tmp"))))
        .and_then(|()| ignore_missing(system::remove_dir(here, &mnt)))
        .and_then(|()| match system::remove_dir(here, &path(name, "")) {
            // A stray file rather than a directory.
            Err(Error::NOTDIR) => system::remove_file(here, &path(name, "")),
            other => ignore_missing(other),
        })
        .map_err(CacheError::system(format!(
            "cannot remove cache entry {name}"
        )))
}

/// Mounts the detached instance `mount` as entry `name`, commits `meta`
/// (the record is set last: an entry without it is broken) and returns
/// `copies` clones.
pub(super) fn insert_entry(
    name: &str,
    mount: &OwnedFd,
    meta: &Meta,
    copies: usize,
) -> Result<Vec<OwnedFd>, CacheError> {
    let here = system::working_dir();
    let err =
        |what: &str, e: Error| CacheError::System(format!("cannot {what} cache entry {name}"), e);
    system::make_dir(here, &path(name, ""), ENTRY_MODE).map_err(|e| err("create", e))?;
    system::make_dir(here, &path(name, "mnt"), ENTRY_MODE).map_err(|e| err("create", e))?;
    let target = system::open_dir_nofollow(here, path(name, "mnt")).map_err(|e| err("open", e))?;
    system::attach_mount(mount.as_fd(), target.as_fd()).map_err(|e| err("mount", e))?;
    system::set_attribute(&path(name, ""), META_ATTRIBUTE, meta.encode().as_bytes())
        .map_err(|e| err("commit", e))?;
    clones(name, copies)
        .map(|c| c.map_err(|e| err("clone", e)))
        .collect()
}

/// `copies` (at least one) detached clones of entry `name`'s instance.
fn clones(name: &str, copies: usize) -> impl Iterator<Item = system::SysResult<OwnedFd>> + '_ {
    (0..copies.max(1)).map(move |_| system::clone_mount_at(&path(name, "mnt")))
}
