//! The FUSE server's request handling (squashfs_mount_fuse::server::Fs) on
//! arbitrary bytes: the input is `[u32 image length][image][requests]`; the
//! image is opened with the mount-time checks, then each request chunk
//! (`[u16 length][bytes]`) is answered twice: as raw bytes (parsing must
//! refuse what is malformed) and behind a well-formed header whose opcode
//! and node id come from its first bytes, so that every operation runs on
//! arbitrary node ids and arguments. Any panic, hang or huge allocation is a
//! bug; replies must be as long as their header says.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squashfs_mount_fuse::proto::Reply;
use squashfs_mount_fuse::server::Fs;
use squashfs_reader::Archive;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let n = (u32::from_le_bytes(data[..4].try_into().unwrap()) as usize).min(data.len() - 4);
    let (image, mut rest) = (&data[4..4 + n], &data[4 + n..]);
    let Ok(archive) = Archive::open(image.to_vec()) else {
        return;
    };
    let fs = Fs::new(archive, "fuzz".into());
    let mut out = Reply::new(1 << 20);
    let mut req = Vec::new();
    let mut count = 0;
    while rest.len() >= 2 && count < 64 {
        count += 1;
        let len = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let chunk = &rest[2..2 + len];
        rest = &rest[2 + len..];
        check(fs.respond(chunk, &mut out));
        // A well-formed header: opcode, node id (small ones mostly, to hit
        // the root and nearby inodes), then the chunk as arguments.
        let opcode = u32::from(*chunk.first().unwrap_or(&0) % 53);
        let nodeid = match chunk.get(1..9) {
            Some(b) if chunk[1] & 1 == 0 => u64::from_le_bytes(b.try_into().unwrap()),
            _ => u64::from(*chunk.get(1).unwrap_or(&1) >> 1),
        };
        let arg = chunk.get(9..).unwrap_or(&[]);
        req.clear();
        req.extend_from_slice(&((40 + arg.len()) as u32).to_le_bytes());
        req.extend_from_slice(&opcode.to_le_bytes());
        req.extend_from_slice(&(count as u64).to_le_bytes());
        req.extend_from_slice(&nodeid.to_le_bytes());
        req.extend_from_slice(&[0u8; 16]);
        req.extend_from_slice(arg);
        check(fs.respond(&req, &mut out));
    }
});

fn check(reply: Option<&[u8]>) {
    if let Some(r) = reply {
        assert!(r.len() >= 16);
        assert_eq!(u32::from_le_bytes(r[..4].try_into().unwrap()) as usize, r.len());
        assert!(r.len() <= (1 << 20) + 4096);
    }
}
