//! Settings from the root-owned configuration file (never from the
//! environment: the tool reads it while privileged).
//!
//! `/etc/squashfs-mount.conf` (path compiled in), `key = value` lines, `#`
//! comments. The file is ignored, with one warning, unless it is a regular
//! file owned by root and writable by nobody else. Unknown keys and bad
//! values are reported (one line each) and skipped; everything has a
//! compiled-in default.
//!
//! ```text
//! cache = on                  # on | off: keep image instances mounted between launches
//! cache-max-idle = 10m        # evict instances unused for this long (s, m, h; 0 = at the next collection)
//! cache-max-instances = 32    # keep at most this many unused instances (least recently used go first)
//! cache-lock-timeout = 5s     # wait at most this long for the cache lock, then mount privately
//! loop-direct-io = off        # on | off: LO_FLAGS_DIRECT_IO for the image's loop device
//! loop-block-size = 4096      # 512 | 1024 | 2048 | 4096, or 0 for the kernel's default
//! squashfs-threads = multi    # single | multi | percpu | <N> | kernel (used where the kernel offers it)
//! ```
//!
//! The packages install `etc/squashfs-mount.conf` of the repository, which
//! lists every key of [`KNOWN_KEYS`] commented out with its default; a unit
//! test keeps the two in sync.

use std::os::fd::AsFd;

use crate::error;
use crate::loopdev::{LoopOptions, SquashfsThreads};
use crate::system;

/// Compiled-in path of the configuration file.
pub const CONFIG_PATH: &str = "/etc/squashfs-mount.conf";
/// Largest configuration file read.
const MAX_CONFIG_BYTES: usize = 64 * 1024;

