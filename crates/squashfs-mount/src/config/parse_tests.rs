//! Unit tests of parse.rs.
use super::*;
use crate::config::policy::Policy;
use crate::system::{Gid, Uid};

fn resolve(name: &str, user: bool) -> Option<u32> {
    match (name, user) {
        ("root", _) => Some(0),
        ("alice", true) => Some(1000),
        ("hpc", false) => Some(300),
        // A name database's entry of -1, which is no id.
        ("nobody-at-all", _) => Some(u32::MAX),
        _ => None,
    }
}
fn p(text: &str) -> (Settings, Vec<String>) {
    parse(text.as_bytes(), &resolve)
}

#[test]
fn defaults_and_overrides() {
    let (s, problems) = p("");
    assert_eq!(s, Settings::default());
    assert!(problems.is_empty());
    let (s, problems) = p("# comment\ncache = off\ncache-max-idle = 2m  # two minutes\ncache-max-instances=5\n\
          cache-lock-timeout = 1s\nloop-direct-io = on\nloop-block-size = 512\nsquashfs-threads = 8\ncache-max-memory = 3%\n");
    assert!(problems.is_empty(), "{problems:?}");
    assert!(!s.cache);
    assert_eq!(
        (
            s.cache_max_idle,
            s.cache_max_instances,
            s.cache_lock_timeout_ms
        ),
        (120, 5, 1000)
    );
    assert!(s.loop_options.direct_io);
    assert_eq!(
        p("cache-lock-timeout = 250ms\n").0.cache_lock_timeout_ms,
        250
    );
    assert_eq!(p("cache-lock-timeout = 2\n").0.cache_lock_timeout_ms, 2000);
    assert!(!p("cache-lock-timeout = 601s\n").1.is_empty());
    assert!(!p("cache-lock-timeout = ms\n").1.is_empty());
    assert_eq!(s.loop_options.block_size, 512);
    assert_eq!(s.loop_options.threads, SquashfsThreads::Count(8));
    assert_eq!(s.cache_max_memory, Memory::PercentOfRam(3));
}

#[test]
fn policy_keys() {
    let (s, problems) = p("kernel-images = none\ntrusted-owners = root, alice 42\ntrusted-groups = hpc\n\
          trusted-dirs = /apps//images/, /opt/x\ntrusted-match = all\nallowed-groups = hpc\nmount-points = /user-environment\n\
          allow-writable = no\nallow-union = no\nallow-mutable-root = no\nmax-images-per-call = 64\nmax-loop-devices = 100\nmax-launches-per-user = 3\nmax-launches-wait = 2s\n");
    assert!(problems.is_empty(), "{problems:?}");
    let pol = &s.policy;
    assert_eq!(pol.kernel_images, KernelImages::None);
    let raw = |ids: &[Uid]| ids.iter().map(|u| u.as_raw()).collect::<Vec<_>>();
    let graw = |ids: &[Gid]| ids.iter().map(|g| g.as_raw()).collect::<Vec<_>>();
    assert_eq!(raw(&pol.trusted_owners), [0, 1000, 42]);
    assert_eq!(graw(&pol.trusted_groups), [300]);
    assert_eq!(
        pol.trusted_dirs.dirs(),
        [OsString::from("/apps/images"), OsString::from("/opt/x")]
    );
    assert_eq!(pol.trusted_match, TrustedMatch::All);
    assert_eq!(graw(&pol.allowed_groups), [300]);
    assert!(!pol.allow_writable && !pol.allow_union && !pol.allow_mutable_root);
    assert_eq!(pol.max_images_per_call, 64);
    assert_eq!(
        (
            s.max_loop_devices,
            s.max_launches_per_user,
            s.max_launches_wait_ms
        ),
        (100, 3, 2000)
    );
    // An empty list is a list: nobody is a trusted owner.
    assert!(p("trusted-owners =\n").0.policy.trusted_owners.is_empty());
    assert_eq!(Policy::default().trusted_owners, [Uid::ROOT]);
}

