//! Metadata blocks and the tables read by walking them: compressor options,
//! metadata blocks and streams over them, the id and xattr id tables and the
//! inode-table census of `sqfs inspect`. Everything here works on untrusted bytes: every offset,
//! length and count is checked before use, nothing is allocated from a size
//! read from the image, and every loop is bounded by bytes actually present.

pub use squashfs_format::superblock::{
    flags, le16, le32, le64, parse_superblock, Superblock, METADATA_SIZE, NO_TABLE, SUPERBLOCK_SIZE,
};
pub use squashfs_format::{Compressor, FormatError};

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

/// The options the image was compressed with, from the compressor options
/// block when there is one, otherwise mksquashfs's defaults for the
/// compressor (the block is written only when something differs from them).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CompressorOptions {
    /// Whether the image carries an options block (else these are defaults).
    pub stored: bool,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub level: Option<u32>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub window_size: Option<u16>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub strategies: Vec<&'static str>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dictionary_size: Option<u32>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub filters: Vec<&'static str>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub algorithm: Option<&'static str>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub high_compression: Option<bool>,
}

impl CompressorOptions {
    fn empty(stored: bool) -> Self {
        CompressorOptions {
            stored,
            level: None,
            window_size: None,
            strategies: Vec::new(),
            dictionary_size: None,
            filters: Vec::new(),
            algorithm: None,
            high_compression: None,
        }
    }

    /// mksquashfs's defaults, which an image without an options block used.
    pub fn defaults(comp: Compressor, block_size: u32) -> Self {
        let mut o = CompressorOptions::empty(false);
        match comp {
            Compressor::Gzip => {
                o.level = Some(9);
                o.window_size = Some(15);
            }
            Compressor::Xz => o.dictionary_size = Some(block_size),
            Compressor::Lz4 => o.high_compression = Some(false),
            Compressor::Zstd => o.level = Some(15),
            Compressor::Lzo => {
                o.algorithm = Some("lzo1x_999");
                o.level = Some(8);
            }
            Compressor::Lzma => {}
        }
        o
    }

    /// Parses the (decompressed) options block of `comp`.
    pub fn parse(comp: Compressor, b: &[u8]) -> Result<Self, FormatError> {
        let need = match comp {
            Compressor::Zstd => 4,
            Compressor::Lzma => 0,
            _ => 8,
        };
        if b.len() < need {
            return Err(corrupt(
                "compressor options",
                format!("{} bytes for {comp}, which needs {need}", b.len()),
            ));
        }
        let mut o = CompressorOptions::empty(true);
        match comp {
            Compressor::Gzip => {
                o.level = Some(le32(b, 0));
                o.window_size = Some(le16(b, 4));
                let s = le16(b, 6);
                for (bit, name) in [
                    (1, "default"),
                    (2, "filtered"),
                    (4, "huffman_only"),
                    (8, "run_length_encoded"),
                    (16, "fixed"),
                ] {
                    if s & bit != 0 {
                        o.strategies.push(name);
                    }
                }
            }
            Compressor::Xz => {
                o.dictionary_size = Some(le32(b, 0));
                let filters = le32(b, 4);
                for (bit, name) in [
                    (1, "x86"),
                    (2, "powerpc"),
                    (4, "ia64"),
                    (8, "arm"),
                    (16, "armthumb"),
                    (32, "sparc"),
                ] {
                    if filters & bit != 0 {
                        o.filters.push(name);
                    }
                }
            }
            Compressor::Lz4 => {
                let version = le32(b, 0);
                if version != 1 {
                    return Err(corrupt(
                        "compressor options",
                        format!("unknown lz4 format version {version}"),
                    ));
                }
                o.high_compression = Some(le32(b, 4) & 1 != 0);
            }
            Compressor::Zstd => o.level = Some(le32(b, 0)),
            Compressor::Lzo => {
                let algorithm = le32(b, 0);
                o.algorithm = Some(match algorithm {
                    0 => "lzo1x_1",
                    1 => "lzo1x_1_11",
                    2 => "lzo1x_1_12",
                    3 => "lzo1x_1_15",
                    4 => "lzo1x_999",
                    other => {
                        return Err(corrupt(
                            "compressor options",
                            format!("unknown lzo algorithm {other}"),
                        ))
                    }
                });
                if algorithm == 4 {
                    o.level = Some(le32(b, 4));
                }
            }
            Compressor::Lzma => {}
        }
        Ok(o)
    }
}

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

