//! The image cache: one read-only instance (loop device + squashfs
//! superblock) per image file is kept mounted after a launch ends, so that
//! the next launch of the same file attaches a clone of it and finds the
//! kernel's page and dentry caches warm. No daemon. See doc/cache.md.
//!
//! Where instances live: in a mount namespace of their own (the *cache
//! namespace*) whose root is a small private tmpfs; nothing else is mounted
//! in it, and no process stays in it. It is kept alive by a bind mount of
//! its nsfs file on `/run/squashfs-mount/ns` (a root-only directory, made a
//! private mount so the bind never propagates). Only a root process can
//! enter it (setns needs CAP_SYS_ADMIN), and the tool enters it only inside
//! `as_root` sections, non-dumpable, for a few system calls.
//!
//! Layout inside the cache namespace, one directory per image file:
//!
//! ```text
//! /squashfs-mount-cache          marker: this namespace is ours
//! /<dev>-<ino>/mnt               the instance, mounted ro,nosuid,nodev
//! /<dev>-<ino>/meta              identity of the image file, loop device,
//!                                path; written last (rename), its mtime
//!                                is the time of last use
//! ```
//!
//! An entry is valid only when `meta` parses and `mnt` is a squashfs mount
//! of the loop device `meta` names; anything else (a launch killed half-way)
//! is removed by the next process that holds the lock exclusively.
//!
//! Locking: `flock` on `/run/squashfs-mount/lock`, shared to reuse an
//! instance, exclusive to create or evict one; taken only inside `as_root`,
//! waited for at most `cache-lock-timeout`, after which the launch mounts a
//! private instance instead (a caller who stops their own launch with
//! SIGSTOP while it holds the lock only slows others down by that long).

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::config::{self, Settings};
use crate::error::{self, print_stdout, Failure};
use crate::image::Image;
use crate::instance;
use crate::loopdev::LoopOptions;
use crate::privilege::{ActingAsCaller, Privileges};
use crate::system::{self, Error, FileId, LockKind};

/// Compiled-in state directory (root-only, 0700).
pub const CACHE_DIR: &str = "/run/squashfs-mount";
const NS_FILE: &str = "ns";
const LOCK_FILE: &str = "lock";
const GC_STAMP: &str = "gc-stamp";
/// Marker at the root of the cache namespace.
const MARKER: &str = "/squashfs-mount-cache";
/// Size limit of the cache namespace's tmpfs (only directories and small
/// `meta` files live there).
const TMPFS_SIZE: &str = "8m";
const META_LIMIT: usize = 16 * 1024;
const MAX_ENTRIES: usize = 4096;
/// Seconds between two opportunistic collections at launch.
const GC_INTERVAL: i64 = 10;
/// At most this many evictions by one launch.
const MAX_EVICTIONS_PER_LAUNCH: usize = 8;
/// Largest /proc/<pid>/mountinfo read when looking for users of instances.
const MOUNTINFO_LIMIT: usize = 8 << 20;
/// CPUs tried when the kernel refuses to bind the cache namespace.
const MAX_CPU_ATTEMPTS: usize = 1024;
/// Loop devices' block major number.
const LOOP_MAJOR: u64 = 7;

// ---------------------------------------------------------------------------
// Pure parts: entry names, metadata, device numbers, eviction plan
// ---------------------------------------------------------------------------

/// The entry name of an image file: `<dev>-<ino>` in hex.
pub fn key_for(dev: u64, ino: u64) -> String {
    format!("{dev:x}-{ino:x}")
}

/// Whether `name` is an entry name made by [`key_for`].
pub fn is_key(name: &[u8]) -> bool {
    let mut parts = name.split(|&b| b == b'-');
    let ok = |p: Option<&[u8]>| {
        matches!(p, Some(p) if !p.is_empty() && p.len() <= 16 && p.iter().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// (major, minor) of a Linux `dev_t` as returned by stat.
pub fn dev_major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
    (major, minor)
}

/// The `dev_t` for (major, minor), as stat returns it.
pub fn make_dev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32) | ((major & 0x0000_0fff) << 8) | ((minor & 0xffff_ff00) << 12) | (minor & 0x0000_00ff)
}

/// What the cache records about an instance. Written and read only by root
/// in the cache namespace; parsed strictly and bounds-checked anyway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub loop_number: u32,
    pub loop_rdev: u64,
    /// Who created the instance (shown to root only).
    pub uid: u32,
    pub created: i64,
    /// The kernel's name of the image file when the instance was created.
    pub path: Vec<u8>,
}

/// First line of every `meta`: the cache's on-disk format and its version.
/// An entry of any other version (left by an older or newer package while
/// instances were cached) does not decode, so it counts as broken: it is
/// never reused, and is evicted (then recreated) by the next launch of its
/// image or by any collection. Change the number whenever `meta` or the
/// entry layout changes.
const META_HEADER: &str = "squashfs-mount-cache 1";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; rust-version is 1.75
    if s.len() % 2 != 0 || s.len() > 2 * 4096 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Meta {
    pub fn encode(&self) -> String {
        format!(
            "{META_HEADER}\ndev {}\nino {}\nsize {}\nmtime {} {}\nctime {} {}\nloop {}\nrdev {}\nuid {}\ncreated {}\npath {}\n",
            self.dev,
            self.ino,
            self.size,
            self.mtime.0,
            self.mtime.1,
            self.ctime.0,
            self.ctime.1,
            self.loop_number,
            self.loop_rdev,
            self.uid,
            self.created,
            hex(&self.path)
        )
    }

    /// Parses what [`Meta::encode`] wrote; anything else is None.
    pub fn decode(bytes: &[u8]) -> Option<Meta> {
        if bytes.len() > META_LIMIT {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        if lines.next()? != META_HEADER {
            return None;
        }
        let mut field = |name: &str| -> Option<Vec<&str>> {
            let line = lines.next()?;
            let mut words = line.split(' ');
            if words.next()? != name {
                return None;
            }
            Some(words.collect())
        };
        fn one<T: std::str::FromStr>(w: Option<Vec<&str>>) -> Option<T> {
            match w?.as_slice() {
                [v] => v.parse().ok(),
                _ => None,
            }
        }
        fn two(w: Option<Vec<&str>>) -> Option<(i64, i64)> {
            match w?.as_slice() {
                [a, b] => Some((a.parse().ok()?, b.parse().ok()?)),
                _ => None,
            }
        }
        let meta = Meta {
            dev: one(field("dev"))?,
            ino: one(field("ino"))?,
            size: one(field("size"))?,
            mtime: two(field("mtime"))?,
            ctime: two(field("ctime"))?,
            loop_number: one(field("loop"))?,
            loop_rdev: one(field("rdev"))?,
            uid: one(field("uid"))?,
            created: one(field("created"))?,
            path: unhex(one::<String>(field("path"))?.as_str())?,
        };
        if lines.next().is_some() {
            return None;
        }
        Some(meta)
    }

    /// Same file, unchanged: device, inode, size, mtime and ctime.
    pub fn same_file(&self, id: &FileId) -> bool {
        self.dev == id.dev && self.ino == id.ino && self.size == id.size && self.mtime == id.mtime && self.ctime == id.ctime
    }
}

/// Who asks for a collection, which decides what may be evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// At the start of a launch: broken entries, and unused instances whose
    /// file was deleted, that were idle too long, or beyond the count; at
    /// most [`MAX_EVICTIONS_PER_LAUNCH`].
    Launch,
    /// `--gc` by a user: as `Launch` without the bound, plus every unused
    /// instance of an image the user can open.
    User,
    /// `--gc` by root: every unused instance.
    Root,
    /// `--gc --all` by root: every instance, used or not (processes that
    /// have one mounted keep it until they exit).
    All,
}

