//! The call's images: one record per distinct image file (however many
//! mounts use it), and, for each mount of the plan, the indices of its
//! images. Every stage after "open and route" works on these records: the
//! FUSE stage and the kernel instances fill in their instances, the attach
//! stage takes one instance per mount point, and `--verbose` reports from
//! them.

use std::os::fd::OwnedFd;

use crate::image::Image;

/// How an image is mounted. (Cached FUSE instances, or another image
/// format, are one more variant here.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mounting {
    /// The kernel's squashfs on a loop device.
    Kernel { cache: Cache },
    /// A FUSE server of the caller's, started for this launch.
    Fuse,
}

/// Whether an instance may be kept in the image cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    /// Yes: caching is on for this launch, the image's path is open to
    /// everyone, and it is not on a FUSE file system.
    Kept,
    /// No, and why (for `--verbose`).
    Private(&'static str),
}

/// What the kernel instances stage did for one image (for `--verbose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Clones of an instance the cache held (or another launch made
    /// meanwhile).
    Reused,
    /// A new instance, now in the cache.
    Cached,
    /// A new instance for this launch only, and why.
    Private(NotCached),
}

/// Why a new instance is not in the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCached {
    /// The image may not be cached (its record says why).
    NotCacheable,
    /// The cache is not in use for this launch (off, or unavailable).
    NoCache,
    /// The cache did not take it (no room, or it could not be stored).
    Refused,
}

/// One distinct image file of the call.
pub struct Record {
    pub image: Image,
    pub mounting: Mounting,
    /// How many detached mounts of it the call needs: one for each mount
    /// (or union layer) that uses it.
    pub copies: usize,
    /// The subject (`image:mountpoint`) of the first mount that uses it.
    pub subject: String,
    /// Which way it was routed and why (`--verbose`).
    pub route: String,
    /// Its detached mounts once made (`copies` of them): each mount that
    /// uses it takes one.
    pub instances: Vec<OwnedFd>,
    /// What the kernel instances stage did for it.
    pub outcome: Option<Outcome>,
}

impl Record {
    pub fn is_kernel(&self) -> bool {
        matches!(self.mounting, Mounting::Kernel { .. })
    }

    pub fn is_fuse(&self) -> bool {
        self.mounting == Mounting::Fuse
    }

    /// May its instance be kept in the image cache?
    pub fn cacheable(&self) -> bool {
        self.mounting == Mounting::Kernel { cache: Cache::Kept }
    }
}

/// The records, and each mount's images by index into them.
#[derive(Default)]
pub struct Images {
    pub records: Vec<Record>,
    /// For each mount of the plan, in plan order: the indices of its
    /// images, top first (none for a bind mount).
    pub layers: Vec<Vec<usize>>,
}

impl Images {
    /// The record of the file (`dev`, `ino`), if the call has it.
    pub fn find(&self, dev: u64, ino: u64) -> Option<usize> {
        self.records
            .iter()
            .position(|r| (r.image.id.dev, r.image.id.ino) == (dev, ino))
    }

    /// The next mount of the plan uses the images `indices`, top first.
    pub fn add_mount(&mut self, indices: Vec<usize>) {
        for &i in &indices {
            self.records[i].copies += 1;
        }
        self.layers.push(indices);
    }

    /// One instance of each image of mount `k` (of the plan), top first,
    /// taken from their records.
    pub fn take_layers(&mut self, k: usize) -> Option<Vec<OwnedFd>> {
        let mut out = Vec::with_capacity(self.layers[k].len());
        for &i in &self.layers[k] {
            out.push(self.records[i].instances.pop()?);
        }
        Some(out)
    }
}
