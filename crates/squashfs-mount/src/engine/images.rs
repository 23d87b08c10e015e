//! The call's images: one record per distinct image file (however many
//! mounts use it), and, for each mount of the plan, the indices of its
//! images. Every stage after "open and route" works on these records: the
//! FUSE stage and the kernel instances fill in their instances, the attach
//! stage takes one instance per mount point, and `--verbose` reports from
//! them.

use std::os::fd::OwnedFd;

use crate::cache::Key;
use crate::mounts::image::Image;
use crate::system::Uid;

/// How an image is mounted, and whether its instance may be kept in the
/// image cache. (Another image format, or another way of mounting, is one
/// more variant here.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mounting {
    /// The kernel's squashfs on a loop device: an instance shared by
    /// everyone who can open the file.
    Kernel { cache: Cache },
    /// A FUSE server of the caller's: an instance for the caller alone.
    Fuse { cache: Cache },
}

/// Whether an instance may be kept in the image cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    /// Yes: caching is on for this launch (and for a kernel instance, the
    /// image's path is open to everyone), and the image is not on a FUSE
    /// file system a user or this tool serves (`route::Home`).
    Kept,
    /// No, and why (for `--verbose`).
    Private(&'static str),
}

/// What became of one image's instances (for `--verbose`).
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
    /// What the stage that made its instances did (FUSE or kernel).
    pub outcome: Option<Outcome>,
    /// The pid of the server of its cached FUSE instance (reused or kept),
    /// whose read errors the launch reports (`fuse_report::start_reporter`).
    pub server: Option<u32>,
}

impl Record {
    pub(crate) fn is_kernel(&self) -> bool {
        matches!(self.mounting, Mounting::Kernel { .. })
    }

    pub(crate) fn is_fuse(&self) -> bool {
        matches!(self.mounting, Mounting::Fuse { .. })
    }

    /// Whether its instance may be kept in the image cache, and if not why.
    pub(crate) fn cache(&self) -> Cache {
        match self.mounting {
            Mounting::Kernel { cache } | Mounting::Fuse { cache } => cache,
        }
    }

    /// May its instance be kept in the image cache?
    pub(crate) fn cacheable(&self) -> bool {
        self.cache() == Cache::Kept
    }

    /// Its instance's entry in the image cache: the file's kernel instance,
    /// or `caller`'s FUSE instance of it.
    pub(crate) fn key(&self, caller: Uid) -> Key {
        Key {
            dev: self.image.id.dev,
            ino: self.image.id.ino,
            fuse_user: self.is_fuse().then_some(caller),
        }
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
    pub(crate) fn find(&self, dev: u64, ino: u64) -> Option<usize> {
        self.records
            .iter()
            .position(|r| (r.image.id.dev, r.image.id.ino) == (dev, ino))
    }

    /// The next mount of the plan uses the images `indices`, top first.
    pub(crate) fn add_mount(&mut self, indices: Vec<usize>) {
        for &i in &indices {
            self.records[i].copies += 1;
        }
        self.layers.push(indices);
    }

    /// One instance of each image of mount `k` (of the plan), top first,
    /// taken from their records.
    pub(crate) fn take_layers(&mut self, k: usize) -> Option<Vec<OwnedFd>> {
        let mut out = Vec::with_capacity(self.layers[k].len());
        for &i in &self.layers[k] {
            out.push(self.records[i].instances.pop()?);
        }
        Some(out)
    }
}