#[test]
fn minus_one_is_no_id() {
    for line in [
        "trusted-owners = 4294967295",
        "trusted-owners = nobody-at-all",
        "trusted-groups = nobody-at-all",
        "allowed-users = nobody-at-all",
        "allowed-groups = 4294967295",
    ] {
        let (s, problems) = p(line);
        assert_eq!(problems.len(), 1, "{line}: {problems:?}");
        assert!(problems[0].contains("unknown"), "{line}: {problems:?}");
        // Skipped: the defaults stay.
        let (pol, default) = (&s.policy, &Settings::default().policy);
        assert_eq!(pol.trusted_owners, default.trusted_owners, "{line}");
        assert_eq!(pol.trusted_groups, default.trusted_groups, "{line}");
        assert_eq!(pol.allowed_users, default.allowed_users, "{line}");
        assert_eq!(pol.allowed_groups, default.allowed_groups, "{line}");
    }
}

#[test]
fn bad_lines_are_reported_and_skipped() {
    let text = b"cache = maybe\nbogus = 1\nno equals sign\ncache-max-idle = -5\ncache-max-idle = 99999999999h\nloop-block-size = 3000\nsquashfs-threads = 0\n\xff\n\
          kernel-images = some\ntrusted-owners = nobody-here\ntrusted-dirs = relative\ntrusted-dirs = /a/../b\ntrusted-dirs = /\n\
          mount-points = /proc/x\nmax-images-per-call = 501\nmax-images-per-call = 0\n";
    let (s, problems) = parse(text, &resolve);
    assert_eq!(s, Settings::default());
    assert_eq!(problems.len(), 16, "{problems:?}");
    assert!(problems[1].contains("unknown key"));
    assert!(problems[9].contains("unknown user"), "{}", problems[9]);
}

#[test]
fn trusted_fuse_names() {
    let (s, problems) = p("trusted-fuse = s3fs, rclone s3fs\n");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(s.policy.trusted_fuse, ["s3fs", "rclone"]);
    let (s, problems) = p("trusted-fuse =\n");
    assert!(problems.is_empty(), "{problems:?}");
    assert!(s.policy.trusted_fuse.is_empty());
    let (s, problems) = p("trusted-fuse = fuse/x\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("after 'fuse.'"), "{problems:?}");
    assert_eq!(s.policy.trusted_fuse, ["glusterfs", "ceph-fuse"]);
}

#[test]
fn every_key_is_known_to_the_parser() {
    for key in KEYS {
        let (_, problems) = p(&format!("{key} = \u{1}\n"));
        assert!(
            problems.iter().all(|m| !m.contains("unknown key")),
            "{key}: {problems:?}"
        );
    }
}

/// The documented configuration file installed by the packages.
const SHIPPED: &str = include_str!("../../../../etc/squashfs-mount.conf");

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
    assert_eq!(p(SHIPPED), (Settings::default(), vec![]));
    let lines: Vec<&str> = SHIPPED.lines().collect();
    let documented: Vec<(String, String)> = lines.iter().filter_map(|l| setting_line(l)).collect();
    let keys: Vec<&str> = documented.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, KEYS, "etc/squashfs-mount.conf must list every key once, commented out with its default, in the order of config::KEYS");
    // Each documented value is valid and is the built-in default.
    for (key, value) in &documented {
        let (s, problems) = p(&format!("{key} = {value}\n"));
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
                "etc/squashfs-mount.conf: '{line}' needs a one-line explanation above it"
            );
        }
    }
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

#[test]
fn cache_share_per_user() {
    use crate::config::Share;
    let (s, problems) = p("cache-max-instances = 40\ncache-max-instances-per-user = 5\n");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(s.cache_max_instances_per_user, Share::Count(5));
    assert_eq!(s.cache_limits().per_user, 5);
    let (s, _) = p("cache-max-instances = 40\ncache-max-instances-per-user = 10%\n");
    assert_eq!(s.cache_limits().per_user, 4);
    assert_eq!(Settings::default().cache_limits().per_user, 614);
    let (s, problems) = p("cache-max-instances-per-user = 0\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(s, Settings::default());
}

#[test]
fn loop_share_per_user() {
    use crate::config::Share;
    assert_eq!(
        p("max-loop-devices-per-user = 5\n")
            .0
            .max_loop_devices_per_user,
        Share::Count(5)
    );
    assert_eq!(
        p("max-loop-devices-per-user = 25%\n")
            .0
            .max_loop_devices_per_user,
        Share::Percent(25)
    );
    for bad in ["0", "0%", "101%", "x", "-1", "5 %"] {
        let (s, problems) = p(&format!("max-loop-devices-per-user = {bad}\n"));
        assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
        assert_eq!(s, Settings::default(), "{bad}");
    }
}
