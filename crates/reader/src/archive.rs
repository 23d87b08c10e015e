//! The whole image: inodes of every type, directories (with the directory
//! index for lookups), file data (compressed, uncompressed and sparse
//! blocks, fragments), the id table and extended attributes.
//!
//! Untrusted input throughout: every offset, length and count is checked
//! before use; allocations are bounded by constants or by bytes actually
//! read; every loop is bounded by the bytes present (a metadata stream ends
//! at its table's end); nothing recurses. Decompressed metadata blocks, data
//! and fragment blocks, parsed inodes, block lists and directory listings
//! are kept in bounded caches; an `Archive` can be shared between threads.

use std::sync::Arc;

use squashfs_format::superblock::{flags, le32, le64, METADATA_SIZE, NO_TABLE, SUPERBLOCK_SIZE};
use squashfs_format::{parse_superblock, Compressor, FormatError, Superblock};

use crate::cache::Cache;
use crate::table::{self, read_metadata_block, Source};

fn corrupt(what: &'static str, detail: impl Into<String>) -> FormatError {
    FormatError::corrupt(what, detail)
}

/// A reference to an inode: the offset of its metadata block from the start
/// of the inode table (upper 32 of 48 bits) and its offset in that block.
pub type InodeRef = u64;

/// Longest name in a directory (the kernel's SQUASHFS_NAME_LEN).
pub const NAME_MAX: usize = 256;
/// Longest symlink target the kernel accepts (PAGE_SIZE).
pub const SYMLINK_MAX: u64 = 4096;
/// Largest xattr value (Linux's XATTR_SIZE_MAX).
pub const XATTR_VALUE_MAX: u32 = 65536;
/// At most this many xattrs per inode, and this many bytes of them.
const XATTR_COUNT_MAX: u32 = 65536;
const XATTR_TOTAL_MAX: usize = 4 << 20;
/// Entries in one directory header (the kernel's SQUASHFS_DIR_COUNT).
const DIR_COUNT_MAX: u32 = 256;
/// Block size bit that marks an uncompressed data block.
const BLOCK_UNCOMPRESSED: u32 = 1 << 24;
const NO_FRAGMENT: u32 = u32::MAX;
const NO_XATTR: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    BlockDev,
    CharDev,
    Fifo,
    Socket,
}

impl Kind {
    /// From the basic inode type (1..=7) of a directory entry.
    pub fn from_basic(t: u16) -> Option<Kind> {
        Some(match t {
            1 => Kind::Dir,
            2 => Kind::File,
            3 => Kind::Symlink,
            4 => Kind::BlockDev,
            5 => Kind::CharDev,
            6 => Kind::Fifo,
            7 => Kind::Socket,
            _ => return None,
        })
    }
    /// The S_IFMT bits.
    pub fn mode_bits(self) -> u32 {
        match self {
            Kind::Dir => 0o040000,
            Kind::File => 0o100000,
            Kind::Symlink => 0o120000,
            Kind::BlockDev => 0o060000,
            Kind::CharDev => 0o020000,
            Kind::Fifo => 0o010000,
            Kind::Socket => 0o140000,
        }
    }
    /// The d_type of readdir.
    pub fn dtype(self) -> u32 {
        match self {
            Kind::Dir => 4,
            Kind::File => 8,
            Kind::Symlink => 10,
            Kind::BlockDev => 6,
            Kind::CharDev => 2,
            Kind::Fifo => 1,
            Kind::Socket => 12,
        }
    }
}

/// Where a metadata stream resumes: absolute offset of a metadata block and
/// the position in its decompressed bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    block: u64,
    pos: usize,
}

#[derive(Clone, Debug)]
pub enum InodeData {
    Dir {
        /// Listing: block offset from the directory table start, offset in it.
        start_block: u32,
        offset: u16,
        parent: u32,
        index_count: u16,
        /// Where the directory index begins (extended directories).
        index_at: Option<Position>,
    },
    File {
        blocks_start: u64,
        fragment: u32,
        frag_offset: u32,
        sparse: u64,
        /// Where the list of block sizes begins.
        list_at: Position,
    },
    Symlink {
        target: Vec<u8>,
    },
    Device {
        rdev: u32,
    },
    Ipc,
}

