//! The plugin's options, parsed with squashfs-mount's own grammar into the
//! request its engine takes (`engine::mount_all`), which checks them like
//! the command line's:
//!
//! ```text
//! --squashfs=<image>:<mountpoint>[,<image>:<mountpoint>...]    ($SLURM_SQUASHFS)
//! --squashfs-union=<image>,<image>[,...]:<mountpoint>[;...]    ($SLURM_SQUASHFS_UNION)
//! --squashfs-writable[=SIZE|DIR]                               ($SLURM_SQUASHFS_WRITABLE)
//! --squashfs-bind=<source>:<destination>[,...]                 ($SLURM_SQUASHFS_BIND)
//! --squashfs-mutable-root                                      ($SLURM_SQUASHFS_MUTABLE_ROOT)
//! ```
//!
//! Bind mounts and `--squashfs-mutable-root` do not take part in the
//! precedence of the images below: each comes from its option, else its
//! variable (a session's `UENV_MOUNT_LIST` lists images only).
//!
//! Where a step's images come from, first match wins (checked by srun,
//! sbatch and salloc before the job is queued, and again on the nodes):
//! 1. the options, if any is given (an empty `--squashfs=` mounts nothing:
//!    the way to opt out of what would be inherited);
//! 2. the `SLURM_SQUASHFS*` variables, if any is set (empty: nothing);
//! 3. `UENV_MOUNT_LIST` of the calling environment: inside a
//!    `squashfs-mount` session, the session's images flow into the job
//!    (a union's layers, listed one after another with the same mount
//!    point, stay a union). An explicit option or variable replaces the
//!    inherited set; it is never merged with it.
//!
//! Pure.

use std::ffi::OsString;
use std::fmt;

use squashfs_mount::{LayerSize, RunRequest};

/// The options' names, as in `srun --squashfs=...`.
pub const OPTION: &str = "squashfs";
pub const OPTION_UNION: &str = "squashfs-union";
pub const OPTION_WRITABLE: &str = "squashfs-writable";
pub const OPTION_BIND: &str = "squashfs-bind";
pub const OPTION_MUTABLE_ROOT: &str = "squashfs-mutable-root";
/// Read when the option is not given.
pub const ENV_FALLBACK: &str = "SLURM_SQUASHFS";
pub const ENV_UNION: &str = "SLURM_SQUASHFS_UNION";
pub const ENV_WRITABLE: &str = "SLURM_SQUASHFS_WRITABLE";
pub const ENV_BIND: &str = "SLURM_SQUASHFS_BIND";
/// Set (to anything but "" or "0"): as `--squashfs-mutable-root`.
pub const ENV_MUTABLE_ROOT: &str = "SLURM_SQUASHFS_MUTABLE_ROOT";
/// What a squashfs-mount session (or a step with images) sets for its
/// command, read last.
pub const ENV_SESSION: &str = "UENV_MOUNT_LIST";

/// Which of the three sources gave the images (for messages: an error at
/// submission names where the failing value came from).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Source {
    #[default]
    Options,
    Variables,
    Session,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Options => "the --squashfs options",
            Source::Variables => "$SLURM_SQUASHFS*",
            Source::Session => "$UENV_MOUNT_LIST (inherited from the squashfs-mount session this was submitted from; give an empty --squashfs= to run without it)",
        }
    }
}

/// The values given, each as bytes (absent: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    pub pairs: Option<Vec<u8>>,
    pub unions: Option<Vec<u8>>,
    /// `Some(empty)`: `--squashfs-writable` without a size.
    pub writable: Option<Vec<u8>>,
    /// `UENV_MOUNT_LIST` (source 3 only).
    pub session: Option<Vec<u8>>,
    pub source: Source,
    /// `--squashfs-bind` (a comma-separated list: the last value given
    /// counts, as for every option).
    pub binds: Option<Vec<u8>>,
    /// `--squashfs-mutable-root` (Some: given; the value is unused).
    pub mutable_root: Option<Vec<u8>>,
}

impl Given {
    /// Nothing to mount.
    pub fn is_empty(&self) -> bool {
        self.pairs.as_ref().is_none_or(|p| p.is_empty())
            && self.unions.as_ref().is_none_or(|u| u.is_empty())
            && self.session.as_ref().is_none_or(|s| s.is_empty())
            && self.binds.as_ref().is_none_or(|b| b.is_empty())
    }

    /// Whether any option or variable was given (even empty).
    pub fn any(&self) -> bool {
        self.pairs.is_some() || self.unions.is_some() || self.writable.is_some()
    }

