//! File data: a regular file's layout (its blocks and fragment, cached),
//! the data and fragment blocks (cached), and reads at any offset.

use std::sync::Arc;

use squashfs_format::superblock::{METADATA_SIZE, NO_TABLE, SUPERBLOCK_SIZE};
use squashfs_format::{FormatError, Superblock};

use super::inode::{Inode, InodeRef};
use super::stream::{corrupt, read_index, Position, Tables};
use crate::cache::Cache;
use crate::table::Source;

/// Block size bit that marks an uncompressed data block.
const BLOCK_UNCOMPRESSED: u32 = 1 << 24;

/// A regular file's data layout: where each block is, and the fragment.
pub struct FileLayout {
    pub size: u64,
    /// (absolute start, stored size word) of each full block.
    blocks: Vec<(u64, u32)>,
    /// Fragment index and offset of the tail, if the tail is in a fragment.
    fragment: Option<(u32, u32)>,
}

/// The locations of the fragment table's metadata blocks (none when the
/// image has no fragments), each checked to lie among the metadata.
fn fragment_index(src: &impl Source, sb: &Superblock) -> Result<Vec<u64>, FormatError> {
    if sb.fragments == 0 {
        return Ok(Vec::new());
    }
    if sb.fragment_table_start == NO_TABLE {
        return Err(corrupt(
            "fragment table",
            format!("missing, but the image has {} fragments", sb.fragments),
        ));
    }
    let n = (u64::from(sb.fragments) * 16).div_ceil(METADATA_SIZE as u64);
    let locs = read_index(
        src,
        sb.fragment_table_start,
        n,
        sb.bytes_used,
        "fragment table",
    )?;
    for &l in &locs {
        if l < SUPERBLOCK_SIZE as u64 || l >= sb.fragment_table_start {
            return Err(corrupt(
                "fragment table",
                format!("a block at byte {l} lies outside the image's metadata"),
            ));
        }
    }
    Ok(locs)
}

/// File data as read: the fragment table's index, the data and fragment
/// blocks read (cached), and the files' block lists (cached).
pub(super) struct FileData {
    fragment_locations: Vec<u64>,
    blocks: Cache<(u64, u32), Vec<u8>>,
    layouts: Cache<InodeRef, FileLayout>,
}

impl FileData {
    /// Checks the fragment table's index; caches of about `block_bytes`
    /// of blocks and `layout_bytes` of block lists.
    pub(super) fn open(
        src: &impl Source,
        sb: &Superblock,
        block_bytes: usize,
        layout_bytes: usize,
    ) -> Result<Self, FormatError> {
        Ok(FileData {
            fragment_locations: fragment_index(src, sb)?,
            blocks: Cache::new(block_bytes),
            layouts: Cache::new(layout_bytes),
        })
    }

    /// The locations of the fragment table's metadata blocks.
    pub(super) fn fragment_locations(&self) -> &[u64] {
        &self.fragment_locations
    }

    /// The data layout of regular file `file`, cached.
    pub(super) fn layout<S: Source>(
        &self,
        tables: &Tables<S>,
        file: &Inode,
    ) -> Result<Arc<FileLayout>, FormatError> {
        if let Some(l) = self.layouts.get(&file.reference) {
            return Ok(l);
        }
        const WHAT: &str = "inode table";
        let shape = file.file_shape(tables.sb.block_size)?;
        let size = file.size;
        let mut c = tables.resume(shape.list_at, tables.sb.directory_table_start, WHAT)?;
        // Grows as entries are read: never sized from the untrusted count.
        let mut blocks = Vec::with_capacity(shape.count.min(4096) as usize);
        let mut at = shape.blocks_start;
        for _ in 0..shape.count {
            let word = c.u32()?;
            let stored = word & !BLOCK_UNCOMPRESSED;
            if stored > tables.sb.block_size {
                return Err(corrupt(WHAT, format!("file inode {} has a data block of {stored} bytes, more than the block size", file.number)));
            }
            blocks.push((at, word));
            at = at
                .checked_add(u64::from(stored))
                .filter(|&e| e <= tables.sb.bytes_used)
                .ok_or_else(|| {
                    corrupt(
                        WHAT,
                        format!(
                            "the data of file inode {} lies past the end of the image",
                            file.number
                        ),
                    )
                })?;
        }
        let cost = blocks.len() * 12 + 64;
        Ok(self.layouts.insert(
            file.reference,
            FileLayout {
                size,
                blocks,
                fragment: shape.tail,
            },
            cost,
        ))
    }

