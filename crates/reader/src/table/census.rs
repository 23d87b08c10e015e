//! The inode-table census of `sqfs inspect`: every inode walked once,
//! counted by type, with the sizes, links and xattrs it declares.

use super::{corrupt, MetadataReader, Source};
use squashfs_format::{FormatError, Superblock};

const WHAT: &str = "inode table";
const NO_FRAGMENT: u32 = u32::MAX;
const NO_XATTR: u32 = u32::MAX;

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
        let (kind, number) = header(&mut r, sb, &mut c)?;
        match kind {
            1 | 8 => directory(&mut r, kind, &mut c)?,
            2 | 9 => regular_file(&mut r, sb, kind, number, &mut c)?,
            3..=7 | 10..=14 => other_inode(&mut r, kind, &mut c)?,
            other => {
                return Err(corrupt(WHAT, format!("inode {number} has unknown type {other} (at block {block} offset {offset})")));
            }
        }
        if block == root_block && offset == root_offset {
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

/// The header every inode starts with, checked: its type and number.
fn header<S: Source + ?Sized>(
    r: &mut MetadataReader<'_, S>,
    sb: &Superblock,
    c: &mut InodeCounts,
) -> Result<(u16, u32), FormatError> {
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
    Ok((kind, number))
}

/// Extra names of an inode with `n` links (hard links).
fn links(n: u32) -> u64 {
    u64::from(n.saturating_sub(1))
}

/// A basic (1) or extended (8) directory, with its index skipped.
fn directory<S: Source + ?Sized>(
    r: &mut MetadataReader<'_, S>,
    kind: u16,
    c: &mut InodeCounts,
) -> Result<(), FormatError> {
    c.directories += 1;
    if kind == 1 {
        // start_block u32, nlink u32, size u16, offset u16, parent u32
        return r.skip(16);
    }
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
    c.with_xattrs += u64::from(xattr != NO_XATTR);
    Ok(())
}

/// A basic (2) or extended (9) regular file, with its block list skipped.
fn regular_file<S: Source + ?Sized>(
    r: &mut MetadataReader<'_, S>,
    sb: &Superblock,
    kind: u16,
    number: u32,
    c: &mut InodeCounts,
) -> Result<(), FormatError> {
    let (size, sparse, nlink, fragment, xattr) = if kind == 2 {
        let _blocks_start = r.u32()?;
        let fragment = r.u32()?;
        let _frag_offset = r.u32()?;
        let size = u64::from(r.u32()?);
        (size, 0, 1, fragment, NO_XATTR)
    } else {
        let _blocks_start = r.u64()?;
        let size = r.u64()?;
        let sparse = r.u64()?;
        let nlink = r.u32()?;
        let fragment = r.u32()?;
        let _frag_offset = r.u32()?;
        let xattr = r.u32()?;
        (size, sparse, nlink, fragment, xattr)
    };
    let block_size = u64::from(sb.block_size);
    let blocks = if fragment == NO_FRAGMENT {
        size.div_ceil(block_size)
    } else {
        size / block_size
    };
    r.skip(blocks.checked_mul(4).ok_or_else(|| {
        corrupt(
            WHAT,
            format!("file inode {number} has an impossible size {size}"),
        )
    })?)?;
    c.regular_files += 1;
    c.file_bytes = c.file_bytes.saturating_add(size);
    c.sparse_bytes = c.sparse_bytes.saturating_add(sparse.min(size));
    c.files_with_fragment += u64::from(fragment != NO_FRAGMENT);
    c.extra_links += links(nlink);
    c.with_xattrs += u64::from(xattr != NO_XATTR);
    if fragment != NO_FRAGMENT && fragment >= sb.fragments {
        return Err(corrupt(
            WHAT,
            format!(
                "file inode {number} uses fragment {fragment}, but the image has {}",
                sb.fragments
            ),
        ));
    }
    Ok(())
}

/// Symlinks (3, 10), devices (4, 5, 11, 12) and fifos and sockets (6, 7,
/// 13, 14); the extended types (10 and up) end with an xattr index.
fn other_inode<S: Source + ?Sized>(
    r: &mut MetadataReader<'_, S>,
    kind: u16,
    c: &mut InodeCounts,
) -> Result<(), FormatError> {
    let nlink = r.u32()?;
    match kind {
        3 | 10 => {
            let target = r.u32()?;
            r.skip(u64::from(target))?;
            c.symlinks += 1;
        }
        4 | 5 | 11 | 12 => {
            let _rdev = r.u32()?;
            if kind % 7 == 4 {
                c.block_devices += 1;
            } else {
                c.char_devices += 1;
            }
        }
        _ if kind % 7 == 6 => c.fifos += 1,
        _ => c.sockets += 1,
    }
    if kind >= 10 {
        c.with_xattrs += u64::from(r.u32()? != NO_XATTR);
    }
    c.extra_links += links(nlink);
    Ok(())
}
