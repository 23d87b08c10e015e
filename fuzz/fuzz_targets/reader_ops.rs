//! squashfs-reader (what the FUSE server serves) on arbitrary bytes as an
//! image: open (the mount-time checks), then a bounded walk from the root
//! doing what FUSE requests do: readdir, lookup of every name (and of a
//! missing one), getattr, readlink, read of every file (whole and at odd
//! offsets), listxattr/getxattr. Any panic, hang or huge allocation is a bug.
//! The image is read through the server's read-ahead: when the first byte
//! is odd, its metadata region is read ahead first, within a budget of up
//! to 64 KiB taken from the second byte; what it reads and holds must stay
//! within it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squashfs_reader::{Archive, InodeData, Kind, ReadAhead};

fuzz_target!(|data: &[u8]| {
    let Ok(ar) = Archive::open(ReadAhead::new(data.to_vec())) else {
        return;
    };
    if data.first().is_some_and(|b| b & 1 == 1) {
        let budget = usize::from(*data.get(1).unwrap_or(&0)) << 8;
        let planned = ar.source().plan(ar.metadata_region(), budget);
        assert!(planned <= budget as u64);
        if let Ok(n) = ar.source().fill() {
            assert_eq!(n, planned);
        }
        assert!(ar.source().held() <= budget);
    }
    // Breadth-first over at most 64 directories and 256 inodes: a crafted
    // image may make directories contain themselves.
    let mut queue = vec![ar.root()];
    let (mut dirs, mut seen) = (0, 0);
    let mut buf = vec![0u8; 300_000];
    while let Some(r) = queue.pop() {
        let Ok(dir) = ar.inode(r) else { continue };
        dirs += 1;
        if dirs > 64 {
            break;
        }
        let _ = ar.xattrs(&dir);
        let _ = ar.lookup(&dir, b"no-such-name");
        let Ok(listing) = ar.listing(&dir) else { continue };
        for e in listing.entries.iter().take(64) {
            seen += 1;
            if seen > 256 {
                return;
            }
            let _ = ar.lookup(&dir, &e.name);
            let Ok(i) = ar.inode(e.inode) else { continue };
            let _ = (i.mode(), i.blocks(), i.rdev());
            if let Ok(x) = ar.xattrs(&i) {
                assert!(x.len() <= 65536);
            }
            match (&i.kind, &i.data) {
                (Kind::Dir, _) => queue.push(e.inode),
                (Kind::File, _) => {
                    if let Ok(layout) = ar.layout(&i) {
                        let mut off = 0u64;
                        while off < i.size.min(4 << 20) {
                            match ar.read(&layout, off, &mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => off += n as u64,
                            }
                        }
                        let _ = ar.read(&layout, i.size / 3 + 1, &mut buf[..4097]);
                    }
                }
                (_, InodeData::Symlink { target }) => assert!(target.len() <= 4096),
                _ => {}
            }
        }
    }
});
