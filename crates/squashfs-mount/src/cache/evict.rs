//! Which cached instances to evict. Pure: the plan is computed from facts
//! the store gathered (validity, use, age, creator).

use std::collections::HashSet;

use super::meta::make_dev;
use crate::config::CacheLimits;

/// Who asks for a collection, which decides what may be evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Occasion {
    /// At a launch: broken entries, and unused instances whose file was
    /// deleted, that were idle too long, or beyond the limits; never one
    /// the launch itself uses; at most [`MAX_EVICTIONS_PER_LAUNCH`].
    Launch,
    /// `--gc --expired` (the packages' timer): what a launch would evict,
    /// without the bound: broken entries, and unused instances whose file
    /// was deleted, that were idle too long, or beyond the limits. The warm
    /// cache stays.
    Expired,
    /// `--gc` by a user: as `Expired`, plus every unused instance that user
    /// created (never other users' warm instances).
    User,
    /// `--gc IMAGE`: the instance of that image, if the asking user created
    /// it (root: whoever did), used or not.
    Image,
    /// `--gc` by root: every unused instance.
    Root,
    /// `--gc --all` by root: every instance, used or not (processes that
    /// have one mounted keep it until they exit).
    All,
    /// A Slurm job of the user ended (the plugin's job epilog): the user's
    /// unused FUSE instances, so that no server of theirs outlives the
    /// job on the node unless another job of theirs still uses it.
    JobEnd,
}

/// At most this many evictions by one launch (each one unmounts).
pub const MAX_EVICTIONS_PER_LAUNCH: usize = 8;

/// One entry as the eviction plan sees it.
#[derive(Clone, Debug, Default)]
pub struct Candidate {
    pub valid: bool,
    pub deleted: bool,
    /// Some namespace other than the cache's has it mounted. When that
    /// cannot be told, false: evicting an instance in use only costs
    /// sharing (its users keep their mounts), while keeping every instance
    /// "just in case" lets anyone who can blow up the scan stop eviction.
    pub in_use: bool,
    /// Created by the user who asks (for `Occasion::User` and `Occasion::Image`).
    pub mine: bool,
    /// A FUSE instance (a server of its user's runs for it).
    pub fuse: bool,
    /// The instance of `--gc IMAGE`'s image (`Occasion::Image`).
    pub target: bool,
    /// Used by the current launch: never evicted by it.
    pub protected: bool,
    pub last_used: i64,
    /// Kernel memory the instance holds, estimated (see `instance_cost`).
    pub cost: u64,
}

/// Kernel memory an instance of an image with `block_size` holds while it
/// is cached: squashfs keeps 8 metadata blocks (8 KiB each) and 3 fragment
/// blocks, plus one data block for its page-cache helper; the loop device
/// and the superblock add about 64 KiB (measured in BENCHMARKS.md, "Memory
/// per cached instance").
pub(crate) fn instance_cost(block_size: u32) -> u64 {
    8 * 8192 + 4 * u64::from(block_size) + (64 << 10)
}

/// Indices of the entries to evict, in order.
pub(crate) fn plan(c: &[Candidate], now: i64, limits: CacheLimits, mode: Occasion) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    if mode == Occasion::All {
        return (0..c.len()).collect();
    }
    // Broken entries first: they hold nothing anyone can reuse.
    out.extend((0..c.len()).filter(|&i| !c[i].valid && !c[i].protected));
    let idle = |i: usize| {
        now.saturating_sub(c[i].last_used) >= limits.max_idle.min(i64::MAX as u64) as i64
    };
    let evictable = |i: usize| c[i].valid && !c[i].in_use && !c[i].protected;
    for (i, e) in c.iter().enumerate() {
        if !e.valid || out.contains(&i) {
            continue;
        }
        let want = match mode {
            Occasion::Image => e.target && e.mine && !e.protected,
            Occasion::Root => evictable(i),
            Occasion::User => evictable(i) && (e.deleted || idle(i) || e.mine),
            Occasion::Launch | Occasion::Expired => evictable(i) && (e.deleted || idle(i)),
            Occasion::JobEnd => evictable(i) && e.mine && e.fuse,
            Occasion::All => true,
        };
        if want {
            out.push(i);
        }
    }
    if mode != Occasion::Image && mode != Occasion::JobEnd {
        // Beyond the limits: least recently used unused instances go.
        let mut kept: Vec<usize> = (0..c.len())
            .filter(|&i| c[i].valid && !out.contains(&i))
            .collect();
        kept.sort_by_key(|&i| c[i].last_used);
        let mut count = kept.len() as u64;
        let mut bytes: u64 = kept.iter().map(|&i| c[i].cost).sum();
        for i in kept {
            if count <= u64::from(limits.max_instances) && bytes <= limits.max_bytes() {
                break;
            }
            if evictable(i) {
                out.push(i);
                count -= 1;
                bytes = bytes.saturating_sub(c[i].cost);
            }
        }
    }
    if mode == Occasion::Launch {
        out.truncate(MAX_EVICTIONS_PER_LAUNCH);
    }
    out
}