/// One entry as the eviction plan sees it.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub valid: bool,
    pub deleted: bool,
    pub in_use: bool,
    pub visible: bool,
    pub last_used: i64,
}

/// Indices of the entries to evict, in order. Pure.
pub fn plan(c: &[Candidate], now: i64, max_idle: u64, max_instances: u32, mode: Mode) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    // Broken entries first: they hold nothing anyone can reuse.
    out.extend((0..c.len()).filter(|&i| !c[i].valid || mode == Mode::All));
    if mode != Mode::All {
        let idle = |i: usize| now.saturating_sub(c[i].last_used) >= max_idle.min(i64::MAX as u64) as i64;
        let evictable = |i: usize| c[i].valid && !c[i].in_use;
        for (i, e) in c.iter().enumerate() {
            if !evictable(i) {
                continue;
            }
            let want = e.deleted || idle(i) || mode == Mode::Root || (mode == Mode::User && e.visible);
            if want {
                out.push(i);
            }
        }
        // Beyond the count: least recently used unused instances. Instances
        // in use are kept (evicting them would free nothing now).
        let mut kept: Vec<usize> = (0..c.len()).filter(|&i| c[i].valid && !out.contains(&i)).collect();
        let mut excess = kept.len().saturating_sub(max_instances as usize);
        kept.sort_by_key(|&i| c[i].last_used);
        for i in kept {
            if excess == 0 {
                break;
            }
            if evictable(i) {
                out.push(i);
                excess -= 1;
            }
        }
    }
    if mode == Mode::Launch {
        out.truncate(MAX_EVICTIONS_PER_LAUNCH);
    }
    out
}

/// The devices (`dev_t`) named in the third field of mountinfo lines.
pub fn mountinfo_devices(text: &[u8]) -> HashSet<u64> {
    let mut out = HashSet::new();
    for line in text.split(|&b| b == b'\n') {
        let Some(field) = line.split(|&b| b == b' ').nth(2) else { continue };
        let Ok(field) = std::str::from_utf8(field) else { continue };
        let Some((maj, min)) = field.split_once(':') else { continue };
        if let (Ok(maj), Ok(min)) = (maj.parse::<u64>(), min.parse::<u64>()) {
            out.insert(make_dev(maj, min));
        }
    }
    out
}

/// Whether the loop device's backing file (its sysfs `backing_file`) has
/// been deleted since the instance was made. A name that ends in
/// " (deleted)" by itself is recognised by being the recorded one; a
/// misjudgement only evicts an unused instance early.
pub fn backing_file_deleted(sysfs_backing_file: &[u8], recorded: &[u8]) -> bool {
    let name = sysfs_backing_file.strip_suffix(b"\n").unwrap_or(sysfs_backing_file);
    name.ends_with(b" (deleted)") && name != recorded
}

// ---------------------------------------------------------------------------
// The cache
// ---------------------------------------------------------------------------

/// Why a launch gets no cached instance.
#[derive(Debug)]
pub enum Miss {
    /// The image itself could not be mounted: reported as without a cache.
    Image(Failure),
    /// The cache could not be used: the launch warns once and mounts a
    /// private instance.
    Unavailable(String),
}

/// An open handle on the cache. All methods need root (call them inside
/// `Privileges::as_root`).
///
/// It holds two file descriptors (the lock file and the namespace) for as
/// long as it lives; others are opened only while needed, so that a launch
/// with a small open-file limit is not made to fail by the cache.
pub struct Cache {
    lock: OwnedFd,
    ns: OwnedFd,
    ns_ino: u64,
    settings: Settings,
}

/// The cache as one launch uses it: possibly absent (`--no-cache`, turned
/// off, or it could not be opened), with at most one pending warning, which
/// [`LaunchCache::finish`] prints once the launch has succeeded (a launch
/// that fails says only why it failed).
pub struct LaunchCache {
    cache: Option<Cache>,
    warning: RefCell<Option<String>>,
}

impl LaunchCache {
    /// No cache for this launch.
    pub fn none() -> LaunchCache {
        LaunchCache { cache: None, warning: RefCell::new(None) }
    }

    /// Opens the cache, creating its namespace if needed, and runs a bounded
    /// collection. Needs root.
    pub fn open(settings: &Settings) -> LaunchCache {
        match Cache::open(settings, true) {
            Ok(Some(cache)) => {
                cache.collect_at_launch();
                LaunchCache { cache: Some(cache), warning: RefCell::new(None) }
            }
            Ok(None) => LaunchCache::none(),
            Err(why) => LaunchCache {
                cache: None,
                warning: RefCell::new(Some(format!("image cache unavailable ({why}); mounting private instances"))),
            },
        }
    }

