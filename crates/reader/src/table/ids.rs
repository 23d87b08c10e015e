//! Tables of fixed-size entries indexed by block locations: the uid/gid
//! table, and the header of the xattr id table.

use super::{corrupt, le32, le64, read_metadata_block, Source, METADATA_SIZE, SUPERBLOCK_SIZE};
use squashfs_format::{FormatError, Superblock};

/// Reads a table of `count` fixed-size entries stored in metadata blocks whose
/// locations are listed (as u64 offsets) at `index_at`, as the id table is.
/// Calls `each` with every entry's bytes.
fn read_indexed_table(
    src: &(impl Source + ?Sized),
    sb: &Superblock,
    index_at: u64,
    count: u64,
    entry_size: usize,
    what: &'static str,
    mut each: impl FnMut(&[u8]),
) -> Result<(), FormatError> {
    let total = count * entry_size as u64;
    let blocks = total.div_ceil(METADATA_SIZE as u64);
    let index_len = blocks * 8;
    if index_at
        .checked_add(index_len)
        .is_none_or(|e| e > sb.bytes_used)
    {
        return Err(corrupt(
            what,
            format!(
                "its index ({blocks} entries at byte {index_at}) lies past the end of the image"
            ),
        ));
    }
    let mut remaining = total;
    let mut block = Vec::new();
    let mut pending: Vec<u8> = Vec::with_capacity(entry_size);
    for i in 0..blocks {
        let mut p = [0u8; 8];
        src.read_at(index_at + i * 8, &mut p)?;
        let at = u64::from_le_bytes(p);
        if at < SUPERBLOCK_SIZE as u64 || at >= index_at {
            return Err(corrupt(
                what,
                format!("block {i} at byte {at} is outside the image's metadata"),
            ));
        }
        read_metadata_block(src, sb.compressor, at, index_at, &mut block)?;
        let want = remaining.min(METADATA_SIZE as u64) as usize;
        if block.len() < want {
            return Err(corrupt(
                what,
                format!("block {i} holds {} bytes, {want} expected", block.len()),
            ));
        }
        for &byte in &block[..want] {
            pending.push(byte);
            if pending.len() == entry_size {
                each(&pending);
                pending.clear();
            }
        }
        remaining -= want as u64;
    }
    Ok(())
}

/// The uid/gid table: the numeric ids files in the image may own.
pub fn id_table(src: &(impl Source + ?Sized), sb: &Superblock) -> Result<Vec<u32>, FormatError> {
    let mut ids = Vec::with_capacity(usize::from(sb.ids));
    read_indexed_table(
        src,
        sb,
        sb.id_table_start,
        u64::from(sb.ids),
        4,
        "uid/gid table",
        |e| ids.push(le32(e, 0)),
    )?;
    Ok(ids)
}

/// The number of distinct extended-attribute sets, if the image has xattrs.
pub fn xattr_ids(
    src: &(impl Source + ?Sized),
    sb: &Superblock,
) -> Result<Option<u32>, FormatError> {
    let Some(at) = sb.xattr_table() else {
        return Ok(None);
    };
    if at.checked_add(16).is_none_or(|e| e > sb.bytes_used) {
        return Err(corrupt(
            "xattr id table",
            "its header lies past the end of the image",
        ));
    }
    let mut h = [0u8; 16];
    src.read_at(at, &mut h)?;
    let xattr_table_start = le64(&h, 0);
    if xattr_table_start >= at {
        return Err(corrupt(
            "xattr id table",
            format!("xattr table start {xattr_table_start} lies after its index"),
        ));
    }
    Ok(Some(le32(&h, 8)))
}
