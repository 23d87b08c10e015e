//! Reading an image's metadata ahead, in large sequential reads.
//!
//! The tables a walk of the tree needs (inode, directory, fragment,
//! export, id and xattr tables) lie together at the end of an image, from
//! the inode table's start to `bytes_used`: the metadata region. Read on
//! demand, each 8 KiB metadata block is two small reads at scattered
//! offsets, each waiting on the disk or on a cluster file system's client.
//! [`ReadAhead`] wraps a [`Source`]: once planned, [`ReadAhead::fill`] reads
//! the region's first `budget` bytes in reads of [`CHUNK`] bytes, in order,
//! into memory it holds (it asks nobody to cache anything: the bytes are
//! its own, so it works wherever the image lives, also on a FUSE file
//! system whose client ignores hints), and every read that falls in a
//! chunk already held is served from memory. Reads it cannot serve go to
//! the wrapped source as before.
//!
//! Bounds: the plan is made once, over a region the superblock checks put
//! inside the image, and holds at most `budget` bytes; `fill` reads each
//! planned chunk
//! once, stops at the first failed read or when asked to, and never reads
//! past the image's end. A corrupt superblock can make the region cover
//! the whole image: the budget still bounds what is read and held. What is
//! held is the image's bytes as stored; every structure in them is checked
//! by the reader when it is used, exactly as if it had been read then.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use squashfs_format::FormatError;

use crate::table::Source;

/// The size of each read ahead (and of what is held, chunk by chunk).
pub const CHUNK: usize = 256 << 10;

/// A source whose metadata region is read ahead; see the module.
pub struct ReadAhead<S> {
    inner: S,
    plan: OnceLock<Plan>,
    stop: AtomicBool,
    /// Reads served from the chunks held (for tests and reports).
    served: AtomicU64,
}

struct Plan {
    start: u64,
    /// The end of what is planned (at most the region's end).
    end: u64,
    chunks: Box<[OnceLock<Box<[u8]>>]>,
}

impl Plan {
    /// Copies `buf.len()` bytes at `offset` from the chunks held; false if
    /// a byte of it lies outside the plan or in a chunk not read yet.
    fn copy(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(buf.len() as u64) else {
            return false;
        };
        if offset < self.start || end > self.end {
            return false;
        }
        let mut at = offset;
        let mut done = 0;
        while done < buf.len() {
            let rel = at - self.start;
            let i = (rel / CHUNK as u64) as usize;
            let Some(chunk) = self.chunks.get(i).and_then(OnceLock::get) else {
                return false;
            };
            let from = (rel % CHUNK as u64) as usize;
            let n = (buf.len() - done).min(chunk.len().saturating_sub(from));
            if n == 0 {
                return false;
            }
            buf[done..done + n].copy_from_slice(&chunk[from..from + n]);
            done += n;
            at += n as u64;
        }
        true
    }
}

impl<S: Source> ReadAhead<S> {
    /// Wraps `inner`; nothing is read ahead until [`ReadAhead::plan`] and
    /// [`ReadAhead::fill`].
    pub fn new(inner: S) -> Self {
        ReadAhead {
            inner,
            plan: OnceLock::new(),
            stop: AtomicBool::new(false),
            served: AtomicU64::new(0),
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Plans to read `region` ahead (clipped to the source): at most
    /// `budget` bytes of it, from its start. Only the first plan counts.
    /// Returns the bytes planned.
    pub fn plan(&self, region: Range<u64>, budget: usize) -> u64 {
        let p = self.plan.get_or_init(|| {
            let end = region.end.min(self.inner.len());
            let start = region.start.min(end);
            let end = end.min(start.saturating_add(budget as u64));
            let n = (end - start).div_ceil(CHUNK as u64) as usize;
            Plan {
                start,
                end,
                chunks: (0..n).map(|_| OnceLock::new()).collect(),
            }
        });
        p.end - p.start
    }

    /// Reads what was planned, chunk by chunk in order, one read each;
    /// returns the bytes read. Ends early, with what it read so far, when
    /// [`ReadAhead::stop`] was called; fails on the first read that fails
    /// (reads of the region then go to the source, which reports it).
    pub fn fill(&self) -> Result<u64, FormatError> {
        let Some(p) = self.plan.get() else {
            return Ok(0);
        };
        let mut read = 0;
        for (i, slot) in p.chunks.iter().enumerate() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let at = p.start + (i * CHUNK) as u64;
            let len = (p.end - at).min(CHUNK as u64) as usize;
            let mut bytes = vec![0u8; len];
            self.inner.read_at(at, &mut bytes)?;
            read += len as u64;
            let _ = slot.set(bytes.into_boxed_slice());
        }
        Ok(read)
    }

    /// Asks a running [`ReadAhead::fill`] to end after its current read.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The bytes held in memory now.
    pub fn held(&self) -> usize {
        self.plan.get().map_or(0, |p| {
            p.chunks
                .iter()
                .filter_map(OnceLock::get)
                .map(|c| c.len())
                .sum()
        })
    }

    /// How many reads were served from the chunks held.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

impl<S: Source> Source for ReadAhead<S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        if let Some(p) = self.plan.get() {
            if p.copy(offset, buf) {
                self.served.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        }
        self.inner.read_at(offset, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_what_it_holds_and_no_more() {
        let bytes: Vec<u8> = (0..(3 * CHUNK + 100)).map(|i| (i % 251) as u8).collect();
        let ra = ReadAhead::new(bytes.clone());
        // Nothing planned: every read goes through.
        let mut b = [0u8; 10];
        ra.read_at(5, &mut b).unwrap();
        assert_eq!(ra.served(), 0);
        // A region past the source's end is clipped to it; the budget
        // bounds what is planned, read and held.
        assert_eq!(ra.plan(50..u64::MAX, 2 * CHUNK + 7), 2 * CHUNK as u64 + 7);
        assert_eq!(ra.held(), 0);
        assert_eq!(ra.fill().unwrap(), 2 * CHUNK as u64 + 7);
        assert_eq!(ra.held(), 2 * CHUNK + 7);
        // Across the chunks' boundary, from memory.
        let mut b = vec![0u8; 300];
        let at = 50 + CHUNK as u64 - 100;
        ra.read_at(at, &mut b).unwrap();
        assert_eq!(&b[..], &bytes[at as usize..at as usize + 300]);
        assert_eq!(ra.served(), 1);
        // Past the plan, and before it: from the source.
        ra.read_at(50 + 2 * CHUNK as u64, &mut b).unwrap();
        ra.read_at(0, &mut b[..20]).unwrap();
        assert_eq!(ra.served(), 1);
        // Past the source's end: an error, as before.
        assert!(ra.read_at(bytes.len() as u64 - 5, &mut b).is_err());
        // A second plan changes nothing.
        assert_eq!(ra.plan(0..10, 1), 2 * CHUNK as u64 + 7);
    }

    #[test]
    fn a_zero_budget_reads_nothing_and_a_stop_ends_it() {
        let ra = ReadAhead::new(vec![7u8; 5 * CHUNK]);
        assert_eq!(ra.plan(0..u64::MAX, 0), 0);
        assert_eq!(ra.fill().unwrap(), 0);
        let ra = ReadAhead::new(vec![7u8; 5 * CHUNK]);
        ra.plan(0..u64::MAX, 5 * CHUNK);
        ra.stop();
        assert_eq!(ra.fill().unwrap(), 0);
        assert_eq!(ra.held(), 0);
    }
}
