//! The parser behind `sqfs inspect`, on arbitrary bytes as an image: the
//! superblock, compressor options, id and xattr tables, and the metadata
//! walk of the inode table through every decompressor (including sqfs's own
//! LZO1X decoder, also fed the input directly). Any panic, hang or huge
//! allocation is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sqfs::inspect::examine(data, "fuzz", |_| {});
    let mut out = [0u8; 8192];
    let _ = sqfs::lzo::decompress(data, &mut out);
});
