//! Settings and site policy from the root-owned configuration file, never
//! from the environment (the tool reads it while privileged).
//!
//! `/etc/squashfs-mount.conf` (path compiled in; every key documented in
//! the repository's `etc/squashfs-mount.conf`). The file is ignored, with
//! one warning, unless it is a regular file owned by root and writable by
//! nobody else. Unknown keys and bad values are reported (one line each)
//! and skipped; everything has a compiled-in default.

pub mod acl;
pub mod mechanisms;
pub mod names;
pub mod parse;
pub mod paths;
pub mod policy;
pub mod provenance;
pub mod show;
pub mod trust;

use std::os::fd::AsFd;

use crate::system;
use crate::system::error;
pub use mechanisms::{CacheLimits, LoopLimits, LoopOptions, SquashfsThreads, MAX_CACHE_ENTRIES};
pub use parse::KEYS;
pub use policy::Policy;

/// Compiled-in path of the configuration file.
pub const CONFIG_PATH: &str = "/etc/squashfs-mount.conf";
/// Largest configuration file read.
const MAX_CONFIG_BYTES: usize = 64 * 1024;

/// A number of things, or a percentage of a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    Count(u32),
    Percent(u8),
}

/// An amount of memory: bytes, or a share of RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    Bytes(u64),
    PercentOfRam(u8),
}

impl Memory {
    pub fn bytes(self, total_memory: u64) -> u64 {
        match self {
            Memory::Bytes(b) => b,
            Memory::PercentOfRam(p) => (u128::from(total_memory) * u128::from(p) / 100) as u64,
        }
    }
}

/// The size limit of the tmpfs under a writable layer (`--writable=SIZE`;
/// the command line's spelling: `cli`, `LayerSize::parse`), which
/// `mounts::overlay` turns into the layer's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerSize {
    Bytes(u64),
    PercentOfRam(u8),
}

impl LayerSize {
    pub const DEFAULT: LayerSize = LayerSize::PercentOfRam(50);

    /// The value for tmpfs' `size` parameter (generated, never user text).
    pub fn tmpfs_value(self) -> String {
        match self {
            LayerSize::Bytes(b) => b.to_string(),
            LayerSize::PercentOfRam(p) => format!("{p}%"),
        }
    }
}

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
    pub fn loop_limits(&self) -> LoopLimits {
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
    pub fn cache_limits(&self) -> CacheLimits {
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

/// Resolves a user or group name from /etc/passwd or /etc/group (files
/// only: no name service module is loaded into the privileged process;
/// sites with directory users list numeric ids).
fn resolve_from_files(name: &str, user: bool) -> Option<u32> {
    let file = if user { "/etc/passwd" } else { "/etc/group" };
    let (text, _) = system::read_file_at(system::working_dir(), file, 4 << 20).ok()?;
    text.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        (fields.next()? == name.as_bytes()).then_some(())?;
        std::str::from_utf8(fields.nth(1)?).ok()?.parse().ok()
    })
}

/// What became of the configuration file at a load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    /// There is none: the built-in defaults.
    Absent,
    /// Read: the keys it set (the built-in defaults for the others), and
    /// the lines or values it got wrong (skipped, each warned of).
    Read {
        set: Vec<&'static str>,
        problems: Vec<String>,
    },
    /// Not read, and why: the built-in defaults apply.
    Ignored(String),
}

/// The settings in force, and where they come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    pub settings: Settings,
    pub file: FileState,
}

/// Loads the settings: compiled-in defaults, overridden by the configuration
/// file when it exists and is trustworthy. Problems are printed as warnings
/// (one line each). Needs root only if the file is not world-readable.
pub fn load() -> Settings {
    load_reporting().settings
}

/// [`load`], saying what became of the file (`--policy` shows it).
pub fn load_reporting() -> Loaded {
    let warn = |msg: &str| error::warn(format_args!("{CONFIG_PATH}: {msg}"));
    let file = match read_file() {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Loaded {
                settings: Settings::default(),
                file: FileState::Absent,
            }
        }
        Err(why) => {
            warn(&format!("ignored: {why}; using the built-in defaults"));
            return Loaded {
                settings: Settings::default(),
                file: FileState::Ignored(why.to_string()),
            };
        }
    };
    let parsed = parse::parse_file(&file, &resolve_from_files);
    for p in &parsed.problems {
        warn(p);
    }
    Loaded {
        settings: parsed.settings,
        file: FileState::Read {
            set: parsed.set,
            problems: parsed.problems,
        },
    }
}

/// Why the configuration file is not read.
#[derive(Debug)]
enum Unread {
    Open(system::Error),
    Stat(system::Error),
    NotRegular(&'static str),
    NotRoots(system::Uid),
    /// Its mode (group or other write).
    Writable(u32),
    Read(system::Error),
    TooLarge,
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const RULE: &str =
            "it must be a regular file owned by root and not writable by group or others";
        match self {
            Unread::Open(e) => write!(f, "it cannot be opened ({e})"),
            Unread::Stat(e) => write!(f, "it cannot be examined ({e})"),
            Unread::NotRegular(kind) => write!(f, "it is a {kind}; {RULE}"),
            Unread::NotRoots(uid) => write!(f, "it is owned by uid {uid}; {RULE}"),
            Unread::Writable(mode) => {
                let who = match mode & 0o022 {
                    0o020 => "its group",
                    0o002 => "others",
                    _ => "its group and others",
                };
                write!(f, "it is writable by {who} (mode {mode:04o}); {RULE}")
            }
            Unread::Read(e) => write!(f, "it cannot be read ({e})"),
            Unread::TooLarge => write!(f, "it is larger than {MAX_CONFIG_BYTES} bytes"),
        }
    }
}

/// The configuration file's text; None when there is none.
fn read_file() -> Result<Option<Vec<u8>>, Unread> {
    let fd = match system::open_read_nofollow(system::working_dir(), CONFIG_PATH) {
        Ok(fd) => fd,
        Err(system::Error::NOENT) => return Ok(None),
        Err(e) => return Err(Unread::Open(e)),
    };
    let id = system::fstat(fd.as_fd()).map_err(Unread::Stat)?;
    if !id.is_regular() {
        return Err(Unread::NotRegular(id.kind()));
    }
    if !id.uid.is_root() {
        return Err(Unread::NotRoots(id.uid));
    }
    if id.mode & 0o022 != 0 {
        return Err(Unread::Writable(id.mode & 0o7777));
    }
    let mut buf = vec![0u8; MAX_CONFIG_BYTES + 1];
    let n = system::read_head(fd.as_fd(), &mut buf).map_err(Unread::Read)?;
    if n > MAX_CONFIG_BYTES {
        return Err(Unread::TooLarge);
    }
    buf.truncate(n);
    Ok(Some(buf))
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
