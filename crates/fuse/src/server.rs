//! The read-only file system: FUSE requests answered from a
//! [`squashfs_reader::Archive`], by several worker threads.
//!
//! Node ids are derived from inode references (root = 1, any other inode
//! = reference + 2), so the server keeps no per-node state and FORGET is a
//! no-op; hard links share one node id. The tree never changes, so entries
//! and attributes get long timeouts, files keep their page cache
//! (FOPEN_KEEP_CACHE), directories are cached by the kernel
//! (FOPEN_CACHE_DIR), lookups of missing names are cached as negative
//! entries, and readdirplus answers a directory's lookups in one request.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustix::io::Errno;
use squashfs_reader::table::Source;
use squashfs_reader::{Archive, FormatError, Inode, InodeData, InodeRef, Kind};

use crate::proto::{self, op, Attr, Reply};

/// Entry and attribute timeout (seconds): the tree never changes.
pub const TTL: u64 = 365 * 24 * 3600;
/// Largest read (1 MiB, also the `max_pages` asked for).
pub const MAX_READ: usize = 1 << 20;
/// Request buffer: the kernel wants room for max_write (4 KiB here) plus
/// headers, and at least 8 KiB.
const REQUEST_BUFFER: usize = 64 << 10;

pub struct Fs<S> {
    pub archive: Archive<S>,
    /// The image's path, for messages.
    pub name: String,
    reported: AtomicBool,
    /// The kernel supports zero-message opens: OPEN and OPENDIR are
    /// answered ENOSYS once, and the kernel then opens files with
    /// FOPEN_KEEP_CACHE and directories with FOPEN_KEEP_CACHE |
    /// FOPEN_CACHE_DIR without asking (and sends no RELEASE).
    zero_open: AtomicBool,
    /// Which entries READDIRPLUS gives attributes for (see `plus`).
    pub plus: crate::plus::Plus,
    /// Every file shown as owned by this user and group (`--owner`), not by
    /// the ids stored in the image.
    pub owner: Option<(u32, u32)>,
    /// Called once, after the first corruption is reported (a detached
    /// server marks itself: `sys::mark_corrupt`).
    pub on_corrupt: Option<fn()>,
}

/// What every report of a corrupt image says after the image's name and
/// the reader's reason (`--report` looks for it in a log).
pub const CORRUPT_MARK: &str = "; the image is corrupt: ";

/// What a worker tells its pool (see `workers`): it took a request read
/// from `dev` (now busy), and it answered it (idle again).
pub trait Busy {
    fn taken(&self, dev: &OwnedFd);
    fn done(&self);
}

/// A single worker: nothing to tell.
pub struct Alone;
impl Busy for Alone {
    fn taken(&self, _: &OwnedFd) {}
    fn done(&self) {}
}

/// How a worker loop ended.
pub enum End {
    /// The connection is gone (unmounted or aborted).
    Unmounted,
    /// Reading or writing /dev/fuse failed otherwise.
    Failed(Errno),
}

impl<S: Source> Fs<S> {
    pub fn new(archive: Archive<S>, name: String) -> Self {
        Fs {
            archive,
            name,
            reported: AtomicBool::new(false),
            zero_open: AtomicBool::new(false),
            plus: crate::plus::Plus::new(),
            owner: None,
            on_corrupt: None,
        }
    }

    fn root(&self) -> InodeRef {
        self.archive.root()
    }

    pub(crate) fn nodeid(&self, r: InodeRef) -> u64 {
        if r == self.root() {
            1
        } else {
            r + 2
        }
    }

    fn reference(&self, nodeid: u64) -> Option<InodeRef> {
        match nodeid {
            1 => Some(self.root()),
            0 => None,
            n => Some(n - 2),
        }
    }

    /// Reports the first corruption (see `log`) and calls `on_corrupt`;
    /// returns EIO.
    pub(crate) fn corrupt(&self, e: &FormatError) -> Errno {
        if !self.reported.swap(true, Ordering::Relaxed) {
            crate::log::message(
                crate::log::Level::Error,
                &format!(
                    "squashfs-mount: {}: {e}{CORRUPT_MARK}reads of the affected files fail with EIO ('sqfs check {}' names them)",
                    self.name, self.name
                ),
            );
            if let Some(mark) = self.on_corrupt {
                mark();
            }
        }
        Errno::IO
    }

    pub(crate) fn inode(&self, nodeid: u64) -> Result<Arc<Inode>, Errno> {
        let r = self.reference(nodeid).ok_or(Errno::INVAL)?;
        self.archive.inode(r).map_err(|e| self.corrupt(&e))
    }

    pub(crate) fn attr(&self, i: &Inode) -> Attr {
        Attr {
            ino: u64::from(i.number),
            size: i.size,
            blocks: i.blocks(),
            time: u64::from(i.mtime),
            mode: i.mode(),
            nlink: i.nlink,
            uid: self.owner.map_or(i.uid, |o| o.0),
            gid: self.owner.map_or(i.gid, |o| o.1),
            rdev: i.rdev(),
            blksize: self.archive.superblock().block_size,
        }
    }

