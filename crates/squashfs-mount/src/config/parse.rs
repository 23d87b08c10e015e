//! The configuration file's grammar: `key = value` lines, `#` comments.
//! Pure: user and group names are resolved by the function passed in.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;

use super::policy::{KernelImages, Policy, TrustedMatch, MAX_IMAGES_PER_CALL};
use super::SquashfsThreads;
use super::{Memory, Settings, Share};
use crate::config::paths;
use crate::system::{Gid, Uid};

/// Every key the file may set, in the order of the documented file
/// (`etc/squashfs-mount.conf`).
pub const KEYS: [&str; 28] = [
    "kernel-images",
    "trusted-owners",
    "trusted-groups",
    "trusted-dirs",
    "trusted-match",
    "trusted-fuse",
    "allowed-users",
    "allowed-groups",
    "mount-points",
    "allow-writable",
    "allow-union",
    "allow-mutable-root",
    "max-images-per-call",
    "max-loop-devices",
    "max-loop-devices-per-user",
    "max-launches-per-user",
    "max-launches-wait",
    "cache",
    "cache-max-idle",
    "cache-max-instances",
    "cache-max-instances-per-user",
    "cache-max-memory",
    "cache-lock-timeout",
    "loop-direct-io",
    "loop-block-size",
    "squashfs-threads",
    "fuse-threads",
    "verbose",
];

/// Resolves a user (`true`) or group (`false`) name to its id.
pub type Resolve<'a> = &'a dyn Fn(&str, bool) -> Option<u32>;

/// The value of the choice named `value`.
fn one_of<T: Copy>(value: &str, choices: &[(&str, T)]) -> Option<T> {
    choices.iter().find(|(n, _)| *n == value).map(|(_, v)| *v)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "on" | "yes" | "true" | "1" => Some(true),
        "off" | "no" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// `<n>`, `<n>s`, `<n>m`, `<n>h` as seconds.
pub(crate) fn parse_duration(v: &str) -> Option<u64> {
    let (num, mult) = match v.as_bytes().last()? {
        b's' => (&v[..v.len() - 1], 1),
        b'm' => (&v[..v.len() - 1], 60),
        b'h' => (&v[..v.len() - 1], 3600),
        _ => (v, 1),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) || num.len() > 9 {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// A duration in milliseconds: `N ms`, or as [`parse_duration`].
fn parse_millis(v: &str) -> Option<u64> {
    match v.strip_suffix("ms") {
        Some(ms) => parse_count(ms, 999_999_999),
        None => parse_duration(v)?.checked_mul(1000),
    }
}

fn parse_count(v: &str, max: u64) -> Option<u64> {
    if v.is_empty() || v.len() > 9 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u64>().ok().filter(|&n| n <= max)
}

/// A positive count, or `N%` (1 to 100).
fn parse_share(v: &str) -> Option<Share> {
    match v.strip_suffix('%') {
        Some(p) => parse_count(p, 100)
            .filter(|&p| p > 0)
            .map(|p| Share::Percent(p as u8)),
        None => parse_count(v, 1 << 20)
            .filter(|&n| n > 0)
            .map(|n| Share::Count(n as u32)),
    }
}

fn parse_threads(v: &str) -> Option<SquashfsThreads> {
    Some(match v {
        "kernel" | "default" => SquashfsThreads::KernelDefault,
        "single" => SquashfsThreads::Single,
        "multi" => SquashfsThreads::Multi,
        "percpu" => SquashfsThreads::PerCpu,
        n => SquashfsThreads::Count(parse_count(n, 9999).filter(|&n| n > 0)? as u16),
    })
}

fn parse_memory(v: &str) -> Option<Memory> {
    if let Some(p) = v.strip_suffix('%') {
        return parse_count(p, 100).map(|p| Memory::PercentOfRam(p as u8));
    }
    squashfs_format::size::parse_size(v).ok().map(Memory::Bytes)
}

/// Why a value was refused: what the key takes, said after "invalid
/// value 'V' for KEY" (nothing when it goes without saying).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// A yes/no, count or duration out of bounds: nothing to add.
    Plain,
    /// The values the key takes.
    Use(&'static str),
    /// A number from `.0` to `.1`.
    Range(u64, u64),
    /// A user (true) or group name that /etc/passwd or /etc/group lacks.
    UnknownId(bool, String),
    NotAbsolute(String),
    DotDot(String),
    /// `/` in a list of directories.
    Root,
    /// A mount point directory that can never be allowed, and why.
    ForbiddenMountPoints(String),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Plain => Ok(()),
            ValueError::Use(what) => f.write_str(what),
            ValueError::Range(from, to) => write!(f, "use {from} to {to}"),
            ValueError::UnknownId(user, name) => write!(
                f,
                "unknown {} '{}'",
                if *user { "user" } else { "group" },
                name.escape_debug()
            ),
            ValueError::NotAbsolute(item) => {
                write!(f, "'{}' is not an absolute path", item.escape_debug())
            }
            ValueError::DotDot(item) => write!(
                f,
                "'{}' contains '..'; give the directory itself",
                item.escape_debug()
            ),
            ValueError::Root => f.write_str("'/' cannot be listed (it would allow everything)"),
            ValueError::ForbiddenMountPoints(why) => {
                write!(f, "a mount point directory cannot be allowed: {why}")
            }
        }
    }
}

/// A list of names or numeric ids, separated by commas or spaces, each
/// made an id by `id` (the checked constructor: -1 is no id).
fn parse_ids<T: PartialEq>(
    v: &str,
    user: bool,
    resolve: Resolve<'_>,
    id: fn(u32) -> Option<T>,
) -> Result<Vec<T>, ValueError> {
    let mut out = Vec::new();
    for item in v.split([',', ' ']).filter(|s| !s.is_empty()) {
        let id = match item.parse::<u32>().ok().and_then(id) {
            Some(n) => n,
            None => resolve(item, user)
                .and_then(id)
                .ok_or_else(|| ValueError::UnknownId(user, item.into()))?,
        };
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

/// File system names (letters, digits, `.`, `_`, `-`), separated by
/// commas or spaces.
fn parse_names(v: &str) -> Result<Vec<String>, ValueError> {
    let mut out: Vec<String> = Vec::new();
    for item in v.split([',', ' ']).filter(|s| !s.is_empty()) {
        let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        if item.len() > 64 || !item.bytes().all(plain) {
            return Err(ValueError::Use(
                "use FUSE file system names as the mount table shows them after 'fuse.', such as glusterfs, ceph-fuse",
            ));
        }
        if !out.iter().any(|o| o == item) {
            out.push(item.to_string());
        }
    }
    Ok(out)
}

/// Absolute directories, separated by commas; no `..`.
fn parse_dirs(v: &str) -> Result<Vec<OsString>, ValueError> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !item.starts_with('/') {
            return Err(ValueError::NotAbsolute(item.into()));
        }
        if paths::components(item.as_bytes()).contains(&&b".."[..]) {
            return Err(ValueError::DotDot(item.into()));
        }
        let tidy = paths::absolute(std::ffi::OsStr::new("/"), std::ffi::OsStr::new(item));
        if tidy.as_bytes() == b"/" {
            return Err(ValueError::Root);
        }
        if !out.contains(&tidy) {
            out.push(tidy);
        }
    }
    Ok(out)
}

/// Parses the configuration text. Returns the settings and one message per
/// line that was skipped.
#[cfg(test)]
pub(crate) fn parse(text: &[u8], resolve: Resolve<'_>) -> (Settings, Vec<String>) {
    let parsed = parse_file(text, resolve);
    (parsed.settings, parsed.problems)
}

/// What a configuration text sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub settings: Settings,
    /// The keys it sets (to a valid value), in the order of [`KEYS`].
    pub set: Vec<&'static str>,
    /// One message per line that was skipped, or value that was refused.
    pub problems: Vec<String>,
}

