//! Settings and site policy from the root-owned configuration file, never
//! from the environment (the tool reads it while privileged).
//!
//! `/etc/squashfs-mount.conf` (path compiled in; every key documented in
//! the repository's `etc/squashfs-mount.conf`). The file is ignored, with
//! one warning, unless it is a regular file owned by root and writable by
//! nobody else. Unknown keys and bad values are reported (one line each)
//! and skipped; everything has a compiled-in default.
//!
//! | file             | concern                                                 |
//! |------------------|---------------------------------------------------------|
//! | `settings.rs`    | the settings in force, their defaults, derived limits   |
//! | `mechanisms.rs`  | what the file sets for the mounts and the cache         |
//! | `parse.rs`       | the file's grammar (pure)                               |
//! | `parse_tests.rs` | unit tests of parse.rs                                  |
//! | `show.rs`        | every setting as the file would write it (`--policy`)   |
//! | `policy.rs`      | the site policy: who, where, what combines, which route |
//! | `trust.rs`       | whether the kernel may mount an image                   |
//! | `trust_tests.rs` | unit tests of trust.rs                                  |
//! | `provenance.rs`  | where an opened file comes from: owners and writers     |
//! | `acl.rs`         | POSIX access ACLs                                       |
//! | `names.rs`       | users and groups by name (/etc/passwd, /etc/group)      |
//! | `paths.rs`       | path logic without system calls (pure)                  |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `LayerSize`, `paths`.

pub(crate) mod acl;
pub(crate) mod mechanisms;
pub(crate) mod names;
pub(crate) mod parse;
pub mod paths;
pub(crate) mod policy;
pub(crate) mod provenance;
pub(crate) mod settings;
pub(crate) mod show;
pub(crate) mod trust;

use std::os::fd::AsFd;

use crate::system;
use crate::system::error;
pub use mechanisms::LayerSize;
pub(crate) use mechanisms::{
    CacheLimits, LoopLimits, LoopOptions, Memory, Share, SquashfsThreads, MAX_CACHE_ENTRIES,
};
pub(crate) use policy::Policy;
pub(crate) use settings::Settings;

/// Compiled-in path of the configuration file.
pub const CONFIG_PATH: &str = "/etc/squashfs-mount.conf";
/// Largest configuration file read.
const MAX_CONFIG_BYTES: usize = 64 * 1024;

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
pub(crate) fn load() -> Settings {
    load_reporting().settings
}

/// [`load`], saying what became of the file (`--policy` shows it).
pub(crate) fn load_reporting() -> Loaded {
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
