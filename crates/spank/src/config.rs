//! The plugin's arguments from plugstack.conf. Pure: no system calls.
//!
//! ```text
//! required /usr/local/lib/squashfs-mount/spank_squashfs_mount.so [mountpoints=/a,/b] [cache=yes|no] [mutable-root=yes|no]
//! ```
//! - `mountpoints=`: the only directories (and directories below them) that
//!   images may be mounted on, as absolute paths separated by ','; replaces
//!   the default `/user-environment,/user-tools`. Root's slurmstepd code runs
//!   in the tasks' namespace until it becomes the user, so anything that root
//!   reads (/etc, /lib, /usr, ...) must never be a mount point.
//! - `cache=yes|no`: whether job steps use squashfs-mount's image cache
//!   (default yes, as for the command; the site configuration's `cache`
//!   applies too: both must allow it).
//! - `mutable-root=yes|no`: whether jobs may ask for missing mount points
//!   (and bind destinations) to be created in the job's view
//!   (`--squashfs-mutable-root`; default no). Creating `/user-environment`
//!   shows the node's `/` to the tasks through a read-only copy of its
//!   entries, in which root's slurmstepd code also runs until it becomes
//!   the user: the site decides.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use squashfs_mount::paths;

pub const DEFAULT_MOUNT_POINTS: [&str; 2] = ["/user-environment", "/user-tools"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Allowed mount points: absolute, tidy (no `.`, `..`, `//`, trailing `/`).
    pub mount_points: Vec<OsString>,
    /// `cache=`: job steps use the image cache (default yes).
    pub cache: bool,
    /// `mutable-root=`: jobs may use `--squashfs-mutable-root` (default no).
    pub mutable_root: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mount_points: DEFAULT_MOUNT_POINTS.iter().map(OsString::from).collect(),
            cache: true,
            mutable_root: false,
        }
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Why the plugstack.conf arguments are refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// An argument the plugin does not know.
    Unknown { arg: String },
    /// `key=` with a value other than yes or no.
    NotYesOrNo { arg: String, key: String },
    /// An entry of `mountpoints=` that cannot be allowed.
    MountPoint {
        item: String,
        why: MountPointProblem,
    },
    /// `mountpoints=` with no entry.
    NoMountPoints,
}

/// What is wrong with an entry of `mountpoints=`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MountPointProblem {
    NotAbsolute,
    DotDot,
    /// A directory root reads, or a kernel file system (the reason says).
    Forbidden(String),
}

impl fmt::Display for MountPointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountPointProblem::NotAbsolute => write!(f, "is not an absolute path"),
            MountPointProblem::DotDot => write!(f, "contains '..'; give the directory itself"),
            MountPointProblem::Forbidden(why) => write!(f, "cannot be allowed: {why}"),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Unknown { arg } => write!(
                f,
                "plugstack.conf: unknown argument '{arg}' (known: mountpoints=<dir>[,<dir>...], cache=yes|no, mutable-root=yes|no)"
            ),
            ConfigError::NotYesOrNo { arg, key } => {
                write!(f, "plugstack.conf: '{arg}': {key}= takes yes or no")
            }
            ConfigError::MountPoint { item, why } => {
                write!(f, "plugstack.conf: mountpoints=: '{item}' {why}")
            }
            ConfigError::NoMountPoints => write!(f, "plugstack.conf: mountpoints= is empty"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Parses the plugstack.conf arguments (everything after the .so path).
pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    for arg in args {
        let arg = arg.as_ref();
        if let Some(list) = arg.strip_prefix(b"mountpoints=") {
            config.mount_points = parse_mount_points(list)?;
        } else if let Some(v) = arg.strip_prefix(b"cache=") {
            config.cache = yes_or_no(arg, v)?;
        } else if let Some(v) = arg.strip_prefix(b"mutable-root=") {
            config.mutable_root = yes_or_no(arg, v)?;
        } else {
            return Err(ConfigError::Unknown { arg: lossy(arg) });
        }
    }
    Ok(config)
}

fn yes_or_no(arg: &[u8], value: &[u8]) -> Result<bool, ConfigError> {
    match value {
        b"yes" => Ok(true),
        b"no" => Ok(false),
        _ => {
            let key = lossy(arg.split(|&b| b == b'=').next().unwrap_or_default());
            Err(ConfigError::NotYesOrNo {
                arg: lossy(arg),
                key,
            })
        }
    }
}

