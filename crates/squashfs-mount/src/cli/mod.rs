//! Command-line parsing. Pure: no system calls, no environment; fuzzed.
//!
//! ```text
//! squashfs-mount [OPTIONS] <image>:<mountpoint> [<image>:<mountpoint>...] -- <command> [args...]
//! squashfs-mount [OPTIONS] --sqfs=<image>:<mountpoint>[,<image>:<mountpoint>...] -- <command> [args...]
//! ```
//!
//! The options of uenv's squashfs-mount are understood as it spells them:
//! `-s LIST` for `--sqfs`, `-v`/`-vv`/`-vvv` for `--verbose`, `-r` for
//! `--mutable-root`, `--bind-mount=SRC:DST[,...]` (repeatable); `-V` and
//! `--version` print the version. An option that takes a value never takes
//! the `--` that starts the command.
//!
//! | file               | concern                                                    |
//! |--------------------|------------------------------------------------------------|
//! | `grammar.rs`       | one argument: pairs, unions, binds, sizes (pure)           |
//! | `grammar_tests.rs` | unit tests of the command line                             |
//! | `usage.rs`         | the text of `--help`                                       |
//! | `usage_error.rs`   | what the command line gets wrong, in words                 |
//! | `environment.rs`   | the command's environment, built after the drop            |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `Invocation`, `MAX_VERBOSITY`, `MountRequest`, `RunRequest`, `USAGE`,
//! `UsageError`, `parse`, `parse_bind`, `parse_layer_dir`, `parse_pair`,
//! `parse_union`.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

pub(crate) mod environment;
mod grammar;
#[cfg(test)]
mod grammar_tests;
mod usage;
mod usage_error;

use crate::config::LayerSize;
use grammar::lossy;
pub(crate) use grammar::{forwarded_name, BindRequest};
pub use grammar::{parse_bind, parse_layer_dir, parse_pair, parse_union, MountRequest};
pub use usage::USAGE;
pub use usage_error::UsageError;
pub(crate) use usage_error::NO_COMMAND;

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
    /// `--policy [--json] [IMAGE...]`: the site policy, whether the FUSE
    /// path is usable, and each image's route.
    Policy {
        images: Vec<OsString>,
        json: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    pub mounts: Vec<MountRequest>,
    /// `--writable[=SIZE]`: every mount gets a private writable layer.
    pub writable: Option<LayerSize>,
    /// `--writable=DIR` (a value with a `/`): every mount's writable
    /// layer lives in DIR and persists; mounted by the caller in a user
    /// namespace after every privilege is gone (`layer`). As given.
    pub layer_dir: Option<OsString>,
    /// Program and its arguments; never empty.
    pub command: Vec<OsString>,
    /// `--no-cache`: private instances, the image cache is left alone.
    pub no_cache: bool,
    /// `-v`/`--verbose` (once or more, `-vv`, `-vvv`): how much to say
    /// about what was done (0: nothing; at most [`MAX_VERBOSITY`]).
    pub verbose: u8,
    /// `-r`/`--mutable-root`: mount points and bind destinations that do
    /// not exist are created in the command's view only.
    pub mutable_root: bool,
    /// `--bind-mount=<source>:<destination>`: directories shown elsewhere
    /// in the command's view, in the order given.
    pub binds: Vec<BindRequest>,
    /// `--quiet`: no note about running without setuid.
    pub quiet: bool,
    /// Prefetch the hot lists images carry (`--prefetch`, the default;
    /// `--no-prefetch` turns it off).
    pub prefetch: bool,
    /// `--join`: the tasks of a Slurm step on one node share one mount
    /// namespace (`join`).
    pub join: bool,
}

/// The most `-v` counts for (`-vvv`: every detail and the time each step
/// took).
pub const MAX_VERBOSITY: u8 = 3;

/// Whether `word` looks like `<image>:<mountpoint>` (or a `--sqfs`/`--union`
/// option), for the hints below.
fn looks_like_pair(word: &[u8]) -> bool {
    word.contains(&b':')
}

