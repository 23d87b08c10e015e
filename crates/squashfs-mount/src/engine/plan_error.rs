//! What the plan refuses (`PlanError`): the request against the limits,
//! the policy's switches and the front end's rules, and the mount points
//! once resolved; each variant's `Display` is the sentence users read.

use std::ffi::OsString;
use std::fmt;

/// What the plan refuses: the request against the limits, the policy's
/// switches and the front end's rules, and the mount points once resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    TooManyImages {
        given: usize,
        max: usize,
        /// Lower than the built-in ceiling: the site set it.
        by_site: bool,
    },
    /// More bind mounts than one call may make: how many were given, and
    /// the most.
    TooManyBinds {
        given: usize,
        max: usize,
    },
    WritableNotAllowed,
    UnionNotAllowed,
    MutableRootNotAllowed,
    /// The front end refuses `-r`, and why.
    MutableRootRefused(&'static str),
    /// A relative image path where the front end needs absolute ones.
    RelativeImage(OsString),
    RelativeMountPoint,
    RelativeBind,
    /// The same mount point twice (`binds`: a bind mount is one of them).
    DuplicateMountPoint {
        key: OsString,
        binds: bool,
    },
    /// Not at or below one of the front end's mount points.
    NotAmongFrontEnds {
        path: OsString,
        places: String,
        source: &'static str,
    },
    /// A resolved path `UENV_MOUNT_LIST` cannot carry (`what`: "image",
    /// "mount point").
    Separators {
        what: &'static str,
        path: OsString,
    },
    AlreadyMounted(OsString),
    HidesEarlier {
        real: OsString,
        hidden: OsString,
    },
    UnionTwice(OsString),
    /// `--writable=DIR` without an image.
    LayerWithoutImages,
    /// A relative `--writable=DIR` where the front end needs absolute ones.
    RelativeLayer(OsString),
    /// The layer directory and a mount point inside one another.
    LayerAndMountPointNested {
        dir: OsString,
        key: OsString,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::TooManyImages { given, max, by_site } => {
                let key = if *by_site {
                    " (max-images-per-call in /etc/squashfs-mount.conf)"
                } else {
                    ""
                };
                write!(f, "{given} images given; at most {max} can be mounted in one call{key}")
            }
            PlanError::TooManyBinds { given, max } => write!(
                f,
                "{given} bind mounts given; at most {max} can be made in one call"
            ),
            PlanError::WritableNotAllowed => f.write_str("--writable is not allowed by the site policy (allow-writable in /etc/squashfs-mount.conf)"),
            PlanError::UnionNotAllowed => f.write_str("--union is not allowed by the site policy (allow-union in /etc/squashfs-mount.conf)"),
            PlanError::MutableRootNotAllowed => f.write_str("-r (--mutable-root) is not allowed by the site policy (allow-mutable-root in /etc/squashfs-mount.conf); ask the administrators to create the mount point"),
            PlanError::MutableRootRefused(why) => f.write_str(why),
            PlanError::RelativeImage(image) => write!(
                f,
                "the image path must be absolute, because the job may start in another directory; give e.g. $PWD/{}",
                image.to_string_lossy()
            ),
            PlanError::RelativeMountPoint => f.write_str("the mount point must be an absolute path"),
            PlanError::RelativeBind => f.write_str("the bind source and destination must be absolute paths, because the job may start in another directory"),
            PlanError::DuplicateMountPoint { key, binds } => {
                let why = if *binds {
                    "is used more than once (by bind mounts or images); give each mount point once"
                } else {
                    // uenv's words.
                    "is used to mount more than one squashfs; give each mount point once"
                };
                write!(f, "the mount point {} {why}", key.to_string_lossy())
            }
            PlanError::NotAmongFrontEnds { path, places, source } => write!(
                f,
                "refusing to mount on {}: images and bind mounts may only be mounted on {places} (or below) ({source}); choose one of these",
                path.to_string_lossy()
            ),
            PlanError::Separators { what, path } => write!(
                f,
                "the {what} resolves to {}, whose path contains ':', ',' or a newline, which UENV_MOUNT_LIST cannot carry; move or rename it",
                path.to_string_lossy()
            ),
            PlanError::AlreadyMounted(real) => write!(
                f,
                "the mount point resolves to {}, which is already a mount point of this call",
                real.to_string_lossy()
            ),
            PlanError::HidesEarlier { real, hidden } => write!(
                f,
                "the mount point resolves to {}, which would hide {} mounted before it (symlinks changed the nesting order); give the mount points as paths without symlinks",
                real.to_string_lossy(),
                hidden.to_string_lossy()
            ),
            PlanError::UnionTwice(name) => write!(
                f,
                "the image {} is named twice in one union; name each image once",
                name.to_string_lossy()
            ),
            PlanError::LayerWithoutImages => f.write_str(
                "--writable=DIR puts a writable layer on images: give at least one image",
            ),
            PlanError::RelativeLayer(dir) => write!(
                f,
                "the writable layer {} must be an absolute path, because the job may start in another directory",
                dir.to_string_lossy()
            ),
            PlanError::LayerAndMountPointNested { dir, key } => write!(
                f,
                "the writable layer {} and the mount point {} are inside one another; give a layer directory outside the mount points",
                dir.to_string_lossy(),
                key.to_string_lossy()
            ),
        }
    }
}
