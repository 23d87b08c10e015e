//! READDIR and READDIRPLUS: a directory's entries from an offset, with
//! attributes for the entries `plus` says (subdirectories always, files
//! while the workload looks them up).

use rustix::io::Errno;
use squashfs_reader::table::Source;
use squashfs_reader::{InodeData, InodeRef, Kind};

use crate::proto::{self, op, Attr, Reply};
use crate::server::{Fs, TTL};

impl<S: Source> Fs<S> {
    pub(crate) fn readdir(
        &self,
        h: &proto::InHeader,
        offset: u64,
        limit: usize,
        out: &mut Reply,
    ) -> Result<(), Errno> {
        let dir = self.inode(h.nodeid)?;
        let InodeData::Dir { parent, .. } = dir.data else {
            return Err(Errno::NOTDIR);
        };
        let listing = self.archive.listing(&dir).map_err(|e| self.corrupt(&e))?;
        let plus = h.opcode == op::READDIRPLUS;
        let files = plus && self.plus.for_listing();
        let mut bare_files = false;
        // Offsets: 0 ".", 1 "..", 2 + k the k-th entry; each entry carries
        // the offset of the next.
        let total = listing.entries.len() as u64 + 2;
        let mut at = offset;
        while at < total {
            let (name, ino, dtype, node): (&[u8], u64, u32, Option<InodeRef>) = match at {
                0 => (b".", u64::from(dir.number), Kind::Dir.dtype(), None),
                1 => (b"..", u64::from(parent), Kind::Dir.dtype(), None),
                k => {
                    let e = &listing.entries[(k - 2) as usize];
                    (&e.name, u64::from(e.number), e.kind.dtype(), Some(e.inode))
                }
            };
            if plus {
                if out.len() + Reply::direntplus_size(name) > limit {
                    break;
                }
                // Attributes for subdirectories (a walk needs them to
                // descend), for files only while the workload looks them up
                // (`plus`). Others, ".", "..", and entries whose inode cannot
                // be read get node id 0: the kernel looks them up when
                // needed, and that lookup reports any error.
                let node = node.filter(|_| dtype == Kind::Dir.dtype() || files);
                bare_files |= node.is_none() && at >= 2 && dtype != Kind::Dir.dtype();
                let inode = node.and_then(|r| match self.archive.inode(r) {
                    Ok(i) => Some(i),
                    Err(e) => {
                        self.corrupt(&e);
                        None
                    }
                });
                match &inode {
                    Some(i) => out.entry(self.nodeid(i.reference), TTL, &self.attr(i)),
                    None => {
                        out.entry(0, 0, &Attr::default());
                    }
                }
                let (ino, dtype) = match &inode {
                    Some(i) => (u64::from(i.number), i.kind.dtype()),
                    None => (ino, dtype),
                };
                if !out.dirent(usize::MAX, ino, at + 1, dtype, name) {
                    break;
                }
            } else if !out.dirent(limit, ino, at + 1, dtype, name) {
                break;
            }
            at += 1;
        }
        if bare_files {
            self.plus.listed(h.nodeid);
        }
        Ok(())
    }
}
