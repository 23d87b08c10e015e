//! What an image holds, read back from it: the number of entries it
//! stores (what `pack` reports, never what it walked) and whether its
//! root holds nothing but one symbolic link (an image packed from a link
//! to a directory by mksquashfs or an older sqfs: it holds the link, and
//! a launch reads the host's tree through it).

use std::path::Path;

use serde::Serialize;
use squashfs_format::FormatError;
use squashfs_reader::{Archive, FileSource, InodeData, Kind};

use squashfs_reader::source::Source;

/// The image's root holds only this symbolic link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoneSymlink {
    /// Its name in the root (lossy if not UTF-8).
    pub name: String,
    /// Where it points (lossy if not UTF-8).
    pub target: String,
}

impl LoneSymlink {
    /// "the image's root holds only a symbolic link, NAME -> TARGET".
    pub fn sentence(&self) -> String {
        format!(
            "the image's root holds nothing but a symbolic link, {} -> {}: a launch shows that link, and what it points to is read from outside the image",
            self.name, self.target
        )
    }
}

/// What the image stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// Entries below the root (names: hard links count once per name).
    pub entries: u64,
    pub lone_symlink: Option<LoneSymlink>,
}

/// Why an image cannot be read back.
#[derive(Debug)]
pub enum StoredError {
    Open(std::io::Error),
    Image(FormatError),
}

impl std::fmt::Display for StoredError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoredError::Open(e) => f.write_str(&crate::units::io_error(e)),
            StoredError::Image(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StoredError {}

/// Opens the image at `path` with the shared reader.
pub fn open(path: &Path) -> Result<Archive<FileSource>, StoredError> {
    let file = std::fs::File::open(path).map_err(StoredError::Open)?;
    let source = FileSource::new(file).map_err(StoredError::Open)?;
    Archive::open(source).map_err(StoredError::Image)
}

/// Counts the entries of the image at `path` (directory listings only: no
/// file data is read).
pub fn count(path: &Path) -> Result<Stored, StoredError> {
    let ar = open(path)?;
    let mut entries = 0u64;
    let mut dirs = vec![ar.root()];
    while let Some(d) = dirs.pop() {
        let dir = ar.inode(d).map_err(StoredError::Image)?;
        let listing = ar.listing(&dir).map_err(StoredError::Image)?;
        entries += listing.entries.len() as u64;
        dirs.extend(
            listing
                .entries
                .iter()
                .filter(|e| e.kind == Kind::Dir)
                .map(|e| e.inode),
        );
    }
    Ok(Stored {
        entries,
        lone_symlink: lone_symlink(&ar).map_err(StoredError::Image)?,
    })
}

/// The symbolic link that is all the image's root holds, if that is so.
pub fn lone_symlink<S: Source>(ar: &Archive<S>) -> Result<Option<LoneSymlink>, FormatError> {
    let root = ar.inode(ar.root())?;
    let listing = ar.listing(&root)?;
    let [only] = listing.entries.as_slice() else {
        return Ok(None);
    };
    let inode = ar.inode(only.inode)?;
    let InodeData::Symlink { target } = &inode.data else {
        return Ok(None);
    };
    Ok(Some(LoneSymlink {
        name: String::from_utf8_lossy(&only.name).into_owned(),
        target: String::from_utf8_lossy(target).into_owned(),
    }))
}
