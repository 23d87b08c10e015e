//! What differs between the kinds of cached instance (`meta::Kind`): what
//! one costs, whether its image file was deleted, and what ending it
//! involves. Needs root (it reads other processes' /proc files).

use super::evict;
use super::meta::{dev_major_minor, Kind, Meta};
use crate::privilege::AsRoot;
use crate::system;

/// Loop devices' block major number.
const LOOP_MAJOR: u64 = 7;
/// What a FUSE instance holds in the kernel besides its server's memory
/// (its connection, root inode and request queues), estimated.
const FUSE_KERNEL_BYTES: u64 = 256 << 10;
/// A FUSE server whose memory cannot be read counts this much.
const FUSE_SERVER_UNKNOWN_BYTES: u64 = 16 << 20;

/// The memory an instance holds while it is cached: the kernel's (see
/// `evict::instance_cost`), and for a FUSE instance its server's resident
/// memory now.
pub(crate) fn cost(meta: &Meta) -> u64 {
    match meta.kind {
        Kind::Kernel { block_size, .. } => evict::instance_cost(block_size),
        Kind::Fuse { pid, .. } => {
            FUSE_KERNEL_BYTES
                + system::process_resident_bytes(pid).unwrap_or(FUSE_SERVER_UNKNOWN_BYTES)
        }
    }
}

/// The memory a new FUSE instance's server `pid` holds, as [`cost`] counts it.
pub(crate) fn fuse_cost(pid: u32) -> u64 {
    FUSE_KERNEL_BYTES + system::process_resident_bytes(pid).unwrap_or(FUSE_SERVER_UNKNOWN_BYTES)
}

/// Whether the image file behind the instance was deleted: the loop
/// device's backing file, or the FUSE server's image descriptor (fd 4).
pub(crate) fn file_deleted(_root: &AsRoot, meta: &Meta) -> bool {
    let link = match meta.kind {
        Kind::Kernel { .. } => {
            let (major, minor) = dev_major_minor(meta.device);
            if major != LOOP_MAJOR {
                return false;
            }
            system::read_file_at(
                system::working_dir(),
                &format!("/sys/dev/block/{major}:{minor}/loop/backing_file"),
                8192,
            )
            .ok()
            .filter(|(_, longer)| !longer)
            .map(|(text, _)| text)
        }
        Kind::Fuse { pid, started } => system::read_link(&format!("/proc/{pid}/fd/4"))
            .ok()
            .filter(|_| system::process_started(pid) == Some(started)),
    };
    link.is_some_and(|text| evict::backing_file_deleted(&text, &meta.path))
}