/// Every key [`parse`] accepts; any other key is reported as unknown. The
/// packaged, documented `etc/squashfs-mount.conf` must list each of them
/// with its default (a unit test checks this): add a new key here, in
/// [`parse`] and in that file.
pub const KNOWN_KEYS: &[&str] = &[
    "cache",
    "cache-max-idle",
    "cache-max-instances",
    "cache-lock-timeout",
    "loop-direct-io",
    "loop-block-size",
    "squashfs-threads",
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Keep image instances mounted between launches (`--no-cache` turns it
    /// off for one launch).
    pub cache: bool,
    /// Instances unused for this many seconds are evicted.
    pub cache_max_idle: u64,
    /// At most this many instances no process uses are kept.
    pub cache_max_instances: u32,
    /// Milliseconds to wait for the cache lock before mounting privately.
    pub cache_lock_timeout_ms: u64,
    pub loop_options: LoopOptions,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cache: true,
            cache_max_idle: 600,
            cache_max_instances: 32,
            cache_lock_timeout_ms: 5000,
            loop_options: LoopOptions::default(),
        }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "on" | "yes" | "true" | "1" => Some(true),
        "off" | "no" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// `<n>`, `<n>s`, `<n>m`, `<n>h` as seconds.
fn parse_duration(v: &str) -> Option<u64> {
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

fn parse_threads(v: &str) -> Option<SquashfsThreads> {
    Some(match v {
        "kernel" | "default" => SquashfsThreads::KernelDefault,
        "single" => SquashfsThreads::Single,
        "multi" => SquashfsThreads::Multi,
        "percpu" => SquashfsThreads::PerCpu,
        n => {
            if n.is_empty() || n.len() > 4 || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: u16 = n.parse().ok()?;
            if n == 0 {
                return None;
            }
            SquashfsThreads::Count(n)
        }
    })
}

/// Parses the configuration text. Returns the settings and one message per
/// line that was skipped. Pure.
pub fn parse(text: &[u8]) -> (Settings, Vec<String>) {
    let mut s = Settings::default();
    let mut problems = Vec::new();
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
        if !KNOWN_KEYS.contains(&key) {
            problems.push(format!(
                "line {lineno}: unknown key '{}'; skipped",
                key.escape_debug()
            ));
            continue;
        }
        let ok = match key {
            "cache" => parse_bool(value).map(|v| s.cache = v),
            "cache-max-idle" => parse_duration(value).map(|v| s.cache_max_idle = v),
            "cache-max-instances" => value
                .parse::<u32>()
                .ok()
                .filter(|&n| n <= 4096 && value.bytes().all(|b| b.is_ascii_digit()))
                .map(|v| s.cache_max_instances = v),
            "cache-lock-timeout" => parse_duration(value)
                .filter(|&v| v <= 600)
                .map(|v| s.cache_lock_timeout_ms = v * 1000),
            "loop-direct-io" => parse_bool(value).map(|v| s.loop_options.direct_io = v),
            "loop-block-size" => match value {
                "0" => Some(0),
                "512" => Some(512),
                "1024" => Some(1024),
                "2048" => Some(2048),
                "4096" => Some(4096),
                _ => None,
            }
            .map(|v| s.loop_options.block_size = v),
            "squashfs-threads" => parse_threads(value).map(|v| s.loop_options.threads = v),
            // In KNOWN_KEYS but not handled here: the unit test
            // `the_shipped_configuration_lists_every_key` fails.
            _ => {
                problems.push(format!(
                    "line {lineno}: key '{key}' is not implemented; skipped"
                ));
                continue;
            }
        };
        if ok.is_none() {
            problems.push(format!(
                "line {lineno}: invalid value '{}' for {key}; using the default",
                value.escape_debug()
            ));
        }
    }
    (s, problems)
}

/// Loads the settings: compiled-in defaults, overridden by the configuration
/// file when it exists and is trustworthy. Problems are printed as warnings
/// (one line each). Needs root only if the file is not world-readable.
pub fn load() -> Settings {
    let warn = |msg: String| error::warn(format_args!("{CONFIG_PATH}: {msg}"));
    let fd = match system::open_read_nofollow(system::working_dir(), CONFIG_PATH) {
        Ok(fd) => fd,
        Err(system::Error::NOENT) => return Settings::default(),
        Err(e) => {
            warn(format!("cannot open it ({e}); using the built-in defaults"));
            return Settings::default();
        }
    };
    let id = match system::fstat(fd.as_fd()) {
        Ok(id) => id,
        Err(e) => {
            warn(format!("cannot stat it ({e}); using the built-in defaults"));
            return Settings::default();
        }
    };
    if !id.is_regular() || id.uid != 0 || id.mode & 0o022 != 0 {
        warn("ignored: it must be a regular file owned by root and not writable by group or others".into());
        return Settings::default();
    }
    let mut buf = vec![0u8; MAX_CONFIG_BYTES + 1];
    let n = match system::read_head(fd.as_fd(), &mut buf) {
        Ok(n) => n,
        Err(e) => {
            warn(format!("cannot read it ({e}); using the built-in defaults"));
            return Settings::default();
        }
    };
    if n > MAX_CONFIG_BYTES {
        warn(format!("ignored: larger than {MAX_CONFIG_BYTES} bytes"));
        return Settings::default();
    }
    let (settings, problems) = parse(&buf[..n]);
    for p in problems {
        warn(p);
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let (s, p) = parse(b"");
        assert_eq!(s, Settings::default());
        assert!(p.is_empty());
        let (s, p) = parse(
            b"# comment\ncache = off\ncache-max-idle = 2m  # two minutes\ncache-max-instances=5\n\
              cache-lock-timeout = 1s\nloop-direct-io = on\nloop-block-size = 512\nsquashfs-threads = 8\n",
        );
        assert!(p.is_empty(), "{p:?}");
        assert!(!s.cache);
        assert_eq!(s.cache_max_idle, 120);
        assert_eq!(s.cache_max_instances, 5);
        assert_eq!(s.cache_lock_timeout_ms, 1000);
        assert!(s.loop_options.direct_io);
        assert_eq!(s.loop_options.block_size, 512);
        assert_eq!(s.loop_options.threads, SquashfsThreads::Count(8));
    }

    #[test]
    fn bad_lines_are_reported_and_skipped() {
        let (s, p) = parse(b"cache = maybe\nbogus = 1\nno equals sign\ncache-max-idle = -5\ncache-max-idle = 99999999999h\nloop-block-size = 3000\nsquashfs-threads = 0\n\xff\n");
        assert_eq!(s, Settings::default());
        assert_eq!(p.len(), 8, "{p:?}");
        assert!(p[1].contains("unknown key"));
    }

    /// The documented configuration file installed by the packages
    /// (etc/squashfs-mount.conf).
    const SHIPPED: &str = include_str!("../../../etc/squashfs-mount.conf");

    /// `(key, value)` of a commented-out setting line `#key = value`.
    fn setting_line(line: &str) -> Option<(String, String)> {
        let (k, v) = line.strip_prefix('#')?.split_once('=')?;
        let k = k.trim();
        (!k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
        .then(|| (k.to_string(), v.trim().to_string()))
    }

    #[test]
    fn the_shipped_configuration_lists_every_key() {
        // As shipped (everything commented out) it changes nothing.
        assert_eq!(parse(SHIPPED.as_bytes()), (Settings::default(), vec![]));
        let lines: Vec<&str> = SHIPPED.lines().collect();
        let documented: Vec<(String, String)> =
            lines.iter().filter_map(|l| setting_line(l)).collect();
        let keys: Vec<&str> = documented.iter().map(|(k, _)| k.as_str()).collect();
        for key in KNOWN_KEYS {
            assert_eq!(
                keys.iter().filter(|k| *k == key).count(),
                1,
                "etc/squashfs-mount.conf must list '{key}' exactly once, commented out with its default \
                 (a line '#{key} = <default>' below a one-line explanation)"
            );
        }
        for key in &keys {
            assert!(
                KNOWN_KEYS.contains(key),
                "etc/squashfs-mount.conf lists '{key}', which config::parse does not accept"
            );
        }
        // Each documented value is valid and is the built-in default.
        for (key, value) in &documented {
            let (s, problems) = parse(format!("{key} = {value}\n").as_bytes());
            assert!(
                problems.is_empty(),
                "etc/squashfs-mount.conf: '{key} = {value}': {problems:?}"
            );
            assert_eq!(
                s,
                Settings::default(),
                "etc/squashfs-mount.conf: '{key} = {value}' is not the built-in default"
            );
        }
        // Each has its explanation on the line above.
        for (i, line) in lines.iter().enumerate() {
            if setting_line(line).is_some() {
                let above = if i > 0 { lines[i - 1] } else { "" };
                assert!(
                    above.starts_with("# ") && above.len() > 10 && setting_line(above).is_none(),
                    "etc/squashfs-mount.conf: '{line}' needs a one-line explanation on the line above"
                );
            }
        }
    }

    #[test]
    fn every_known_key_is_accepted_and_others_are_not() {
        for key in KNOWN_KEYS {
            let (_, p) = parse(format!("{key} = ?\n").as_bytes());
            assert!(
                p.iter().all(|p| p.contains("invalid value")),
                "{key} is not handled by parse: {p:?}"
            );
        }
        let (_, p) = parse(b"cache-max-idles = 5\n");
        assert!(p[0].contains("unknown key"), "{p:?}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("30s"), Some(30));
        assert_eq!(parse_duration("10m"), Some(600));
        assert_eq!(parse_duration("1h"), Some(3600));
        assert_eq!(parse_duration("m"), None);
        assert_eq!(parse_duration("1.5m"), None);
        assert_eq!(parse_duration("+5"), None);
    }
}
