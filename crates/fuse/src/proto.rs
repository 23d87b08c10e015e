//! The parts of the FUSE kernel protocol (linux/fuse.h, 7.x) a read-only
//! file system needs, encoded and decoded by hand: requests are parsed with
//! bounds checks (a short or inconsistent request is refused, never read
//! past), replies are built into a byte buffer and written in one `write`.

pub const KERNEL_VERSION: u32 = 7;
/// The minor version this server speaks (the kernel adapts to the lower one).
pub const KERNEL_MINOR_VERSION: u32 = 38;

pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const READLINK: u32 = 5;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const BATCH_FORGET: u32 = 42;
    pub const READDIRPLUS: u32 = 44;
    /// Operations that would change the file system.
    pub const MODIFYING: [u32; 17] = [
        4, 6, 8, 9, 10, 11, 12, 13, 16, 20, 21, 24, 30, 35, 43, 45, 51,
    ];
}

/// FUSE_INIT flags (fuse_init_in.flags / fuse_init_out.flags).
pub mod init {
    pub const ASYNC_READ: u32 = 1 << 0;
    pub const DO_READDIRPLUS: u32 = 1 << 13;
    pub const NO_OPEN_SUPPORT: u32 = 1 << 17;
    pub const PARALLEL_DIROPS: u32 = 1 << 18;
    pub const MAX_PAGES: u32 = 1 << 22;
    pub const CACHE_SYMLINKS: u32 = 1 << 23;
    pub const NO_OPENDIR_SUPPORT: u32 = 1 << 24;
}

/// fuse_open_out.open_flags.
pub const FOPEN_KEEP_CACHE: u32 = 1 << 1;
pub const FOPEN_CACHE_DIR: u32 = 1 << 3;

pub const IN_HEADER_SIZE: usize = 40;
pub const OUT_HEADER_SIZE: usize = 16;
pub const ATTR_SIZE: usize = 88;
pub const ENTRY_OUT_SIZE: usize = 40 + ATTR_SIZE;
pub const DIRENT_SIZE: usize = 24;

/// The fixed header of every request.
#[derive(Debug, Clone, Copy)]
pub struct InHeader {
    pub len: u32,
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Splits one request read from /dev/fuse into its header and argument
/// bytes; `None` if it is shorter than its header or its length field
/// disagrees with what was read.
pub fn parse(buf: &[u8]) -> Option<(InHeader, &[u8])> {
    let h = InHeader {
        len: le32(buf, 0)?,
        opcode: le32(buf, 4)?,
        unique: le64(buf, 8)?,
        nodeid: le64(buf, 16)?,
    };
    if h.len as usize != buf.len() || buf.len() < IN_HEADER_SIZE {
        return None;
    }
    Some((h, &buf[IN_HEADER_SIZE..]))
}

/// A NUL-terminated name at the start of `arg` (LOOKUP, GETXATTR).
pub fn c_name(arg: &[u8]) -> Option<&[u8]> {
    let end = arg.iter().position(|&b| b == 0)?;
    Some(&arg[..end])
}

pub struct InitIn {
    pub major: u32,
    pub max_readahead: u32,
    pub flags: u32,
}

pub fn init_in(arg: &[u8]) -> Option<InitIn> {
    Some(InitIn {
        major: le32(arg, 0)?,
        max_readahead: le32(arg, 8)?,
        flags: le32(arg, 12)?,
    })
}

/// fuse_read_in (READ, READDIR, READDIRPLUS): (fh, offset, size).
pub fn read_in(arg: &[u8]) -> Option<(u64, u64, u32)> {
    Some((le64(arg, 0)?, le64(arg, 8)?, le32(arg, 16)?))
}

/// fuse_open_in.flags.
pub fn open_flags(arg: &[u8]) -> Option<u32> {
    le32(arg, 0)
}

/// fuse_getxattr_in (GETXATTR, LISTXATTR): (size, rest of the arguments).
pub fn getxattr_in(arg: &[u8]) -> Option<(u32, &[u8])> {
    Some((le32(arg, 0)?, arg.get(8..)?))
}

/// A reply being built: header first, then the payload.
pub struct Reply {
    pub buf: Vec<u8>,
}

/// Attributes of one inode, as fuse_attr carries them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attr {
    pub ino: u64,
    pub size: u64,
    pub blocks: u64,
    pub time: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub blksize: u32,
}