/// Parses the configuration text: the settings, which keys it set, and
/// what it got wrong.
pub(crate) fn parse_file(text: &[u8], resolve: Resolve<'_>) -> Parsed {
    let mut s = Settings::default();
    let mut problems = Vec::new();
    let mut set_keys = Vec::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let lineno = i + 1;
        let Ok(line) = std::str::from_utf8(raw) else {
            problems.push(format!("line {lineno}: not UTF-8; skipped"));
            continue;
        };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            problems.push(format!("line {lineno}: expected key = value; skipped"));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let set = match set_policy(&mut s.policy, key, value, resolve) {
            Some(set) => set,
            None => match set_tuning(&mut s, key, value) {
                Some(set) => set,
                None => {
                    problems.push(format!(
                        "line {lineno}: unknown key '{}'; skipped",
                        key.escape_debug()
                    ));
                    continue;
                }
            },
        };
        match set {
            Ok(()) => set_keys.extend(KEYS.iter().find(|k| **k == key)),
            Err(why) => {
                let why = match why {
                    ValueError::Plain => String::new(),
                    why => format!(" ({why})"),
                };
                problems.push(format!(
                    "line {lineno}: invalid value '{}' for {key}{why}; using the default",
                    value.escape_debug()
                ));
            }
        }
    }
    let set = KEYS
        .iter()
        .copied()
        .filter(|k| set_keys.contains(k))
        .collect();
    Parsed {
        settings: s,
        set,
        problems,
    }
}

