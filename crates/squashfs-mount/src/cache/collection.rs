//! Collecting the cache: evicting what the limits, `--gc` and the job
//! epilog allow, under the exclusive lock, with the usage scan run before
//! it (`usage_scan`), and ending evicted FUSE servers after it.

use std::collections::HashSet;
use std::os::fd::AsFd;

use super::entries::{list_entries, remove_entry, Entry, Host};
use super::evict::{self, Occasion};
use super::eviction_view::{self, Scanned};
use super::store::Store;
use super::usage_scan::{self, ScanBudget};
use super::{CacheError, STATE_DIR};
use crate::mounts::shared_lock::{self, Reach};
use crate::privilege::AsRoot;
use crate::system::{self, LockKind, Uid};

impl Store {
    /// Evicts what `mode` allows for the user `asker` (exclusive lock);
    /// `target` is `--gc IMAGE`'s file (device, inode: its kernel and FUSE
    /// instances). Returns every entry with whether it was evicted.
    pub(crate) fn collect(
        &self,
        root: &AsRoot,
        mode: Occasion,
        asker: Option<Uid>,
        target: Option<(u64, u64)>,
        budget: ScanBudget,
    ) -> Result<Vec<(Entry, bool)>, CacheError> {
        let scanned = self.scan_usage(root, budget);
        let guard = self.lock(root, LockKind::Exclusive)?;
        let out = self.collect_locked(root, mode, asker, target, &scanned);
        drop(guard);
        self.end_evicted_servers(root, &out);
        out
    }

    /// With the lock released: the servers of what a collection evicted.
    fn end_evicted_servers(&self, root: &AsRoot, out: &Result<Vec<(Entry, bool)>, CacheError>) {
        if let Ok(out) = out {
            let evicted = out.iter().filter(|(_, e)| *e);
            self.end_servers(root, evicted.filter_map(|(e, _)| e.meta.as_ref()));
        }
    }

    /// At a launch, at most every `interval` seconds and only if nobody
    /// holds the lock: a bounded collection.
    pub(crate) fn maintain(&self, root: &AsRoot, interval: i64) {
        let now = system::unix_time();
        if let Some(last) = self.last_gc {
            if last <= now && now - last < interval {
                return;
            }
        }
        let Ok(dir) = system::open_dir_nofollow(system::working_dir(), STATE_DIR) else {
            return;
        };
        let scanned = self.scan_usage(root, usage_scan::AT_LAUNCH);
        let Ok(Some(guard)) =
            shared_lock::try_take(root, self.lock.as_fd(), LockKind::Exclusive, Reach::Out)
        else {
            return;
        };
        let _ = system::create_file_if_missing(dir.as_fd(), super::GC_STAMP, 0o600);
        let _ = system::touch(dir.as_fd(), super::GC_STAMP);
        let out = self.collect_locked(root, Occasion::Launch, None, None, &scanned);
        drop(guard);
        self.end_evicted_servers(root, &out);
    }

    fn collect_locked(
        &self,
        root: &AsRoot,
        mode: Occasion,
        asker: Option<Uid>,
        target: Option<(u64, u64)>,
        scanned: &Scanned,
    ) -> Result<Vec<(Entry, bool)>, CacheError> {
        super::claim::tidy(root);
        let host = Host::open()?;
        let entries = self.visit(false, |_| list_entries(&host))?;
        let cands =
            eviction_view::candidates(root, &entries, asker, target, &HashSet::new(), scanned);
        let chosen = evict::plan(&cands, system::unix_time(), self.limits, mode);
        if !chosen.is_empty() {
            let devices = crate::mounts::loop_records::Devices::open(root)
                .ok()
                .flatten();
            eviction_view::let_go(root, devices.as_ref(), chosen.iter().map(|&i| &entries[i]));
            // One entry that cannot be removed does not keep the others.
            let removed = self.visit(false, |_| {
                let results: Vec<_> = chosen
                    .iter()
                    .map(|&i| remove_entry(&entries[i].name))
                    .collect();
                Ok(results)
            })?;
            if let Some(Err(e)) = removed.into_iter().find(Result::is_err) {
                return Err(e);
            }
        }
        Ok(entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| (e, chosen.contains(&i)))
            .collect())
    }

    /// The loop devices of `entries` that some namespace uses (for
    /// `--cache-status`), and whether the scan saw every namespace.
    pub(crate) fn usage(&self, root: &AsRoot, entries: &[Entry]) -> usage_scan::Usage {
        let devs: HashSet<u64> = entries
            .iter()
            .filter(|e| e.valid)
            .filter_map(|e| e.meta.as_ref().map(|m| m.device))
            .collect();
        usage_scan::devices_in_use(root, &devs, self.ns_ino, usage_scan::ON_REQUEST)
    }
}
