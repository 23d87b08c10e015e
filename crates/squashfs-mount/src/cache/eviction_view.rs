//! What an eviction sees and lets go, between the store and the
//! collection: the usage a scan found before the lock, the eviction plan's
//! view of the entries, what stays, and the loop devices left to the cache.

use std::collections::HashSet;

use super::entries::Entry;
use super::evict::Candidate;
use super::kinds;
use super::meta::Kind;
use super::usage_scan::{self, ScanBudget};
use crate::mounts::loop_records::Devices;
use crate::privilege::AsRoot;
use crate::system::Uid;

/// What a usage scan before the lock found: the devices it asked about,
/// and those some namespace uses.
pub(super) struct Scanned {
    asked: HashSet<u64>,
    used: HashSet<u64>,
}

impl Scanned {
    /// Which of the cached instances listed in `entries` some namespace
    /// uses: a scan run before the exclusive lock is taken (listing
    /// without the lock; the plan made under the lock re-reads the entries
    /// and treats one the scan did not cover as used).
    pub(super) fn of(root: &AsRoot, entries: &[Entry], ns_ino: u64, budget: ScanBudget) -> Scanned {
        let asked: HashSet<u64> = entries
            .iter()
            .filter(|e| e.valid)
            .filter_map(|e| e.meta.as_ref().map(|m| m.device))
            .collect();
        let used = usage_scan::devices_in_use(root, &asked, ns_ino, budget).used;
        Scanned { asked, used }
    }
}

/// The eviction plan's view of `entries`, with the use `scanned` found
/// before the lock.
pub(super) fn candidates(
    root: &AsRoot,
    entries: &[Entry],
    asker: Option<Uid>,
    target: Option<(u64, u64)>,
    protected: &HashSet<String>,
    scanned: &Scanned,
) -> Vec<Candidate> {
    let used = |dev: u64| scanned.used.contains(&dev) || !scanned.asked.contains(&dev);
    entries
        .iter()
        .map(|e| Candidate {
            valid: e.valid,
            deleted: e
                .meta
                .as_ref()
                .is_some_and(|m| e.valid && kinds::file_deleted(root, m)),
            in_use: e.meta.as_ref().is_some_and(|m| used(m.device)),
            mine: asker.is_some_and(|u| u.is_root() || e.meta.as_ref().is_some_and(|m| m.uid == u)),
            fuse: e
                .meta
                .as_ref()
                .is_some_and(|m| matches!(m.kind, Kind::Fuse { .. })),
            target: e
                .meta
                .as_ref()
                .is_some_and(|m| target == Some((m.dev, m.ino))),
            protected: protected.contains(&e.name),
            last_used: e.last_used,
            cost: e.meta.as_ref().map_or(0, kinds::cost),
        })
        .collect()
}

/// Under the lock, before `evict` goes: the entries that stay, and how
/// many instances and how much kernel memory the cache then holds, with
/// the devices `left` to it (count, bytes), which count against its limits
/// as its entries do; the devices of what may go (evicted, or replaced by
/// an offer, `offered`) are left to the cache where another user than
/// their maker cloned them (`let_go`).
pub(super) fn staying(
    root: &AsRoot,
    (devices, left): (Option<&Devices>, (usize, u64)),
    entries: &[Entry],
    cands: &[Candidate],
    (evict, offered): (&[usize], &HashSet<String>),
) -> (Vec<usize>, usize, u64) {
    let staying: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].valid && !evict.contains(&i))
        .collect();
    let count = staying.len() + left.0;
    let bytes = staying.iter().map(|&i| cands[i].cost).sum::<u64>() + left.1;
    let going =
        (0..entries.len()).filter(|&i| evict.contains(&i) || offered.contains(&entries[i].name));
    let_go(root, devices, going.map(|i| &entries[i]));
    (staying, count, bytes)
}

/// Before the cache lets go of `evicted` (under its lock): the loop device
/// of each shared kernel instance among them (one another user than its
/// maker cloned) is left to the cache, so that while it stays attached it
/// counts for the cache (within its limits) and never for a maker who may
/// not hold it (`loop_records`).
pub(super) fn let_go<'a>(
    root: &AsRoot,
    devices: Option<&Devices>,
    evicted: impl Iterator<Item = &'a Entry>,
) {
    let Some(devices) = devices else {
        return;
    };
    for e in evicted.filter(|e| e.shared) {
        if let Some(m) = &e.meta {
            if let Kind::Kernel { loop_number, .. } = m.kind {
                let cost = kinds::cost(m);
                devices.leave_to_the_cache(root, loop_number, (m.dev, m.ino), cost);
            }
        }
    }
}