    /// The images by precedence: `self` holds the options given; `get`
    /// reads a variable of the calling environment.
    pub fn resolve<E>(self, get: impl Fn(&str) -> Result<Option<Vec<u8>>, E>) -> Result<Given, E> {
        let binds = match self.binds.clone() {
            Some(b) => Some(b),
            None => get(ENV_BIND)?,
        };
        let mutable_root = match self.mutable_root.clone() {
            Some(m) => Some(m),
            None => get(ENV_MUTABLE_ROOT)?.filter(|v| !matches!(v.as_slice(), b"" | b"0")),
        };
        if self.any() {
            return Ok(Given {
                source: Source::Options,
                binds,
                mutable_root,
                ..self
            });
        }
        let vars = Given {
            pairs: get(ENV_FALLBACK)?,
            unions: get(ENV_UNION)?,
            writable: get(ENV_WRITABLE)?,
            session: None,
            source: Source::Variables,
            binds: binds.clone(),
            mutable_root: mutable_root.clone(),
        };
        if vars.any() {
            return Ok(vars);
        }
        Ok(Given {
            session: get(ENV_SESSION)?.filter(|v| !v.is_empty()),
            source: Source::Session,
            binds,
            mutable_root,
            ..Given::default()
        })
    }
}

/// Why the values given make no request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The value of `--name` does not parse (as squashfs-mount's own
    /// option would not).
    Option {
        name: &'static str,
        error: squashfs_mount::UsageError,
    },
    /// The value of `$name` does not parse.
    Variable {
        name: &'static str,
        error: squashfs_mount::UsageError,
    },
    /// `--squashfs-writable` without any image.
    WritableWithoutImages,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Option { name, error } => write!(f, "--{name}: {}", error.message()),
            RequestError::Variable { name, error } => write!(f, "${name}: {}", error.message()),
            RequestError::WritableWithoutImages => write!(
                f,
                "--{OPTION_WRITABLE} needs images: give --{OPTION}= or --{OPTION_UNION}="
            ),
        }
    }
}

impl std::error::Error for RequestError {}

/// A refusal of option `name`'s value, in squashfs-mount's words.
fn option(name: &'static str) -> impl Fn(squashfs_mount::UsageError) -> RequestError {
    move |error| RequestError::Option { name, error }
}

/// Builds the request (no command: the tasks are the command).
pub fn parse(given: &Given) -> Result<RunRequest, RequestError> {
    let mut mounts = Vec::new();
    if let Some(spec) = given.pairs.as_deref().filter(|s| !s.is_empty()) {
        for pair in spec.split(|&b| b == b',') {
            mounts.push(squashfs_mount::parse_pair(pair).map_err(option(OPTION))?);
        }
    }
    if let Some(spec) = given.unions.as_deref().filter(|s| !s.is_empty()) {
        for union in spec.split(|&b| b == b';') {
            mounts.push(squashfs_mount::parse_union(union).map_err(option(OPTION_UNION))?);
        }
    }
    if let Some(list) = given.session.as_deref().filter(|s| !s.is_empty()) {
        mounts.extend(from_mount_list(list)?);
    }
    let (writable, layer_dir) = match given.writable.as_deref() {
        None => (None, None),
        Some([]) => (Some(LayerSize::DEFAULT), None),
        // A value with a '/': a kept layer in that directory.
        Some(dir) if dir.contains(&b'/') => (
            None,
            Some(squashfs_mount::parse_layer_dir(dir).map_err(option(OPTION_WRITABLE))?),
        ),
        Some(size) => (
            Some(LayerSize::parse(size).map_err(option(OPTION_WRITABLE))?),
            None,
        ),
    };
    if mounts.is_empty() && (writable.is_some() || layer_dir.is_some()) {
        return Err(RequestError::WritableWithoutImages);
    }
    let mut binds = Vec::new();
    if let Some(spec) = given.binds.as_deref().filter(|s| !s.is_empty()) {
        for bind in spec.split(|&b| b == b',') {
            binds.push(squashfs_mount::parse_bind(bind).map_err(option(OPTION_BIND))?);
        }
    }
    Ok(RunRequest {
        mounts,
        writable,
        layer_dir,
        command: vec![OsString::from("(tasks)")],
        no_cache: false,
        verbose: 0,
        mutable_root: given.mutable_root.is_some(),
        binds,
        quiet: true,
        // The plugin does not prefetch (the tasks start later, elsewhere).
        prefetch: false,
        // The plugin's tasks share the step's namespace already.
        join: false,
    })
}

/// `UENV_MOUNT_LIST` (`image:mountpoint,...`): layers of one union are
/// listed one after another with the union's mount point.
fn from_mount_list(list: &[u8]) -> Result<Vec<squashfs_mount::MountRequest>, RequestError> {
    let mut out: Vec<squashfs_mount::MountRequest> = Vec::new();
    for pair in list.split(|&b| b == b',') {
        let req = squashfs_mount::parse_pair(pair).map_err(|error| RequestError::Variable {
            name: ENV_SESSION,
            error,
        })?;
        match out.last_mut() {
            Some(last) if last.mount_point == req.mount_point => {
                last.images.extend(req.images);
                last.union = true;
            }
            _ => out.push(req),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
