//! Inodes: their kinds, what each type holds, and how one is read from
//! the inode table (owner ids resolved through the id table).

use std::sync::Arc;

use squashfs_format::FormatError;

use super::stream::{Cursor, Position};
use super::{corrupt, Archive};
use crate::table::Source;

/// A reference to an inode: the offset of its metadata block from the start
/// of the inode table (upper 32 of 48 bits) and its offset in that block.
pub type InodeRef = u64;

/// Longest symlink target the kernel accepts (PAGE_SIZE).
pub const SYMLINK_MAX: u64 = 4096;

const WHAT: &str = "inode table";
/// A regular file's fragment index when its tail is in no fragment.
pub(super) const NO_FRAGMENT: u32 = u32::MAX;
/// An inode's xattr index when it has no extended attributes.
pub(super) const NO_XATTR: u32 = u32::MAX;

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

impl<S: Source> Archive<S> {
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
        if let Some(id) = inode.xattr {
            // As the kernel does when it reads an inode with xattrs.
            inode.xattr_size = self.xattr_entry(id)?.2;
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
        if number == 0 || number > self.sb.inodes {
            return Err(corrupt(
                WHAT,
                format!("inode number {number} is outside 1..={}", self.sb.inodes),
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
        match &self.xattrs {
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