    /// A clone of the cached instance of `image`, or None when there is no
    /// usable cache (the first problem is kept as the warning and the cache
    /// is not tried again in this launch; the caller then mounts a private
    /// instance). An image that cannot be mounted at all is an error, as
    /// without the cache. Needs root.
    pub fn obtain(&self, image: &Image, options: LoopOptions, subject: &str) -> Result<Option<OwnedFd>, Failure> {
        if self.warning.borrow().is_some() {
            return Ok(None);
        }
        let Some(cache) = &self.cache else { return Ok(None) };
        match cache.instance(image, options, subject) {
            Ok(tree) => Ok(Some(tree)),
            Err(Miss::Image(f)) => Err(f),
            Err(Miss::Unavailable(why)) => {
                *self.warning.borrow_mut() = Some(format!("{subject}: image cache unavailable ({why}); mounting a private instance"));
                Ok(None)
            }
        }
    }

    /// Another clone of a clone this cache handed out, made inside the
    /// cache's namespace (see `instance::duplicate`). Needs root.
    pub fn duplicate(&self, tree: &OwnedFd) -> Option<Result<OwnedFd, String>> {
        self.cache.as_ref().map(|c| c.duplicate(tree))
    }

    /// Prints the pending warning, if any, and closes the cache's files.
    pub fn finish(self) {
        if let Some(w) = self.warning.into_inner() {
            error::warn(w);
        }
    }
}

/// One cached entry, as listed.
#[derive(Clone, Debug)]
pub struct Entry {
    pub key: String,
    pub meta: Option<Meta>,
    /// `meta` parses and `mnt` is a squashfs mount of its loop device.
    pub valid: bool,
    pub last_used: i64,
}

struct LockGuard<'a>(BorrowedFd<'a>);

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let _ = system::unlock(self.0);
    }
}

fn root_only(fd: BorrowedFd<'_>, what: &str) -> Result<(), String> {
    let id = system::fstat(fd).map_err(|e| format!("cannot stat {what}: {e}"))?;
    if !id.is_dir() || id.uid != 0 || id.mode & 0o077 != 0 {
        return Err(format!("{what} is not a directory owned by root with mode 0700"));
    }
    Ok(())
}

fn entry_path(key: &str, leaf: &str) -> String {
    if leaf.is_empty() {
        format!("/{key}")
    } else {
        format!("/{key}/{leaf}")
    }
}

fn ignore_missing(r: Result<(), Error>) -> Result<(), Error> {
    match r {
        Err(Error::NOENT) => Ok(()),
        other => other,
    }
}

impl Cache {
    /// Opens the cache. With `create`, makes the state directory and the
    /// cache namespace when they do not exist; without, answers None then.
    pub fn open(settings: &Settings, create: bool) -> Result<Option<Cache>, String> {
        let dir = if create {
            system::open_or_create_dir(CACHE_DIR, 0o700)
        } else {
            system::open_dir_nofollow(system::working_dir(), CACHE_DIR)
        };
        let dir = match dir {
            Ok(d) => d,
            Err(Error::NOENT) if !create => return Ok(None),
            Err(e) => return Err(format!("cannot use {CACHE_DIR}: {e}")),
        };
        root_only(dir.as_fd(), CACHE_DIR)?;
        let lock = system::open_lock_file(dir.as_fd(), LOCK_FILE, 0o600)
            .map_err(|e| format!("cannot open {CACHE_DIR}/{LOCK_FILE}: {e}"))?;
        let mut cache = Cache {
            ns: match Self::open_namespace(dir.as_fd()) {
                Some(ns) => ns,
                None if !create => return Ok(None),
                None => {
                    let _g = lock_with_timeout(lock.as_fd(), LockKind::Exclusive, settings.cache_lock_timeout_ms)?;
                    match Self::open_namespace(dir.as_fd()) {
                        Some(ns) => ns,
                        None => {
                            create_namespace(dir.as_fd())?;
                            // The directory is now a private mount of its own.
                            let dir = system::open_dir_nofollow(system::working_dir(), CACHE_DIR)
                                .map_err(|e| format!("cannot open {CACHE_DIR}: {e}"))?;
                            Self::open_namespace(dir.as_fd())
                                .ok_or_else(|| format!("{CACHE_DIR}/{NS_FILE} is not a namespace after creating it"))?
                        }
                    }
                }
            },
            lock,
            ns_ino: 0,
            settings: settings.clone(),
        };
        drop(dir);
        // Again: creation may have put a private mount over the directory.
        let dir = system::open_dir_nofollow(system::working_dir(), CACHE_DIR).map_err(|e| format!("cannot open {CACHE_DIR}: {e}"))?;
        root_only(dir.as_fd(), CACHE_DIR)?;
        drop(dir);
        cache.ns_ino = system::fstat(cache.ns.as_fd()).map_err(|e| format!("cannot stat the cache namespace: {e}"))?.ino;
        Ok(Some(cache))
    }

    /// The nsfs file of the cache namespace, if one is bound there.
    fn open_namespace(dir: BorrowedFd<'_>) -> Option<OwnedFd> {
        let fd = system::open_read_nofollow(dir, NS_FILE).ok()?;
        (system::filesystem_type(fd.as_fd()).ok()? == system::NSFS_MAGIC).then_some(fd)
    }

