//! Command-line parsing. Pure: no system calls, no environment; fuzzed.
//!
//! ```text
//! squashfs-mount [OPTIONS] <image>:<mountpoint> [<image>:<mountpoint>...] -- <command> [args...]
//! squashfs-mount [OPTIONS] --sqfs=<image>:<mountpoint>[,<image>:<mountpoint>...] -- <command> [args...]
//! ```

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

mod grammar;
#[cfg(test)]
mod tests;
mod usage;

use grammar::lossy;
pub use grammar::{
    forwarded_name, parse_pair, parse_union, LayerSize, MountRequest, UsageError, MAX_UNION_LAYERS,
    NO_COMMAND,
};
pub use usage::USAGE;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    Help,
    Version,
    Run(RunRequest),
    /// `--gc [--all | --expired | IMAGE]`: evict cached image instances.
    Gc {
        all: bool,
        expired: bool,
        image: Option<OsString>,
    },
    /// `--cache-status [--json]`: list cached image instances.
    CacheStatus {
        json: bool,
    },
    /// `--policy [IMAGE...]`: the site policy, and each image's route.
    Policy {
        images: Vec<OsString>,
    },
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
    /// Prefetch the hot lists images carry (`--prefetch`, the default;
    /// `--no-prefetch` turns it off).
    pub prefetch: bool,
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
    let mut r = RunRequest {
        mounts: Vec::new(),
        writable: None,
        command: Vec::new(),
        no_cache: false,
        verbose: false,
        quiet: false,
        prefetch: true,
    };
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
            b"--prefetch" => r.prefetch = true,
            b"--no-prefetch" => r.prefetch = false,
            b"--verbose" => r.verbose = true,
            b"-q" | b"--quiet" => r.quiet = true,
            _ if arg.starts_with(b"--sqfs=") => {
                let list = &arg[b"--sqfs=".len()..];
                if list.is_empty() {
                    return Err(UsageError(
                        "--sqfs= needs <image>:<mountpoint>[,...]".into(),
                    ));
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
                    Some(next)
                        if !looks_like_pair(next)
                            && !next.starts_with(b"-")
                            && next
                                .first()
                                .is_some_and(|b| b.is_ascii_digit() || *b == b'.') =>
                    {
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
                    return Err(UsageError(
                        "--union needs <image>,<image>[,...]:<mountpoint>".into(),
                    ));
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
    let own: Vec<&[u8]> = args
        .iter()
        .map(|a| a.as_bytes())
        .take_while(|a| *a != b"--")
        .collect();
    let has = |w: &[u8]| own.contains(&w);
    let (gc, status, policy) = (has(b"--gc"), has(b"--cache-status"), has(b"--policy"));
    if [gc, status, policy].iter().filter(|&&x| x).count() > 1 {
        return Err(UsageError(
            "give only one of --gc, --cache-status and --policy".into(),
        ));
    }
    if !gc && !status && !policy {
        if has(b"--all") || has(b"--expired") {
            return Err(UsageError("--all and --expired go with --gc".into()));
        }
        if has(b"--json") {
            return Err(UsageError("--json goes with --cache-status".into()));
        }
        return Ok(None);
    }
    let words: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    let rest: Vec<&[u8]> = words
        .iter()
        .copied()
        .filter(|a| !matches!(*a, b"--gc" | b"--cache-status" | b"--policy"))
        .collect();
    if policy {
        if let Some(opt) = rest.iter().find(|a| a.starts_with(b"-")) {
            return Err(UsageError(format!(
                "'{}' cannot be combined with --policy",
                lossy(opt)
            )));
        }
        return Ok(Some(Invocation::Policy {
            images: rest
                .iter()
                .map(|a| OsString::from_vec(a.to_vec()))
                .collect(),
        }));
    }
    if status {
        return match rest.as_slice() {
            [] => Ok(Some(Invocation::CacheStatus { json: false })),
            [b"--json"] => Ok(Some(Invocation::CacheStatus { json: true })),
            [b"--all", ..] | [_, b"--all", ..] => Err(UsageError("--all goes with --gc".into())),
            [extra, ..] => Err(UsageError(format!(
                "'{}' cannot be combined with --cache-status",
                lossy(extra)
            ))),
        };
    }
    match rest.as_slice() {
        [] => Ok(Some(Invocation::Gc {
            all: false,
            expired: false,
            image: None,
        })),
        [b"--all"] => Ok(Some(Invocation::Gc {
            all: true,
            expired: false,
            image: None,
        })),
        [b"--expired"] => Ok(Some(Invocation::Gc {
            all: false,
            expired: true,
            image: None,
        })),
        [image] if !image.starts_with(b"-") => Ok(Some(Invocation::Gc {
            all: false,
            expired: false,
            image: Some(OsString::from_vec(image.to_vec())),
        })),
        [extra, ..] => Err(UsageError(format!(
            "'{}' cannot be combined with --gc (give --all, --expired, or one image)",
            lossy(extra)
        ))),
    }
}