/// Parses the arguments after `argv[0]`.
pub fn parse(args: &[OsString]) -> Result<Invocation, UsageError> {
    if args.is_empty() {
        return Err(UsageError::NoCommand);
    }
    if let Some(maintenance) = parse_maintenance(args)? {
        return Ok(maintenance);
    }
    let mut r = RunRequest {
        mounts: Vec::new(),
        writable: None,
        layer_dir: None,
        command: Vec::new(),
        no_cache: false,
        verbose: 0,
        mutable_root: false,
        binds: Vec::new(),
        quiet: false,
        prefetch: true,
        join: false,
    };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_bytes();
        i += 1;
        match arg {
            b"--" => {
                r.command = args[i..].to_vec();
                if r.command.is_empty() {
                    return Err(UsageError::NoCommandAfterDashes);
                }
                check_writable(&r)?;
                return Ok(Invocation::Run(r));
            }
            b"-h" | b"--help" => return Ok(Invocation::Help),
            b"-V" | b"--version" => return Ok(Invocation::Version),
            _ if flag(arg, &mut r)? || mounts(arg, args, &mut i, &mut r)? => {}
            _ if arg.starts_with(b"-") => {
                return Err(UsageError::UnknownOption(
                    lossy(arg),
                    usage_error::suggestion(&lossy(arg)),
                ))
            }
            _ if !looks_like_pair(arg) && !r.mounts.is_empty() => {
                return Err(UsageError::NotAPair(lossy(arg)))
            }
            _ => r.mounts.push(parse_pair(arg)?),
        }
    }
    Err(UsageError::NoCommandAtEnd)
}

/// A flag of the run (`--no-cache`, `-v`, `-rq`, ...): whether `arg` is one.
fn flag(arg: &[u8], r: &mut RunRequest) -> Result<bool, UsageError> {
    match arg {
        b"--no-cache" => r.no_cache = true,
        b"--prefetch" => r.prefetch = true,
        b"--no-prefetch" => r.prefetch = false,
        b"--verbose" => r.verbose = r.verbose.saturating_add(1).min(MAX_VERBOSITY),
        b"--mutable-root" => r.mutable_root = true,
        b"--quiet" => r.quiet = true,
        b"--join" => r.join = true,
        // uenv's single-threaded FUSE loop: accepted; the FUSE server
        // sizes its own workers.
        b"--fuse-single" => {}
        _ if arg.starts_with(b"--verbose=") => r.verbose = verbosity(&arg[b"--verbose=".len()..])?,
        _ if is_short_flags(arg) => short_flags(&arg[1..], r),
        _ => return Ok(false),
    }
    Ok(true)
}

