//! Reading an image's metadata ahead. SquashFS keeps every inode and
//! directory entry in one region at the end of the image (from the inode
//! table to the last table). The kernel path reads it through a loop
//! device whose reads of the backing file get the page cache's readahead;
//! this server reads it one 8 KiB metadata block at a time, as the scan
//! asks, which on a cluster file system is one round trip to its servers
//! each. So once the server has answered `ready`, one thread asks the
//! kernel to read the region ahead (`posix_fadvise(WILLNEED)`), bounded,
//! while the first requests are served.

use std::fs::File;
use std::num::NonZeroU64;

use squashfs_format::Superblock;

/// The most of the region asked for: its start (the root directory's
/// inode is in the inode table, which comes first) on the largest
/// images, all of it on the study's (about 20 MiB an image of 300,000
/// entries).
pub const MAX_BYTES: u64 = 64 << 20;

/// The byte range of the metadata region to ask for: from the inode
/// table on, at most [`MAX_BYTES`], within the image's bytes used. None
/// for an empty or inconsistent range.
pub fn range(inode_table_start: u64, bytes_used: u64) -> Option<(u64, NonZeroU64)> {
    let len = bytes_used.checked_sub(inode_table_start)?.min(MAX_BYTES);
    Some((inode_table_start, NonZeroU64::new(len)?))
}

/// Asks, from a thread of its own, for `sb`'s metadata region of `image`
/// (a descriptor of the image file the server reads, its own copy, closed
/// when done). A hint: nothing is reported when the kernel declines.
pub fn read_ahead(image: File, sb: &Superblock) {
    let Some((start, len)) = range(sb.inode_table_start, sb.bytes_used) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("metadata-ahead".into())
        .spawn(move || {
            let _ = rustix::fs::fadvise(&image, start, Some(len), rustix::fs::Advice::WillNeed);
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_from_the_inode_table_bounded() {
        assert_eq!(range(1000, 5000), NonZeroU64::new(4000).map(|n| (1000, n)));
        assert_eq!(
            range(1 << 20, 1 << 40),
            NonZeroU64::new(MAX_BYTES).map(|n| (1 << 20, n))
        );
        assert_eq!(range(5000, 5000), None);
        assert_eq!(range(6000, 5000), None);
    }
}