    /// Handles one request; `Ok(false)` when no reply is due (FORGET...).
    fn handle(&self, h: &proto::InHeader, arg: &[u8], out: &mut Reply) -> Result<bool, Errno> {
        match h.opcode {
            op::INIT => self.init(arg, out),
            op::DESTROY | op::RELEASE | op::RELEASEDIR => Ok(true),
            op::FORGET | op::BATCH_FORGET | op::INTERRUPT => Ok(false),
            op::LOOKUP => self.lookup(h, arg, out),
            op::GETATTR => {
                let i = self.inode(h.nodeid)?;
                out.u64(TTL);
                out.u32(0);
                out.u32(0);
                out.attr(&self.attr(&i));
                Ok(true)
            }
            op::READLINK => {
                let i = self.inode(h.nodeid)?;
                match &i.data {
                    InodeData::Symlink { target } => out.bytes(target),
                    _ => return Err(Errno::INVAL),
                }
                Ok(true)
            }
            op::OPEN | op::OPENDIR => self.open(h, arg, out),
            op::READ => self.read(h, arg, out),
            op::READDIR | op::READDIRPLUS => {
                let (_, offset, size) = proto::read_in(arg).ok_or(Errno::INVAL)?;
                self.readdir(h, offset, (size as usize).min(MAX_READ), out)?;
                Ok(true)
            }
            op::STATFS => self.statfs(out),
            op::GETXATTR | op::LISTXATTR => self.xattr(h, arg, out),
            o if op::MODIFYING.contains(&o) => Err(Errno::ROFS),
            _ => Err(Errno::NOSYS),
        }
    }

    /// INIT: the protocol version and what this server wants.
    fn init(&self, arg: &[u8], out: &mut Reply) -> Result<bool, Errno> {
        let i = proto::init_in(arg).ok_or(Errno::INVAL)?;
        if i.major < 7 {
            return Err(Errno::PROTO);
        }
        out.u32(proto::KERNEL_VERSION);
        out.u32(proto::KERNEL_MINOR_VERSION);
        if i.major > 7 {
            // The kernel retries with 7.x.
            return Ok(true);
        }
        let want = proto::init::ASYNC_READ
            | proto::init::DO_READDIRPLUS
            | proto::init::PARALLEL_DIROPS
            | proto::init::MAX_PAGES
            | proto::init::CACHE_SYMLINKS;
        let zero = proto::init::NO_OPEN_SUPPORT | proto::init::NO_OPENDIR_SUPPORT;
        self.zero_open
            .store(i.flags & zero == zero, Ordering::Relaxed);
        out.u32(i.max_readahead);
        out.u32(i.flags & want);
        out.u16(64); // max_background
        out.u16(48); // congestion_threshold
        out.u32(4096); // max_write
        out.u32(1_000_000_000); // time_gran: whole seconds
        out.u16((MAX_READ / 4096) as u16); // max_pages
        out.u16(0); // map_alignment
        out.u32(0); // flags2
        out.u32(0); // max_stack_depth
        out.bytes(&[0u8; 24]); // unused
        Ok(true)
    }

    fn lookup(&self, h: &proto::InHeader, arg: &[u8], out: &mut Reply) -> Result<bool, Errno> {
        let name = proto::c_name(arg).ok_or(Errno::INVAL)?;
        let dir = self.inode(h.nodeid)?;
        if dir.kind != Kind::Dir {
            return Err(Errno::NOTDIR);
        }
        match self
            .archive
            .lookup(&dir, name)
            .map_err(|e| self.corrupt(&e))?
        {
            Some(e) => {
                if e.kind != Kind::Dir {
                    self.plus.looked_up_file(h.nodeid);
                }
                let i = self.archive.inode(e.inode).map_err(|e| self.corrupt(&e))?;
                out.entry(self.nodeid(e.inode), TTL, &self.attr(&i));
            }
            // A negative entry, cached by the kernel for TTL.
            None => out.entry(0, TTL, &Attr::default()),
        }
        Ok(true)
    }

    fn open(&self, h: &proto::InHeader, arg: &[u8], out: &mut Reply) -> Result<bool, Errno> {
        let flags = proto::open_flags(arg).ok_or(Errno::INVAL)?;
        if flags & 3 != 0 {
            return Err(Errno::ROFS);
        }
        if self.zero_open.load(Ordering::Relaxed) {
            return Err(Errno::NOSYS);
        }
        let i = self.inode(h.nodeid)?;
        let open_flags = if h.opcode == op::OPENDIR {
            if i.kind != Kind::Dir {
                return Err(Errno::NOTDIR);
            }
            proto::FOPEN_KEEP_CACHE | proto::FOPEN_CACHE_DIR
        } else {
            if i.kind == Kind::Dir {
                return Err(Errno::ISDIR);
            }
            proto::FOPEN_KEEP_CACHE
        };
        out.u64(0); // fh: nothing to keep per open file
        out.u32(open_flags);
        out.u32(0);
        Ok(true)
    }

