//! The only untrusted bytes the setuid tool interprets: the 96-byte
//! superblock. Must never panic; accepted superblocks must be consistent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use squashfs_mount::superblock::{check, SUPERBLOCK_SIZE};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_le_bytes(data[..8].try_into().unwrap());
    let head = &data[8..];
    if let Ok(sb) = check(&head[..head.len().min(SUPERBLOCK_SIZE)], size) {
        assert!(sb.bytes_used <= size);
        assert!(sb.block_size.is_power_of_two());
    }
});
