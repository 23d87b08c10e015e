//! Directories: their listings (cached), the walk over a listing's headers
//! and entries, and lookups through the directory index of large ones.

use std::sync::Arc;

use squashfs_format::superblock::{METADATA_SIZE, NO_TABLE};
use squashfs_format::{FormatError, Superblock};

use super::inode::{Inode, InodeData, InodeRef, Kind};
use super::stream::{corrupt, Cursor, Tables};
use crate::cache::Cache;
use crate::table::Source;

/// Longest name in a directory (the kernel's SQUASHFS_NAME_LEN).
pub const NAME_MAX: usize = 256;
/// Entries in one directory header (the kernel's SQUASHFS_DIR_COUNT).
const DIR_COUNT_MAX: u32 = 256;

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

/// Where the directory table ends: at the next table after it, or the
/// image's end.
fn table_end(sb: &Superblock) -> u64 {
    let end = sb.bytes_used;
    [
        sb.fragment_table_start,
        sb.export_table_start,
        sb.id_table_start,
        sb.xattr_id_table_start,
    ]
    .into_iter()
    .filter(|&t| t != NO_TABLE && t > sb.directory_table_start)
    .min()
    .unwrap_or(end)
    .min(end)
}

/// The directory table as read: where it ends, and the listings read
/// (cached).
pub(super) struct Directories {
    table_end: u64,
    listings: Cache<InodeRef, Listing>,
}

impl Directories {
    pub(super) fn new(sb: &Superblock, cache_bytes: usize) -> Self {
        Directories {
            table_end: table_end(sb),
            listings: Cache::new(cache_bytes),
        }
    }

    /// The entries of directory `dir` (without "." and ".."), cached.
    pub(super) fn listing<S: Source>(
        &self,
        tables: &Tables<S>,
        dir: &Inode,
    ) -> Result<Arc<Listing>, FormatError> {
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
        let mut c = tables.cursor(
            tables.sb.directory_table_start,
            u64::from(start_block),
            usize::from(offset),
            self.table_end,
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
    fn walk_dir<S: Source>(
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
    pub(super) fn lookup<S: Source>(
        &self,
        tables: &Tables<S>,
        dir: &Inode,
        name: &[u8],
    ) -> Result<Option<DirEntry>, FormatError> {
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
            return Ok(self.listing(tables, dir)?.find(name).cloned());
        };
        // Directory index: the last index entry whose name is <= `name`
        // says where to start scanning (as the kernel's lookup does).
        const WHAT: &str = "directory index";
        let listing_len = dir.size.saturating_sub(3);
        let mut start = (u64::from(start_block), usize::from(offset), 0u64);
        let mut ic = tables.resume(index_at, tables.sb.directory_table_start, WHAT)?;
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
        let mut c = tables.cursor(
            tables.sb.directory_table_start,
            start.0,
            start.1,
            self.table_end,
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
}
