//! The superblock check every tool applies before anything else reads an
//! image (the setuid squashfs-mount before the kernel sees it). Must never
//! panic; accepted superblocks must be consistent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use squashfs_format::{parse_superblock, SUPERBLOCK_SIZE};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_le_bytes(data[..8].try_into().unwrap());
    let head = &data[8..];
    if let Ok(sb) = parse_superblock(&head[..head.len().min(SUPERBLOCK_SIZE)], size) {
        assert!(sb.bytes_used <= size);
        assert!(sb.bytes_used >= SUPERBLOCK_SIZE as u64);
        assert!(sb.block_size.is_power_of_two());
        assert!(sb.inode_table_start < sb.bytes_used && sb.directory_table_start < sb.bytes_used);
    }
});
