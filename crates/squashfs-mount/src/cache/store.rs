//! The cache's state, in the cache namespace, and the operations on it.
//! Everything here needs root: each operation takes the proof (`&AsRoot`).
//!
//! Locking: `flock` on `/run/squashfs-mount/lock`, exclusive to insert or
//! evict; never held across I/O on an image (instances are made before the
//! exclusive lock is taken) nor across a usage scan (run before it),
//! waited for at most `cache-lock-timeout`, and not at all for a holder
//! that makes no progress (`shared_lock`). Reusing an instance takes no
//! lock: every clone is checked against the record it was read with
//! (`entries::clones_of`), so an entry evicted or replaced meanwhile is
//! never reused, and an instance is never ended while a clone of it is
//! mounted (`servers.rs`). A warm launch thus waits for nobody.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

pub(crate) use super::entries::Entry;
use super::entries::{clones_of, insert_entry, list_entries, read_secret, remove_entry, Host};
use super::entry_names::Key;
use super::evict::{self, Candidate, Occasion};
use super::eviction_view::{self, staying, Scanned};
use super::lock::lock_with_timeout;
use super::meta::{Identity, Kind, Meta};
use super::usage_scan::{self, ScanBudget};
use super::{root_only, CacheError, LOCK_FILE, MARKER, NS_FILE, STATE_DIR};
use crate::config::CacheLimits;
use crate::mounts::budgets::Holdings;
use crate::mounts::loop_records::CachedDevice;
use crate::mounts::loop_records::Devices;
use crate::mounts::shared_lock::Held;
use crate::privilege::AsRoot;
use crate::system::{self, Error, LockKind, Uid, VisitError};

/// What a stranded visit calls (see `Credentials::stranded`).
pub type OnStranded = fn(&dyn fmt::Display) -> !;

/// An open handle on the cache. It holds two file descriptors (the lock
/// file and the namespace) for as long as it lives; others are opened only
/// while needed, so that a small open-file limit does not fail a launch.
pub struct Store {
    pub(super) lock: OwnedFd,
    pub(super) ns: OwnedFd,
    pub(super) ns_ino: u64,
    pub(super) timeout_ms: u64,
    pub limits: CacheLimits,
    pub(super) stranded: OnStranded,
    pub(super) secret: Cell<Option<[u8; 32]>>,
    /// When the last opportunistic collection ran (the stamp's mtime, read
    /// while the state directory was open).
    pub(super) last_gc: Option<i64>,
}

/// A cached instance a launch asks for.
pub struct Want {
    pub key: Key,
    /// The file as the launch opened it.
    pub id: Identity,
    pub copies: usize,
    /// The user whose launch asks.
    pub by: Uid,
}

/// Clones of a cached instance (empty: none), and the record of a stale
/// entry that could not be reused.
pub type Reused = (Vec<OwnedFd>, Option<Meta>);

/// A fresh instance a launch made (without the lock) and offers the cache.
pub struct Offer {
    pub mount: OwnedFd,
    pub meta: Meta,
    pub cost: u64,
    pub copies: usize,
}

/// What became of an offer: clones of the cached instance (ours, or one
/// another launch inserted meanwhile), or the offer back, to be used as a
/// private instance (no room).
pub enum Placed {
    Cached(Vec<OwnedFd>),
    Private(Offer),
}

/// What the cache holds while a launch places its offers: instances, kernel
/// memory, and the maker of each entry.
struct Tally {
    count: usize,
    bytes: u64,
    makers: Vec<Uid>,
}

