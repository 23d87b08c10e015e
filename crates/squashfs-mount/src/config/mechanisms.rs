//! What the configuration file sets for the mechanisms below the engine
//! (the `mounts` and `cache` rooms): plain values, so that the settings
//! stand below the things they set.

/// A number of things, or a percentage of a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    Count(u32),
    Percent(u8),
}

/// An amount of memory: bytes, or a share of RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    Bytes(u64),
    PercentOfRam(u8),
}

impl Memory {
    pub(crate) fn bytes(self, total_memory: u64) -> u64 {
        match self {
            Memory::Bytes(b) => b,
            Memory::PercentOfRam(p) => (u128::from(total_memory) * u128::from(p) / 100) as u64,
        }
    }
}

/// The size limit of the tmpfs under a writable layer (`--writable=SIZE`;
/// the command line's spelling: `cli`, `LayerSize::parse`), which
/// `mounts::overlay` turns into the layer's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerSize {
    Bytes(u64),
    PercentOfRam(u8),
}

impl LayerSize {
    pub const DEFAULT: LayerSize = LayerSize::PercentOfRam(50);

    /// The value for tmpfs' `size` parameter (generated, never user text).
    #[cfg(test)]
    pub(crate) fn tmpfs_value(self) -> String {
        match self {
            LayerSize::Bytes(b) => b.to_string(),
            LayerSize::PercentOfRam(p) => format!("{p}%"),
        }
    }
}

/// How an image instance is made: loop device options and the squashfs
/// decompressor mode (measured in BENCHMARKS.md, "Loop device options").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopOptions {
    pub direct_io: bool,
    /// Logical block size; 0 = kernel default (512).
    pub block_size: u32,
    /// squashfs `threads=` mount option, used where the kernel offers it.
    pub threads: SquashfsThreads,
}

impl Default for LoopOptions {
    /// Buffered I/O and 4 KiB blocks: in BENCHMARKS.md ("Loop device
    /// options (cache helper)") buffered was as fast as or faster than
    /// direct I/O (13% for a cold full read) and reads a still-cached image
    /// file from memory; direct I/O only saves the page cache of the
    /// compressed file (about a quarter of the decompressed data there).
    /// 4096 over 512 gives squashfs 4 KiB device blocks instead of 1 KiB,
    /// 10% faster for `find`; used only when the image size is a multiple.
    fn default() -> Self {
        LoopOptions {
            direct_io: false,
            block_size: 4096,
            threads: SquashfsThreads::Multi,
        }
    }
}

/// The squashfs `threads=` mount option (kernels built with
/// CONFIG_SQUASHFS_CHOICE_DECOMP_BY_MOUNT). Other kernels reject the key
/// with EINVAL and use their compiled-in decompressor mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SquashfsThreads {
    /// Do not pass the option.
    KernelDefault,
    Single,
    /// Decompressors allocated on demand (up to 2 per CPU): memory grows
    /// only with real parallelism, which matters for instances kept mounted.
    Multi,
    PerCpu,
    Count(u16),
}

impl SquashfsThreads {
    /// The option's value, or None when it is not to be passed.
    pub(crate) fn value(self) -> Option<String> {
        match self {
            SquashfsThreads::KernelDefault => None,
            SquashfsThreads::Single => Some("single".into()),
            SquashfsThreads::Multi => Some("multi".into()),
            SquashfsThreads::PerCpu => Some("percpu".into()),
            SquashfsThreads::Count(n) => Some(n.to_string()),
        }
    }
}

/// How many loop devices the tool may attach: in all, and for one user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopLimits {
    /// `max-loop-devices`.
    pub all: u32,
    /// `max-loop-devices-per-user`.
    pub per_user: u32,
}

/// Most names listed in the cache namespace (a hard cap on entries, and
/// on `cache-max-instances`).
pub const MAX_CACHE_ENTRIES: usize = 4096;

/// The cache's size limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    pub max_idle: u64,
    pub max_instances: u32,
    /// `cache-max-memory`, sized against RAM only when a decision needs
    /// it (`max_bytes`): a launch that finds its instance never asks.
    pub max_memory: Memory,
    /// Instances one user's launches may have made that the cache holds
    /// (`cache-max-instances-per-user`): kernel and FUSE ones together,
    /// so also the user's cached FUSE servers.
    pub per_user: u32,
}

impl CacheLimits {
    /// The most bytes the cached instances may hold (RAM asked once per
    /// process, with sysinfo, which counts every block device's pages).
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_memory.bytes(crate::system::total_memory())
    }
}