    fn lock(&self, kind: LockKind) -> Result<LockGuard<'_>, String> {
        lock_with_timeout(self.lock.as_fd(), kind, self.settings.cache_lock_timeout_ms)
    }

    /// Runs `f` inside the cache namespace (paths in `f` are relative to its
    /// root). Refuses a namespace without our marker.
    fn visit<T>(&self, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
        system::in_mount_namespace(self.ns.as_fd(), || {
            match system::stat_at(system::working_dir(), MARKER) {
                Ok(id) if id.is_regular() => f(),
                _ => Err(format!("{CACHE_DIR}/{NS_FILE} is not squashfs-mount's cache namespace")),
            }
        })
        .map_err(|e| format!("cannot enter the cache namespace: {e}"))?
    }

    /// A clone of the cached instance of `image` (made now if there is none
    /// or the cached one is stale), as a detached mount.
    pub fn instance(&self, image: &Image, options: LoopOptions, subject: &str) -> Result<OwnedFd, Miss> {
        // Identity of the opened file, now (not a path: the fd).
        let id = system::fstat(image.fd.as_fd()).map_err(|e| Miss::Unavailable(format!("cannot stat the image: {e}")))?;
        let key = key_for(id.dev, id.ino);
        // /dev, for the loop device check inside the cache namespace.
        let dev_dir = system::open_dir_nofollow(system::working_dir(), "/dev")
            .map_err(|e| Miss::Unavailable(format!("cannot open /dev: {e}")))?;
        let dev_dir = dev_dir.as_fd();
        {
            let _g = self.lock(LockKind::Shared).map_err(Miss::Unavailable)?;
            if let Some(clone) = self.visit(|| self.reuse(&key, &id, dev_dir)).map_err(Miss::Unavailable)? {
                return Ok(clone);
            }
        }
        let _g = self.lock(LockKind::Exclusive).map_err(Miss::Unavailable)?;
        // Another launch may have made it while we waited.
        if let Some(clone) = self.visit(|| self.reuse(&key, &id, dev_dir)).map_err(Miss::Unavailable)? {
            return Ok(clone);
        }
        // A stale (modified, or half-made) entry of this file goes first.
        self.visit(|| remove_entry(&key)).map_err(Miss::Unavailable)?;
        let _ = self.collect_locked(Mode::Launch, &HashSet::new());
        let fresh = instance::fresh_instance(image, options, subject).map_err(Miss::Image)?;
        let id = system::fstat(image.fd.as_fd()).map_err(|e| Miss::Unavailable(format!("cannot stat the image: {e}")))?;
        let meta = Meta {
            dev: id.dev,
            ino: id.ino,
            size: id.size,
            mtime: id.mtime,
            ctime: id.ctime,
            loop_number: fresh.loop_number,
            loop_rdev: fresh.loop_rdev,
            uid: system::real_uid().as_raw(),
            created: system::unix_time(),
            path: image.path.as_bytes().to_vec(),
        };
        let inserted = self.visit(|| {
            let r = insert_entry(&key, fresh.mount, &meta);
            if r.is_err() {
                let _ = remove_entry(&key);
            }
            r
        });
        match inserted {
            Ok(clone) => {
                check_clone(&clone, meta.loop_rdev).map_err(Miss::Unavailable)?;
                Ok(clone)
            }
            Err(why) => Err(Miss::Unavailable(why)),
        }
    }

    /// Inside the cache namespace, lock held: a clone of entry `key` if it
    /// is valid, of the same unchanged file `id`, and its loop device is
    /// still backed by that very file.
    fn reuse(&self, key: &str, id: &FileId, dev_dir: BorrowedFd<'_>) -> Result<Option<OwnedFd>, String> {
        let Some(entry) = read_entry(key)? else { return Ok(None) };
        let Some(meta) = entry.meta.filter(|_| entry.valid) else { return Ok(None) };
        if !meta.same_file(id) {
            return Ok(None);
        }
        let Ok(dev) = system::open_loop_device_at(dev_dir, meta.loop_number) else { return Ok(None) };
        if system::fstat(dev.as_fd()).map(|s| s.rdev).ok() != Some(meta.loop_rdev) {
            return Ok(None);
        }
        let Ok(info) = system::loop_status(dev.as_fd()) else { return Ok(None) };
        let want = system::LO_FLAGS_READ_ONLY | system::LO_FLAGS_AUTOCLEAR;
        if info.lo_device != id.dev || info.lo_inode != id.ino || info.lo_flags & want != want {
            return Ok(None);
        }
        let clone = system::clone_mount_at(&entry_path(key, "mnt")).map_err(|e| format!("cannot clone the cached instance: {e}"))?;
        check_clone(&clone, meta.loop_rdev)?;
        let _ = system::touch(system::working_dir(), &entry_path(key, "meta"));
        Ok(Some(clone))
    }

    /// Another clone of a clone this cache handed out (see
    /// `instance::duplicate`).
    pub fn duplicate(&self, tree: &OwnedFd) -> Result<OwnedFd, String> {
        self.visit(|| system::clone_mount(tree.as_fd()).map_err(|e| format!("in the cache namespace: {e}")))
    }

    /// Lists the entries (shared lock).
    pub fn entries(&self) -> Result<Vec<Entry>, String> {
        let _g = self.lock(LockKind::Shared)?;
        self.visit(list_entries)
    }

    /// At the start of a launch, at most every [`GC_INTERVAL`] seconds and
    /// only if nobody holds the lock: a bounded collection.
    fn collect_at_launch(&self) {
        let now = system::unix_time();
        let Ok(dir) = system::open_dir_nofollow(system::working_dir(), CACHE_DIR) else { return };
        if let Ok(st) = system::stat_at(dir.as_fd(), GC_STAMP) {
            let last = st.mtime.0;
            if last <= now && now - last < GC_INTERVAL {
                return;
            }
        }
        if !matches!(system::try_lock(self.lock.as_fd(), LockKind::Exclusive), Ok(true)) {
            return;
        }
        let _g = LockGuard(self.lock.as_fd());
        let _ = system::create_file_if_missing(dir.as_fd(), GC_STAMP, 0o600);
        let _ = system::touch(dir.as_fd(), GC_STAMP);
        drop(dir);
        let _ = self.collect_locked(Mode::Launch, &HashSet::new());
    }

    /// `--gc`: evicts what `mode` allows (exclusive lock). `visible` names
    /// the entries (keys) whose image the calling user can open.
    pub fn collect(&self, mode: Mode, visible: &HashSet<String>) -> Result<Vec<(Entry, bool)>, String> {
        let _g = self.lock(LockKind::Exclusive)?;
        self.collect_locked(mode, visible)
    }

    /// Returns every entry with whether it was evicted.
    fn collect_locked(&self, mode: Mode, visible: &HashSet<String>) -> Result<Vec<(Entry, bool)>, String> {
        let entries = self.visit(list_entries)?;
        let now = system::unix_time();
        let max_idle = self.settings.cache_max_idle;
        let mut cands: Vec<Candidate> = entries
            .iter()
            .map(|e| Candidate {
                valid: e.valid,
                deleted: e.meta.as_ref().is_some_and(|m| e.valid && loop_file_deleted(m)),
                in_use: false,
                visible: visible.contains(&e.key),
                last_used: e.last_used,
            })
            .collect();
        let valid = cands.iter().filter(|c| c.valid).count();
        let needs_usage = mode != Mode::All
            && valid > 0
            && (mode != Mode::Launch
                || valid > self.settings.cache_max_instances as usize
                || cands.iter().any(|c| c.valid && (c.deleted || now.saturating_sub(c.last_used) >= max_idle as i64)));
        if needs_usage {
            let devs: HashSet<u64> = entries.iter().filter(|e| e.valid).filter_map(|e| e.meta.as_ref().map(|m| m.loop_rdev)).collect();
            let used = self.devices_in_use(&devs);
            for (c, e) in cands.iter_mut().zip(&entries) {
                let rdev = e.meta.as_ref().map(|m| m.loop_rdev).unwrap_or(0);
                // Unknown (the scan failed): count as in use, evict nothing.
                c.in_use = used.as_ref().map(|u| u.contains(&rdev)).unwrap_or(true);
            }
        }
        let chosen = plan(&cands, now, max_idle, self.settings.cache_max_instances, mode);
        if !chosen.is_empty() {
            let keys: Vec<&str> = chosen.iter().map(|&i| entries[i].key.as_str()).collect();
            self.visit(|| {
                for k in &keys {
                    remove_entry(k)?;
                }
                Ok(())
            })?;
        }
        Ok(entries.into_iter().enumerate().map(|(i, e)| (e, chosen.contains(&i))).collect())
    }

    /// The loop devices among `devs` that some mount namespace other than
    /// the cache's has mounted (from /proc/<pid>/mountinfo, one process per
    /// namespace). None if that cannot be told.
    fn devices_in_use(&self, devs: &HashSet<u64>) -> Option<HashSet<u64>> {
        let here = system::working_dir();
        let (pids, more) = system::list_dir(here, "/proc", 1 << 22).ok()?;
        if more {
            return None;
        }
        let mut seen = HashSet::new();
        seen.insert(self.ns_ino);
        let mut used = HashSet::new();
        for pid in pids {
            let pid = pid.as_bytes();
            if pid.is_empty() || !pid.iter().all(u8::is_ascii_digit) {
                continue;
            }
            let pid = String::from_utf8_lossy(pid);
            let Ok(ns) = system::stat_following(here, &format!("/proc/{pid}/ns/mnt")) else { continue };
            if !seen.insert(ns.ino) {
                continue;
            }
            match system::read_file_at(here, &format!("/proc/{pid}/mountinfo"), MOUNTINFO_LIMIT) {
                Ok((_, true)) => return None,
                Ok((text, false)) => used.extend(mountinfo_devices(&text).intersection(devs)),
                // The process exited meanwhile; its namespace, if still
                // alive, is seen through another process.
                Err(_) => {
                    seen.remove(&ns.ino);
                }
            }
        }
        Some(used)
    }
}