/// Reads the compressor options block that follows the superblock, if the
/// image has one; otherwise returns mksquashfs's defaults.
pub fn compressor_options(
    src: &(impl Source + ?Sized),
    sb: &Superblock,
) -> Result<CompressorOptions, FormatError> {
    if !sb.has(flags::COMPRESSOR_OPTIONS) {
        return Ok(CompressorOptions::defaults(sb.compressor, sb.block_size));
    }
    let mut block = Vec::new();
    // The options block is written uncompressed by mksquashfs, but the
    // kernel accepts a compressed one too.
    read_metadata_block(
        src,
        sb.compressor,
        SUPERBLOCK_SIZE as u64,
        sb.inode_table_start,
        &mut block,
    )
    .map_err(|e| match e {
        FormatError::Corrupt { detail, .. } => corrupt("compressor options", detail),
        other => other,
    })?;
    CompressorOptions::parse(sb.compressor, &block)
}

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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InodeCounts {
    pub regular_files: u64,
    pub directories: u64,
    pub symlinks: u64,
    pub block_devices: u64,
    pub char_devices: u64,
    pub fifos: u64,
    pub sockets: u64,
    /// Inodes with extended attributes.
    pub with_xattrs: u64,
    /// Sum of the sizes of all regular files (each inode once).
    pub file_bytes: u64,
    /// Bytes of regular files stored as holes (sparse).
    pub sparse_bytes: u64,
    /// Regular files whose last block is in a fragment.
    pub files_with_fragment: u64,
    /// Extra names of regular files and other non-directories (hard links).
    pub extra_links: u64,
    /// The newest modification time of any inode (Unix seconds).
    pub newest_mtime: u32,
}

