//! Why `sqfs pack --split` cannot go on.

use std::fmt;
use std::path::PathBuf;

use crate::error::FileError;
use crate::pack::PackError;
use crate::tree::TreeError;
use crate::units;

#[derive(Debug)]
pub enum SplitError {
    DepthZero,
    /// The limit leaves no room after an image's overhead.
    LimitTooSmall {
        max: u64,
        overhead: u64,
    },
    NothingToPack {
        dir: PathBuf,
        depth: usize,
    },
    /// A unit (or units linked together) larger than the limit.
    TooLarge {
        names: String,
        how: TooLarge,
        max: u64,
        depth: usize,
    },
    /// An image still over the limit after every attempt.
    OverLimit {
        image: PathBuf,
        size: u64,
        max: u64,
        attempts: usize,
    },
    CannotRename {
        from: String,
        to: PathBuf,
        error: std::io::Error,
    },
    /// An entry below the cut depth outside every unit (a bug).
    NoUnit(PathBuf),
    SamplerPanicked,
    Manifest(serde_json::Error),
    File(FileError),
    Tree(TreeError),
    Pack(PackError),
}

/// How a unit was found too large.
#[derive(Debug)]
pub enum TooLarge {
    /// Its estimated compressed size.
    Estimated(u64),
    /// The size of an image built of it alone.
    Built(u64),
}

crate::error::wraps!(SplitError {
    File(FileError),
    Tree(TreeError),
    Pack(PackError),
    Manifest(serde_json::Error),
});

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SplitError as E;
        match self {
            E::DepthZero => f.write_str("--depth must be at least 1"),
            E::LimitTooSmall { max, overhead } => write!(
                f,
                "the limit {} is too small; images need at least {} of overhead",
                units::bytes(*max),
                units::bytes(*overhead)
            ),
            E::NothingToPack { dir, depth } => write!(
                f,
                "{} has nothing at depth {depth} or above to pack",
                dir.display()
            ),
            E::TooLarge {
                names,
                how,
                max,
                depth,
            } => {
                let what = match how {
                    TooLarge::Estimated(n) => format!(
                        "needs about {} in an image (estimated, compressed)",
                        units::bytes(*n)
                    ),
                    TooLarge::Built(n) => format!("alone makes an image of {}", units::bytes(*n)),
                };
                write!(
                    f,
                    "{names} {what}, more than the limit {} allows; split deeper (--depth {}) or raise the limit",
                    units::bytes(*max),
                    depth + 1
                )
            }
            E::OverLimit {
                image,
                size,
                max,
                attempts,
            } => write!(
                f,
                "{} came out {size} bytes, over the limit of {max}, after {attempts} attempts; please report this, and split deeper meanwhile",
                image.display()
            ),
            E::CannotRename { from, to, error } => write!(
                f,
                "cannot rename {from} to {}: {}",
                to.display(),
                units::io_error(error)
            ),
            E::NoUnit(path) => write!(f, "internal error: {} belongs to no unit", path.display()),
            E::SamplerPanicked => f.write_str("internal error: a sampling thread panicked"),
            E::Manifest(e) => e.fmt(f),
            E::File(e) => e.fmt(f),
            E::Tree(e) => e.fmt(f),
            E::Pack(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SplitError {}