    /// Decompresses (or reads) a data or fragment block stored at `start`
    /// with size word `word`; cached.
    fn block<S: Source>(
        &self,
        tables: &Tables<S>,
        start: u64,
        word: u32,
        what: &'static str,
    ) -> Result<Arc<Vec<u8>>, FormatError> {
        let key = (start, word);
        if let Some(b) = self.blocks.get(&key) {
            return Ok(b);
        }
        let stored = (word & !BLOCK_UNCOMPRESSED) as usize;
        if stored as u64 > u64::from(tables.sb.block_size)
            || start
                .checked_add(stored as u64)
                .is_none_or(|e| e > tables.sb.bytes_used)
        {
            return Err(corrupt(
                what,
                format!("a block of {stored} bytes at byte {start} lies outside the image"),
            ));
        }
        let mut raw = vec![0u8; stored];
        tables.src.read_at(start, &mut raw)?;
        let out = if word & BLOCK_UNCOMPRESSED != 0 {
            raw
        } else {
            let mut out = vec![0u8; tables.sb.block_size as usize];
            let n = crate::decompress::decompress(tables.sb.compressor, &raw, &mut out).map_err(
                |e| {
                    corrupt(
                        what,
                        format!(
                            "the block at byte {start} does not decompress with {}: {e}",
                            tables.sb.compressor
                        ),
                    )
                },
            )?;
            out.truncate(n);
            out
        };
        let cost = out.len() + 64;
        Ok(self.blocks.insert(key, out, cost))
    }

    /// The fragment table entry `index`: (start, size word).
    fn fragment_entry<S: Source>(
        &self,
        tables: &Tables<S>,
        index: u32,
    ) -> Result<(u64, u32), FormatError> {
        const WHAT: &str = "fragment table";
        let byte = u64::from(index) * 16;
        let loc = *self
            .fragment_locations
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
        Ok((start, word))
    }

    /// Reads file data at `offset` into `buf`; returns the bytes read (fewer
    /// only at the end of the file).
    pub(super) fn read<S: Source>(
        &self,
        tables: &Tables<S>,
        layout: &FileLayout,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, FormatError> {
        if offset >= layout.size {
            return Ok(0);
        }
        let bs = u64::from(tables.sb.block_size);
        let n = (buf.len() as u64).min(layout.size - offset) as usize;
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let index = pos / bs;
            let within = (pos % bs) as usize;
            let expected = (layout.size - index * bs).min(bs) as usize;
            let want = (n - done).min(expected - within);
            let out = &mut buf[done..done + want];
            if let Some(&(start, word)) = layout.blocks.get(index as usize) {
                if word & !BLOCK_UNCOMPRESSED == 0 {
                    out.fill(0); // sparse block
                } else {
                    let b = self.block(tables, start, word, "data block")?;
                    if b.len() != expected {
                        return Err(corrupt(
                            "data block",
                            format!(
                                "the block at byte {start} holds {} bytes, {expected} expected",
                                b.len()
                            ),
                        ));
                    }
                    out.copy_from_slice(&b[within..within + want]);
                }
            } else {
                let (fragment, frag_offset) = layout.fragment.ok_or_else(|| {
                    corrupt(
                        "inode table",
                        "a file's block list is shorter than its size",
                    )
                })?;
                let (start, word) = self.fragment_entry(tables, fragment)?;
                let b = self.block(tables, start, word, "fragment block")?;
                let from = (frag_offset as usize)
                    .checked_add(within)
                    .filter(|&f| f + want <= b.len() && frag_offset as usize + expected <= b.len());
                let Some(from) = from else {
                    return Err(corrupt("fragment block", format!("fragment {fragment} holds {} bytes, a file needs {expected} at offset {frag_offset}", b.len())));
                };
                out.copy_from_slice(&b[from..from + want]);
            }
            done += want;
        }
        Ok(n)
    }
}