/// Whether one more instance costing `cost` fits the limits next to the
/// entries that stay (`remaining` count and bytes): beyond them a launch
/// mounts a private instance instead of caching a new one.
pub(crate) fn has_room(
    remaining: usize,
    remaining_bytes: u64,
    cost: u64,
    limits: CacheLimits,
) -> bool {
    (remaining as u64) < u64::from(limits.max_instances)
        && remaining_bytes.saturating_add(cost) <= limits.max_bytes()
}

/// Whether a user whose launches made `made` of the instances that stay may
/// add one more: beyond their share, their launch mounts a private
/// instance (its loop device or server counts for them) instead.
pub(crate) fn within_share(made: usize, limits: CacheLimits) -> bool {
    (made as u64) < u64::from(limits.per_user)
}

/// The devices (`dev_t`) named in the third field of mountinfo lines.
pub(crate) fn mountinfo_devices(text: &[u8]) -> HashSet<u64> {
    let mut out = HashSet::new();
    for line in text.split(|&b| b == b'\n') {
        let Some(field) = line.split(|&b| b == b' ').nth(2) else {
            continue;
        };
        let Ok(field) = std::str::from_utf8(field) else {
            continue;
        };
        let Some((maj, min)) = field.split_once(':') else {
            continue;
        };
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
pub(crate) fn backing_file_deleted(sysfs_backing_file: &[u8], recorded: &[u8]) -> bool {
    let name = sysfs_backing_file
        .strip_suffix(b"\n")
        .unwrap_or(sysfs_backing_file);
    name.ends_with(b" (deleted)") && name != recorded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Memory;

    #[test]
    fn a_job_end_evicts_its_users_unused_fuse_instances_only() {
        let fuse = |mine: bool, in_use: bool| Candidate {
            valid: true,
            fuse: true,
            mine,
            in_use,
            last_used: 0,
            ..Default::default()
        };
        let kernel = Candidate {
            valid: true,
            mine: true,
            ..Default::default()
        };
        let c = [
            fuse(true, false),
            fuse(true, true),
            fuse(false, false),
            kernel,
        ];
        let limits = CacheLimits {
            max_idle: 600,
            max_instances: 0,
            per_user: u32::MAX,
            max_memory: Memory::Bytes(0),
        };
        assert_eq!(plan(&c, 1, limits, Occasion::JobEnd), vec![0]);
    }

    fn cand(valid: bool, in_use: bool, last_used: i64) -> Candidate {
        Candidate {
            valid,
            in_use,
            last_used,
            cost: 1,
            ..Candidate::default()
        }
    }
    const L: CacheLimits = CacheLimits {
        max_idle: 600,
        max_instances: 10,
        per_user: u32::MAX,
        max_memory: Memory::Bytes(u64::MAX),
    };

    #[test]
    fn eviction_plan() {
        let now = 10_000;
        let c = vec![
            cand(false, false, now),      // 0 broken
            cand(true, false, now - 700), // 1 idle
            cand(true, true, now - 700),  // 2 idle but in use
            cand(true, false, now - 10),  // 3 recent, another user's
            Candidate {
                deleted: true,
                ..cand(true, false, now)
            }, // 4 deleted
            Candidate {
                deleted: true,
                ..cand(true, true, now)
            }, // 5 deleted, in use
            Candidate {
                mine: true,
                ..cand(true, false, now - 5)
            }, // 6 the asking user's own
        ];
        assert_eq!(plan(&c, now, L, Occasion::Launch), vec![0, 1, 4]);
        assert_eq!(plan(&c, now, L, Occasion::Expired), vec![0, 1, 4]);
        // A user's --gc: routine maintenance plus their own, never 3.
        assert_eq!(plan(&c, now, L, Occasion::User), vec![0, 1, 4, 6]);
        assert_eq!(plan(&c, now, L, Occasion::Root), vec![0, 1, 3, 4, 6]);
        assert_eq!(plan(&c, now, L, Occasion::All), (0..7).collect::<Vec<_>>());
        // Count: kept valid ones after the rules are 2, 3, 5, 6 (4 > 2):
        // the least recently used unused ones go (3 before 6: older).
        let two = CacheLimits {
            max_instances: 2,
            ..L
        };
        assert_eq!(plan(&c, now, two, Occasion::Launch), vec![0, 1, 4, 3, 6]);
        // max idle 0: every unused instance is idle.
        assert_eq!(
            plan(&c, now, CacheLimits { max_idle: 0, ..L }, Occasion::Launch),
            vec![0, 1, 3, 4, 6]
        );
    }

    #[test]
    fn the_launch_never_evicts_what_it_uses() {
        let now = 10_000;
        let c: Vec<Candidate> = (0..6)
            .map(|i| Candidate {
                protected: i % 2 == 0,
                ..cand(true, false, now - 700 - i)
            })
            .collect();
        let p = plan(
            &c,
            now,
            CacheLimits {
                max_instances: 1,
                ..L
            },
            Occasion::Launch,
        );
        assert_eq!(p, vec![1, 3, 5]);
        assert!(p.iter().all(|&i| !c[i].protected));
    }

    #[test]
    fn memory_limit() {
        let now = 10_000;
        let c: Vec<Candidate> = (0..4)
            .map(|i| Candidate {
                cost: 100,
                ..cand(true, false, now - i)
            })
            .collect();
        // 400 bytes kept, 250 allowed: the two least recently used go.
        assert_eq!(
            plan(
                &c,
                now,
                CacheLimits {
                    max_memory: Memory::Bytes(250),
                    ..L
                },
                Occasion::Launch
            ),
            vec![3, 2]
        );
        assert!(has_room(
            2,
            200,
            50,
            CacheLimits {
                max_memory: Memory::Bytes(250),
                ..L
            }
        ));
        assert!(!has_room(
            2,
            200,
            51,
            CacheLimits {
                max_memory: Memory::Bytes(250),
                ..L
            }
        ));
        assert!(!has_room(10, 0, 1, L));
    }

    #[test]
    fn gc_of_one_image() {
        let c = vec![
            Candidate {
                target: true,
                mine: true,
                in_use: true,
                ..cand(true, true, 0)
            },
            Candidate {
                target: true,
                mine: false,
                ..cand(true, false, 0)
            },
            Candidate {
                mine: true,
                ..cand(true, false, 0)
            },
        ];
        assert_eq!(plan(&c, 0, L, Occasion::Image), vec![0]);
    }

    #[test]
    fn entries_of_another_format_version_are_evicted_not_reused() {
        // An entry whose record does not decode (another version's format,
        // left by a package upgrade) is invalid: every kind of collection
        // evicts it first, even while a command still uses its instance
        // (the command keeps its clone).
        let entries = [
            Candidate {
                in_use: true,
                ..cand(false, true, 100)
            },
            cand(true, false, 100),
        ];
        for mode in [
            Occasion::Launch,
            Occasion::User,
            Occasion::Root,
            Occasion::All,
        ] {
            let p = plan(&entries, 100, L, mode);
            assert_eq!(p.first(), Some(&0), "{mode:?}: {p:?}");
        }
    }

    #[test]
    fn launch_plan_is_bounded() {
        let c: Vec<Candidate> = (0..50).map(|_| cand(false, false, 0)).collect();
        assert_eq!(
            plan(&c, 0, L, Occasion::Launch).len(),
            MAX_EVICTIONS_PER_LAUNCH
        );
        assert_eq!(plan(&c, 0, L, Occasion::Expired).len(), 50);
        assert_eq!(plan(&c, 0, L, Occasion::Root).len(), 50);
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
        assert!(backing_file_deleted(
            b"/a/img.sqfs (deleted)\n",
            b"/a/img.sqfs"
        ));
        assert!(!backing_file_deleted(b"/a/img.sqfs\n", b"/a/img.sqfs"));
        assert!(!backing_file_deleted(
            b"/a/x (deleted)\n",
            b"/a/x (deleted)"
        ));
        assert!(backing_file_deleted(b"/b/y (deleted)", b"/a/x"));
    }
}