/// One inode, with its owner ids resolved through the id table.
#[derive(Clone, Debug)]
pub struct Inode {
    pub reference: InodeRef,
    pub kind: Kind,
    /// Permission bits (07777).
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub mtime: u32,
    pub number: u32,
    pub nlink: u32,
    /// Index into the xattr id table, if the inode has xattrs.
    pub xattr: Option<u32>,
    /// Bytes of xattrs (from the xattr id table), counted in st_blocks.
    pub xattr_size: u32,
    /// Files: their size; directories: the listing size the kernel shows
    /// (the stored size, 3 more than the listing's bytes); symlinks: the
    /// target's length; others 0.
    pub size: u64,
    pub data: InodeData,
}

impl Inode {
    /// The full st_mode.
    pub fn mode(&self) -> u32 {
        self.kind.mode_bits() | u32::from(self.perm & 0o7777)
    }
    /// st_blocks (512-byte units) as the kernel driver computes it: the
    /// stored data of files, plus the xattrs of any inode that has them.
    pub fn blocks(&self) -> u64 {
        let data = match &self.data {
            InodeData::File { sparse, .. } => {
                let stored = self.size.saturating_sub(*sparse);
                if stored == 0 {
                    0
                } else {
                    ((stored - 1) >> 9) + 1
                }
            }
            _ => 0,
        };
        // The kernel adds ((size - 1) >> 9) + 1 computed in an int.
        let xattr = if self.xattr.is_some() {
            ((i64::from(self.xattr_size as i32) - 1) >> 9) + 1
        } else {
            0
        };
        data.saturating_add_signed(xattr)
    }
    pub fn rdev(&self) -> u32 {
        match self.data {
            InodeData::Device { rdev } => rdev,
            _ => 0,
        }
    }
}

/// An extended attribute: full name (with its prefix) and value.
pub type Xattr = (Vec<u8>, Vec<u8>);

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Box<[u8]>,
    pub inode: InodeRef,
    pub number: u32,
    /// The type the entry claims (the inode itself is authoritative).
    pub kind: Kind,
}

/// A directory's entries in image order (sorted by name in images that
/// mksquashfs writes).
pub struct Listing {
    pub entries: Vec<DirEntry>,
    sorted: bool,
}

impl Listing {
    pub fn find(&self, name: &[u8]) -> Option<&DirEntry> {
        if self.sorted {
            self.entries
                .binary_search_by(|e| (*e.name).cmp(name))
                .ok()
                .map(|i| &self.entries[i])
        } else {
            self.entries.iter().find(|e| &*e.name == name)
        }
    }
}

/// A regular file's data layout: where each block is, and the fragment.
pub struct FileLayout {
    pub size: u64,
    /// (absolute start, stored size word) of each full block.
    blocks: Vec<(u64, u32)>,
    /// Fragment index and offset of the tail, if the tail is in a fragment.
    fragment: Option<(u32, u32)>,
}

struct MetaBlock {
    data: Vec<u8>,
    next: u64,
}

struct XattrTables {
    /// Start of the key/value table.
    kv_start: u64,
    /// Start of the xattr id table header (end of what it indexes).
    id_table_at: u64,
    count: u32,
    /// Locations of the metadata blocks of xattr id entries.
    locations: Vec<u64>,
}

/// An opened image. All methods take `&self`; share it with `Arc`.
pub struct Archive<S> {
    src: S,
    sb: Superblock,
    ids: Vec<u32>,
    fragment_locations: Vec<u64>,
    xattrs: Option<XattrTables>,
    dir_table_end: u64,
    root: InodeRef,
    meta: Cache<u64, MetaBlock>,
    data: Cache<(u64, u32), Vec<u8>>,
    inodes: Cache<InodeRef, Inode>,
    listings: Cache<InodeRef, Listing>,
    layouts: Cache<InodeRef, FileLayout>,
}

/// Cache sizes (each cache holds at most twice this).
const META_CACHE: usize = 8 << 20;
const DATA_CACHE: usize = 16 << 20;
const INODE_CACHE: usize = 4 << 20;
const LISTING_CACHE: usize = 8 << 20;
const LAYOUT_CACHE: usize = 4 << 20;

/// A stream of bytes over consecutive metadata blocks, ending at `limit`.
struct Cursor<'a, S> {
    ar: &'a Archive<S>,
    block: Arc<MetaBlock>,
    at: u64,
    pos: usize,
    limit: u64,
    what: &'static str,
}