fn parse_mount_points(list: &[u8]) -> Result<Vec<OsString>, ConfigError> {
    let mut out: Vec<OsString> = Vec::new();
    for item in list.split(|&b| b == b',') {
        let bad = |why| {
            Err(ConfigError::MountPoint {
                item: lossy(item),
                why,
            })
        };
        if !item.starts_with(b"/") {
            return bad(MountPointProblem::NotAbsolute);
        }
        let comps = paths::components(item);
        if comps.iter().any(|c| *c == b"..") {
            return bad(MountPointProblem::DotDot);
        }
        let tidy = paths::absolute(OsStr::new("/"), OsStr::from_bytes(item));
        if let Some(why) = paths::forbidden_reason(&tidy) {
            return bad(MountPointProblem::Forbidden(why));
        }
        if !out.contains(&tidy) {
            out.push(tidy);
        }
    }
    if out.is_empty() {
        return Err(ConfigError::NoMountPoints);
    }
    Ok(out)
}

impl Config {
    /// Whether `path` (absolute; the kernel's name of a resolved directory,
    /// or a tidy requested path) is an allowed mount point or lies below
    /// one. Compared by whole path components, never by string prefix.
    pub fn allows(&self, path: &OsStr) -> bool {
        self.mount_points.iter().any(|m| paths::is_within(path, m))
    }

    /// "/user-environment, /user-tools" for messages.
    pub fn allowed_list(&self) -> String {
        let v: Vec<String> = self
            .mount_points
            .iter()
            .map(|m| m.to_string_lossy().into_owned())
            .collect();
        v.join(", ")
    }
}

/// For messages: the bytes of a path (paths need not be UTF-8).
pub fn display(p: &OsStr) -> String {
    lossy(p.as_bytes())
}

/// Owned path from bytes.
pub fn path(b: &[u8]) -> OsString {
    OsString::from_vec(b.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(c: &Config, p: &str) -> bool {
        c.allows(OsStr::new(p))
    }

    #[test]
    fn defaults() {
        let c = parse::<&[u8]>(&[]).unwrap();
        assert_eq!(c, Config::default());
        assert!(c.cache);
        assert!(allowed(&c, "/user-environment"));
        assert!(allowed(&c, "/user-environment/sub/dir"));
        assert!(allowed(&c, "/user-tools"));
        // Whole components, never string prefixes.
        assert!(!allowed(&c, "/user-environment2"));
        assert!(!allowed(&c, "/user-tools-x"));
        assert!(!allowed(&c, "/user"));
        assert!(!allowed(&c, "/etc"));
        assert!(!allowed(&c, "/"));
        assert!(!allowed(&c, "/tmp/user-environment"));
    }

    #[test]
    fn mount_points_replace_the_default() {
        let c = parse(&["mountpoints=/scratch/uenv,//opt//stack/", "cache=yes"]).unwrap();
        assert_eq!(
            c.mount_points,
            [
                OsString::from("/scratch/uenv"),
                OsString::from("/opt/stack")
            ]
        );
        assert!(c.cache);
        assert!(allowed(&c, "/opt/stack/x"));
        assert!(!allowed(&c, "/opt/stack2"));
        assert!(!allowed(&c, "/user-environment"));
        assert!(!parse(&["cache=no"]).unwrap().cache);
        assert!(!c.mutable_root);
        assert!(parse(&["mutable-root=yes"]).unwrap().mutable_root);
        assert!(!parse(&["mutable-root=no"]).unwrap().mutable_root);
    }

    #[test]
    fn bad_arguments() {
        for bad in [
            "mountpoints=",
            "mountpoints=relative",
            "mountpoints=/",
            "mountpoints=/a,",
            "mountpoints=/proc/x",
            "mountpoints=/dev",
            "mountpoints=/sys/fs",
            "mountpoints=/a/../etc",
            "cache=maybe",
            "mutable-root=1",
            "cache",
            "allowed=/x",
            "",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad:?} accepted");
        }
        // What the admin reads in slurmd's log.
        for (bad, said) in [
            ("mountpoints=", "plugstack.conf: mountpoints=: '' is not an absolute path"),
            ("mountpoints=/a/../etc", "plugstack.conf: mountpoints=: '/a/../etc' contains '..'; give the directory itself"),
            ("cache=maybe", "plugstack.conf: 'cache=maybe': cache= takes yes or no"),
            ("allowed=/x", "plugstack.conf: unknown argument 'allowed=/x' (known: mountpoints=<dir>[,<dir>...], cache=yes|no, mutable-root=yes|no)"),
        ] {
            assert_eq!(parse(&[bad]).unwrap_err().to_string(), said);
        }
        let forbidden = parse(&["mountpoints=/dev"]).unwrap_err().to_string();
        assert!(
            forbidden.starts_with("plugstack.conf: mountpoints=: '/dev' cannot be allowed: "),
            "{forbidden}"
        );
    }
}
