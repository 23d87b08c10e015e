//! The two images to compare, as each thread reads them (readers of its
//! own), and the errors of reading them.

use std::path::Path;
use std::sync::Arc;

use squashfs_format::FormatError;
use squashfs_reader::{Archive, FileSource, Inode};

use super::error::DiffError;

/// The two images to compare, and how.
pub(super) struct Setup<'s> {
    pub a: &'s Path,
    pub b: &'s Path,
    pub a_name: String,
    pub b_name: String,
    pub times: bool,
}

/// A thread's readers of the two images.
pub(super) type Readers = (Archive<FileSource>, Archive<FileSource>);

impl Setup<'_> {
    /// Readers of both images, for one thread.
    pub fn open(&self) -> Result<Readers, DiffError> {
        let ar =
            crate::stored::open(self.a).map_err(|e| DiffError::Open(self.a_name.clone(), e))?;
        let br =
            crate::stored::open(self.b).map_err(|e| DiffError::Open(self.b_name.clone(), e))?;
        Ok((ar, br))
    }

    pub(super) fn images<'r>(&'r self, (a, b): &'r Readers) -> Images<'r> {
        Images {
            a,
            b,
            a_name: &self.a_name,
            b_name: &self.b_name,
            times: self.times,
        }
    }
}

/// The two images as one thread reads them, and what to compare.
pub(super) struct Images<'a> {
    pub a: &'a Archive<FileSource>,
    pub b: &'a Archive<FileSource>,
    pub a_name: &'a str,
    pub b_name: &'a str,
    pub times: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    A,
    B,
}

impl Images<'_> {
    pub(super) fn side(&self, w: Which) -> (&Archive<FileSource>, &str) {
        match w {
            Which::A => (self.a, self.a_name),
            Which::B => (self.b, self.b_name),
        }
    }

    /// The error of reading `path` in image `w`.
    pub(super) fn failed(&self, w: Which, path: &[u8]) -> impl FnOnce(FormatError) -> DiffError {
        let image = self.side(w).1.to_string();
        let path = String::from_utf8_lossy(path).into_owned();
        move |error| DiffError::Read { image, path, error }
    }

    pub(super) fn inode(&self, w: Which, r: u64, path: &[u8]) -> Result<Arc<Inode>, DiffError> {
        self.side(w).0.inode(r).map_err(self.failed(w, path))
    }
}
