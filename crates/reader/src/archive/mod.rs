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
//!
//! Each part reads through the ones listed before it; this file puts them
//! together as [`Archive`]:
//! - `stream.rs`: the image's bytes, superblock and metadata blocks, and
//!   cursors over a table's metadata stream;
//! - `inode.rs`: what an inode is (kinds, what each type holds);
//! - `xattr.rs`: the xattr id table and an inode's extended attributes;
//! - `inode_table.rs`: inodes read from the inode table;
//! - `directory.rs`: listings and lookups (with the directory index);
//! - `data.rs`: file data, decompressed, and its block lists;
//! - `stored.rs`: file data as stored (for comparing images).

use std::sync::Arc;

use squashfs_format::superblock::{flags, METADATA_SIZE, NO_TABLE};
use squashfs_format::{parse_superblock, Compressor, FormatError, Superblock};

use crate::table::{self, Source};

mod data;
mod directory;
mod inode;
mod inode_table;
mod stored;
mod stream;
mod xattr;

pub use data::FileLayout;
pub use directory::{DirEntry, Listing, NAME_MAX};
pub use inode::{Inode, InodeData, InodeRef, Kind, SYMLINK_MAX};
pub use stored::{StoredData, StoredTail, STORED_UNCOMPRESSED};
pub use stream::Position;
pub use xattr::{Xattr, XATTR_VALUE_MAX};

use data::FileData;
use directory::Directories;
use inode_table::Inodes;
use stream::{corrupt, read_index, Tables};
use xattr::XattrTables;

/// An opened image. All methods take `&self`; share it with `Arc`.
pub struct Archive<S> {
    tables: Tables<S>,
    root: InodeRef,
    inodes: Inodes,
    directories: Directories,
    data: FileData,
    xattrs: Option<XattrTables>,
}

/// The caches' budget when none is given: 40 MiB (each cache holds at most
/// twice its share). A scan needs far less (metadata is read nearly in
/// order); what the budget buys is reuse of data and fragment blocks.
pub const DEFAULT_CACHE_BYTES: usize = 40 << 20;

/// How a budget is shared: metadata blocks 1/5, data and fragment blocks
/// 2/5, inodes 1/10, directory listings 1/5, block lists 1/10.
fn cache_shares(bytes: usize) -> [usize; 5] {
    [bytes / 5, bytes / 5 * 2, bytes / 10, bytes / 5, bytes / 10]
}

impl<S: Source> Archive<S> {
    /// Opens an image: checks the superblock and everything the kernel
    /// checks at mount time (compressor options, id table, fragment table,
    /// export table, xattr id table, root inode).
    pub fn open(src: S) -> Result<Self, FormatError> {
        Self::open_with_cache(src, DEFAULT_CACHE_BYTES)
    }

    /// As [`Archive::open`], with caches of `cache_bytes` in all (they hold
    /// at most about twice that): a process serving many images at once
    /// gives each a share of what one would get.
    pub fn open_with_cache(src: S, cache_bytes: usize) -> Result<Self, FormatError> {
        let size = src.len();
        let mut head = vec![0u8; size.min(4096) as usize];
        src.read_at(0, &mut head)?;
        let sb = parse_superblock(&head, size)?;
        table::compressor_options(&src, &sb)?;
        let ids = table::id_table(&src, &sb)?;
        let [meta, blocks, inodes, listings, layouts] = cache_shares(cache_bytes);
        let data = FileData::open(&src, &sb, blocks, layouts)?;
        check_export_table(&src, &sb)?;
        let xattrs = XattrTables::open(&src, &sb)?;
        let ar = Archive {
            root: sb.root_inode,
            inodes: Inodes::new(ids, inodes),
            directories: Directories::new(&sb, listings),
            data,
            xattrs,
            tables: Tables::new(src, sb, meta),
        };
        let root = ar.inode(ar.root)?;
        if root.kind != Kind::Dir {
            return Err(corrupt("inode table", "the root inode is not a directory"));
        }
        Ok(ar)
    }