/// Sets the policy's `key` (None: not a policy key); the error says what
/// values it takes (empty: it goes without saying).
fn set_policy(
    p: &mut Policy,
    key: &str,
    value: &str,
    resolve: Resolve<'_>,
) -> Option<Result<(), ValueError>> {
    Some(match key {
        "kernel-images" => one_of(
            value,
            &[
                ("all", KernelImages::All),
                ("trusted", KernelImages::Trusted),
                ("none", KernelImages::None),
            ],
        )
        .map(|v| p.kernel_images = v)
        .ok_or(ValueError::Use("use all, trusted or none")),
        "trusted-owners" => {
            parse_ids(value, true, resolve, Uid::checked).map(|v| p.trusted_owners = v)
        }
        "trusted-groups" => {
            parse_ids(value, false, resolve, Gid::checked).map(|v| p.trusted_groups = v)
        }
        "trusted-dirs" => parse_dirs(value).map(|v| p.trusted_dirs = v.into()),
        "trusted-match" => one_of(
            value,
            &[("any", TrustedMatch::Any), ("all", TrustedMatch::All)],
        )
        .map(|v| p.trusted_match = v)
        .ok_or(ValueError::Use("use any or all")),
        "trusted-fuse" => parse_names(value).map(|v| p.trusted_fuse = v),
        "allowed-users" => {
            parse_ids(value, true, resolve, Uid::checked).map(|v| p.allowed_users = v)
        }
        "allowed-groups" => {
            parse_ids(value, false, resolve, Gid::checked).map(|v| p.allowed_groups = v)
        }
        "mount-points" => parse_dirs(value).and_then(|v| {
            match v.iter().find_map(|d| paths::forbidden_reason(d)) {
                Some(why) => Err(ValueError::ForbiddenMountPoints(why)),
                None => {
                    p.mount_points = v.into();
                    Ok(())
                }
            }
        }),
        "allow-writable" => parse_bool(value)
            .map(|v| p.allow_writable = v)
            .ok_or(ValueError::Plain),
        "allow-union" => parse_bool(value)
            .map(|v| p.allow_union = v)
            .ok_or(ValueError::Plain),
        "allow-mutable-root" => parse_bool(value)
            .map(|v| p.allow_mutable_root = v)
            .ok_or(ValueError::Plain),
        "max-images-per-call" => parse_count(value, MAX_IMAGES_PER_CALL as u64)
            .filter(|&n| n > 0)
            .map(|v| p.max_images_per_call = v as usize)
            .ok_or(ValueError::Range(1, MAX_IMAGES_PER_CALL as u64)),
        _ => return None,
    })
}

/// Sets the tuning `key` (None: not one).
fn set_tuning(s: &mut Settings, key: &str, value: &str) -> Option<Result<(), ValueError>> {
    Some(match key {
        "max-loop-devices" => parse_count(value, 1 << 20)
            .map(|v| s.max_loop_devices = v as u32)
            .ok_or(ValueError::Plain),
        "max-loop-devices-per-user" => parse_share(value)
            .map(|v| s.max_loop_devices_per_user = v)
            .ok_or(ValueError::Use(
                "use a number such as 64, or a percentage of max-loop-devices such as 10%",
            )),
        "max-launches-per-user" => parse_count(value, 4096)
            .filter(|&n| n > 0)
            .map(|v| s.max_launches_per_user = v as u32)
            .ok_or(ValueError::Plain),
        "max-launches-wait" => parse_duration(value)
            .filter(|&v| v <= 3600)
            .map(|v| s.max_launches_wait_ms = v * 1000)
            .ok_or(ValueError::Plain),
        "cache" => parse_bool(value)
            .map(|v| s.cache = v)
            .ok_or(ValueError::Plain),
        "cache-max-idle" => parse_duration(value)
            .map(|v| s.cache_max_idle = v)
            .ok_or(ValueError::Plain),
        "cache-max-instances" => parse_count(value, super::MAX_CACHE_ENTRIES as u64)
            .map(|v| s.cache_max_instances = v as u32)
            .ok_or(ValueError::Range(0, super::MAX_CACHE_ENTRIES as u64)),
        "cache-max-instances-per-user" => parse_share(value)
            .map(|v| s.cache_max_instances_per_user = v)
            .ok_or(ValueError::Use(
                "use a number such as 64, or a percentage of cache-max-instances such as 25%",
            )),
        "cache-max-memory" => {
            parse_memory(value)
                .map(|v| s.cache_max_memory = v)
                .ok_or(ValueError::Use(
                    "use a size such as 512M or a percentage of RAM such as 2%",
                ))
        }
        "cache-lock-timeout" => parse_millis(value)
            .filter(|&v| v <= 600_000)
            .map(|v| s.cache_lock_timeout_ms = v)
            .ok_or(ValueError::Plain),
        "loop-direct-io" => parse_bool(value)
            .map(|v| s.loop_options.direct_io = v)
            .ok_or(ValueError::Plain),
        "loop-block-size" => one_of(
            value,
            &[
                ("0", 0),
                ("512", 512),
                ("1024", 1024),
                ("2048", 2048),
                ("4096", 4096),
            ],
        )
        .map(|v| s.loop_options.block_size = v)
        .ok_or(ValueError::Use("use 0, 512, 1024, 2048 or 4096")),
        "squashfs-threads" => parse_threads(value)
            .map(|v| s.loop_options.threads = v)
            .ok_or(ValueError::Plain),
        "fuse-threads" => parse_count(value, 64)
            .map(|v| s.fuse_threads = v as u32)
            .ok_or(ValueError::Use("use 0 (automatic) to 64")),
        "verbose" => parse_bool(value)
            .map(|v| s.verbose = v)
            .ok_or(ValueError::Plain),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
