//! File contents of equal size compared: as stored first (size words and
//! raw bytes of each block, and of each pair of fragment blocks once),
//! decompressed only where the stored bytes differ or cannot be compared
//! (different compressors or block sizes), so a difference is never
//! missed and unchanged data is never decompressed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use squashfs_format::FormatError;
use squashfs_reader::archive::StoredTail;
use squashfs_reader::Inode;

use super::error::DiffError;
use super::images::Images;

/// A file on both sides, with the same size, as a thread reads them.
pub(super) struct File<'p> {
    pub im: &'p Images<'p>,
    pub a: &'p Inode,
    pub b: &'p Inode,
    /// Its path, made only for a message.
    pub path: &'p dyn Fn() -> Vec<u8>,
}

/// The comparison of file contents between two images (what the
/// threads share).
pub(super) struct Contents {
    /// Same compressor and block size: equal stored blocks hold equal data.
    as_stored: bool,
    block_size: u64,
    /// Pairs of fragment blocks (A's index, B's) already compared as
    /// stored: whether their stored bytes are equal.
    fragments: Mutex<HashMap<(u32, u32), bool>>,
    stored: AtomicU64,
    decompressed: AtomicU64,
}

/// A thread's buffers, and the last pair of fragment blocks it compared
/// (files in walk order mostly share them).
#[derive(Default)]
pub(super) struct Bufs {
    a: Vec<u8>,
    b: Vec<u8>,
    last_fragments: Option<((u32, u32), bool)>,
}

impl Contents {
    pub fn new(sa: &squashfs_format::Superblock, sb: &squashfs_format::Superblock) -> Self {
        Contents {
            as_stored: sa.compressor == sb.compressor && sa.block_size == sb.block_size,
            block_size: u64::from(sa.block_size.max(sb.block_size)),
            fragments: Mutex::new(HashMap::new()),
            stored: AtomicU64::new(0),
            decompressed: AtomicU64::new(0),
        }
    }

    pub fn stored_bytes(&self) -> u64 {
        self.stored.load(Ordering::Relaxed)
    }

    pub fn decompressed_bytes(&self) -> u64 {
        self.decompressed.load(Ordering::Relaxed)
    }

    /// The error of reading file `f` in image A or B.
    fn failed<'p>(
        &self,
        b_side: bool,
        f: &'p File<'p>,
    ) -> impl FnOnce(FormatError) -> DiffError + 'p {
        let image = if b_side { f.im.b_name } else { f.im.a_name }.to_string();
        move |error| DiffError::Read {
            image,
            path: String::from_utf8_lossy(&(f.path)()).into_owned(),
            error,
        }
    }

    /// Whether the contents of a file pair of equal size differ.
    pub fn differ(&self, f: &File<'_>, bufs: &mut Bufs) -> Result<bool, DiffError> {
        let size = f.a.size;
        if !self.as_stored {
            return self.decompressed_differ(f, 0, size, bufs);
        }
        let sa = f.im.a.stored_data(f.a).map_err(self.failed(false, f))?;
        let sb = f.im.b.stored_data(f.b).map_err(self.failed(true, f))?;
        if sa.blocks.len() != sb.blocks.len() || sa.tail.is_some() != sb.tail.is_some() {
            return self.decompressed_differ(f, 0, size, bufs);
        }
        let bs = self.block_size;
        for (k, (&(pa, wa), &(pb, wb))) in sa.blocks.iter().zip(&sb.blocks).enumerate() {
            if wa == 0 && wb == 0 {
                continue; // both sparse: zeros
            }
            if wa == wb {
                let x =
                    f.im.a
                        .stored_bytes(pa, wa, &mut bufs.a)
                        .map_err(self.failed(false, f))?;
                let y =
                    f.im.b
                        .stored_bytes(pb, wb, &mut bufs.b)
                        .map_err(self.failed(true, f))?;
                self.stored
                    .fetch_add((x.len() + y.len()) as u64, Ordering::Relaxed);
                if x == y {
                    continue;
                }
            }
            let from = k as u64 * bs;
            if self.decompressed_differ(f, from, (from + bs).min(size), bufs)? {
                return Ok(true);
            }
        }
        match (sa.tail, sb.tail) {
            (Some(ta), Some(tb)) => {
                if ta.offset == tb.offset && self.same_fragment(f, ta, tb, bufs)? {
                    return Ok(false);
                }
                let from = sa.blocks.len() as u64 * bs;
                self.decompressed_differ(f, from, size, bufs)
            }
            _ => Ok(false),
        }
    }

    /// Whether two fragment blocks are stored alike (compared once per
    /// pair).
    fn same_fragment(
        &self,
        f: &File<'_>,
        ta: StoredTail,
        tb: StoredTail,
        bufs: &mut Bufs,
    ) -> Result<bool, DiffError> {
        let key = (ta.fragment, tb.fragment);
        if let Some((k, same)) = bufs.last_fragments {
            if k == key {
                return Ok(same);
            }
        }
        let known = self
            .fragments
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        let same = match known {
            Some(same) => same,
            None => {
                let same = self.fragments_alike(f, key, bufs)?;
                self.fragments
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, same);
                same
            }
        };
        bufs.last_fragments = Some((key, same));
        Ok(same)
    }

    /// Reads and compares fragment blocks `key` as stored.
    fn fragments_alike(
        &self,
        f: &File<'_>,
        key: (u32, u32),
        bufs: &mut Bufs,
    ) -> Result<bool, DiffError> {
        let (sa, wa) =
            f.im.a
                .fragment_block(key.0)
                .map_err(self.failed(false, f))?;
        let (sb, wb) = f.im.b.fragment_block(key.1).map_err(self.failed(true, f))?;
        if wa != wb {
            return Ok(false);
        }
        let x =
            f.im.a
                .stored_bytes(sa, wa, &mut bufs.a)
                .map_err(self.failed(false, f))?;
        let y =
            f.im.b
                .stored_bytes(sb, wb, &mut bufs.b)
                .map_err(self.failed(true, f))?;
        self.stored
            .fetch_add((x.len() + y.len()) as u64, Ordering::Relaxed);
        Ok(x == y)
    }

    /// Whether bytes `from..to` of the pair differ, read decompressed.
    fn decompressed_differ(
        &self,
        f: &File<'_>,
        from: u64,
        to: u64,
        bufs: &mut Bufs,
    ) -> Result<bool, DiffError> {
        let la = f.im.a.layout(f.a).map_err(self.failed(false, f))?;
        let lb = f.im.b.layout(f.b).map_err(self.failed(true, f))?;
        let mut at = from;
        while at < to {
            let n = (to - at).min(self.block_size) as usize;
            for buf in [&mut bufs.a, &mut bufs.b] {
                if buf.len() < n {
                    buf.resize(n, 0);
                }
            }
            let (x, y) = (&mut bufs.a[..n], &mut bufs.b[..n]);
            let ra = f.im.a.read(&la, at, x).map_err(self.failed(false, f))?;
            let rb = f.im.b.read(&lb, at, y).map_err(self.failed(true, f))?;
            self.decompressed
                .fetch_add((ra + rb) as u64, Ordering::Relaxed);
            if ra != n || rb != n || x != y {
                return Ok(true);
            }
            at += n as u64;
        }
        Ok(false)
    }
}