/// Whether the file behind the instance's loop device was deleted.
fn loop_file_deleted(meta: &Meta) -> bool {
    let (major, minor) = dev_major_minor(meta.loop_rdev);
    if major != LOOP_MAJOR {
        return false;
    }
    match system::read_file_at(system::working_dir(), &format!("/sys/dev/block/{major}:{minor}/loop/backing_file"), 8192) {
        Ok((text, false)) => backing_file_deleted(&text, &meta.path),
        // No loop device any more behind a mounted instance cannot happen;
        // treat anything odd as "not known to be deleted".
        _ => false,
    }
}

fn lock_with_timeout(fd: BorrowedFd<'_>, kind: LockKind, timeout_ms: u64) -> Result<LockGuard<'_>, String> {
    let mut waited = 0u64;
    let mut step = 1u64;
    loop {
        match system::try_lock(fd, kind) {
            Ok(true) => return Ok(LockGuard(fd)),
            Ok(false) => {}
            Err(e) => return Err(format!("cannot lock {CACHE_DIR}/{LOCK_FILE}: {e}")),
        }
        if waited >= timeout_ms {
            return Err(format!("the cache lock was busy for {} ms", waited));
        }
        system::pause_millis(step);
        waited += step;
        step = (step * 2).min(16);
    }
}

/// Checks that a clone is a read-only, nosuid, nodev squashfs mount of the
/// loop device `rdev`.
fn check_clone(clone: &OwnedFd, rdev: u64) -> Result<(), String> {
    let st = system::fstat(clone.as_fd()).map_err(|e| format!("cannot stat the cached instance: {e}"))?;
    let magic = system::filesystem_type(clone.as_fd()).map_err(|e| format!("cannot statfs the cached instance: {e}"))?;
    let flags = system::mount_flags(clone.as_fd()).map_err(|e| format!("cannot read the cached instance's flags: {e}"))?;
    if st.dev != rdev || magic != system::SQUASHFS_MAGIC || flags != (true, true, true) {
        return Err("the cached instance is not what was recorded".into());
    }
    Ok(())
}

// --- Inside the cache namespace (called from `Cache::visit`) ---------------

fn read_entry(key: &str) -> Result<Option<Entry>, String> {
    let here = system::working_dir();
    let dir = match system::stat_at(here, &entry_path(key, "")) {
        Ok(d) => d,
        Err(Error::NOENT) => return Ok(None),
        Err(e) => return Err(format!("cannot stat cache entry {key}: {e}")),
    };
    let meta_path = entry_path(key, "meta");
    let meta = match system::read_file_at(here, &meta_path, META_LIMIT) {
        Ok((bytes, false)) => Meta::decode(&bytes),
        _ => None,
    };
    let last_used = system::stat_at(here, &meta_path).map(|s| s.mtime.0).unwrap_or(dir.mtime.0);
    let valid = dir.is_dir()
        && meta.as_ref().is_some_and(|m| {
            match system::open_dir_nofollow(here, &entry_path(key, "mnt")) {
                Ok(mnt) => {
                    system::fstat(mnt.as_fd()).map(|s| s.dev).ok() == Some(m.loop_rdev)
                        && system::filesystem_type(mnt.as_fd()).ok() == Some(system::SQUASHFS_MAGIC)
                }
                Err(_) => false,
            }
        });
    Ok(Some(Entry { key: key.to_string(), meta, valid, last_used }))
}

fn list_entries() -> Result<Vec<Entry>, String> {
    let (names, _) = system::list_dir(system::working_dir(), "/", MAX_ENTRIES).map_err(|e| format!("cannot list the cache: {e}"))?;
    let mut out = Vec::new();
    for name in names {
        if !is_key(name.as_bytes()) {
            continue;
        }
        let key = String::from_utf8_lossy(name.as_bytes()).into_owned();
        if let Some(e) = read_entry(&key)? {
            out.push(e);
        }
    }
    Ok(out)
}

/// Unmounts the instance of entry `key` (lazily: clones attached by running
/// launches keep the superblock and loop device until they exit) and removes
/// the entry. Missing parts are fine.
fn remove_entry(key: &str) -> Result<(), String> {
    let here = system::working_dir();
    let mnt = entry_path(key, "mnt");
    for _ in 0..8 {
        match system::detach_mount(&mnt) {
            Ok(()) => continue,
            Err(Error::INVAL) | Err(Error::NOENT) | Err(Error::NOTDIR) => break,
            Err(e) => return Err(format!("cannot unmount cache entry {key}: {e}")),
        }
    }
    let r = ignore_missing(system::remove_file(here, &entry_path(key, "meta")))
        .and_then(|()| ignore_missing(system::remove_file(here, &entry_path(key, "meta.tmp"))))
        .and_then(|()| ignore_missing(system::remove_dir(here, &mnt)))
        .and_then(|()| ignore_missing(system::remove_dir(here, &entry_path(key, ""))));
    r.map_err(|e| format!("cannot remove cache entry {key}: {e}"))
}

/// Mounts the detached instance `mount` as entry `key`, commits `meta`
/// (written, then renamed into place) and returns a clone.
fn insert_entry(key: &str, mount: OwnedFd, meta: &Meta) -> Result<OwnedFd, String> {
    let here = system::working_dir();
    let err = |what: &str, e: Error| format!("cannot {what} cache entry {key}: {e}");
    system::make_dir(here, &entry_path(key, ""), 0o700).map_err(|e| err("create", e))?;
    system::make_dir(here, &entry_path(key, "mnt"), 0o700).map_err(|e| err("create", e))?;
    let target = system::open_dir_nofollow(here, &entry_path(key, "mnt")).map_err(|e| err("open", e))?;
    system::attach_mount(mount.as_fd(), target.as_fd()).map_err(|e| err("mount", e))?;
    system::write_new_file(here, &entry_path(key, "meta.tmp"), meta.encode().as_bytes(), 0o600).map_err(|e| err("write", e))?;
    system::rename(here, &entry_path(key, "meta.tmp"), &entry_path(key, "meta")).map_err(|e| err("commit", e))?;
    system::clone_mount_at(&entry_path(key, "mnt")).map_err(|e| err("clone", e))
}

/// Creates the cache namespace and binds it on `<dir>/ns`. Exclusive lock
/// held; root; in the namespace the launch started in.
fn create_namespace(dir: BorrowedFd<'_>) -> Result<(), String> {
    // The bind of a mount-namespace file must not propagate (the kernel
    // refuses to copy one): make the state directory a private mount.
    match system::is_mount_root(dir, ".") {
        Ok(true) => {}
        Ok(false) => system::bind_onto_itself(dir).map_err(|e| format!("cannot bind {CACHE_DIR} onto itself: {e}"))?,
        Err(e) => return Err(format!("cannot tell whether {CACHE_DIR} is a mount: {e}")),
    }
    system::make_private(CACHE_DIR).map_err(|e| format!("cannot make {CACHE_DIR} a private mount: {e}"))?;
    let dir = system::open_dir_nofollow(system::working_dir(), CACHE_DIR).map_err(|e| format!("cannot open {CACHE_DIR}: {e}"))?;
    root_only(dir.as_fd(), CACHE_DIR)?;
    system::create_file_if_missing(dir.as_fd(), NS_FILE, 0o400).map_err(|e| format!("cannot create {CACHE_DIR}/{NS_FILE}: {e}"))?;
    let target = system::open_path_nofollow(dir.as_fd(), NS_FILE).map_err(|e| format!("cannot open {CACHE_DIR}/{NS_FILE}: {e}"))?;

    // The kernel refuses (ELOOP) to bind a namespace file into a namespace
    // whose id is not lower than the bound one's. Ids grow in time, but
    // since Linux 6.18 they are handed out in per-CPU batches, so a
    // namespace made on another CPU than the current namespace may get a
    // lower id. The initial namespace has the lowest id and never hits
    // this; inside another namespace (a job container) creating the cache
    // namespace on each CPU in turn (not only those of the inherited
    // affinity, which the caller chose) finds one with a higher id. The
    // affinity is restored afterwards.
    let affinity = system::cpu_affinity().ok();
    let cpus: Vec<Option<usize>> = std::iter::once(None).chain((0..MAX_CPU_ATTEMPTS).map(Some)).collect();
    let mut result = Err("no attempt".to_string());
    for cpu in cpus {
        if let Some(cpu) = cpu {
            if system::pin_to_cpu(cpu).is_err() {
                continue;
            }
        }
        result = attempt_namespace(target.as_fd());
        if result.as_ref().err().map(|e| e.as_str()) != Some("ELOOP") {
            break;
        }
    }
    if let Some(a) = &affinity {
        let _ = system::set_cpu_affinity(a);
    }
    result.map_err(|e| if e == "ELOOP" { "the kernel refused to keep the cache namespace (ELOOP)".into() } else { e })
}

fn attempt_namespace(target: BorrowedFd<'_>) -> Result<(), String> {
    let (ns, setup) = system::in_new_mount_namespace(|| -> Result<(), Error> {
        system::become_tmpfs_rooted(CACHE_DIR, TMPFS_SIZE)?;
        system::write_new_file(system::working_dir(), MARKER, b"squashfs-mount image cache\n", 0o600)
    })
    .map_err(|e| format!("cannot create the cache namespace: {e}"))?;
    setup.map_err(|e| format!("cannot set up the cache namespace: {e}"))?;
    match system::bind_namespace(ns.as_fd(), target) {
        Ok(()) => Ok(()),
        Err(Error::LOOP) => Err("ELOOP".into()),
        Err(e) => Err(format!("cannot bind the cache namespace on {CACHE_DIR}/{NS_FILE}: {e}")),
    }
}

/// Whether the caller may see the entry `meta`: they created it, or they
/// can open the image at the recorded path now and it is still the same
/// file (device and inode), opened with their own rights. Decides what
/// `--cache-status` shows and what a user's `--gc` may evict; it shows
/// nobody a path they could not have found out by themselves.
pub fn visible_to_caller(_as_caller: &impl ActingAsCaller, caller_uid: u32, meta: &Meta) -> bool {
    if meta.uid == caller_uid {
        return true;
    }
    let Ok(fd) = system::open_image(OsStr::from_bytes(&meta.path)) else { return false };
    matches!(system::fstat(fd.as_fd()), Ok(id) if id.is_regular() && id.dev == meta.dev && id.ino == meta.ino)
}

fn shown_path(e: &Entry) -> String {
    match &e.meta {
        Some(m) => String::from_utf8_lossy(&m.path).escape_debug().to_string(),
        None => format!("(incomplete entry {})", e.key),
    }
}

// ---------------------------------------------------------------------------
// --gc and --cache-status
// ---------------------------------------------------------------------------

fn age(now: i64, then: i64) -> String {
    let s = now.saturating_sub(then).max(0);
    if s < 120 {
        format!("{s}s")
    } else if s < 7200 {
        format!("{}m", s / 60)
    } else {
        format!("{}h", s / 3600)
    }
}

/// Opens the existing cache as root; None when there is none.
fn open_existing(privileges: &mut Privileges) -> Result<Option<(Cache, Settings)>, Failure> {
    let settings = privileges.as_root(config::load)?;
    let cache = privileges
        .as_root(|| Cache::open(&settings, false))?
        .map_err(|why| Failure::new(format!("image cache: {why}")))?;
    Ok(cache.map(|c| (c, settings)))
}

/// The entries the caller may see: all for root, else those whose image
/// the caller can open.
fn visible(privileges: &Privileges, entries: &[Entry]) -> HashSet<String> {
    let root = privileges.caller().uid.is_root();
    let uid = privileges.caller().uid.as_raw();
    entries
        .iter()
        .filter(|e| root || e.meta.as_ref().is_some_and(|m| visible_to_caller(privileges, uid, m)))
        .map(|e| e.key.clone())
        .collect()
}

/// `squashfs-mount --gc [--all]`.
pub fn gc_command(all: bool) -> Result<(), Failure> {
    let mut privileges = Privileges::acquire()?;
    let root = privileges.caller().uid.is_root();
    if all && !root {
        return Err(Failure::new("--gc --all evicts instances other users may be about to reuse; only root may use it"));
    }
    let Some((cache, _)) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout("no image cache\n");
        return Ok(());
    };
    let entries = privileges.as_root(|| cache.entries())?.map_err(|e| Failure::new(format!("image cache: {e}")))?;
    let shown = visible(&privileges, &entries);
    let mode = if all { Mode::All } else if root { Mode::Root } else { Mode::User };
    let result = privileges.as_root(|| cache.collect(mode, &shown))?.map_err(|e| Failure::new(format!("image cache: {e}")))?;
    drop(cache);
    privileges.drop_for_good()?;
    let mut out = String::new();
    let (mut evicted, mut kept, mut others) = (0, 0, 0);
    for (e, gone) in &result {
        if !shown.contains(&e.key) {
            others += usize::from(*gone);
            continue;
        }
        if *gone {
            evicted += 1;
            out += &format!("evicted {}\n", shown_path(e));
        } else {
            kept += 1;
        }
    }
    out += &format!("{evicted} evicted, {kept} kept (in use)");
    if others > 0 {
        out += &format!("; also evicted {others} stale instance(s) of other images");
    }
    out.push('\n');
    print_stdout(&out);
    Ok(())
}

