//! The one error every module shares: an I/O failure on a named file.

use std::fmt;
use std::path::{Path, PathBuf};

/// "PATH: what went wrong" (the I/O error without Rust's "(os error N)").
#[derive(Debug)]
pub struct FileError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

impl FileError {
    pub fn new(path: &Path, error: std::io::Error) -> Self {
        FileError {
            path: path.to_path_buf(),
            error,
        }
    }

    /// A closure for `map_err` that names `path`.
    pub fn at(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |error| FileError::new(path, error)
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            self.path.display(),
            crate::units::io_error(&self.error)
        )
    }
}

impl std::error::Error for FileError {}

/// `From` conversions for a module's error enum whose variants wrap other
/// errors (and show them unchanged).
macro_rules! wraps {
    ($enum:ident { $($variant:ident($inner:ty)),* $(,)? }) => {
        $(impl From<$inner> for $enum {
            fn from(e: $inner) -> Self {
                $enum::$variant(e)
            }
        })*
    };
}

pub(crate) use wraps;