/// An option that adds mounts or a writable layer (`--sqfs`, `-s`,
/// `--bind-mount`, `--union`, `--writable`), with its value: whether
/// `arg` is one. `i` is the next word's index.
fn mounts(
    arg: &[u8],
    args: &[OsString],
    i: &mut usize,
    r: &mut RunRequest,
) -> Result<bool, UsageError> {
    match arg {
        b"--sqfs" | b"-s" => {
            let list = value(args, i, lossy(arg), "<image>:<mountpoint>[,...]")?;
            pairs(list, r)?;
        }
        _ if arg.starts_with(b"--sqfs=") || (arg.starts_with(b"-s") && !arg.starts_with(b"--")) => {
            let list = arg.strip_prefix(b"--sqfs=").unwrap_or(&arg[2..]);
            if list.is_empty() {
                return Err(UsageError::EmptyValue(
                    "--sqfs",
                    "<image>:<mountpoint>[,...]",
                ));
            }
            pairs(list, r)?;
        }
        b"--bind-mount" => {
            let list = value(args, i, lossy(arg), "<source>:<destination>[,...]")?;
            binds(list, r)?;
        }
        _ if arg.starts_with(b"--bind-mount=") => {
            let list = &arg[b"--bind-mount=".len()..];
            if list.is_empty() {
                return Err(UsageError::EmptyValue(
                    "--bind-mount",
                    "<source>:<destination>[,...]",
                ));
            }
            binds(list, r)?;
        }
        b"--writable" => writable_next_word(args, i, r)?,
        _ if arg.starts_with(b"--writable=") => {
            let value = &arg[b"--writable=".len()..];
            if value.contains(&b'/') {
                r.layer_dir = Some(parse_layer_dir(value)?);
            } else {
                r.writable = Some(LayerSize::parse(value).map_err(|e| {
                    // A word that cannot start a size: a directory without '/'.
                    let size_like = value
                        .first()
                        .is_some_and(|b| b.is_ascii_digit() || *b == b'.');
                    if size_like || value.starts_with(b"~") {
                        e
                    } else {
                        UsageError::WritableNeitherSizeNorDir(lossy(value))
                    }
                })?);
            }
        }
        _ if arg.starts_with(b"--union=") => {
            r.mounts.push(parse_union(&arg[b"--union=".len()..])?);
        }
        b"--union" => {
            let spec = value(args, i, lossy(arg), "<image>,<image>[,...]:<mountpoint>")?;
            r.mounts.push(parse_union(spec)?);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// `<image>:<mountpoint>[,...]`.
fn pairs(list: &[u8], r: &mut RunRequest) -> Result<(), UsageError> {
    for pair in list.split(|&b| b == b',') {
        r.mounts.push(parse_pair(pair)?);
    }
    Ok(())
}

/// `<source>:<destination>[,...]`.
fn binds(list: &[u8], r: &mut RunRequest) -> Result<(), UsageError> {
    for bind in list.split(|&b| b == b',') {
        r.binds.push(parse_bind(bind)?);
    }
    Ok(())
}

/// `--writable` and the next word, as every option's value may be given
/// (the next word is never a pair, an option or the '--'): a directory
/// when it has a '/' (`--writable ~/layer`, which the shell expands, as
/// `--writable=DIR`), a size when it starts like one (`--writable 1G`);
/// else `--writable` alone (the default size), the word not taken.
fn writable_next_word(
    args: &[OsString],
    i: &mut usize,
    r: &mut RunRequest,
) -> Result<(), UsageError> {
    let next = args
        .get(*i)
        .map(|a| a.as_bytes())
        .filter(|n| !looks_like_pair(n) && !n.starts_with(b"-"));
    match next {
        Some(dir) if dir.contains(&b'/') => {
            *i += 1;
            r.layer_dir = Some(parse_layer_dir(dir)?);
        }
        Some(size)
            if size
                .first()
                .is_some_and(|b| b.is_ascii_digit() || *b == b'.') =>
        {
            *i += 1;
            r.writable = Some(LayerSize::parse(size)?);
        }
        _ => r.writable = Some(LayerSize::DEFAULT),
    }
    Ok(())
}

/// `--writable[=SIZE]` and `--writable=DIR` exclude each other (checked
/// once the whole line is read, whatever the order).
fn check_writable(r: &RunRequest) -> Result<(), UsageError> {
    if r.writable.is_some() && r.layer_dir.is_some() {
        return Err(UsageError::BothWritables);
    }
    Ok(())
}

/// The value of an option given as the next word (`--sqfs LIST`), which
/// is never the `--` that starts the command.
fn value<'a>(
    args: &'a [OsString],
    i: &mut usize,
    option: String,
    what: &'static str,
) -> Result<&'a [u8], UsageError> {
    match args.get(*i).map(|a| a.as_bytes()) {
        Some(v) if v != b"--" && !v.is_empty() => {
            *i += 1;
            Ok(v)
        }
        _ => Err(UsageError::NeedsValue(option, what)),
    }
}

/// `-r`, `-q`, `-v`, and several of them in one word (`-rvv`), as uenv's
/// command line allows.
fn is_short_flags(arg: &[u8]) -> bool {
    arg.len() > 1 && arg[0] == b'-' && arg[1..].iter().all(|b| matches!(b, b'r' | b'q' | b'v'))
}

fn short_flags(flags: &[u8], r: &mut RunRequest) {
    for f in flags {
        match f {
            b'r' => r.mutable_root = true,
            b'q' => r.quiet = true,
            _ => r.verbose = r.verbose.saturating_add(1).min(MAX_VERBOSITY),
        }
    }
}

/// `--verbose=N`, N from 0 to [`MAX_VERBOSITY`].
fn verbosity(text: &[u8]) -> Result<u8, UsageError> {
    match text {
        [d @ b'0'..=b'9'] if d - b'0' <= MAX_VERBOSITY => Ok(d - b'0'),
        _ => Err(UsageError::Verbosity {
            text: lossy(text),
            max: MAX_VERBOSITY,
        }),
    }
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
        return Err(UsageError::OnlyOneCommand);
    }
    if !gc && !status && !policy {
        if has(b"--all") || has(b"--expired") {
            return Err(UsageError::AllOrExpiredWithoutGc);
        }
        if has(b"--json") {
            return Err(UsageError::JsonWithoutStatus);
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
        let json = rest.contains(&&b"--json"[..]);
        let rest: Vec<&[u8]> = rest.into_iter().filter(|a| *a != b"--json").collect();
        if let Some(opt) = rest.iter().find(|a| a.starts_with(b"-")) {
            return Err(UsageError::NotWith(lossy(opt), "--policy [--json]"));
        }
        return Ok(Some(Invocation::Policy {
            images: rest
                .iter()
                .map(|a| OsString::from_vec(a.to_vec()))
                .collect(),
            json,
        }));
    }
    if status {
        return match rest.as_slice() {
            [] => Ok(Some(Invocation::CacheStatus { json: false })),
            [b"--json"] => Ok(Some(Invocation::CacheStatus { json: true })),
            [b"--all", ..] | [_, b"--all", ..] => Err(UsageError::AllWithStatus),
            [extra, ..] => Err(UsageError::NotWith(lossy(extra), "--cache-status")),
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
        [extra, ..] => Err(UsageError::NotWith(
            lossy(extra),
            "--gc (give --all, --expired, or one image)",
        )),
    }
}