    fn read(&self, h: &proto::InHeader, arg: &[u8], out: &mut Reply) -> Result<bool, Errno> {
        let (_, offset, size) = proto::read_in(arg).ok_or(Errno::INVAL)?;
        let i = self.inode(h.nodeid)?;
        if i.kind != Kind::File {
            return Err(Errno::INVAL);
        }
        let layout = self.archive.layout(&i).map_err(|e| self.corrupt(&e))?;
        let size = (size as usize).min(MAX_READ);
        let start = out.buf.len();
        out.buf.resize(start + size, 0);
        match self.archive.read(&layout, offset, &mut out.buf[start..]) {
            Ok(n) => out.buf.truncate(start + n),
            Err(e) => return Err(self.corrupt(&e)),
        }
        Ok(true)
    }

    fn statfs(&self, out: &mut Reply) -> Result<bool, Errno> {
        let sb = self.archive.superblock();
        let bs = u64::from(sb.block_size);
        out.u64(sb.bytes_used.div_ceil(bs)); // blocks
        out.u64(0); // bfree
        out.u64(0); // bavail
        out.u64(u64::from(sb.inodes)); // files
        out.u64(0); // ffree
        out.u32(sb.block_size); // bsize
        out.u32(squashfs_reader::archive::NAME_MAX as u32); // namelen
        out.u32(sb.block_size); // frsize
        out.u32(0);
        out.bytes(&[0u8; 24]);
        Ok(true)
    }

    /// GETXATTR (one value) and LISTXATTR (every name).
    fn xattr(&self, h: &proto::InHeader, arg: &[u8], out: &mut Reply) -> Result<bool, Errno> {
        let (size, rest) = proto::getxattr_in(arg).ok_or(Errno::INVAL)?;
        let i = self.inode(h.nodeid)?;
        let all = self.archive.xattrs(&i).map_err(|e| self.corrupt(&e))?;
        let value = if h.opcode == op::GETXATTR {
            let name = proto::c_name(rest).ok_or(Errno::INVAL)?;
            all.into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v)
                .ok_or(Errno::NODATA)?
        } else {
            let mut list = Vec::new();
            for (n, _) in all {
                list.extend_from_slice(&n);
                list.push(0);
            }
            list
        };
        if size == 0 {
            out.u32(value.len() as u32);
            out.u32(0);
        } else if value.len() > size as usize {
            return Err(Errno::RANGE);
        } else {
            out.bytes(&value);
        }
        Ok(true)
    }

    /// Answers one request as read from /dev/fuse: the reply to write, or
    /// `None` if the request is malformed or wants no reply (fuzzing and
    /// tests use this without a kernel).
    pub fn respond<'a>(&self, request: &[u8], out: &'a mut Reply) -> Option<&'a [u8]> {
        let (h, arg) = proto::parse(request)?;
        out.start();
        match self.handle(&h, arg, out) {
            Ok(true) => Some(out.finish(h.unique, 0)),
            Ok(false) => None,
            Err(e) => Some(out.finish(h.unique, e.raw_os_error())),
        }
    }

    /// Serves requests read from `dev` until the connection ends. `pool`
    /// is told when a request was taken and when its reply is written.
    pub fn serve(&self, dev: &OwnedFd, pool: &dyn Busy) -> End {
        let mut buf = vec![0u8; REQUEST_BUFFER];
        let mut out = Reply::new(MAX_READ + 4096);
        loop {
            let n = match rustix::io::read(dev, &mut buf) {
                // Not a FUSE device (end of file): nothing will ever come.
                Ok(0) => return End::Failed(Errno::NODEV),
                Ok(n) => n,
                // Interrupted, or a request that was aborted before we got it.
                Err(Errno::INTR) | Err(Errno::NOENT) => continue,
                Err(Errno::AGAIN) => {
                    let mut p = [rustix::event::PollFd::new(
                        dev,
                        rustix::event::PollFlags::IN,
                    )];
                    let _ = rustix::event::poll(&mut p, None);
                    continue;
                }
                // Unmounted, or aborted (ECONNABORTED if the kernel was
                // asked for it; this server does not ask).
                Err(Errno::NODEV) | Err(Errno::CONNABORTED) => return End::Unmounted,
                Err(e) => return End::Failed(e),
            };
            let Some((h, arg)) = proto::parse(&buf[..n]) else {
                continue;
            };
            pool.taken(dev);
            out.start();
            let reply = match self.handle(&h, arg, &mut out) {
                Ok(true) => Some(out.finish(h.unique, 0)),
                Ok(false) => None,
                Err(e) => Some(out.finish(h.unique, e.raw_os_error())),
            };
            let written = reply.map(|r| rustix::io::write(dev.as_fd(), r));
            pool.done();
            match written {
                None | Some(Ok(_)) | Some(Err(Errno::NOENT)) | Some(Err(Errno::INTR)) => {}
                Some(Err(Errno::NODEV)) | Some(Err(Errno::CONNABORTED)) => return End::Unmounted,
                Some(Err(e)) => return End::Failed(e),
            }
        }
    }
}
