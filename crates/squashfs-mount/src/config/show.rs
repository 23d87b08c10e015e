//! Every setting in force as the configuration file would write it
//! (`key = value`, in the order of [`KEYS`]), for `--policy`: values the
//! parser reads back to the same settings, and a note where the value
//! alone does not say what it means (a share's number, an empty list).
//! Pure: user and group names come from the function passed in.

use super::parse::KEYS;
use super::policy::{KernelImages, TrustedMatch};
use super::{Memory, Settings, Share, SquashfsThreads};
use crate::config::paths::Places;

/// One setting: its key, its value as the file would write it, and what
/// the value means where it does not say so itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub key: &'static str,
    pub value: String,
    pub note: Option<String>,
}

/// Names a user (`true`) or group id, when it has a name.
pub type Name<'a> = &'a dyn Fn(u32, bool) -> Option<String>;

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn on(b: bool) -> String {
    if b { "on" } else { "off" }.into()
}

/// Milliseconds as the shortest duration the parser reads back.
fn duration(ms: u64) -> String {
    match ms {
        0 => "0".into(),
        ms if ms % 1000 != 0 => format!("{ms}ms"),
        ms => match ms / 1000 {
            s if s % 3600 == 0 => format!("{}h", s / 3600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        },
    }
}

fn share(s: Share) -> String {
    match s {
        Share::Count(n) => n.to_string(),
        Share::Percent(p) => format!("{p}%"),
    }
}

fn memory(m: Memory) -> String {
    match m {
        Memory::PercentOfRam(p) => format!("{p}%"),
        Memory::Bytes(b) => ["P", "T", "G", "M", "K"]
            .iter()
            .zip([50, 40, 30, 20, 10])
            .find(|(_, shift)| b != 0 && b % (1u64 << shift) == 0)
            .map_or(b.to_string(), |(unit, shift)| {
                format!("{}{unit}", b >> shift)
            }),
    }
}

fn ids(list: impl IntoIterator<Item = u32>, user: bool, name: Name<'_>) -> String {
    let shown: Vec<String> = list
        .into_iter()
        .map(|id| name(id, user).unwrap_or_else(|| id.to_string()))
        .collect();
    shown.join(", ")
}

fn places(p: &Places) -> String {
    match p.is_empty() {
        true => String::new(),
        false => p.list(),
    }
}

fn threads(t: SquashfsThreads) -> String {
    t.value().unwrap_or_else(|| "kernel".into())
}

/// The value of `key` in `s`.
fn value(s: &Settings, key: &str, name: Name<'_>) -> String {
    let p = &s.policy;
    match key {
        "kernel-images" => match p.kernel_images {
            KernelImages::All => "all",
            KernelImages::Trusted => "trusted",
            KernelImages::None => "none",
        }
        .into(),
        "trusted-owners" => {
            let others = p.trusted_owners.iter().filter(|u| !u.is_root());
            ids(
                std::iter::once(0).chain(others.map(|u| u.as_raw())),
                true,
                name,
            )
        }
        "trusted-groups" => ids(p.trusted_groups.iter().map(|g| g.as_raw()), false, name),
        "trusted-dirs" => places(&p.trusted_dirs),
        "trusted-match" => match p.trusted_match {
            TrustedMatch::Any => "any",
            TrustedMatch::All => "all",
        }
        .into(),
        "trusted-fuse" => p.trusted_fuse.join(", "),
        "allowed-users" => ids(p.allowed_users.iter().map(|u| u.as_raw()), true, name),
        "allowed-groups" => ids(p.allowed_groups.iter().map(|g| g.as_raw()), false, name),
        "mount-points" => places(&p.mount_points),
        "allow-writable" => yes(p.allow_writable),
        "allow-union" => yes(p.allow_union),
        "allow-mutable-root" => yes(p.allow_mutable_root),
        "max-images-per-call" => p.max_images_per_call.to_string(),
        _ => tuning(s, key),
    }
}

/// The value of a key that is not the policy's.
fn tuning(s: &Settings, key: &str) -> String {
    match key {
        "max-loop-devices" => s.max_loop_devices.to_string(),
        "max-loop-devices-per-user" => share(s.max_loop_devices_per_user),
        "max-launches-per-user" => s.max_launches_per_user.to_string(),
        "max-launches-wait" => duration(s.max_launches_wait_ms),
        "cache" => on(s.cache),
        "cache-max-idle" => duration(s.cache_max_idle * 1000),
        "cache-max-instances" => s.cache_max_instances.to_string(),
        "cache-max-instances-per-user" => share(s.cache_max_instances_per_user),
        "cache-max-memory" => memory(s.cache_max_memory),
        "cache-lock-timeout" => duration(s.cache_lock_timeout_ms),
        "loop-direct-io" => on(s.loop_options.direct_io),
        "loop-block-size" => s.loop_options.block_size.to_string(),
        "squashfs-threads" => threads(s.loop_options.threads),
        "fuse-threads" => s.fuse_threads.to_string(),
        "verbose" => yes(s.verbose),
        _ => unreachable!("every key of KEYS has a value: {key}"),
    }
}

/// What the value of `key` means, where it does not say so itself
/// (`total_memory`: the machine's RAM in bytes).
fn note(s: &Settings, key: &str, total_memory: u64) -> Option<String> {
    let p = &s.policy;
    let nobody = p.allowed_users.is_empty() && p.allowed_groups.is_empty();
    Some(match key {
        "trusted-owners" => "root always".into(),
        "trusted-dirs" if p.trusted_dirs.is_empty() => "anywhere".into(),
        "trusted-fuse" if p.trusted_fuse.is_empty() => {
            "no FUSE file system: images on root's FUSE mounts go to FUSE".into()
        }
        "allowed-users" if nobody => "everyone may use squashfs-mount".into(),
        "mount-points" if p.mount_points.is_empty() => "anywhere but /, /proc, /sys, /dev".into(),
        "max-loop-devices-per-user" => format!("{} loop devices", s.loop_limits().per_user),
        "cache-max-instances-per-user" => format!("{} instances", s.cache_limits().per_user),
        "cache-max-memory" => {
            let bytes = s.cache_max_memory.bytes(total_memory);
            format!("{} MiB", bytes >> 20)
        }
        "loop-block-size" if s.loop_options.block_size == 0 => "the kernel's (512)".into(),
        "fuse-threads" if s.fuse_threads == 0 => "chosen from the CPUs".into(),
        _ => return None,
    })
}

/// Every setting of `s`, in the order of [`KEYS`].
pub(crate) fn settings(s: &Settings, name: Name<'_>, total_memory: u64) -> Vec<Shown> {
    KEYS.iter()
        .map(|&key| Shown {
            key,
            value: value(s, key, name),
            note: note(s, key, total_memory),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse::parse;

    fn names(id: u32, user: bool) -> Option<String> {
        match (id, user) {
            (0, _) => Some("root".into()),
            (1000, true) => Some("alice".into()),
            (300, false) => Some("hpc".into()),
            _ => None,
        }
    }

    fn resolve(name: &str, user: bool) -> Option<u32> {
        match (name, user) {
            ("root", _) => Some(0),
            ("alice", true) => Some(1000),
            ("hpc", false) => Some(300),
            _ => None,
        }
    }

    /// The lines `--policy` prints, read back as a configuration file.
    fn round_trip(s: &Settings) -> Settings {
        let text: String = settings(s, &names, 8 << 30)
            .iter()
            .map(|l| format!("{} = {}\n", l.key, l.value))
            .collect();
        let (back, problems) = parse(text.as_bytes(), &resolve);
        assert!(problems.is_empty(), "{text}\n{problems:?}");
        back
    }

    /// Item 5 of issue 39: every key in force is shown, in the file's
    /// order, as the file would set it.
    #[test]
    fn every_key_is_shown_and_reads_back() {
        let shown = settings(&Settings::default(), &names, 8 << 30);
        let keys: Vec<&str> = shown.iter().map(|l| l.key).collect();
        assert_eq!(keys, KEYS);
        assert_eq!(round_trip(&Settings::default()), Settings::default());
        let text = "kernel-images = none\ntrusted-owners = root, alice, 42\ntrusted-groups = hpc\n\
            trusted-dirs = /apps, /opt/x\ntrusted-match = all\ntrusted-fuse = s3fs\nallowed-users = alice\n\
            allowed-groups = hpc, 77\nmount-points = /user-environment\nallow-writable = no\nallow-union = no\n\
            allow-mutable-root = no\nmax-images-per-call = 64\nmax-loop-devices = 100\n\
            max-loop-devices-per-user = 7\nmax-launches-per-user = 3\nmax-launches-wait = 90s\ncache = off\n\
            cache-max-idle = 2h\ncache-max-instances = 40\ncache-max-instances-per-user = 10%\n\
            cache-max-memory = 1536M\ncache-lock-timeout = 1m\nloop-direct-io = on\nloop-block-size = 0\n\
            squashfs-threads = 3\nfuse-threads = 8\nverbose = yes\n";
        let (set, problems) = parse(text.as_bytes(), &resolve);
        assert!(problems.is_empty(), "{problems:?}");
        assert_ne!(set, Settings::default());
        assert_eq!(round_trip(&set), set);
        let shown = settings(&set, &names, 8 << 30);
        let line = |k: &str| shown.iter().find(|l| l.key == k).unwrap().clone();
        assert_eq!(line("trusted-owners").value, "root, alice, 42");
        assert_eq!(line("cache-max-memory").value, "1536M");
        assert_eq!(line("max-launches-wait").value, "90s");
        assert_eq!(
            line("cache-max-instances-per-user").note.as_deref(),
            Some("4 instances")
        );
        assert_eq!(
            line("max-loop-devices-per-user").note.as_deref(),
            Some("7 loop devices")
        );
        let default = settings(&Settings::default(), &names, 8 << 30);
        let note = |k: &str| default.iter().find(|l| l.key == k).unwrap().note.clone();
        assert_eq!(note("cache-max-memory").as_deref(), Some("163 MiB"));
        assert_eq!(
            note("allowed-users").as_deref(),
            Some("everyone may use squashfs-mount")
        );
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(memory(Memory::Bytes(0)), "0");
        assert_eq!(memory(Memory::Bytes(1000)), "1000");
        assert_eq!(memory(Memory::Bytes(3 << 30)), "3G");
        assert_eq!(duration(0), "0");
        assert_eq!(duration(61_000), "61s");
        assert_eq!(duration(100), "100ms");
        assert_eq!(duration(7_200_000), "2h");
    }
}
