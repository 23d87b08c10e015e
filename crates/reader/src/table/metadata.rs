//! Metadata blocks (at most 8 KiB each, compressed or not) and a byte
//! stream over consecutive ones, as the inode and directory tables are
//! stored.

use super::{corrupt, Source, METADATA_SIZE};
use squashfs_format::{Compressor, FormatError};

/// Reads one metadata block at `offset` (absolute): returns its decompressed
/// contents and the offset of the next block. Fails if the block extends past
/// `limit`.
pub fn read_metadata_block(
    src: &(impl Source + ?Sized),
    comp: Compressor,
    offset: u64,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<u64, FormatError> {
    let what = "metadata block";
    let header_end = offset
        .checked_add(2)
        .filter(|&e| e <= limit)
        .ok_or_else(|| {
            corrupt(
                what,
                format!("header at byte {offset} lies past the end of its table ({limit})"),
            )
        })?;
    let mut h = [0u8; 2];
    src.read_at(offset, &mut h)?;
    let header = u16::from_le_bytes(h);
    let stored = usize::from(header & 0x7fff);
    let compressed = header & 0x8000 == 0;
    if stored == 0 || stored > METADATA_SIZE {
        return Err(corrupt(
            what,
            format!("at byte {offset} has invalid length {stored}"),
        ));
    }
    let end = header_end + stored as u64;
    if end > limit {
        return Err(corrupt(
            what,
            format!(
                "at byte {offset} ({stored} bytes) extends past the end of its table ({limit})"
            ),
        ));
    }
    let mut raw = vec![0u8; stored];
    src.read_at(header_end, &mut raw)?;
    out.clear();
    if compressed {
        out.resize(METADATA_SIZE, 0);
        let n = crate::decompress::decompress(comp, &raw, out).map_err(|e| {
            corrupt(
                what,
                format!("at byte {offset} does not decompress with {comp}: {e}"),
            )
        })?;
        out.truncate(n);
    } else {
        out.extend_from_slice(&raw);
    }
    Ok(end)
}

/// A byte stream over consecutive metadata blocks from `start` up to `end`,
/// as the inode and directory tables are stored.
pub struct MetadataReader<'a, S: Source + ?Sized> {
    src: &'a S,
    comp: Compressor,
    table_start: u64,
    next: u64,
    end: u64,
    block: Vec<u8>,
    /// Offset (from `table_start`) of the block in `block`.
    block_start: u64,
    pos: usize,
    what: &'static str,
}

impl<'a, S: Source + ?Sized> MetadataReader<'a, S> {
    pub fn new(src: &'a S, comp: Compressor, start: u64, end: u64, what: &'static str) -> Self {
        MetadataReader {
            src,
            comp,
            table_start: start,
            next: start,
            end,
            block: Vec::with_capacity(METADATA_SIZE),
            block_start: 0,
            pos: 0,
            what,
        }
    }

    /// Where the next byte comes from: (block offset from the table start,
    /// offset in the block), as inode references are written. Loads the next
    /// block if the current one is used up.
    pub fn position(&mut self) -> Result<Option<(u64, usize)>, FormatError> {
        if self.pos == self.block.len() && !self.load()? {
            return Ok(None);
        }
        Ok(Some((self.block_start, self.pos)))
    }

    /// Bytes consumed from the image so far (compressed), for progress.
    pub fn consumed(&self) -> u64 {
        self.next - self.table_start
    }

    pub fn at_end(&self) -> bool {
        self.pos == self.block.len() && self.next >= self.end
    }

    fn load(&mut self) -> Result<bool, FormatError> {
        if self.next >= self.end {
            return Ok(false);
        }
        let at = self.next;
        self.next = read_metadata_block(self.src, self.comp, at, self.end, &mut self.block)?;
        self.block_start = at - self.table_start;
        self.pos = 0;
        Ok(true)
    }

    fn short(&self, n: u64) -> FormatError {
        corrupt(
            self.what,
            format!("ends in the middle of an entry ({n} more bytes needed)"),
        )
    }

    pub fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
        let mut done = 0;
        while done < buf.len() {
            if self.pos == self.block.len() && !self.load()? {
                return Err(self.short((buf.len() - done) as u64));
            }
            let n = (buf.len() - done).min(self.block.len() - self.pos);
            buf[done..done + n].copy_from_slice(&self.block[self.pos..self.pos + n]);
            self.pos += n;
            done += n;
        }
        Ok(())
    }

    /// Skips `n` bytes; takes time proportional to the bytes really present.
    pub fn skip(&mut self, mut n: u64) -> Result<(), FormatError> {
        while n > 0 {
            if self.pos == self.block.len() && !self.load()? {
                return Err(self.short(n));
            }
            let step = n.min((self.block.len() - self.pos) as u64);
            self.pos += step as usize;
            n -= step;
        }
        Ok(())
    }

    pub fn u16(&mut self) -> Result<u16, FormatError> {
        let mut b = [0u8; 2];
        self.read_exact(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    pub fn u32(&mut self) -> Result<u32, FormatError> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    pub fn u64(&mut self) -> Result<u64, FormatError> {
        let mut b = [0u8; 8];
        self.read_exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_block_bounds() {
        // uncompressed block of 3 bytes at offset 0
        let img = [3u8, 0x80, 1, 2, 3];
        let mut out = Vec::new();
        assert_eq!(
            read_metadata_block(&img[..], Compressor::Zstd, 0, 5, &mut out),
            Ok(5)
        );
        assert_eq!(out, [1, 2, 3]);
        assert!(read_metadata_block(&img[..], Compressor::Zstd, 0, 4, &mut out).is_err());
        assert!(read_metadata_block(&[0u8, 0x80][..], Compressor::Zstd, 0, 2, &mut out).is_err());
        assert!(
            read_metadata_block(&[0xffu8, 0x7f][..], Compressor::Zstd, 0, 2, &mut out).is_err()
        );
        // a reader over two blocks reads across the boundary and skips
        let img = [2u8, 0x80, 1, 2, 2, 0x80, 3, 4];
        let mut r = MetadataReader::new(&img[..], Compressor::Zstd, 0, 8, "test");
        assert_eq!(r.u32().unwrap(), u32::from_le_bytes([1, 2, 3, 4]));
        assert!(r.at_end());
        let mut r = MetadataReader::new(&img[..], Compressor::Zstd, 0, 8, "test");
        r.skip(3).unwrap();
        assert!(r.skip(2).is_err());
    }
}