/// Walks the inode table and counts inodes by type. `progress` is called
/// with the number of compressed bytes of the table read so far.
pub fn count_inodes(
    src: &(impl Source + ?Sized),
    sb: &Superblock,
    mut progress: impl FnMut(u64),
) -> Result<InodeCounts, FormatError> {
    const WHAT: &str = "inode table";
    let mut r = MetadataReader::new(
        src,
        sb.compressor,
        sb.inode_table_start,
        sb.directory_table_start,
        WHAT,
    );
    let mut c = InodeCounts::default();
    let root_block = sb.root_inode >> 16;
    let root_offset = (sb.root_inode & 0xffff) as usize;
    let mut root_seen = false;
    let no_fragment = u32::MAX;
    let block_size = u64::from(sb.block_size);
    for i in 0..sb.inodes {
        let Some((block, offset)) = r.position()? else {
            return Err(corrupt(
                WHAT,
                format!(
                    "holds only {i} of the {} inodes the superblock announces",
                    sb.inodes
                ),
            ));
        };
        if i % 4096 == 0 {
            progress(r.consumed());
        }
        let kind = r.u16()?;
        let _mode = r.u16()?;
        let uid_index = r.u16()?;
        let gid_index = r.u16()?;
        let mtime = r.u32()?;
        c.newest_mtime = c.newest_mtime.max(mtime);
        let number = r.u32()?;
        if uid_index >= sb.ids || gid_index >= sb.ids {
            return Err(corrupt(
                WHAT,
                format!(
                    "inode {number} names owner id #{uid_index}/#{gid_index}, but the table has {}",
                    sb.ids
                ),
            ));
        }
        if number == 0 || number > sb.inodes {
            return Err(corrupt(
                WHAT,
                format!("inode number {number} is outside 1..={}", sb.inodes),
            ));
        }
        let is_root = block == root_block && offset == root_offset;
        let links = |n: u32| u64::from(n.saturating_sub(1));
        let blocks_of = |size: u64, fragment: u32| -> u64 {
            if fragment == no_fragment {
                size.div_ceil(block_size)
            } else {
                size / block_size
            }
        };
        match kind {
            1 => {
                // basic directory: start_block u32, nlink u32, size u16, offset u16, parent u32
                r.skip(16)?;
                c.directories += 1;
            }
            8 => {
                // extended directory
                let _nlink = r.u32()?;
                let _size = r.u32()?;
                let _start = r.u32()?;
                let _parent = r.u32()?;
                let index_count = r.u16()?;
                let _offset = r.u16()?;
                let xattr = r.u32()?;
                for _ in 0..index_count {
                    let _index = r.u32()?;
                    let _start = r.u32()?;
                    let name_size = r.u32()?;
                    r.skip(u64::from(name_size) + 1)?;
                }
                c.directories += 1;
                c.with_xattrs += u64::from(xattr != u32::MAX);
            }
            2 => {
                let _blocks_start = r.u32()?;
                let fragment = r.u32()?;
                let _frag_offset = r.u32()?;
                let size = u64::from(r.u32()?);
                let n = blocks_of(size, fragment);
                r.skip(n * 4)?;
                c.regular_files += 1;
                c.file_bytes = c.file_bytes.saturating_add(size);
                c.files_with_fragment += u64::from(fragment != no_fragment);
                if fragment != no_fragment && fragment >= sb.fragments {
                    return Err(corrupt(
                        WHAT,
                        format!(
                            "file inode {number} uses fragment {fragment}, but the image has {}",
                            sb.fragments
                        ),
                    ));
                }
            }
            9 => {
                let _blocks_start = r.u64()?;
                let size = r.u64()?;
                let sparse = r.u64()?;
                let nlink = r.u32()?;
                let fragment = r.u32()?;
                let _frag_offset = r.u32()?;
                let xattr = r.u32()?;
                let n = blocks_of(size, fragment);
                r.skip(n.checked_mul(4).ok_or_else(|| {
                    corrupt(
                        WHAT,
                        format!("file inode {number} has an impossible size {size}"),
                    )
                })?)?;
                c.regular_files += 1;
                c.file_bytes = c.file_bytes.saturating_add(size);
                c.sparse_bytes = c.sparse_bytes.saturating_add(sparse.min(size));
                c.files_with_fragment += u64::from(fragment != no_fragment);
                c.extra_links += links(nlink);
                c.with_xattrs += u64::from(xattr != u32::MAX);
                if fragment != no_fragment && fragment >= sb.fragments {
                    return Err(corrupt(
                        WHAT,
                        format!(
                            "file inode {number} uses fragment {fragment}, but the image has {}",
                            sb.fragments
                        ),
                    ));
                }
            }
            3 | 10 => {
                let nlink = r.u32()?;
                let target = r.u32()?;
                r.skip(u64::from(target))?;
                if kind == 10 {
                    c.with_xattrs += u64::from(r.u32()? != u32::MAX);
                }
                c.symlinks += 1;
                c.extra_links += links(nlink);
            }
            4 | 5 | 11 | 12 => {
                let nlink = r.u32()?;
                let _rdev = r.u32()?;
                if kind > 10 {
                    c.with_xattrs += u64::from(r.u32()? != u32::MAX);
                }
                if kind % 7 == 4 {
                    c.block_devices += 1;
                } else {
                    c.char_devices += 1;
                }
                c.extra_links += links(nlink);
            }
            6 | 7 | 13 | 14 => {
                let nlink = r.u32()?;
                if kind > 10 {
                    c.with_xattrs += u64::from(r.u32()? != u32::MAX);
                }
                if kind % 7 == 6 {
                    c.fifos += 1;
                } else {
                    c.sockets += 1;
                }
                c.extra_links += links(nlink);
            }
            other => {
                return Err(corrupt(WHAT, format!("inode {number} has unknown type {other} (at block {block} offset {offset})")));
            }
        }
        if is_root {
            if kind != 1 && kind != 8 {
                return Err(corrupt(WHAT, "the root inode is not a directory"));
            }
            root_seen = true;
        }
    }
    progress(r.consumed());
    if !root_seen {
        return Err(corrupt(
            WHAT,
            format!("no inode at the root reference (block {root_block}, offset {root_offset})"),
        ));
    }
    if !r.at_end() {
        return Err(corrupt(
            WHAT,
            format!(
                "has data after the {} inodes the superblock announces",
                sb.inodes
            ),
        ));
    }
    Ok(c)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn options() {
        let o = CompressorOptions::parse(Compressor::Gzip, &[4, 0, 0, 0, 12, 0, 3, 0]).unwrap();
        assert_eq!((o.level, o.window_size), (Some(4), Some(12)));
        assert_eq!(o.strategies, vec!["default", "filtered"]);
        let o = CompressorOptions::parse(Compressor::Xz, &[0, 0, 1, 0, 9, 0, 0, 0]).unwrap();
        assert_eq!(o.dictionary_size, Some(65536));
        assert_eq!(o.filters, vec!["x86", "arm"]);
        assert!(CompressorOptions::parse(Compressor::Zstd, &[1, 0]).is_err());
        assert!(CompressorOptions::parse(Compressor::Lzo, &[9, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(CompressorOptions::parse(Compressor::Lz4, &[2, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

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