    pub fn superblock(&self) -> &Superblock {
        &self.tables.sb
    }
    pub fn root(&self) -> InodeRef {
        self.root
    }
    pub fn compressor(&self) -> Compressor {
        self.tables.sb.compressor
    }
    pub fn has_xattrs(&self) -> bool {
        self.xattrs.is_some()
    }
    /// The source the image is read from.
    pub fn source(&self) -> &S {
        &self.tables.src
    }
    /// Where the tables lie: from the inode table's start to the end of
    /// the image's bytes (inode, directory, fragment, export, id and xattr
    /// tables; the superblock checks put it inside the image).
    pub fn metadata_region(&self) -> std::ops::Range<u64> {
        self.tables.sb.inode_table_start..self.tables.sb.bytes_used
    }

    /// The inode at `r`.
    pub fn inode(&self, r: InodeRef) -> Result<Arc<Inode>, FormatError> {
        self.inodes.get(&self.tables, self.xattrs.as_ref(), r)
    }

    /// The entries of directory `dir` (without "." and ".."), cached.
    pub fn listing(&self, dir: &Inode) -> Result<Arc<Listing>, FormatError> {
        self.directories.listing(&self.tables, dir)
    }

    /// Looks `name` up in directory `dir`. Uses a cached listing when there
    /// is one, the directory index of a large directory otherwise.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Option<DirEntry>, FormatError> {
        self.directories.lookup(&self.tables, dir, name)
    }

    /// The data layout of regular file `file`, cached.
    pub fn layout(&self, file: &Inode) -> Result<Arc<FileLayout>, FormatError> {
        self.data.layout(&self.tables, file)
    }

    /// Reads file data at `offset` into `buf`; returns the bytes read (fewer
    /// only at the end of the file).
    pub fn read(
        &self,
        layout: &FileLayout,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, FormatError> {
        self.data.read(&self.tables, layout, offset, buf)
    }

    /// Where the data of regular file `file` is stored.
    pub fn stored_data(&self, file: &Inode) -> Result<StoredData, FormatError> {
        stored::stored_data(&self.tables, file)
    }

    /// Where fragment block `index` is stored, and its size word, checked
    /// to lie inside the image.
    pub fn fragment_block(&self, index: u32) -> Result<(u64, u32), FormatError> {
        stored::fragment_block(&self.tables, self.data.fragment_locations(), index)
    }

    /// The raw bytes of the block stored at `start` with size word `word`
    /// (as [`StoredData`] and [`Archive::fragment_block`] give them), read
    /// into `buf` (grown when too short, never shrunk: a buffer reused
    /// for many blocks is allocated and zeroed once).
    pub fn stored_bytes<'b>(
        &self,
        start: u64,
        word: u32,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8], FormatError> {
        stored::stored_bytes(&self.tables, start, word, buf)
    }

    /// The xattrs of `inode` (names with their prefix, e.g. `user.mime`).
    pub fn xattrs(&self, inode: &Inode) -> Result<Vec<Xattr>, FormatError> {
        match (inode.xattr, &self.xattrs) {
            (Some(id), Some(x)) => x.read(&self.tables, id, inode.number),
            _ => Ok(Vec::new()),
        }
    }
}

/// The export table's index, when the image has one: each block among the
/// metadata after the directory table.
fn check_export_table(src: &impl Source, sb: &Superblock) -> Result<(), FormatError> {
    if sb.export_table_start == NO_TABLE || !sb.has(flags::EXPORTABLE) {
        return Ok(());
    }
    let n = (u64::from(sb.inodes) * 8).div_ceil(METADATA_SIZE as u64);
    let locs = read_index(src, sb.export_table_start, n, sb.bytes_used, "export table")?;
    for &l in &locs {
        if l < sb.directory_table_start || l >= sb.export_table_start {
            return Err(corrupt(
                "export table",
                format!("a block at byte {l} lies outside the image's metadata"),
            ));
        }
    }
    Ok(())
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