/// `squashfs-mount --cache-status`: the cached instances of images the
/// caller can open (all of them for root).
pub fn status_command() -> Result<(), Failure> {
    let mut privileges = Privileges::acquire()?;
    let root = privileges.caller().uid.is_root();
    let Some((cache, _)) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout("no image cache\n");
        return Ok(());
    };
    let entries = privileges.as_root(|| cache.entries())?.map_err(|e| Failure::new(format!("image cache: {e}")))?;
    let shown = visible(&privileges, &entries);
    let devs: HashSet<u64> = entries
        .iter()
        .filter(|e| shown.contains(&e.key) && e.valid)
        .filter_map(|e| e.meta.as_ref().map(|m| m.loop_rdev))
        .collect();
    let used = if devs.is_empty() { Some(HashSet::new()) } else { privileges.as_root(|| cache.devices_in_use(&devs))? };
    drop(cache);
    privileges.drop_for_good()?;
    let now = system::unix_time();
    let mut out = format!("{:<8} {:<12} {:>10} {:>9}  IMAGE\n", "STATE", "DEVICE", "SIZE", "LAST USE");
    for e in entries.iter().filter(|e| shown.contains(&e.key)) {
        let Some(m) = &e.meta else {
            out += &format!("{:<8} {:<12} {:>10} {:>9}  {}\n", "broken", "-", "-", "-", shown_path(e));
            continue;
        };
        let state = if !e.valid {
            "broken"
        } else {
            match &used {
                Some(u) if u.contains(&m.loop_rdev) => "in-use",
                Some(_) => "idle",
                None => "unknown",
            }
        };
        let owner = if root { format!("  (created by uid {})", m.uid) } else { String::new() };
        out += &format!(
            "{:<8} {:<12} {:>10} {:>9}  {}{}\n",
            state,
            format!("/dev/loop{}", m.loop_number),
            m.size,
            format!("{} ago", age(now, e.last_used)),
            shown_path(e),
            owner
        );
    }
    print_stdout(&out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            dev: 0xfe00,
            ino: 12345,
            size: 4096,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
            loop_number: 3,
            loop_rdev: make_dev(7, 3),
            uid: 1000,
            created: 1_700_000_002,
            path: b"/home/u/a b\n\xff.sqfs".to_vec(),
        }
    }

    #[test]
    fn meta_round_trip_and_strictness() {
        let m = meta();
        assert_eq!(Meta::decode(m.encode().as_bytes()), Some(m.clone()));
        let good = m.encode();
        for bad in [
            good.replace("squashfs-mount-cache 1", "squashfs-mount-cache 2"),
            good.replace("ino 12345", "ino -1"),
            good.replace("ino 12345", "ino 1 2"),
            good.replace("loop 3", "loop 99999999999"),
            good.replace("\npath ", "\npath z"),
            good.clone() + "extra\n",
            good.trim_end().to_string(),
            String::new(),
        ] {
            assert_eq!(Meta::decode(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(Meta::decode(&vec![b'a'; META_LIMIT + 1]), None);
    }

    #[test]
    fn entries_of_another_format_version_are_evicted_not_reused() {
        // What another version of the tool may have left in the cache when
        // a package upgrade replaced the binary: a different header, with
        // the same fields or new ones.
        let good = meta().encode();
        for other in [
            good.replacen(META_HEADER, "squashfs-mount-cache 2", 1),
            good.replacen(META_HEADER, "squashfs-mount-cache 0", 1),
            good.replacen(META_HEADER, "squashfs-mount-cache 2", 1) + "flags 7\n",
            "squashfs-mount-cache 3\nidentity fe00 12345\n".to_string(),
        ] {
            assert_eq!(Meta::decode(other.as_bytes()), None, "{other:?}");
        }
        // Such an entry is not valid (read_entry: valid needs a decoded
        // meta), and every kind of collection evicts an invalid entry, at
        // launch first of all, even while a command still uses its instance
        // (the command keeps its clone).
        let entries = [
            Candidate {
                valid: false,
                deleted: false,
                in_use: true,
                visible: false,
                last_used: 100,
            },
            cand(true, false, 100),
        ];
        for mode in [Mode::Launch, Mode::User, Mode::Root, Mode::All] {
            let p = plan(&entries, 100, 600, 32, mode);
            assert_eq!(p.first(), Some(&0), "{mode:?}: {p:?}");
        }
    }

    #[test]
    fn same_file_needs_every_field() {
        let m = meta();
        let id = FileId {
            dev: m.dev,
            ino: m.ino,
            mode: 0o100644,
            size: m.size,
            nlink: 1,
            uid: 0,
            gid: 0,
            mtime: m.mtime,
            ctime: m.ctime,
            rdev: 0,
        };
        assert!(m.same_file(&id));
        assert!(!m.same_file(&FileId { ino: 1, ..id }));
        assert!(!m.same_file(&FileId { dev: 1, ..id }));
        assert!(!m.same_file(&FileId { size: 1, ..id }));
        assert!(!m.same_file(&FileId { mtime: (m.mtime.0, 6), ..id }));
        assert!(!m.same_file(&FileId { ctime: (m.ctime.0 + 1, m.ctime.1), ..id }));
    }

    #[test]
    fn keys() {
        assert_eq!(key_for(0xfe00, 0x1f), "fe00-1f");
        assert!(is_key(b"fe00-1f"));
        for bad in [&b"fe00"[..], b"-1", b"1-", b"1-2-3", b"FE-1", b"g-1", b"../x", b"", b"11111111111111111-1"] {
            assert!(!is_key(bad), "{bad:?}");
        }
    }

    #[test]
    fn device_numbers() {
        for (maj, min) in [(7, 0), (7, 255), (7, 256), (7, 1_048_575), (259, 3), (4095, 1)] {
            assert_eq!(dev_major_minor(make_dev(maj, min)), (maj, min));
        }
        assert_eq!(make_dev(7, 1), 0x701);
        assert_eq!(make_dev(254, 0), 0xfe00);
    }

    #[test]
    fn mountinfo_third_field() {
        let text = b"22 27 0:21 / /proc rw - proc proc rw\n68 70 7:1 / /my mnt ro - squashfs /dev/loop1 ro\nbroken\n69 70 7:300 /x /y ro - squashfs /dev/loop300 ro";
        let devs = mountinfo_devices(text);
        assert!(devs.contains(&make_dev(7, 1)));
        assert!(devs.contains(&make_dev(7, 300)));
        assert!(devs.contains(&make_dev(0, 21)));
        assert_eq!(devs.len(), 3);
    }

    #[test]
    fn deleted_backing_files() {
        assert!(backing_file_deleted(b"/a/img.sqfs (deleted)\n", b"/a/img.sqfs"));
        assert!(!backing_file_deleted(b"/a/img.sqfs\n", b"/a/img.sqfs"));
        // Named like that by its owner, not deleted.
        assert!(!backing_file_deleted(b"/a/x (deleted)\n", b"/a/x (deleted)"));
        // Renamed, then deleted.
        assert!(backing_file_deleted(b"/b/y (deleted)", b"/a/x"));
    }

    fn cand(valid: bool, in_use: bool, last_used: i64) -> Candidate {
        Candidate { valid, deleted: false, in_use, visible: false, last_used }
    }

    #[test]
    fn eviction_plan() {
        let now = 10_000;
        // idle limit 600 s, at most 2 instances.
        let c = vec![
            cand(false, false, now),      // 0 broken
            cand(true, false, now - 700), // 1 idle
            cand(true, true, now - 700),  // 2 idle but in use
            cand(true, false, now - 10),  // 3 recent
            Candidate { deleted: true, ..cand(true, false, now) }, // 4 deleted
            Candidate { deleted: true, ..cand(true, true, now) },  // 5 deleted, in use
            Candidate { visible: true, ..cand(true, false, now - 5) }, // 6 user's own
        ];
        let p = plan(&c, now, 600, 10, Mode::Launch);
        assert_eq!(p, vec![0, 1, 4]);
        let p = plan(&c, now, 600, 10, Mode::User);
        assert_eq!(p, vec![0, 1, 4, 6]);
        let p = plan(&c, now, 600, 10, Mode::Root);
        assert_eq!(p, vec![0, 1, 3, 4, 6]);
        let p = plan(&c, now, 600, 10, Mode::All);
        assert_eq!(p, (0..7).collect::<Vec<_>>());
        // Count: kept valid ones after the rules are 2, 3, 5, 6 (4 > 2):
        // the least recently used unused ones go (3 before 6: older).
        let p = plan(&c, now, 600, 2, Mode::Launch);
        assert_eq!(p, vec![0, 1, 4, 3, 6]);
        // max idle 0: every unused instance is idle.
        let p = plan(&c, now, 0, 10, Mode::Launch);
        assert_eq!(p, vec![0, 1, 3, 4, 6]);
    }

    #[test]
    fn launch_plan_is_bounded() {
        let c: Vec<Candidate> = (0..50).map(|_| cand(false, false, 0)).collect();
        assert_eq!(plan(&c, 0, 600, 32, Mode::Launch).len(), MAX_EVICTIONS_PER_LAUNCH);
        assert_eq!(plan(&c, 0, 600, 32, Mode::Root).len(), 50);
    }
}
