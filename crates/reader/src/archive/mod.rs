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

use squashfs_format::superblock::{flags, METADATA_SIZE, NO_TABLE};
use squashfs_format::{parse_superblock, Compressor, FormatError, Superblock};

use crate::cache::Cache;
use crate::table::{self, Source};

mod data;
mod directory;
mod inode;
mod stored;
mod stream;
mod xattr;

pub use data::FileLayout;
pub use directory::{DirEntry, Listing, NAME_MAX};
pub use inode::{Inode, InodeData, InodeRef, Kind, SYMLINK_MAX};
pub use stored::{StoredData, StoredTail, STORED_UNCOMPRESSED};
pub use stream::Position;
pub use xattr::{Xattr, XATTR_VALUE_MAX};

use stream::{read_index, MetaBlock};
use xattr::XattrTables;

fn corrupt(what: &'static str, detail: impl Into<String>) -> FormatError {
    FormatError::corrupt(what, detail)
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
        let fragment_locations = data::fragment_index(&src, &sb)?;
        check_export_table(&src, &sb)?;
        let xattrs = XattrTables::open(&src, &sb)?;
        let dir_table_end = directory::table_end(&sb);
        let [meta, data, inodes, listings, layouts] = cache_shares(cache_bytes);
        let ar = Archive {
            src,
            sb,
            ids,
            fragment_locations,
            xattrs,
            dir_table_end,
            root: sb.root_inode,
            meta: Cache::new(meta),
            data: Cache::new(data),
            inodes: Cache::new(inodes),
            listings: Cache::new(listings),
            layouts: Cache::new(layouts),
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
    /// The source the image is read from.
    pub fn source(&self) -> &S {
        &self.src
    }
    /// Where the tables lie: from the inode table's start to the end of
    /// the image's bytes (inode, directory, fragment, export, id and xattr
    /// tables; the superblock checks put it inside the image).
    pub fn metadata_region(&self) -> std::ops::Range<u64> {
        self.sb.inode_table_start..self.sb.bytes_used
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
