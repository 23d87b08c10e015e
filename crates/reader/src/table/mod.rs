//! Metadata blocks and the tables read by walking them: compressor options
//! (`options.rs`), metadata blocks and streams over them (`metadata.rs`),
//! the id and xattr id tables (`ids.rs`) and the inode-table census of
//! `sqfs inspect` (`census.rs`). Everything here works on untrusted bytes:
//! every offset, length and count is checked before use, nothing is
//! allocated from a size read from the image, and every loop is bounded by
//! bytes actually present.

pub use squashfs_format::superblock::{
    flags, le16, le32, le64, parse_superblock, Superblock, METADATA_SIZE, NO_TABLE, SUPERBLOCK_SIZE,
};
pub use squashfs_format::{Compressor, FormatError};

mod census;
mod ids;
mod metadata;
mod options;

pub use census::{count_inodes, InodeCounts};
pub use ids::{id_table, xattr_ids};
pub use metadata::{read_metadata_block, MetadataReader};
pub use options::{compressor_options, CompressorOptions};

pub(crate) fn corrupt(what: &'static str, detail: impl Into<String>) -> FormatError {
    FormatError::corrupt(what, detail)
}

/// Random access to the bytes of an image. Reads outside `0..len()` fail.
pub trait Source {
    fn len(&self) -> u64;
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError>;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Source for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        let start =
            usize::try_from(offset).map_err(|_| FormatError::Io("offset out of range".into()))?;
        let end = start
            .checked_add(buf.len())
            .filter(|&e| e <= <[u8]>::len(self))
            .ok_or_else(|| {
                FormatError::Io(format!(
                    "read of {} bytes at {offset} beyond the end",
                    buf.len()
                ))
            })?;
        buf.copy_from_slice(&self[start..end]);
        Ok(())
    }
}
