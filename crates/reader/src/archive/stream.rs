//! Metadata streams: the image's bytes and superblock with the decompressed
//! metadata blocks of its tables (cached), and cursors that read across
//! them up to a table's end. Every other file of the archive reads through
//! these.

use std::sync::Arc;

use squashfs_format::superblock::{le64, METADATA_SIZE};
use squashfs_format::{FormatError, Superblock};

use crate::cache::Cache;
use crate::table::{read_metadata_block, Source};

pub(super) fn corrupt(what: &'static str, detail: impl Into<String>) -> FormatError {
    FormatError::corrupt(what, detail)
}

/// An image's bytes, its superblock and its metadata blocks (cached).
pub(super) struct Tables<S> {
    pub(super) src: S,
    pub(super) sb: Superblock,
    meta: Cache<u64, MetaBlock>,
}

/// Where a metadata stream resumes: absolute offset of a metadata block and
/// the position in its decompressed bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub(super) block: u64,
    pub(super) pos: usize,
}

pub(super) struct MetaBlock {
    data: Vec<u8>,
    next: u64,
}

/// A stream of bytes over consecutive metadata blocks, ending at `limit`.
pub(super) struct Cursor<'a, S> {
    tables: &'a Tables<S>,
    block: Arc<MetaBlock>,
    at: u64,
    pos: usize,
    limit: u64,
    what: &'static str,
}

impl<'a, S: Source> Cursor<'a, S> {
    pub(super) fn position(&self) -> Position {
        Position {
            block: self.at,
            pos: self.pos,
        }
    }

    pub(super) fn read(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
        let mut done = 0;
        while done < buf.len() {
            if self.pos >= self.block.data.len() {
                // Each block is at least 3 bytes long, so this advances
                // towards `limit` and the loop ends.
                let next = self.block.next;
                if next >= self.limit {
                    return Err(corrupt(
                        self.what,
                        format!("runs past the end of its table (byte {})", self.limit),
                    ));
                }
                self.block = self.tables.meta_block(next, self.limit, self.what)?;
                self.at = next;
                self.pos = 0;
                continue;
            }
            let n = (buf.len() - done).min(self.block.data.len() - self.pos);
            buf[done..done + n].copy_from_slice(&self.block.data[self.pos..self.pos + n]);
            self.pos += n;
            done += n;
        }
        Ok(())
    }

    pub(super) fn bytes(&mut self, n: usize) -> Result<Vec<u8>, FormatError> {
        let mut v = vec![0u8; n];
        self.read(&mut v)?;
        Ok(v)
    }

    pub(super) fn u16(&mut self) -> Result<u16, FormatError> {
        let mut b = [0u8; 2];
        self.read(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    pub(super) fn u32(&mut self) -> Result<u32, FormatError> {
        let mut b = [0u8; 4];
        self.read(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    pub(super) fn u64(&mut self) -> Result<u64, FormatError> {
        let mut b = [0u8; 8];
        self.read(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Reads an index of `count` u64 block locations at `at`, which must end at
/// or before `end`.
pub(super) fn read_index(
    src: &impl Source,
    at: u64,
    count: u64,
    end: u64,
    what: &'static str,
) -> Result<Vec<u64>, FormatError> {
    let len = count
        .checked_mul(8)
        .ok_or_else(|| corrupt(what, "impossibly large"))?;
    if at.checked_add(len).is_none_or(|e| e > end) {
        return Err(corrupt(
            what,
            format!("its index ({count} entries at byte {at}) lies past byte {end}"),
        ));
    }
    // Bounded by the check above: the index is inside the image.
    let mut raw = vec![0u8; len as usize];
    src.read_at(at, &mut raw)?;
    Ok(raw.chunks_exact(8).map(|c| le64(c, 0)).collect())
}

impl<S: Source> Tables<S> {
    /// The tables of image `src` with superblock `sb`, with a cache of
    /// metadata blocks of about `cache_bytes`.
    pub(super) fn new(src: S, sb: Superblock, cache_bytes: usize) -> Self {
        Tables {
            src,
            sb,
            meta: Cache::new(cache_bytes),
        }
    }

    fn meta_block(
        &self,
        at: u64,
        limit: u64,
        what: &'static str,
    ) -> Result<Arc<MetaBlock>, FormatError> {
        if let Some(b) = self.meta.get(&at) {
            if b.next <= limit {
                return Ok(b);
            }
            return Err(corrupt(
                what,
                format!("the metadata block at byte {at} runs past the end of its table"),
            ));
        }
        let mut data = Vec::with_capacity(METADATA_SIZE);
        let next = read_metadata_block(&self.src, self.sb.compressor, at, limit, &mut data)?;
        let size = data.len() + 64;
        Ok(self.meta.insert(at, MetaBlock { data, next }, size))
    }

    /// A stream at `block` (relative to `table`) offset `offset`, ending at `limit`.
    pub(super) fn cursor(
        &self,
        table: u64,
        block: u64,
        offset: usize,
        limit: u64,
        what: &'static str,
    ) -> Result<Cursor<'_, S>, FormatError> {
        if offset >= METADATA_SIZE {
            return Err(corrupt(
                what,
                format!("a reference to offset {offset} in a metadata block"),
            ));
        }
        let at = table
            .checked_add(block)
            .filter(|&a| a < limit)
            .ok_or_else(|| {
                corrupt(
                    what,
                    format!("a reference to block {block} lies outside its table"),
                )
            })?;
        self.resume(
            Position {
                block: at,
                pos: offset,
            },
            limit,
            what,
        )
    }

    pub(super) fn resume(
        &self,
        p: Position,
        limit: u64,
        what: &'static str,
    ) -> Result<Cursor<'_, S>, FormatError> {
        let block = self.meta_block(p.block, limit, what)?;
        if p.pos > block.data.len() {
            return Err(corrupt(
                what,
                format!(
                    "a reference to offset {} in a block of {} bytes",
                    p.pos,
                    block.data.len()
                ),
            ));
        }
        Ok(Cursor {
            tables: self,
            block,
            at: p.block,
            pos: p.pos,
            limit,
            what,
        })
    }
}