impl Reply {
    pub fn new(capacity: usize) -> Self {
        Reply {
            buf: Vec::with_capacity(capacity),
        }
    }
    pub fn start(&mut self) {
        self.buf.clear();
        self.buf.resize(OUT_HEADER_SIZE, 0);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Payload bytes so far.
    pub fn len(&self) -> usize {
        self.buf.len() - OUT_HEADER_SIZE
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills in the header; the reply is then `self.buf`.
    pub fn finish(&mut self, unique: u64, error: i32) -> &[u8] {
        if error != 0 {
            self.buf.truncate(OUT_HEADER_SIZE);
        }
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_le_bytes());
        self.buf[4..8].copy_from_slice(&(-error).to_le_bytes());
        self.buf[8..16].copy_from_slice(&unique.to_le_bytes());
        &self.buf
    }

    pub fn attr(&mut self, a: &Attr) {
        self.u64(a.ino);
        self.u64(a.size);
        self.u64(a.blocks);
        self.u64(a.time); // atime
        self.u64(a.time); // mtime
        self.u64(a.time); // ctime
        self.u32(0);
        self.u32(0);
        self.u32(0);
        self.u32(a.mode);
        self.u32(a.nlink);
        self.u32(a.uid);
        self.u32(a.gid);
        self.u32(a.rdev);
        self.u32(a.blksize);
        self.u32(0); // flags
    }

    /// fuse_entry_out; `nodeid` 0 with a timeout caches a negative entry.
    pub fn entry(&mut self, nodeid: u64, ttl: u64, a: &Attr) {
        self.u64(nodeid);
        self.u64(0); // generation
        self.u64(ttl); // entry_valid
        self.u64(ttl); // attr_valid
        self.u32(0);
        self.u32(0);
        self.attr(a);
    }

    /// Appends a fuse_dirent if it fits in `limit` payload bytes.
    pub fn dirent(&mut self, limit: usize, ino: u64, off: u64, dtype: u32, name: &[u8]) -> bool {
        let size = (DIRENT_SIZE + name.len()).next_multiple_of(8);
        if self.len() + size > limit {
            return false;
        }
        self.u64(ino);
        self.u64(off);
        self.u32(name.len() as u32);
        self.u32(dtype);
        self.bytes(name);
        self.buf
            .resize(self.buf.len() + (size - DIRENT_SIZE - name.len()), 0);
        true
    }

    /// Size of a fuse_direntplus for `name`.
    pub fn direntplus_size(name: &[u8]) -> usize {
        ENTRY_OUT_SIZE + (DIRENT_SIZE + name.len()).next_multiple_of(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_bounds_checked() {
        assert!(parse(&[]).is_none());
        let mut b = vec![0u8; 48];
        b[0..4].copy_from_slice(&48u32.to_le_bytes());
        b[4..8].copy_from_slice(&op::LOOKUP.to_le_bytes());
        let (h, arg) = parse(&b).unwrap();
        assert_eq!((h.opcode, arg.len()), (op::LOOKUP, 8));
        b[0..4].copy_from_slice(&100u32.to_le_bytes());
        assert!(
            parse(&b).is_none(),
            "length field disagrees with the bytes read"
        );
        b[0..4].copy_from_slice(&20u32.to_le_bytes());
        assert!(parse(&b[..20]).is_none(), "shorter than a header");
        assert_eq!(c_name(b"abc\0def"), Some(&b"abc"[..]));
        assert_eq!(c_name(b"abc"), None);
        assert!(read_in(&[0u8; 19]).is_none());
        assert!(init_in(&[0u8; 15]).is_none());
    }

    #[test]
    fn replies_have_the_kernel_layout() {
        let mut r = Reply::new(256);
        r.start();
        r.entry(5, 10, &Attr::default());
        assert_eq!(r.len(), ENTRY_OUT_SIZE);
        let out = r.finish(77, 0).to_vec();
        assert_eq!(
            u32::from_le_bytes(out[0..4].try_into().unwrap()) as usize,
            OUT_HEADER_SIZE + ENTRY_OUT_SIZE
        );
        assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), 77);
        r.start();
        assert!(r.dirent(64, 1, 1, 4, b"abc"));
        assert_eq!(r.len(), 32);
        assert!(!r.dirent(64, 1, 2, 4, b"0123456789"), "does not fit in 64");
        let out = r.finish(1, 2).to_vec();
        assert_eq!(out.len(), OUT_HEADER_SIZE, "errors carry no payload");
        assert_eq!(i32::from_le_bytes(out[4..8].try_into().unwrap()), -2);
    }
}
