//! Why an image cannot be read. Every message says what is wrong and, where
//! there is one, what to do.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    Empty,
    TooShort(u64),
    BadMagic {
        looks_like: Option<&'static str>,
    },
    BigEndian,
    UnsupportedVersion(u16, u16),
    UnknownCompressor(u16),
    BadBlockSize(u32),
    Truncated {
        bytes_used: u64,
        file_size: u64,
    },
    /// A table or structure is inconsistent; `what` names it.
    Corrupt {
        what: &'static str,
        detail: String,
    },
    Io(String),
}

impl FormatError {
    pub fn corrupt(what: &'static str, detail: impl Into<String>) -> FormatError {
        FormatError::Corrupt {
            what,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Empty => write!(f, "the file is empty (0 bytes), not a SquashFS image"),
            FormatError::TooShort(n) => write!(
                f,
                "the file is only {n} bytes long, shorter than a SquashFS superblock (96 bytes); it is truncated or not an image"
            ),
            FormatError::BadMagic { looks_like: Some(kind) } => write!(
                f,
                "not a SquashFS image (bad magic number; it looks like {kind}); build images with 'sqfs pack' or mksquashfs"
            ),
            FormatError::BadMagic { looks_like: None } => write!(
                f,
                "not a SquashFS image (bad magic number); build images with 'sqfs pack' or mksquashfs"
            ),
            FormatError::BigEndian => write!(
                f,
                "big-endian SquashFS image, which Linux cannot mount; rebuild it with a current mksquashfs"
            ),
            FormatError::UnsupportedVersion(major, minor) => write!(
                f,
                "SquashFS version {major}.{minor} is not supported (Linux mounts version 4.0 only); rebuild it with a current mksquashfs"
            ),
            FormatError::UnknownCompressor(id) => {
                write!(f, "unknown compressor id {id} in the superblock; the image is corrupt")
            }
            FormatError::BadBlockSize(b) => {
                write!(f, "invalid block size {b} in the superblock; the image is corrupt")
            }
            FormatError::Truncated { bytes_used, file_size } => write!(
                f,
                "the image is truncated: its superblock says it is {bytes_used} bytes long but the file has {file_size}; copy it again"
            ),
            FormatError::Corrupt { what, detail } => write!(f, "corrupt {what}: {detail}"),
            FormatError::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

impl std::error::Error for FormatError {}
