//! A regular file's data as the image stores it, for comparing images
//! without decompressing (`sqfs diff`): where each full block is and its
//! stored size word, where the tail is (its fragment block and the
//! offset in it), and the raw bytes of a stored block. Two blocks of
//! images with the same compressor and block size whose size words and
//! raw bytes are equal decompress to the same data; only blocks that
//! differ need decompressing (through [`Archive::read`](super::Archive::read)) to tell.
//!
//! Checked as the rest of the reader: every block lies inside the image,
//! lists grow as they are read, never sized from the image.

use squashfs_format::superblock::METADATA_SIZE;
use squashfs_format::FormatError;

use super::inode::Inode;
use super::stream::{corrupt, Position, Tables};
use crate::table::Source;

/// Bit 24 of a size word: the block is stored uncompressed.
pub const STORED_UNCOMPRESSED: u32 = 1 << 24;

/// A regular file's stored data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredData {
    /// (absolute start, size word) of each full block; a word of 0 is a
    /// sparse block (zeros, nothing stored).
    pub blocks: Vec<(u64, u32)>,
    pub tail: Option<StoredTail>,
}

/// The tail of a file kept in a fragment block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredTail {
    /// The fragment block's index in the fragment table (where it is
    /// stored: [`Archive::fragment_block`](super::Archive::fragment_block)).
    pub fragment: u32,
    /// Where the tail starts in the decompressed fragment block.
    pub offset: u32,
}

/// Where the data of regular file `file` is stored.
pub(super) fn stored_data<S: Source>(
    tables: &Tables<S>,
    file: &Inode,
) -> Result<StoredData, FormatError> {
    const WHAT: &str = "inode table";
    let shape = file.file_shape(tables.sb.block_size)?;
    let mut blocks = Vec::with_capacity(shape.count.min(4096) as usize);
    // A file held in a fragment alone has no block list to read.
    if shape.count > 0 {
        let mut c = tables.resume(shape.list_at, tables.sb.directory_table_start, WHAT)?;
        let mut at = shape.blocks_start;
        for _ in 0..shape.count {
            let word = c.u32()?;
            let stored = word & !STORED_UNCOMPRESSED;
            let end = at
                .checked_add(u64::from(stored))
                .filter(|&e| stored <= tables.sb.block_size && e <= tables.sb.bytes_used)
                .ok_or_else(|| {
                    corrupt(
                        WHAT,
                        format!(
                            "a data block of file inode {} lies outside the image",
                            file.number
                        ),
                    )
                })?;
            blocks.push((at, word));
            at = end;
        }
    }
    // The fragment index was checked when the inode was read.
    let tail = shape
        .tail
        .map(|(fragment, offset)| StoredTail { fragment, offset });
    Ok(StoredData { blocks, tail })
}

/// Whether a block stored at `start` with size word `word` is larger
/// than a block or ends past the image's bytes.
fn lies_outside<S: Source>(tables: &Tables<S>, start: u64, word: u32) -> bool {
    let stored = word & !STORED_UNCOMPRESSED;
    stored > tables.sb.block_size
        || start
            .checked_add(u64::from(stored))
            .is_none_or(|e| e > tables.sb.bytes_used)
}

/// Where fragment block `index` is stored, and its size word, checked
/// to lie inside the image.
pub(super) fn fragment_block<S: Source>(
    tables: &Tables<S>,
    fragment_locations: &[u64],
    index: u32,
) -> Result<(u64, u32), FormatError> {
    const WHAT: &str = "fragment table";
    let byte = u64::from(index) * 16;
    let loc = *fragment_locations
        .get((byte / METADATA_SIZE as u64) as usize)
        .ok_or_else(|| corrupt(WHAT, format!("fragment {index} does not exist")))?;
    let mut c = tables.resume(
        Position {
            block: loc,
            pos: (byte % METADATA_SIZE as u64) as usize,
        },
        tables.sb.fragment_table_start,
        WHAT,
    )?;
    let start = c.u64()?;
    let word = c.u32()?;
    if lies_outside(tables, start, word) {
        return Err(corrupt(
            WHAT,
            format!("fragment {index} lies outside the image"),
        ));
    }
    Ok((start, word))
}

/// The raw bytes of the block stored at `start` with size word `word`
/// (as [`StoredData`] and
/// [`Archive::fragment_block`](super::Archive::fragment_block) give them), read
/// into `buf` (grown when too short, never shrunk: a buffer reused
/// for many blocks is allocated and zeroed once).
pub(super) fn stored_bytes<'b, S: Source>(
    tables: &Tables<S>,
    start: u64,
    word: u32,
    buf: &'b mut Vec<u8>,
) -> Result<&'b [u8], FormatError> {
    let stored = word & !STORED_UNCOMPRESSED;
    if lies_outside(tables, start, word) {
        return Err(corrupt(
            "data block",
            format!("a block of {stored} bytes at byte {start} lies outside the image"),
        ));
    }
    let n = stored as usize;
    if buf.len() < n {
        buf.resize(n, 0);
    }
    tables.src.read_at(start, &mut buf[..n])?;
    Ok(&buf[..n])
}
