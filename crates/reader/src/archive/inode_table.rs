//! The inode table as read: an inode parsed from its metadata stream
//! (every type), its owners resolved through the id table and its xattr
//! set checked, and the inodes read kept in a cache.

use std::sync::Arc;

use squashfs_format::FormatError;

use super::inode::{Inode, InodeData, InodeRef, Kind, NO_FRAGMENT, NO_XATTR, SYMLINK_MAX};
use super::stream::{corrupt, Cursor, Tables};
use super::xattr::XattrTables;
use crate::cache::Cache;
use crate::table::Source;

const WHAT: &str = "inode table";

/// The inode table as read: the id table owners resolve through, and the
/// inodes read (cached).
pub(super) struct Inodes {
    ids: Vec<u32>,
    cache: Cache<InodeRef, Inode>,
}

impl Inodes {
    pub(super) fn new(ids: Vec<u32>, cache_bytes: usize) -> Self {
        Inodes {
            ids,
            cache: Cache::new(cache_bytes),
        }
    }

    /// The inode at `r` (an xattr set it names checked in `xattrs`).
    pub(super) fn get<S: Source>(
        &self,
        tables: &Tables<S>,
        xattrs: Option<&XattrTables>,
        r: InodeRef,
    ) -> Result<Arc<Inode>, FormatError> {
        if let Some(i) = self.cache.get(&r) {
            return Ok(i);
        }
        let reader = Reader {
            tables,
            ids: &self.ids,
            xattrs,
        };
        let inode = reader.parse_inode(r)?;
        let size = 160
            + match &inode.data {
                InodeData::Symlink { target } => target.len(),
                _ => 0,
            };
        Ok(self.cache.insert(r, inode, size))
    }
}

/// What reading one inode needs: the tables, the id table and the xattr
/// id table.
struct Reader<'a, S> {
    tables: &'a Tables<S>,
    ids: &'a [u32],
    xattrs: Option<&'a XattrTables>,
}

impl<S: Source> Reader<'_, S> {
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

    fn parse_inode(&self, r: InodeRef) -> Result<Inode, FormatError> {
        if r >> 48 != 0 {
            return Err(corrupt(WHAT, format!("invalid inode reference {r:#x}")));
        }
        let mut c = self.tables.cursor(
            self.tables.sb.inode_table_start,
            r >> 16,
            (r & 0xffff) as usize,
            self.tables.sb.directory_table_start,
            WHAT,
        )?;
        let (t, mut inode) = self.inode_header(&mut c, r)?;
        let number = inode.number;
        match t {
            1 | 8 => self.directory(&mut c, t, &mut inode)?,
            2 | 9 => self.regular_file(&mut c, t, &mut inode)?,
            3 | 10 => self.symlink(&mut c, t, &mut inode)?,
            4 | 5 | 11 | 12 => {
                inode.nlink = c.u32()?;
                let rdev = c.u32()?;
                if t > 10 {
                    inode.xattr = self.xattr_of(c.u32()?, number)?;
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
                    inode.xattr = self.xattr_of(c.u32()?, number)?;
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
        if let (Some(id), Some(x)) = (inode.xattr, self.xattrs) {
            // As the kernel does when it reads an inode with xattrs (an
            // inode names a set only when the image has xattr tables).
            inode.xattr_size = x.entry(self.tables, id)?.2;
        }
        Ok(inode)
    }

    /// The header every inode starts with: its type, and the inode with
    /// what the header says (the rest set by its type's reader).
    fn inode_header(
        &self,
        c: &mut Cursor<'_, S>,
        r: InodeRef,
    ) -> Result<(u16, Inode), FormatError> {
        let t = c.u16()?;
        let perm = c.u16()?;
        let uid_index = c.u16()?;
        let gid_index = c.u16()?;
        let mtime = c.u32()?;
        let number = c.u32()?;
        if number == 0 || number > self.tables.sb.inodes {
            return Err(corrupt(
                WHAT,
                format!(
                    "inode number {number} is outside 1..={}",
                    self.tables.sb.inodes
                ),
            ));
        }
        let uid = self.id(uid_index, number)?;
        let gid = self.id(gid_index, number)?;
        let inode = Inode {
            reference: r,
            kind: Kind::Fifo, // set for every type by its reader
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
        Ok((t, inode))
    }

    /// The xattr set an inode names, if it names one that exists.
    fn xattr_of(&self, x: u32, number: u32) -> Result<Option<u32>, FormatError> {
        if x == NO_XATTR {
            return Ok(None);
        }
        match self.xattrs {
            Some(t) if x < t.count => Ok(Some(x)),
            _ => Err(corrupt(
                WHAT,
                format!("inode {number} names xattr set {x}, which does not exist"),
            )),
        }
    }

    /// A basic (1) or extended (8) directory inode.
    fn directory(
        &self,
        c: &mut Cursor<'_, S>,
        t: u16,
        inode: &mut Inode,
    ) -> Result<(), FormatError> {
        inode.kind = Kind::Dir;
        if t == 1 {
            let start_block = c.u32()?;
            inode.nlink = c.u32()?;
            inode.size = u64::from(c.u16()?);
            let offset = c.u16()?;
            let parent = c.u32()?;
            inode.data = InodeData::Dir {
                start_block,
                offset,
                parent,
                index_count: 0,
                index_at: None,
            };
            return Ok(());
        }
        inode.nlink = c.u32()?;
        inode.size = u64::from(c.u32()?);
        let start_block = c.u32()?;
        let parent = c.u32()?;
        let index_count = c.u16()?;
        let offset = c.u16()?;
        inode.xattr = self.xattr_of(c.u32()?, inode.number)?;
        let index_at = (index_count > 0).then(|| c.position());
        inode.data = InodeData::Dir {
            start_block,
            offset,
            parent,
            index_count,
            index_at,
        };
        Ok(())
    }

    /// A basic (2) or extended (9) regular file inode; its block list
    /// follows (read by `layout`).
    fn regular_file(
        &self,
        c: &mut Cursor<'_, S>,
        t: u16,
        inode: &mut Inode,
    ) -> Result<(), FormatError> {
        let number = inode.number;
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
            inode.xattr = self.xattr_of(c.u32()?, number)?;
            (start, size, sparse, fragment, frag_offset)
        };
        if size > i64::MAX as u64 {
            return Err(corrupt(
                WHAT,
                format!("file inode {number} has an impossible size {size}"),
            ));
        }
        if fragment != NO_FRAGMENT && fragment >= self.tables.sb.fragments {
            return Err(corrupt(
                WHAT,
                format!(
                    "file inode {number} uses fragment {fragment}, but the image has {}",
                    self.tables.sb.fragments
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
        Ok(())
    }

    /// A basic (3) or extended (10) symlink inode.
    fn symlink(&self, c: &mut Cursor<'_, S>, t: u16, inode: &mut Inode) -> Result<(), FormatError> {
        inode.nlink = c.u32()?;
        let len = c.u32()?;
        if u64::from(len) > SYMLINK_MAX {
            return Err(corrupt(
                WHAT,
                format!("symlink inode {} has a target of {len} bytes", inode.number),
            ));
        }
        let target = c.bytes(len as usize)?;
        if t == 10 {
            inode.xattr = self.xattr_of(c.u32()?, inode.number)?;
        }
        inode.kind = Kind::Symlink;
        inode.size = u64::from(len);
        inode.data = InodeData::Symlink { target };
        Ok(())
    }
}