impl Store {
    /// Opens the cache. With `create`, makes the state directory and the
    /// cache namespace when they do not exist; without, answers None then.
    pub(crate) fn open(
        root: &AsRoot,
        limits: CacheLimits,
        timeout_ms: u64,
        create: bool,
        stranded: OnStranded,
    ) -> Result<Option<Store>, CacheError> {
        let unavailable = |what: String, e: Error| CacheError::System(what, e);
        let dir = match system::open_dir_nofollow(system::working_dir(), STATE_DIR) {
            Err(Error::NOENT) if create => system::open_or_create_dir(STATE_DIR, 0o700),
            other => other,
        };
        let dir = match dir {
            Ok(d) => d,
            Err(Error::NOENT) if !create => return Ok(None),
            Err(e) => return Err(unavailable(format!("cannot use {STATE_DIR}"), e)),
        };
        root_only(dir.as_fd())?;
        let reopen = || -> Result<OwnedFd, CacheError> {
            let dir = system::open_dir_nofollow(system::working_dir(), STATE_DIR)
                .map_err(|e| unavailable(format!("cannot open {STATE_DIR}"), e))?;
            root_only(dir.as_fd())?;
            Ok(dir)
        };
        let lock = system::open_lock_file(dir.as_fd(), LOCK_FILE, 0o600)
            .map_err(|e| unavailable(format!("cannot open {STATE_DIR}/{LOCK_FILE}"), e))?;
        let ns = match open_namespace(dir.as_fd()) {
            Some(ns) => ns,
            None if !create => return Ok(None),
            None => {
                let _g = lock_with_timeout(root, lock.as_fd(), LockKind::Exclusive, timeout_ms)?;
                // Judged again by path, not through `dir`: a launch that
                // made the cache namespace meanwhile also made the state
                // directory a mount of its own, which `dir`, opened before,
                // does not show (it would see no namespace and stack a
                // second state directory and cache namespace on the first).
                let fresh = reopen()?;
                if open_namespace(fresh.as_fd()).is_none() {
                    super::cache_namespace::create(root, fresh.as_fd(), stranded)?;
                }
                // The directory is now a private mount of its own: open again.
                open_namespace(reopen()?.as_fd()).ok_or(CacheError::NotNamespace)?
            }
        };
        let ns_ino = system::fstat(ns.as_fd())
            .map_err(|e| unavailable("cannot stat the cache namespace".into(), e))?
            .ino;
        let last_gc = system::stat_at(dir.as_fd(), super::GC_STAMP)
            .ok()
            .map(|st| st.mtime.0);
        Ok(Some(Store {
            lock,
            ns,
            ns_ino,
            timeout_ms,
            limits,
            stranded,
            secret: Cell::new(None),
            last_gc,
        }))
    }

