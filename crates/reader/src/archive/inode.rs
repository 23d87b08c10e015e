//! Inodes: their kinds and what each type holds (read by
//! `inode_table.rs`).

use squashfs_format::FormatError;

use super::stream::Position;

/// A reference to an inode: the offset of its metadata block from the start
/// of the inode table (upper 32 of 48 bits) and its offset in that block.
pub type InodeRef = u64;

/// Longest symlink target the kernel accepts (PAGE_SIZE).
pub const SYMLINK_MAX: u64 = 4096;

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

/// What a regular file's inode says of its data: where its full blocks
/// start, where the list of their size words is, how many there are, and
/// the fragment block and offset of its tail, when a fragment holds one.
pub(super) struct FileShape {
    pub blocks_start: u64,
    pub list_at: Position,
    pub count: u64,
    pub tail: Option<(u32, u32)>,
}

impl Inode {
    /// The shape of this regular file's data with blocks of `block_size`
    /// bytes (a file whose size is a whole number of blocks has no tail,
    /// whatever its fragment field says).
    pub(super) fn file_shape(&self, block_size: u32) -> Result<FileShape, FormatError> {
        let InodeData::File {
            blocks_start,
            fragment,
            frag_offset,
            list_at,
            ..
        } = self.data
        else {
            return Err(FormatError::Io("not a regular file".into()));
        };
        let bs = u64::from(block_size);
        let (count, tail) = if fragment == NO_FRAGMENT || self.size.is_multiple_of(bs) {
            (self.size.div_ceil(bs), None)
        } else {
            (self.size / bs, Some((fragment, frag_offset)))
        };
        Ok(FileShape {
            blocks_start,
            list_at,
            count,
            tail,
        })
    }

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