impl<'a, S: Source> Cursor<'a, S> {
    fn position(&self) -> Position {
        Position {
            block: self.at,
            pos: self.pos,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<(), FormatError> {
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
                self.block = self.ar.meta_block(next, self.limit, self.what)?;
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

    fn bytes(&mut self, n: usize) -> Result<Vec<u8>, FormatError> {
        let mut v = vec![0u8; n];
        self.read(&mut v)?;
        Ok(v)
    }

    fn u16(&mut self) -> Result<u16, FormatError> {
        let mut b = [0u8; 2];
        self.read(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        let mut b = [0u8; 4];
        self.read(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        let mut b = [0u8; 8];
        self.read(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Reads an index of `count` u64 block locations at `at`, which must end at
/// or before `end`.
fn read_index(
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

impl<S: Source> Archive<S> {
    /// Opens an image: checks the superblock and everything the kernel
    /// checks at mount time (compressor options, id table, fragment table,
    /// export table, xattr id table, root inode).
    pub fn open(src: S) -> Result<Self, FormatError> {
        let size = src.len();
        let mut head = vec![0u8; size.min(4096) as usize];
        src.read_at(0, &mut head)?;
        let sb = parse_superblock(&head, size)?;
        table::compressor_options(&src, &sb)?;
        let ids = table::id_table(&src, &sb)?;
        let end = sb.bytes_used;

        let fragment_locations = if sb.fragments == 0 {
            Vec::new()
        } else {
            if sb.fragment_table_start == NO_TABLE {
                return Err(corrupt(
                    "fragment table",
                    format!("missing, but the image has {} fragments", sb.fragments),
                ));
            }
            let n = (u64::from(sb.fragments) * 16).div_ceil(METADATA_SIZE as u64);
            let locs = read_index(&src, sb.fragment_table_start, n, end, "fragment table")?;
            for &l in &locs {
                if l < SUPERBLOCK_SIZE as u64 || l >= sb.fragment_table_start {
                    return Err(corrupt(
                        "fragment table",
                        format!("a block at byte {l} lies outside the image's metadata"),
                    ));
                }
            }
            locs
        };

        if sb.export_table_start != NO_TABLE && sb.has(flags::EXPORTABLE) {
            let n = (u64::from(sb.inodes) * 8).div_ceil(METADATA_SIZE as u64);
            let locs = read_index(&src, sb.export_table_start, n, end, "export table")?;
            for &l in &locs {
                if l < sb.directory_table_start || l >= sb.export_table_start {
                    return Err(corrupt(
                        "export table",
                        format!("a block at byte {l} lies outside the image's metadata"),
                    ));
                }
            }
        }

        let xattrs = match sb.xattr_table() {
            Some(at) if !sb.has(flags::NO_XATTRS) => {
                if at.checked_add(16).is_none_or(|e| e > end) {
                    return Err(corrupt(
                        "xattr id table",
                        "its header lies past the end of the image",
                    ));
                }
                let mut h = [0u8; 16];
                src.read_at(at, &mut h)?;
                let kv_start = le64(&h, 0);
                let count = le32(&h, 8);
                if kv_start >= at || kv_start < sb.directory_table_start {
                    return Err(corrupt(
                        "xattr id table",
                        format!("the xattr table start {kv_start} is not below its index"),
                    ));
                }
                if count == 0 {
                    return Err(corrupt("xattr id table", "it lists no xattr sets"));
                }
                let n = (u64::from(count) * 16).div_ceil(METADATA_SIZE as u64);
                let locations = read_index(&src, at + 16, n, end, "xattr id table")?;
                for &l in &locations {
                    if l < kv_start || l >= at {
                        return Err(corrupt(
                            "xattr id table",
                            format!("a block at byte {l} lies outside the xattr tables"),
                        ));
                    }
                }
                Some(XattrTables {
                    kv_start,
                    id_table_at: at,
                    count,
                    locations,
                })
            }
            _ => None,
        };

        let dir_table_end = [
            sb.fragment_table_start,
            sb.export_table_start,
            sb.id_table_start,
            sb.xattr_id_table_start,
        ]
        .into_iter()
        .filter(|&t| t != NO_TABLE && t > sb.directory_table_start)
        .min()
        .unwrap_or(end)
        .min(end);

        let ar = Archive {
            src,
            sb,
            ids,
            fragment_locations,
            xattrs,
            dir_table_end,
            root: sb.root_inode,
            meta: Cache::new(META_CACHE),
            data: Cache::new(DATA_CACHE),
            inodes: Cache::new(INODE_CACHE),
            listings: Cache::new(LISTING_CACHE),
            layouts: Cache::new(LAYOUT_CACHE),
        };
        let root = ar.inode(ar.root)?;
        if root.kind != Kind::Dir {
            return Err(corrupt("inode table", "the root inode is not a directory"));
        }
        Ok(ar)
    }

    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }
    pub fn root(&self) -> InodeRef {
        self.root
    }
    pub fn compressor(&self) -> Compressor {
        self.sb.compressor
    }
    pub fn has_xattrs(&self) -> bool {
        self.xattrs.is_some()
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
    fn cursor(
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

    fn resume(
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
            ar: self,
            block,
            at: p.block,
            pos: p.pos,
            limit,
            what,
        })
    }

    fn id(&self, index: u16, number: u32) -> Result<u32, FormatError> {
        self.ids.get(usize::from(index)).copied().ok_or_else(|| {
            corrupt(
                "inode table",
                format!(
                    "inode {number} names owner id #{index}, but the id table has {}",
                    self.ids.len()
                ),
            )
        })
    }

    /// The inode at `r`.
    pub fn inode(&self, r: InodeRef) -> Result<Arc<Inode>, FormatError> {
        if let Some(i) = self.inodes.get(&r) {
            return Ok(i);
        }
        let inode = self.parse_inode(r)?;
        let size = 160
            + match &inode.data {
                InodeData::Symlink { target } => target.len(),
                _ => 0,
            };
        Ok(self.inodes.insert(r, inode, size))
    }

    fn parse_inode(&self, r: InodeRef) -> Result<Inode, FormatError> {
        const WHAT: &str = "inode table";
        if r >> 48 != 0 {
            return Err(corrupt(WHAT, format!("invalid inode reference {r:#x}")));
        }
        let mut c = self.cursor(
            self.sb.inode_table_start,
            r >> 16,
            (r & 0xffff) as usize,
            self.sb.directory_table_start,
            WHAT,
        )?;
        let t = c.u16()?;
        let perm = c.u16()?;
        let uid_index = c.u16()?;
        let gid_index = c.u16()?;
        let mtime = c.u32()?;
        let number = c.u32()?;
        if number == 0 || number > self.sb.inodes {
            return Err(corrupt(
                WHAT,
                format!("inode number {number} is outside 1..={}", self.sb.inodes),
            ));
        }
        let uid = self.id(uid_index, number)?;
        let gid = self.id(gid_index, number)?;
        let xattr_of = |x: u32| -> Result<Option<u32>, FormatError> {
            if x == NO_XATTR {
                return Ok(None);
            }
            match &self.xattrs {
                Some(t) if x < t.count => Ok(Some(x)),
                _ => Err(corrupt(
                    WHAT,
                    format!("inode {number} names xattr set {x}, which does not exist"),
                )),
            }
        };
        let mut inode = Inode {
            reference: r,
            kind: Kind::Fifo, // set below for every type
            perm,
            uid,
            gid,
            mtime,
            number,
            nlink: 1,
            xattr: None,
            xattr_size: 0,
            size: 0,
            data: InodeData::Ipc,
        };
        match t {
            1 => {
                let start_block = c.u32()?;
                inode.nlink = c.u32()?;
                inode.size = u64::from(c.u16()?);
                let offset = c.u16()?;
                let parent = c.u32()?;
                inode.kind = Kind::Dir;
                inode.data = InodeData::Dir {
                    start_block,
                    offset,
                    parent,
                    index_count: 0,
                    index_at: None,
                };
            }
            8 => {
                inode.nlink = c.u32()?;
                inode.size = u64::from(c.u32()?);
                let start_block = c.u32()?;
                let parent = c.u32()?;
                let index_count = c.u16()?;
                let offset = c.u16()?;
                inode.xattr = xattr_of(c.u32()?)?;
                inode.kind = Kind::Dir;
                let index_at = (index_count > 0).then(|| c.position());
                inode.data = InodeData::Dir {
                    start_block,
                    offset,
                    parent,
                    index_count,
                    index_at,
                };
            }
            2 | 9 => {
                let (blocks_start, size, sparse, fragment, frag_offset) = if t == 2 {
                    let start = u64::from(c.u32()?);
                    let fragment = c.u32()?;
                    let frag_offset = c.u32()?;
                    let size = u64::from(c.u32()?);
                    (start, size, 0, fragment, frag_offset)
                } else {
                    let start = c.u64()?;
                    let size = c.u64()?;
                    let sparse = c.u64()?;
                    inode.nlink = c.u32()?;
                    let fragment = c.u32()?;
                    let frag_offset = c.u32()?;
                    inode.xattr = xattr_of(c.u32()?)?;
                    (start, size, sparse, fragment, frag_offset)
                };
                if size > i64::MAX as u64 {
                    return Err(corrupt(
                        WHAT,
                        format!("file inode {number} has an impossible size {size}"),
                    ));
                }
                if fragment != NO_FRAGMENT && fragment >= self.sb.fragments {
                    return Err(corrupt(
                        WHAT,
                        format!(
                            "file inode {number} uses fragment {fragment}, but the image has {}",
                            self.sb.fragments
                        ),
                    ));
                }
                inode.kind = Kind::File;
                inode.size = size;
                inode.data = InodeData::File {
                    blocks_start,
                    fragment,
                    frag_offset,
                    sparse,
                    list_at: c.position(),
                };
            }
            3 | 10 => {
                inode.nlink = c.u32()?;
                let len = c.u32()?;
                if u64::from(len) > SYMLINK_MAX {
                    return Err(corrupt(
                        WHAT,
                        format!("symlink inode {number} has a target of {len} bytes"),
                    ));
                }
                let target = c.bytes(len as usize)?;
                if t == 10 {
                    inode.xattr = xattr_of(c.u32()?)?;
                }
                inode.kind = Kind::Symlink;
                inode.size = u64::from(len);
                inode.data = InodeData::Symlink { target };
            }
            4 | 5 | 11 | 12 => {
                inode.nlink = c.u32()?;
                let rdev = c.u32()?;
                if t > 10 {
                    inode.xattr = xattr_of(c.u32()?)?;
                }
                inode.kind = if t % 7 == 4 {
                    Kind::BlockDev
                } else {
                    Kind::CharDev
                };
                inode.data = InodeData::Device { rdev };
            }
            6 | 7 | 13 | 14 => {
                inode.nlink = c.u32()?;
                if t > 10 {
                    inode.xattr = xattr_of(c.u32()?)?;
                }
                inode.kind = if t % 7 == 6 { Kind::Fifo } else { Kind::Socket };
            }
            other => {
                return Err(corrupt(
                    WHAT,
                    format!("inode {number} has unknown type {other}"),
                ))
            }
        }
        if let Some(id) = inode.xattr {
            // As the kernel does when it reads an inode with xattrs.
            inode.xattr_size = self.xattr_entry(id)?.2;
        }
        Ok(inode)
    }

    /// The entries of directory `dir` (without "." and ".."), cached.
    pub fn listing(&self, dir: &Inode) -> Result<Arc<Listing>, FormatError> {
        if let Some(l) = self.listings.get(&dir.reference) {
            return Ok(l);
        }
        let InodeData::Dir {
            start_block,
            offset,
            ..
        } = dir.data
        else {
            return Err(FormatError::Io("not a directory".into()));
        };
        let mut entries = Vec::new();
        let mut c = self.cursor(
            self.sb.directory_table_start,
            u64::from(start_block),
            usize::from(offset),
            self.dir_table_end,
            "directory table",
        )?;
        let mut bytes = 0usize;
        self.walk_dir(&mut c, dir.size.saturating_sub(3), |e| {
            bytes += e.name.len() + 48;
            entries.push(e);
            std::ops::ControlFlow::Continue(())
        })?;
        // The cache counts what the entries hold, not spare capacity.
        entries.shrink_to_fit();
        let sorted = entries.windows(2).all(|w| w[0].name < w[1].name);
        Ok(self
            .listings
            .insert(dir.reference, Listing { entries, sorted }, bytes + 64))
    }

    /// Reads `remaining` bytes of directory listing from `c`, calling `each`
    /// for every entry until it breaks.
    fn walk_dir(
        &self,
        c: &mut Cursor<'_, S>,
        mut remaining: u64,
        mut each: impl FnMut(DirEntry) -> std::ops::ControlFlow<()>,
    ) -> Result<(), FormatError> {
        const WHAT: &str = "directory table";
        let mut name = [0u8; NAME_MAX];
        while remaining > 0 {
            if remaining < 12 {
                return Err(corrupt(
                    WHAT,
                    format!("a directory listing ends with {remaining} stray bytes"),
                ));
            }
            let count = c.u32()?;
            let start_block = c.u32()?;
            let base = c.u32()?;
            remaining -= 12;
            if count >= DIR_COUNT_MAX {
                return Err(corrupt(
                    WHAT,
                    format!(
                        "a directory header announces {} entries (at most 256)",
                        u64::from(count) + 1
                    ),
                ));
            }
            for _ in 0..=count {
                if remaining < 8 {
                    return Err(corrupt(
                        WHAT,
                        "a directory listing ends in the middle of an entry",
                    ));
                }
                let offset = c.u16()?;
                let delta = c.u16()? as i16;
                let t = c.u16()?;
                let len = usize::from(c.u16()?) + 1;
                if len > NAME_MAX {
                    return Err(corrupt(
                        WHAT,
                        format!("a name of {len} bytes (at most {NAME_MAX})"),
                    ));
                }
                remaining = remaining.checked_sub(8 + len as u64).ok_or_else(|| {
                    corrupt(WHAT, "an entry extends past the end of its directory")
                })?;
                c.read(&mut name[..len])?;
                let n = &name[..len];
                if n.contains(&b'/') || n.contains(&0) || n == b"." || n == b".." {
                    return Err(corrupt(
                        WHAT,
                        format!(
                            "invalid name {:?} in a directory",
                            String::from_utf8_lossy(n)
                        ),
                    ));
                }
                if usize::from(offset) >= METADATA_SIZE {
                    return Err(corrupt(
                        WHAT,
                        format!("an entry points to offset {offset} in a metadata block"),
                    ));
                }
                let kind = Kind::from_basic(t)
                    .ok_or_else(|| corrupt(WHAT, format!("an entry of unknown type {t}")))?;
                let entry = DirEntry {
                    name: n.into(),
                    inode: (u64::from(start_block) << 16) | u64::from(offset),
                    number: base.wrapping_add(delta as i32 as u32),
                    kind,
                };
                if each(entry).is_break() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Looks `name` up in directory `dir`. Uses a cached listing when there
    /// is one, the directory index of a large directory otherwise.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<DirEntry>, FormatError> {
        let InodeData::Dir {
            start_block,
            offset,
            index_count,
            index_at,
            ..
        } = dir.data
        else {
            return Err(FormatError::Io("not a directory".into()));
        };
        if name.is_empty() || name.len() > NAME_MAX {
            return Ok(None);
        }
        if let Some(l) = self.listings.get(&dir.reference) {
            return Ok(l.find(name).cloned());
        }
        let Some(index_at) = index_at else {
            return Ok(self.listing(dir)?.find(name).cloned());
        };
        // Directory index: the last index entry whose name is <= `name`
        // says where to start scanning (as the kernel's lookup does).
        const WHAT: &str = "directory index";
        let listing_len = dir.size.saturating_sub(3);
        let mut start = (u64::from(start_block), usize::from(offset), 0u64);
        let mut ic = self.resume(index_at, self.sb.directory_table_start, WHAT)?;
        let mut iname = [0u8; NAME_MAX];
        for _ in 0..index_count {
            let index = u64::from(ic.u32()?);
            let block = ic.u32()?;
            let len = ic.u32()? as usize + 1;
            if len > NAME_MAX {
                return Err(corrupt(WHAT, format!("an index name of {len} bytes")));
            }
            ic.read(&mut iname[..len])?;
            if &iname[..len] > name {
                break;
            }
            if index < start.2 || index > listing_len {
                return Err(corrupt(WHAT, format!("index entry at listing byte {index} is out of order or past the listing ({listing_len} bytes)")));
            }
            // `index` counts listing bytes from the directory's first
            // offset; the index entry names the block they fall in.
            let pos = (index + u64::from(offset)) % METADATA_SIZE as u64;
            start = (u64::from(block), pos as usize, index);
        }
        let mut c = self.cursor(
            self.sb.directory_table_start,
            start.0,
            start.1,
            self.dir_table_end,
            "directory table",
        )?;
        let mut found = None;
        self.walk_dir(&mut c, listing_len - start.2, |e| {
            use std::ops::ControlFlow::*;
            match (*e.name).cmp(name) {
                std::cmp::Ordering::Less => Continue(()),
                std::cmp::Ordering::Equal => {
                    found = Some(e);
                    Break(())
                }
                std::cmp::Ordering::Greater => Break(()),
            }
        })?;
        Ok(found)
    }

    /// The data layout of regular file `file`, cached.
    pub fn layout(&self, file: &Inode) -> Result<Arc<FileLayout>, FormatError> {
        if let Some(l) = self.layouts.get(&file.reference) {
            return Ok(l);
        }
        const WHAT: &str = "inode table";
        let InodeData::File {
            blocks_start,
            fragment,
            frag_offset,
            list_at,
            ..
        } = file.data
        else {
            return Err(FormatError::Io("not a regular file".into()));
        };
        let bs = u64::from(self.sb.block_size);
        let size = file.size;
        let (count, fragment) = if fragment == NO_FRAGMENT || size.is_multiple_of(bs) {
            (size.div_ceil(bs), None)
        } else {
            (size / bs, Some((fragment, frag_offset)))
        };
        let mut c = self.resume(list_at, self.sb.directory_table_start, WHAT)?;
        // Grows as entries are read: never sized from the untrusted count.
        let mut blocks = Vec::with_capacity(count.min(4096) as usize);
        let mut at = blocks_start;
        for _ in 0..count {
            let word = c.u32()?;
            let stored = word & !BLOCK_UNCOMPRESSED;
            if stored > self.sb.block_size {
                return Err(corrupt(WHAT, format!("file inode {} has a data block of {stored} bytes, more than the block size", file.number)));
            }
            blocks.push((at, word));
            at = at
                .checked_add(u64::from(stored))
                .filter(|&e| e <= self.sb.bytes_used)
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
                fragment,
            },
            cost,
        ))
    }

    /// Decompresses (or reads) a data or fragment block stored at `start`
    /// with size word `word`; cached.
    fn block(
        &self,
        start: u64,
        word: u32,
        what: &'static str,
    ) -> Result<Arc<Vec<u8>>, FormatError> {
        let key = (start, word);
        if let Some(b) = self.data.get(&key) {
            return Ok(b);
        }
        let stored = (word & !BLOCK_UNCOMPRESSED) as usize;
        if stored as u64 > u64::from(self.sb.block_size)
            || start
                .checked_add(stored as u64)
                .is_none_or(|e| e > self.sb.bytes_used)
        {
            return Err(corrupt(
                what,
                format!("a block of {stored} bytes at byte {start} lies outside the image"),
            ));
        }
        let mut raw = vec![0u8; stored];
        self.src.read_at(start, &mut raw)?;
        let out = if word & BLOCK_UNCOMPRESSED != 0 {
            raw
        } else {
            let mut out = vec![0u8; self.sb.block_size as usize];
            let n =
                crate::decompress::decompress(self.sb.compressor, &raw, &mut out).map_err(|e| {
                    corrupt(
                        what,
                        format!(
                            "the block at byte {start} does not decompress with {}: {e}",
                            self.sb.compressor
                        ),
                    )
                })?;
            out.truncate(n);
            out
        };
        let cost = out.len() + 64;
        Ok(self.data.insert(key, out, cost))
    }

    /// The fragment table entry `index`: (start, size word).
    fn fragment_entry(&self, index: u32) -> Result<(u64, u32), FormatError> {
        const WHAT: &str = "fragment table";
        let byte = u64::from(index) * 16;
        let loc = *self
            .fragment_locations
            .get((byte / METADATA_SIZE as u64) as usize)
            .ok_or_else(|| corrupt(WHAT, format!("fragment {index} does not exist")))?;
        let mut c = self.resume(
            Position {
                block: loc,
                pos: (byte % METADATA_SIZE as u64) as usize,
            },
            self.sb.fragment_table_start,
            WHAT,
        )?;
        let start = c.u64()?;
        let word = c.u32()?;
        Ok((start, word))
    }

    /// Reads file data at `offset` into `buf`; returns the bytes read (fewer
    /// only at the end of the file).
    pub fn read(
        &self,
        layout: &FileLayout,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, FormatError> {
        if offset >= layout.size {
            return Ok(0);
        }
        let bs = u64::from(self.sb.block_size);
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
                    let b = self.block(start, word, "data block")?;
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
                let (start, word) = self.fragment_entry(fragment)?;
                let b = self.block(start, word, "fragment block")?;
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

    /// The xattrs of `inode` (names with their prefix, e.g. `user.mime`).
    /// The xattr id table entry `id`: (reference into the key/value table,
    /// count, size in bytes).
    fn xattr_entry(&self, id: u32) -> Result<(u64, u32, u32), FormatError> {
        const WHAT: &str = "xattr id table";
        let t = self
            .xattrs
            .as_ref()
            .ok_or_else(|| corrupt(WHAT, "missing"))?;
        let byte = u64::from(id) * 16;
        let loc = *t
            .locations
            .get((byte / METADATA_SIZE as u64) as usize)
            .ok_or_else(|| corrupt(WHAT, format!("xattr set {id} does not exist")))?;
        let mut ic = self.resume(
            Position {
                block: loc,
                pos: (byte % METADATA_SIZE as u64) as usize,
            },
            t.id_table_at,
            WHAT,
        )?;
        Ok((ic.u64()?, ic.u32()?, ic.u32()?))
    }

    pub fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>, FormatError> {
        const WHAT: &str = "xattr table";
        let (Some(id), Some(t)) = (inode.xattr, &self.xattrs) else {
            return Ok(Vec::new());
        };
        let (r, count, _size) = self.xattr_entry(id)?;
        if count > XATTR_COUNT_MAX {
            return Err(corrupt(
                WHAT,
                format!("inode {} has {count} xattrs", inode.number),
            ));
        }
        let mut c = self.cursor(
            t.kv_start,
            r >> 16,
            (r & 0xffff) as usize,
            t.id_table_at,
            WHAT,
        )?;
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut name = [0u8; 256];
        for _ in 0..count {
            let kind = c.u16()?;
            let len = usize::from(c.u16()?);
            if len > 255 {
                return Err(corrupt(WHAT, format!("an xattr name of {len} bytes")));
            }
            c.read(&mut name[..len])?;
            let vsize = c.u32()?;
            let value = if kind & 0x100 != 0 {
                if vsize != 8 {
                    return Err(corrupt(
                        WHAT,
                        format!("an out-of-line xattr reference of {vsize} bytes"),
                    ));
                }
                let vr = c.u64()?;
                let mut vc = self.cursor(
                    t.kv_start,
                    vr >> 16,
                    (vr & 0xffff) as usize,
                    t.id_table_at,
                    WHAT,
                )?;
                let vsize = vc.u32()?;
                if vsize > XATTR_VALUE_MAX {
                    return Err(corrupt(WHAT, format!("an xattr value of {vsize} bytes")));
                }
                vc.bytes(vsize as usize)?
            } else {
                if vsize > XATTR_VALUE_MAX {
                    return Err(corrupt(WHAT, format!("an xattr value of {vsize} bytes")));
                }
                c.bytes(vsize as usize)?
            };
            let prefix: &[u8] = match kind & 0xff {
                0 => b"user.",
                1 => b"trusted.",
                2 => b"security.",
                _ => continue, // unknown prefixes are skipped, as the kernel does
            };
            total += len + value.len() + prefix.len();
            if total > XATTR_TOTAL_MAX {
                return Err(corrupt(
                    WHAT,
                    format!(
                        "inode {} has more than {XATTR_TOTAL_MAX} bytes of xattrs",
                        inode.number
                    ),
                ));
            }
            let mut full = prefix.to_vec();
            full.extend_from_slice(&name[..len]);
            out.push((full, value));
        }
        Ok(out)
    }
}

/// Opens an image held in memory (tests, fuzzing).
pub fn open_bytes(bytes: Vec<u8>) -> Result<Archive<Vec<u8>>, FormatError> {
    Archive::open(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(open_bytes(Vec::new()).is_err());
        assert!(open_bytes(vec![0u8; 100]).is_err());
    }
}