    pub(super) fn lock(
        &self,
        root: &AsRoot,
        kind: LockKind,
    ) -> Result<Held<BorrowedFd<'_>>, CacheError> {
        lock_with_timeout(root, self.lock.as_fd(), kind, self.timeout_ms)
    }

    /// Runs `f` inside the cache namespace (paths are relative to its
    /// root), with the namespace's secret (made now if `make_secret` and
    /// there is none). Refuses a namespace without our marker. A visit that
    /// cannot return ends the process or thread (`stranded`).
    pub(super) fn visit<T>(
        &self,
        make_secret: bool,
        f: impl FnOnce(Option<&[u8; 32]>) -> Result<T, CacheError>,
    ) -> Result<T, CacheError> {
        let known = self.secret.get();
        let r = system::in_mount_namespace(self.ns.as_fd(), || {
            let here = system::working_dir();
            if !matches!(system::stat_at(here, MARKER), Ok(id) if id.is_regular()) {
                return Err(CacheError::NotOurs);
            }
            let secret = match known {
                Some(s) => Some(s),
                None => read_secret(make_secret)?,
            };
            f(secret.as_ref()).map(|t| (t, secret))
        });
        match r {
            Ok(Ok((t, secret))) => {
                self.secret.set(secret);
                Ok(t)
            }
            Ok(Err(e)) => Err(e),
            Err(VisitError::Enter(e)) => Err(CacheError::System(
                "cannot enter the cache namespace".into(),
                e,
            )),
            Err(VisitError::Stranded(s)) => (self.stranded)(&s),
        }
    }

    /// What the cache holds that counts for `uid` (see `budgets::Holdings`):
    /// the loop devices of the kernel instances it holds, by its records
    /// (valid entries only: their instance is mounted on their device), and
    /// how many of its instances `uid`'s launches made. Read without the
    /// cache's lock, so only ever after the devices' records
    /// (`Devices::count`): what was placed or evicted meanwhile then counts
    /// as it is now. Nothing when the cache cannot be read.
    pub(crate) fn holdings(&self, _root: &AsRoot, uid: Uid) -> Holdings {
        let Ok(host) = Host::open() else {
            return Holdings::default();
        };
        let entries = self
            .visit(false, |_| list_entries(&host))
            .unwrap_or_default();
        let valid = || {
            entries
                .iter()
                .filter(|e| e.valid)
                .filter_map(|e| e.meta.as_ref())
        };
        Holdings {
            devices: valid()
                .filter_map(|m| match m.kind {
                    Kind::Kernel { loop_number, .. } => Some(CachedDevice {
                        number: loop_number,
                        backing: (m.dev, m.ino),
                    }),
                    Kind::Fuse { .. } => None,
                })
                .collect(),
            made: valid().filter(|m| m.uid == uid).count(),
        }
    }

    /// Clones of the cached instances `wanted` (which instance, the file's
    /// identity as opened now, and how many clones), in one visit, without
    /// the lock (see the module's note). An empty list means: not cached
    /// (or stale); the record of a stale entry comes with it (to say why).
    pub(crate) fn reuse(&self, _root: &AsRoot, wanted: &[Want]) -> Result<Vec<Reused>, CacheError> {
        let host = Host::open()?;
        self.visit(false, |secret| {
            let Some(secret) = secret else {
                return Ok(wanted.iter().map(|_| (Vec::new(), None)).collect());
            };
            Ok(wanted
                .iter()
                .map(|w| {
                    let name = w.key.entry_name(secret);
                    clones_of(&name, &w.id, (w.key.fuse_user, w.by), w.copies, &host)
                })
                .collect())
        })
    }

    /// Offers fresh instances (made without the lock) to the cache, under
    /// the exclusive lock: where another launch inserted the same file
    /// meanwhile, its clones are used; otherwise ours is inserted when the
    /// limits leave room (after evicting what a launch may evict, never
    /// what `protected` names: the launch's own images); otherwise the offer
    /// comes back, to be used privately. On an error the offers not yet
    /// placed come back with it.
    pub(crate) fn place(
        &self,
        root: &AsRoot,
        offers: Vec<Offer>,
        protected: &[Key],
    ) -> Result<Vec<Placed>, (CacheError, Vec<Offer>)> {
        // Before the lock: which instances some namespace uses (a bounded
        // but slow scan that nobody should wait for).
        let scanned = self.scan_usage(root, usage_scan::AT_LAUNCH);
        // Also before it: the devices left to the cache (a walk over every
        // device's record; the few a holder leaves meanwhile count from
        // the next offer on).
        let devices = Devices::open(root).ok().flatten();
        let left = devices.as_ref().map_or((0, 0), |d| d.left(root));
        let (host, guard, entries, secret) = match self.locked_listing(root) {
            Ok(p) => p,
            Err(e) => return Err((e, offers)),
        };
        let (cands, evict) = self.evictions(root, &entries, &secret, &offers, protected, &scanned);
        let offered: HashSet<String> = offers
            .iter()
            .map(|o| o.meta.key().entry_name(&secret))
            .collect();
        let (staying, count, bytes) = staying(
            root,
            (devices.as_ref(), left),
            &entries,
            &cands,
            (&evict, &offered),
        );
        let makers: Vec<Uid> = staying
            .iter()
            .filter_map(|&i| entries[i].meta.as_ref().map(|m| m.uid))
            .collect();
        let mut tally = Tally {
            count,
            bytes,
            makers,
        };
        let pending = std::cell::RefCell::new(offers);
        let placed = self.visit(false, |_| {
            for &i in &evict {
                let _ = remove_entry(&entries[i].name);
            }
            let mut out = Vec::new();
            for offer in pending.borrow_mut().drain(..) {
                out.push(self.place_offer(offer, (&host, &secret), &mut tally));
            }
            Ok(out)
        });
        // What the cache took now counts for it, by its records alone
        // (`holdings`); what it let go, for its maker, or for the cache
        // still if another user had cloned it (`let_go`).
        drop(guard);
        self.end_servers(root, evict.iter().filter_map(|&i| entries[i].meta.as_ref()));
        placed.map_err(|e| (e, pending.into_inner()))
    }

    /// Places one offer, with the lock held and the host's view open: clones
    /// of what another launch inserted meanwhile, the offer inserted when
    /// the cache has room for it and its maker's share allows (`tally`
    /// then counts it), else the offer back.
    fn place_offer(
        &self,
        offer: Offer,
        (host, secret): (&Host, &[u8; 32]),
        tally: &mut Tally,
    ) -> Placed {
        let key = offer.meta.key();
        let name = key.entry_name(secret);
        let (theirs, _) = clones_of(
            &name,
            &offer.meta.identity(),
            (key.fuse_user, offer.meta.uid),
            offer.copies,
            host,
        );
        if !theirs.is_empty() {
            return Placed::Cached(theirs);
        }
        let maker = offer.meta.uid;
        let mine = tally.makers.iter().filter(|&&u| u == maker).count();
        if !evict::has_room(tally.count, tally.bytes, offer.cost, self.limits)
            || !evict::within_share(mine, self.limits)
            || remove_entry(&name).is_err()
        {
            return Placed::Private(offer);
        }
        match insert_entry(&name, &offer.mount, &offer.meta, offer.copies) {
            Ok(clones) => {
                tally.count += 1;
                tally.bytes += offer.cost;
                tally.makers.push(maker);
                Placed::Cached(clones)
            }
            Err(_) => {
                let _ = remove_entry(&name);
                Placed::Private(offer)
            }
        }
    }

    /// The exclusive lock, and the entries and the secret read under it.
    #[allow(clippy::type_complexity)]
    fn locked_listing(
        &self,
        root: &AsRoot,
    ) -> Result<(Host, Held<BorrowedFd<'_>>, Vec<Entry>, [u8; 32]), CacheError> {
        let host = Host::open()?;
        let guard = self.lock(root, LockKind::Exclusive)?;
        let entries = self.visit(true, |_| list_entries(&host))?;
        let secret = self.secret.get().ok_or(CacheError::NoSecret)?;
        Ok((host, guard, entries, secret))
    }

    /// What a launch placing `offers` evicts of `entries` (with the plan's
    /// view of them): what the plan of a launch allows (never what
    /// `protected` names), and the stale entries of the offered instances
    /// in any case.
    fn evictions(
        &self,
        root: &AsRoot,
        entries: &[Entry],
        secret: &[u8; 32],
        offers: &[Offer],
        protected: &[Key],
        scanned: &Scanned,
    ) -> (Vec<Candidate>, Vec<usize>) {
        let protected_names: HashSet<String> =
            protected.iter().map(|k| k.entry_name(secret)).collect();
        let offered: HashSet<String> = offers
            .iter()
            .map(|o| o.meta.key().entry_name(secret))
            .collect();
        let cands = eviction_view::candidates(root, entries, None, None, &protected_names, scanned);
        let mut evict = evict::plan(&cands, system::unix_time(), self.limits, Occasion::Launch);
        let stale: Vec<usize> = (0..entries.len())
            .filter(|&i| {
                offered.contains(&entries[i].name) && !entries[i].valid && !evict.contains(&i)
            })
            .collect();
        evict.extend(stale);
        (cands, evict)
    }

    /// Which of the cached instances some namespace uses (see
    /// [`Scanned::of`]).
    pub(super) fn scan_usage(&self, root: &AsRoot, budget: ScanBudget) -> Scanned {
        let entries = Host::open()
            .and_then(|host| self.visit(false, |_| list_entries(&host)))
            .unwrap_or_default();
        Scanned::of(root, &entries, self.ns_ino, budget)
    }

    /// Lists the entries (shared lock).
    pub(crate) fn entries(&self, root: &AsRoot) -> Result<Vec<Entry>, CacheError> {
        let host = Host::open()?;
        let _g = self.lock(root, LockKind::Shared)?;
        self.visit(false, |_| list_entries(&host))
    }
}

/// The nsfs file of the cache namespace, if one is bound there.
fn open_namespace(dir: BorrowedFd<'_>) -> Option<OwnedFd> {
    let fd = system::open_read_nofollow(dir, NS_FILE).ok()?;
    (system::filesystem_type(fd.as_fd()).ok()? == system::NSFS_MAGIC).then_some(fd)
}
