//! The settings in force ([`Settings`]): every key of the configuration
//! file, its compiled-in default, and the limits derived from them.

use super::mechanisms::{CacheLimits, LoopLimits, LoopOptions, Memory, Share};
use super::policy::Policy;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub policy: Policy,
    /// Keep image instances mounted between launches (`--no-cache` turns it
    /// off for one launch).
    pub cache: bool,
    /// Instances unused for this many seconds are evicted.
    pub cache_max_idle: u64,
    /// At most this many cached instances; beyond, launches mount private
    /// instances.
    pub cache_max_instances: u32,
    /// Cached instances one user's launches made (kernel and FUSE, so also
    /// their cached FUSE servers): a number, or a share of
    /// `cache_max_instances`. By default 60%: room for a call of
    /// `max-images-per-call` (500) and a call of 56 images beside it, all
    /// kept warm (doc/cache.md, "Each user's share").
    pub cache_max_instances_per_user: Share,
    /// At most this much kernel memory held by cached instances (estimated,
    /// see `cache::evict::instance_cost`).
    pub cache_max_memory: Memory,
    /// Milliseconds to wait for the cache lock before mounting privately
    /// (its holder may be another user's launch: 100 ms by default).
    pub cache_lock_timeout_ms: u64,
    pub loop_options: LoopOptions,
    /// Loop devices attached by squashfs-mount at once (cached and private
    /// instances of every user together).
    pub max_loop_devices: u32,
    /// Loop devices attached for one user at once: a number, or a share
    /// of `max_loop_devices`.
    pub max_loop_devices_per_user: Share,
    /// Launches of one user in their privileged phase at once.
    pub max_launches_per_user: u32,
    /// How long a launch waits for one of its user's launch slots.
    pub max_launches_wait_ms: u64,
    /// Threads of each FUSE server (0: chosen from the CPUs).
    pub fuse_threads: u32,
    /// Say what was done on stderr (as `--verbose`).
    pub verbose: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy: Policy::default(),
            cache: true,
            cache_max_idle: 600,
            cache_max_instances: 1024,
            cache_max_instances_per_user: Share::Percent(60),
            cache_max_memory: Memory::PercentOfRam(2),
            cache_lock_timeout_ms: 100,
            loop_options: LoopOptions::default(),
            max_loop_devices: 2048,
            max_loop_devices_per_user: Share::Percent(10),
            max_launches_per_user: 16,
            max_launches_wait_ms: 30_000,
            fuse_threads: 0,
            verbose: false,
        }
    }
}

impl Settings {
    /// The loop-device limits: `max-loop-devices`, and each user's share
    /// (by default a tenth of it, so that one user leaves most of the
    /// budget to the others; at least 1, never more than the whole).
    pub(crate) fn loop_limits(&self) -> LoopLimits {
        let all = self.max_loop_devices;
        let per_user = match self.max_loop_devices_per_user {
            Share::Count(n) => n,
            Share::Percent(p) => (u64::from(all) * u64::from(p) / 100) as u32,
        };
        LoopLimits {
            all,
            per_user: per_user.clamp(1, all.max(1)),
        }
    }

    /// The image cache's limits on this machine; each user's share (by
    /// default 60%) at least 1.
    pub(crate) fn cache_limits(&self) -> CacheLimits {
        let all = self.cache_max_instances;
        let per_user = match self.cache_max_instances_per_user {
            Share::Count(n) => n,
            Share::Percent(p) => (u64::from(all) * u64::from(p) / 100) as u32,
        };
        CacheLimits {
            max_idle: self.cache_max_idle,
            max_instances: all,
            per_user: per_user.clamp(1, all.max(1)),
            max_memory: self.cache_max_memory,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_gets_a_tenth_of_the_loop_devices_by_default() {
        let mut s = Settings::default();
        assert_eq!(
            s.loop_limits(),
            LoopLimits {
                all: 2048,
                per_user: 204
            }
        );
        s.max_loop_devices = 3;
        assert_eq!(s.loop_limits().per_user, 1);
        s.max_loop_devices_per_user = Share::Count(10);
        assert_eq!(s.loop_limits().per_user, 3);
        s.max_loop_devices = 100;
        assert_eq!(s.loop_limits().per_user, 10);
        s.max_loop_devices_per_user = Share::Percent(50);
        assert_eq!(s.loop_limits().per_user, 50);
    }

    #[test]
    fn by_default_one_user_keeps_a_call_of_500_images_and_one_of_56_warm() {
        let s = Settings::default();
        let cache = s.cache_limits();
        assert!(cache.per_user >= 500 + 56, "{cache:?}");
        assert!(cache.per_user < cache.max_instances, "{cache:?}");
        // Their loop devices outside the cache stay a tenth of the whole.
        assert_eq!(s.loop_limits().per_user, 204);
    }

    #[test]
    fn memory() {
        assert_eq!(Memory::PercentOfRam(2).bytes(100 << 30), 2147483648);
        assert_eq!(Memory::Bytes(5).bytes(1), 5);
    }
}
