//! Command-line parsing. Pure: no system calls, no environment; fuzzed.
//!
//! ```text
//! squashfs-mount [OPTIONS] <image>:<mountpoint> [<image>:<mountpoint>...] -- <command> [args...]
//! squashfs-mount [OPTIONS] --sqfs=<image>:<mountpoint>[,<image>:<mountpoint>...] -- <command> [args...]
//! ```

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

pub const USAGE: &str = "\
Usage: squashfs-mount [OPTIONS] <image>:<mountpoint> [<image>:<mountpoint>...] -- <command> [args...]
       squashfs-mount [OPTIONS] --sqfs=<image>:<mountpoint>[,<image>:<mountpoint>...] -- <command> [args...]
       squashfs-mount --gc [--all | <image>]
       squashfs-mount --cache-status [--json]
       squashfs-mount --policy [<image>...]

Mounts each SquashFS <image> read-only (nosuid, nodev) on <mountpoint> in a
private mount namespace, drops all privileges and runs <command> as you.
Images are opened with your own permissions. The site policy decides which
images the kernel mounts; the others are served by a FUSE server running as
you (see --policy).

Options:
  --sqfs=<image>:<mountpoint>[,...]   images to mount (comma-separated list)
  --union=<image>,<image>[,...]:<mountpoint>
                                      stack several images at one mount point
                                      (overlayfs, read-only; the first image
                                      named is on top); repeatable
  --writable[=SIZE]                   give every mount a private writable layer
                                      on a fresh tmpfs (SIZE: 512M, 2G, 2GiB,
                                      1.5G... or N% of RAM; default 50%);
                                      changes vanish at exit
  --no-cache                          mount private instances; do not use or
                                      fill the image cache
  --verbose                           say which way each image was mounted
  -q, --quiet                         no note when running without setuid
  --gc                                evict unused cached instances you
                                      created (root: all unused ones); with
                                      an <image>: that image's instance;
                                      --all (root only): every instance
  --cache-status                      list your cached instances (root: all);
                                      --json for a machine-readable list
  --policy [<image>...]               print the site policy in force and, for
                                      each <image>, which way it would be
                                      mounted and why
  -h, --help                          print this help and exit
  -V, -v, --version                   print the version and exit

Environment:
  SQFSMNT_FWD_<NAME>=<value>  passed to <command> as <NAME>=<value>
                              (e.g. SQFSMNT_FWD_LD_LIBRARY_PATH)
  UENV_MOUNT_LIST             set for <command>: <image>:<mountpoint>,... in
                              mount order, absolute paths
";

/// One `<image>:<mountpoint>` or `--union=<image>,...:<mountpoint>`
/// request, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountRequest {
    /// One image, or the layers of a union, top first.
    pub images: Vec<OsString>,
    pub mount_point: OsString,
    pub union: bool,
}

impl MountRequest {
    /// `image:mountpoint` (or `a,b:mountpoint`) for messages (lossy for
    /// non-UTF-8 bytes).
    pub fn describe(&self) -> String {
        let images: Vec<_> = self.images.iter().map(|i| i.to_string_lossy()).collect();
        format!("{}:{}", images.join(","), self.mount_point.to_string_lossy())
    }
}

/// Size limit of the tmpfs under a writable layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerSize {
    Bytes(u64),
    PercentOfRam(u8),
}

impl LayerSize {
    pub const DEFAULT: LayerSize = LayerSize::PercentOfRam(50);

    /// `N%` of RAM, or a size in the grammar both tools share
    /// (`squashfs_format::size`: `64k`, `512M`, `1.5G`, `2GB`, `2GiB`, ...).
    pub fn parse(text: &[u8]) -> Result<LayerSize, UsageError> {
        let bad = |why: String| {
            UsageError(format!(
                "invalid --writable size '{}': {why}; use a size such as 512M, 2G or 2GiB, or a percentage of RAM such as 25%",
                lossy(text)
            ))
        };
        let text_str = std::str::from_utf8(text).map_err(|_| bad("not UTF-8".into()))?;
        if let Some(percent) = text_str.strip_suffix('%') {
            return match percent.parse::<u8>() {
                Ok(n @ 1..=100) if percent.bytes().all(|b| b.is_ascii_digit()) => Ok(LayerSize::PercentOfRam(n)),
                _ => Err(bad("a percentage must be a whole number from 1 to 100".into())),
            };
        }
        let bytes = squashfs_format::size::parse_size(text_str).map_err(|e| bad(e.to_string()))?;
        if bytes < 1 << 20 {
            return Err(UsageError(format!("--writable size '{}' is too small: give at least 1M", lossy(text))));
        }
        Ok(LayerSize::Bytes(bytes))
    }

