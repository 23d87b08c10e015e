//! What differs between the kinds of cached instance (`meta::Kind`): what
//! one costs, whether its image file was deleted, and what ending it
//! involves. Needs root (it reads other processes' /proc files).

use std::os::fd::AsFd;

use super::evict;
use super::meta::{dev_major_minor, Kind, Meta};
use crate::mounts::loop_device::{self, Owner};
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
pub fn cost(meta: &Meta) -> u64 {
    match meta.kind {
        Kind::Kernel { block_size, .. } => evict::instance_cost(block_size),
        Kind::Fuse { pid, .. } => {
            FUSE_KERNEL_BYTES
                + system::process_resident_bytes(pid).unwrap_or(FUSE_SERVER_UNKNOWN_BYTES)
        }
    }
}

/// The memory a new FUSE instance's server `pid` holds, as [`cost`] counts it.
pub fn fuse_cost(pid: u32) -> u64 {
    FUSE_KERNEL_BYTES + system::process_resident_bytes(pid).unwrap_or(FUSE_SERVER_UNKNOWN_BYTES)
}

/// Whether the image file behind the instance was deleted: the loop
/// device's backing file, or the FUSE server's image descriptor (fd 4).
pub fn file_deleted(_root: &AsRoot, meta: &Meta) -> bool {
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

/// Counts a kernel instance's loop device for `owner` from now on (under
/// the cache's lock): `Owner::Cache` once the cache holds it, its maker's
/// once evicted (its users may keep it attached). Best effort: a device
/// gone or reused meanwhile is left alone.
pub fn count_device_for(root: &AsRoot, meta: &Meta, owner: Owner) {
    let Kind::Kernel { loop_number, .. } = meta.kind else {
        return;
    };
    if let Ok(dev) = system::open_dir_nofollow(system::working_dir(), "/dev") {
        let backing = (meta.dev, meta.ino);
        let _ = loop_device::count_for(root, dev.as_fd(), loop_number, backing, owner);
    }
}
