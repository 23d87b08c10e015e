//! Why `sqfs bench` cannot go on.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;

use crate::error::FileError;
use crate::pack::PackError;
use crate::tree::TreeError;
use crate::units;

#[derive(Debug)]
pub enum BenchError {
    /// A variant of `--comp` with a bad block size or level.
    Variant {
        item: String,
        error: PackError,
    },
    Level(String),
    Twice(String),
    NoCompressor,
    DropCaches(std::io::Error),
    Syscall {
        path: PathBuf,
        call: &'static str,
        error: rustix::io::Errno,
    },
    CannotRun {
        exe: PathBuf,
        error: std::io::Error,
    },
    Waiting {
        exe: PathBuf,
        error: std::io::Error,
    },
    /// The command inside an image failed.
    RunFailed {
        image: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    OwnExecutable(std::io::Error),
    MountPoint(FileError),
    ColonInMountPoint(PathBuf),
    NoSquashfsMount,
    NoWorkDir(PathBuf),
    File(FileError),
    Tree(TreeError),
    Pack(PackError),
}

impl BenchError {
    pub(super) fn variant(item: &str, error: PackError) -> Self {
        BenchError::Variant {
            item: item.to_string(),
            error,
        }
    }
}

crate::error::wraps!(BenchError {
    File(FileError),
    Tree(TreeError),
    Pack(PackError),
});

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BenchError as E;
        match self {
            E::Variant { item, error } => write!(f, "'{item}': {error}"),
            E::Level(item) => write!(f, "'{item}': the level must be a number"),
            E::Twice(item) => write!(f, "'{item}' is listed twice"),
            E::NoCompressor => f.write_str("no compressor given"),
            E::DropCaches(e) => write!(f, "cannot drop caches: {}", units::io_error(e)),
            E::Syscall { path, call, error } => write!(f, "{}: {call}: {error}", path.display()),
            E::CannotRun { exe, error } => write!(
                f,
                "cannot run {}: {}",
                exe.display(),
                units::io_error(error)
            ),
            E::Waiting { exe, error } => write!(
                f,
                "waiting for {}: {}",
                exe.display(),
                units::io_error(error)
            ),
            E::RunFailed {
                image,
                status,
                stderr,
            } => {
                write!(f, "the run inside {} failed ({status})", image.display())?;
                if !stderr.is_empty() {
                    write!(f, ":\n{stderr}")?;
                }
                Ok(())
            }
            E::OwnExecutable(e) => write!(f, "cannot find sqfs's own executable: {e}"),
            E::MountPoint(e) => write!(f, "mount point {e}"),
            E::ColonInMountPoint(m) => write!(
                f,
                "the mount point {} contains ':', which squashfs-mount cannot take; pass --mountpoint",
                m.display()
            ),
            E::NoSquashfsMount => f.write_str("squashfs-mount not found next to sqfs nor on PATH; install it (make install), or pass --no-run to measure only sizes and build times"),
            E::NoWorkDir(parent) => write!(
                f,
                "cannot create a work directory in {}",
                parent.display()
            ),
            E::File(e) => e.fmt(f),
            E::Tree(e) => e.fmt(f),
            E::Pack(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BenchError {}