    /// The value for tmpfs' `size` parameter (generated, never user text).
    pub fn tmpfs_value(self) -> String {
        match self {
            LayerSize::Bytes(b) => b.to_string(),
            LayerSize::PercentOfRam(p) => format!("{p}%"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    Help,
    Version,
    Run(RunRequest),
    /// `--gc [--all | IMAGE]`: evict cached image instances.
    Gc { all: bool, image: Option<OsString> },
    /// `--cache-status [--json]`: list cached image instances.
    CacheStatus { json: bool },
    /// `--policy [IMAGE...]`: the site policy, and each image's route.
    Policy { images: Vec<OsString> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    pub mounts: Vec<MountRequest>,
    /// `--writable[=SIZE]`: every mount gets a private writable layer.
    pub writable: Option<LayerSize>,
    /// Program and its arguments; never empty.
    pub command: Vec<OsString>,
    /// `--no-cache`: private instances, the image cache is left alone.
    pub no_cache: bool,
    /// `--verbose`: say which way each image was mounted.
    pub verbose: bool,
    /// `--quiet`: no note about running without setuid.
    pub quiet: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

/// The message for a call without any argument (the wording of the C tool
/// and of uenv, which scripts match); `main` prints the usage first.
pub const NO_COMMAND: &str = "no command given";

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (see squashfs-mount --help)", self.0)
    }
}

impl From<UsageError> for crate::error::Failure {
    fn from(e: UsageError) -> Self {
        crate::error::Failure::new(e.to_string())
    }
}

fn lossy(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

/// Parses one `<image>:<mountpoint>` pair.
pub fn parse_pair(arg: &[u8]) -> Result<MountRequest, UsageError> {
    let (images, mount_point) = split_pair(arg)?;
    Ok(MountRequest { images: vec![images], mount_point, union: false })
}

/// Most layers one union may have (overlayfs allows 500 lower layers).
pub const MAX_UNION_LAYERS: usize = 500;

/// Parses `<image>,<image>[,...]:<mountpoint>` of `--union=`.
pub fn parse_union(arg: &[u8]) -> Result<MountRequest, UsageError> {
    let (list, mount_point) = split_pair(arg)?;
    let images: Vec<OsString> = list
        .as_bytes()
        .split(|&b| b == b',')
        .map(|i| OsString::from_vec(i.to_vec()))
        .collect();
    if images.iter().any(|i| i.is_empty()) {
        return Err(UsageError(format!("--union='{}': an image path is empty", lossy(arg))));
    }
    if images.len() > MAX_UNION_LAYERS {
        return Err(UsageError(format!(
            "--union: {} images given, at most {MAX_UNION_LAYERS} can be stacked",
            images.len()
        )));
    }
    Ok(MountRequest { images, mount_point, union: true })
}

fn split_pair(arg: &[u8]) -> Result<(OsString, OsString), UsageError> {
    let colons = arg.iter().filter(|&&b| b == b':').count();
    if colons == 0 {
        return Err(UsageError(format!(
            "'{}' is not of the form <image>:<mountpoint>",
            lossy(arg)
        )));
    }
    if colons > 1 {
        return Err(UsageError(format!(
            "'{}' has more than one ':'; paths containing ':' are not supported, use a symlink without ':' to the image or mount point",
            lossy(arg)
        )));
    }
    let at = arg.iter().position(|&b| b == b':').unwrap_or(0);
    let (image, mount_point) = (&arg[..at], &arg[at + 1..]);
    if image.is_empty() {
        return Err(UsageError(format!("'{}': the image path is empty", lossy(arg))));
    }
    if mount_point.is_empty() {
        return Err(UsageError(format!("'{}': the mount point is empty", lossy(arg))));
    }
    for part in [image, mount_point] {
        if part.contains(&b'\n') {
            return Err(UsageError(format!(
                "'{}': paths containing a newline are not supported",
                lossy(arg).escape_debug()
            )));
        }
        if part.contains(&0) {
            return Err(UsageError("paths cannot contain a NUL byte".into()));
        }
    }
    Ok((
        OsString::from_vec(image.to_vec()),
        OsString::from_vec(mount_point.to_vec()),
    ))
}

/// Whether `word` looks like `<image>:<mountpoint>` (or a `--sqfs`/`--union`
/// option), for the hints below.
fn looks_like_pair(word: &[u8]) -> bool {
    word.contains(&b':')
}

/// Parses the arguments after argv[0].
pub fn parse(args: &[OsString]) -> Result<Invocation, UsageError> {
    if args.is_empty() {
        return Err(UsageError(NO_COMMAND.into()));
    }
    if let Some(maintenance) = parse_maintenance(args)? {
        return Ok(maintenance);
    }
    let mut r = RunRequest { mounts: Vec::new(), writable: None, command: Vec::new(), no_cache: false, verbose: false, quiet: false };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        i += 1;
        match arg {
            b"--" => {
                r.command = args[i..].to_vec();
                if r.command.is_empty() {
                    return Err(UsageError(format!("{NO_COMMAND} after '--'")));
                }
                return Ok(Invocation::Run(r));
            }
            b"-h" | b"--help" => return Ok(Invocation::Help),
            b"-V" | b"-v" | b"--version" => return Ok(Invocation::Version),
            b"--no-cache" => r.no_cache = true,
            b"--verbose" => r.verbose = true,
            b"-q" | b"--quiet" => r.quiet = true,
            _ if arg.starts_with(b"--sqfs=") => {
                let list = &arg[b"--sqfs=".len()..];
                if list.is_empty() {
                    return Err(UsageError("--sqfs= needs <image>:<mountpoint>[,...]".into()));
                }
                for pair in list.split(|&b| b == b',') {
                    r.mounts.push(parse_pair(pair)?);
                }
            }
            b"--sqfs" => {
                let Some(list) = args.get(i) else {
                    return Err(UsageError("--sqfs needs <image>:<mountpoint>[,...]".into()));
                };
                i += 1;
                for pair in list.as_bytes().split(|&b| b == b',') {
                    r.mounts.push(parse_pair(pair)?);
                }
            }
            b"--writable" => {
                // `--writable 1G`: the next word is its size when it is a
                // size (never a pair, an option or the '--').
                match args.get(i).map(|a| a.as_bytes()) {
                    Some(next) if !looks_like_pair(next) && !next.starts_with(b"-") && next.first().is_some_and(|b| b.is_ascii_digit() || *b == b'.') => {
                        r.writable = Some(LayerSize::parse(next)?);
                        i += 1;
                    }
                    _ => r.writable = Some(LayerSize::DEFAULT),
                }
            }
            _ if arg.starts_with(b"--writable=") => {
                r.writable = Some(LayerSize::parse(&arg[b"--writable=".len()..])?);
            }
            _ if arg.starts_with(b"--union=") => {
                r.mounts.push(parse_union(&arg[b"--union=".len()..])?);
            }
            b"--union" => {
                let Some(spec) = args.get(i) else {
                    return Err(UsageError("--union needs <image>,<image>[,...]:<mountpoint>".into()));
                };
                i += 1;
                r.mounts.push(parse_union(spec.as_bytes())?);
            }
            _ if arg.starts_with(b"-") => {
                return Err(UsageError(format!("unknown option '{}'", lossy(arg))));
            }
            _ if !looks_like_pair(arg) && !r.mounts.is_empty() => {
                return Err(UsageError(format!(
                    "'{}' is not of the form <image>:<mountpoint>; did you forget '--' before the command?",
                    lossy(arg)
                )));
            }
            _ => r.mounts.push(parse_pair(arg)?),
        }
    }
    Err(UsageError(format!("{NO_COMMAND}: put the command to run after '--', e.g. squashfs-mount image.sqfs:/mnt -- bash")))
}

/// `--gc [--all | IMAGE]`, `--cache-status [--json]` and `--policy
/// [IMAGE...]` stand alone: None when none is given before `--`.
fn parse_maintenance(args: &[OsString]) -> Result<Option<Invocation>, UsageError> {
    let own: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).take_while(|a| *a != b"--").collect();
    let has = |w: &[u8]| own.contains(&w);
    let (gc, status, policy) = (has(b"--gc"), has(b"--cache-status"), has(b"--policy"));
    if [gc, status, policy].iter().filter(|&&x| x).count() > 1 {
        return Err(UsageError("give only one of --gc, --cache-status and --policy".into()));
    }
    if !gc && !status && !policy {
        if has(b"--all") {
            return Err(UsageError("--all goes with --gc".into()));
        }
        if has(b"--json") {
            return Err(UsageError("--json goes with --cache-status".into()));
        }
        return Ok(None);
    }
    let words: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let rest: Vec<&[u8]> = words.iter().copied().filter(|a| !matches!(*a, b"--gc" | b"--cache-status" | b"--policy")).collect();
    if policy {
        if let Some(opt) = rest.iter().find(|a| a.starts_with(b"-")) {
            return Err(UsageError(format!("'{}' cannot be combined with --policy", lossy(opt))));
        }
        return Ok(Some(Invocation::Policy { images: rest.iter().map(|a| OsString::from_vec(a.to_vec())).collect() }));
    }
    if status {
        return match rest.as_slice() {
            [] => Ok(Some(Invocation::CacheStatus { json: false })),
            [b"--json"] => Ok(Some(Invocation::CacheStatus { json: true })),
            [b"--all", ..] | [_, b"--all", ..] => Err(UsageError("--all goes with --gc".into())),
            [extra, ..] => Err(UsageError(format!("'{}' cannot be combined with --cache-status", lossy(extra)))),
        };
    }
    match rest.as_slice() {
        [] => Ok(Some(Invocation::Gc { all: false, image: None })),
        [b"--all"] => Ok(Some(Invocation::Gc { all: true, image: None })),
        [image] if !image.starts_with(b"-") => Ok(Some(Invocation::Gc { all: false, image: Some(OsString::from_vec(image.to_vec())) })),
        [extra, ..] => Err(UsageError(format!("'{}' cannot be combined with --gc (give --all, or one image)", lossy(extra)))),
    }
}

/// `SQFSMNT_FWD_<NAME>=<value>` becomes `<NAME>=<value>`: returns NAME.
pub fn forwarded_name(name: &OsStr) -> Option<&OsStr> {
    let rest = name.as_bytes().strip_prefix(b"SQFSMNT_FWD_")?;
    if rest.is_empty() || rest.contains(&b'=') {
        return None;
    }
    Some(OsStr::from_bytes(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }
    fn run(list: &[&str]) -> RunRequest {
        match parse(&args(list)).unwrap() {
            Invocation::Run(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn single_pair() {
        let r = run(&["a.sqfs:/mnt", "--", "true"]);
        assert_eq!(r.mounts.len(), 1);
        assert_eq!(r.mounts[0].images, ["a.sqfs"]);
        assert_eq!(r.mounts[0].mount_point, "/mnt");
        assert_eq!(r.command, args(&["true"]));
    }

    #[test]
    fn several_pairs_and_sqfs_list() {
        let r = run(&["--sqfs=a:/x,b:/y", "c:/z", "--", "ls", "-l", "--", "x"]);
        let got: Vec<_> = r.mounts.iter().map(|m| m.describe()).collect();
        assert_eq!(got, ["a:/x", "b:/y", "c:/z"]);
        assert_eq!(r.command, args(&["ls", "-l", "--", "x"]));
        let r = run(&["--sqfs", "a:/x", "--", "true"]);
        assert_eq!(r.mounts.len(), 1);
    }

    #[test]
    fn no_pairs_is_passthrough() {
        assert!(run(&["--", "env"]).mounts.is_empty());
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(&args(&["-h"])).unwrap(), Invocation::Help);
        assert_eq!(parse(&args(&["--version"])).unwrap(), Invocation::Version);
        assert_eq!(parse(&args(&["-v"])).unwrap(), Invocation::Version);
        // After '--' everything belongs to the command.
        assert!(matches!(parse(&args(&["--", "x", "-h"])).unwrap(), Invocation::Run(_)));
    }

    #[test]
    fn invalid() {
        for bad in [
            &["invalid_argument", "--", "true"][..],
            &["a:/m"],
            &["a:/m", "--"],
            &[":/m", "--", "true"],
            &["a:", "--", "true"],
            &["a:b:c", "--", "true"],
            &["--bogus", "--", "true"],
            &["--sqfs=", "--", "true"],
            &["--sqfs=a:/x,", "--", "true"],
            &["a\n:/m", "--", "true"],
            &[],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn non_utf8_paths_are_kept_exactly() {
        let a = vec![
            OsString::from_vec(b"im\xffg:/mn\xfet".to_vec()),
            "--".into(),
            "true".into(),
        ];
        let Invocation::Run(r) = parse(&a).unwrap() else { panic!() };
        assert_eq!(r.mounts[0].images[0].as_bytes(), b"im\xffg");
        assert_eq!(r.mounts[0].mount_point.as_bytes(), b"/mn\xfet");
    }

    #[test]
    fn cache_options() {
        assert!(!run(&["a:/m", "--", "true"]).no_cache);
        assert!(run(&["--no-cache", "a:/m", "--", "true"]).no_cache);
        assert!(run(&["a:/m", "--no-cache", "--", "true"]).no_cache);
        // After '--' it belongs to the command.
        assert!(!run(&["a:/m", "--", "true", "--no-cache"]).no_cache);
        assert_eq!(parse(&args(&["--gc"])).unwrap(), Invocation::Gc { all: false, image: None });
        assert_eq!(parse(&args(&["--gc", "--all"])).unwrap(), Invocation::Gc { all: true, image: None });
        assert_eq!(parse(&args(&["--all", "--gc"])).unwrap(), Invocation::Gc { all: true, image: None });
        assert_eq!(parse(&args(&["--gc", "a.sqfs"])).unwrap(), Invocation::Gc { all: false, image: Some("a.sqfs".into()) });
        assert_eq!(parse(&args(&["--cache-status"])).unwrap(), Invocation::CacheStatus { json: false });
        assert_eq!(parse(&args(&["--cache-status", "--json"])).unwrap(), Invocation::CacheStatus { json: true });
        assert_eq!(parse(&args(&["--policy"])).unwrap(), Invocation::Policy { images: vec![] });
        assert_eq!(parse(&args(&["--policy", "a", "b"])).unwrap(), Invocation::Policy { images: args(&["a", "b"]) });
        // A command may be called --gc.
        assert!(matches!(parse(&args(&["--", "--gc"])).unwrap(), Invocation::Run(_)));
        for bad in [
            &["--gc", "a:/m", "--", "true"][..],
            &["--gc", "--cache-status"],
            &["--cache-status", "--all"],
            &["--all"],
            &["--all", "a:/m", "--", "true"],
            &["--gc", "--no-cache"],
            &["--gc", "--", "true"],
            &["--gc", "a", "b"],
            &["--gc", "--all", "a"],
            &["--json"],
            &["--cache-status", "--json", "--all"],
            &["--policy", "--gc"],
            &["--policy", "--json"],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn mistakes_get_hints() {
        let e = |list: &[&str]| parse(&args(list)).unwrap_err().0;
        assert_eq!(e(&[]), NO_COMMAND);
        assert!(e(&["a:/m"]).starts_with("no command given: put the command to run after '--'"));
        assert!(e(&["a:/m", "--"]).starts_with("no command given"));
        let bare = e(&["img.sqfs:/mnt", "ls", "/mnt"]);
        assert!(bare.contains("'ls'") && bare.contains("did you forget '--'"), "{bare}");
        // A first word without ':' is not "a command after pairs".
        assert!(!e(&["img.sqfs", "--", "true"]).contains("forget"));
    }

    #[test]
    fn verbose_quiet_and_version() {
        assert!(run(&["-q", "--verbose", "a:/m", "--", "true"]).quiet);
        assert!(run(&["--verbose", "a:/m", "--", "true"]).verbose);
        assert_eq!(parse(&args(&["-V"])).unwrap(), Invocation::Version);
    }

    #[test]
    fn writable_size_as_the_next_word() {
        assert_eq!(run(&["--writable", "1G", "a:/m", "--", "true"]).writable, Some(LayerSize::Bytes(1 << 30)));
        assert_eq!(run(&["--writable", "25%", "a:/m", "--", "true"]).writable, Some(LayerSize::PercentOfRam(25)));
        // A pair, an option or '--' after it is not its size.
        let r = run(&["--writable", "a:/m", "--", "true"]);
        assert_eq!((r.writable, r.mounts.len()), (Some(LayerSize::DEFAULT), 1));
        assert_eq!(run(&["a:/m", "--writable", "--", "true"]).writable, Some(LayerSize::DEFAULT));
        assert_eq!(run(&["--writable", "--no-cache", "a:/m", "--", "true"]).writable, Some(LayerSize::DEFAULT));
        assert!(parse(&args(&["--writable", "1Q", "a:/m", "--", "true"])).is_err());
    }

    #[test]
    fn unions_and_writable() {
        let r = run(&["--union=a,b,c:/u", "x:/y", "--union", "d,e:/v", "--writable", "--", "true"]);
        assert_eq!(r.mounts.len(), 3);
        assert!(r.mounts[0].union && !r.mounts[1].union && r.mounts[2].union);
        assert_eq!(r.mounts[0].images, ["a", "b", "c"]);
        assert_eq!(r.mounts[0].describe(), "a,b,c:/u");
        assert_eq!(r.writable, Some(LayerSize::DEFAULT));
        assert_eq!(run(&["--writable=2G", "--", "true"]).writable, Some(LayerSize::Bytes(2 << 30)));
        assert_eq!(run(&["--writable=25%", "--", "true"]).writable, Some(LayerSize::PercentOfRam(25)));
        for (spelling, bytes) in [("2GB", 2u64 << 30), ("2GiB", 2 << 30), ("1.5G", 3 << 29), ("512m", 512 << 20)] {
            let arg = format!("--writable={spelling}");
            assert_eq!(run(&[&arg, "--", "true"]).writable, Some(LayerSize::Bytes(bytes)), "{spelling}");
        }
        assert_eq!(run(&["a:/m", "--", "true"]).writable, None);
        let many: String = (0..64).map(|i| format!("i{i}")).collect::<Vec<_>>().join(",");
        assert_eq!(run(&[&format!("--union={many}:/d"), "--", "true"]).mounts[0].images.len(), 64);
        for bad in ["--writable=", "--writable=0", "--writable=12", "--writable=101%", "--writable=0%", "--writable=1.5%", "--writable=1X",
                    "--writable=-5", "--writable=99999999999999999G", "--union=a,,b:/m", "--union=a:b:/m", "--union=:/m"] {
            assert!(parse(&args(&[bad, "--", "true"])).is_err(), "{bad} accepted");
        }
        assert_eq!(LayerSize::Bytes(1 << 20).tmpfs_value(), "1048576");
        assert_eq!(LayerSize::PercentOfRam(50).tmpfs_value(), "50%");
    }

    #[test]
    fn forwarding_names() {
        assert_eq!(forwarded_name(OsStr::new("SQFSMNT_FWD_LD_LIBRARY_PATH")).unwrap(), "LD_LIBRARY_PATH");
        assert_eq!(forwarded_name(OsStr::new("SQFSMNT_FWD_BASH_FUNC_f%%")).unwrap(), "BASH_FUNC_f%%");
        assert!(forwarded_name(OsStr::new("SQFSMNT_FWD_")).is_none());
        assert!(forwarded_name(OsStr::new("PATH")).is_none());
    }
}
