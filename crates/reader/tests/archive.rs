//! The reader on images built by mksquashfs: lookups through the directory
//! index of a large directory agree with the full listing; file data is
//! read back exactly; and thousands of corrupted variants of an image are
//! walked without a panic or a hang, also with their metadata read ahead.

use std::fs;
use std::path::Path;
use std::process::Command;

use sqfsmnt_test_support::tree::TempDir;
use squashfs_reader::table::Source;
use squashfs_reader::{Archive, FileSource, InodeData, Kind, ReadAhead};

fn mksquashfs(src: &Path, img: &Path, extra: &[&str]) {
    sqfsmnt_test_support::cmd::run(
        Command::new("mksquashfs")
            .arg(src)
            .arg(img)
            .args(["-noappend", "-quiet", "-no-progress"])
            .args(extra),
    )
    .ok_as("mksquashfs (apt-get install squashfs-tools)");
}

fn name(i: usize) -> String {
    format!("entry-{i:05}-{}", "x".repeat(i % 50))
}

#[test]
fn directory_index_lookups_match_the_listing() {
    let t = TempDir::new("index");
    let src = t.0.join("src");
    fs::create_dir_all(src.join("big")).unwrap();
    for i in 0..3000 {
        fs::write(src.join("big").join(name(i)), format!("{i}\n")).unwrap();
    }
    let img = t.0.join("img.sqfs");
    mksquashfs(&src, &img, &[]);
    // Lookups first (no cached listing), through the index.
    let ar = Archive::open(FileSource::new(fs::File::open(&img).unwrap()).unwrap()).unwrap();
    let root = ar.inode(ar.root()).unwrap();
    let big = ar.lookup(&root, b"big").unwrap().expect("big");
    let big = ar.inode(big.inode).unwrap();
    let InodeData::Dir { index_count, .. } = big.data else {
        panic!("not a dir")
    };
    assert!(
        index_count > 4,
        "the directory has an index ({index_count} entries)"
    );
    let mut buf = [0u8; 16];
    for i in (0..3000).step_by(7).chain([0, 1, 2999]) {
        let e = ar
            .lookup(&big, name(i).as_bytes())
            .unwrap()
            .unwrap_or_else(|| panic!("{} not found", name(i)));
        let f = ar.inode(e.inode).unwrap();
        assert_eq!(f.kind, Kind::File);
        let n = ar.read(&ar.layout(&f).unwrap(), 0, &mut buf).unwrap();
        assert_eq!(&buf[..n], format!("{i}\n").as_bytes());
    }
    for missing in ["entry-99999", "a", "zzzz", "entry-00001-", "entry-00001-xx"] {
        assert!(
            ar.lookup(&big, missing.as_bytes()).unwrap().is_none(),
            "{missing}"
        );
    }
    // The listing agrees.
    let listing = ar.listing(&big).unwrap();
    assert_eq!(listing.entries.len(), 3000);
    let mut names: Vec<String> = (0..3000).map(name).collect();
    names.sort();
    for (e, n) in listing.entries.iter().zip(&names) {
        assert_eq!(&*e.name, n.as_bytes());
    }
}

/// Everything the FUSE server can be asked, over a bounded walk.
fn walk<S: Source>(ar: &Archive<S>) -> usize {
    let mut queue = vec![ar.root()];
    let mut visited = 0;
    let mut buf = vec![0u8; 200_000];
    while let Some(r) = queue.pop() {
        let Ok(dir) = ar.inode(r) else { continue };
        let _ = ar.xattrs(&dir);
        let _ = ar.lookup(&dir, b"missing");
        let Ok(listing) = ar.listing(&dir) else {
            continue;
        };
        for e in listing.entries.iter().take(100) {
            visited += 1;
            if visited > 500 {
                return visited;
            }
            let _ = ar.lookup(&dir, &e.name);
            let Ok(i) = ar.inode(e.inode) else { continue };
            let _ = ar.xattrs(&i);
            match i.kind {
                Kind::Dir => queue.push(e.inode),
                Kind::File => {
                    if let Ok(l) = ar.layout(&i) {
                        let _ = ar.read(&l, 0, &mut buf);
                        let _ = ar.read(&l, i.size.saturating_sub(10), &mut buf[..100]);
                    }
                }
                _ => {}
            }
        }
    }
    visited
}

#[test]
fn corrupted_images_never_panic() {
    let t = TempDir::new("corrupt");
    let src = t.0.join("src");
    fs::create_dir_all(src.join("d/e")).unwrap();
    for i in 0..30 {
        fs::write(src.join(format!("d/f{i}")), vec![i as u8; i * 1000]).unwrap();
    }
    std::os::unix::fs::symlink("d/f1", src.join("l")).unwrap();
    fs::write(src.join("d/e/g"), b"deep").unwrap();
    for comp in ["gzip", "zstd", "lzo"] {
        let img = t.0.join("img.sqfs");
        mksquashfs(&src, &img, &["-comp", comp, "-b", "4096"]);
        let good = fs::read(&img).unwrap();
        assert!(walk(&Archive::open(good.clone()).unwrap()) >= 33);
        // Every byte of the metadata (the tail of the image) changed, one
        // at a time, in a few ways; and truncations.
        let bytes_used = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
        let inode_start = u64::from_le_bytes(good[64..72].try_into().unwrap()) as usize;
        let mut opened = 0;
        for at in (96..bytes_used).filter(|&a| a >= inode_start.saturating_sub(200) || a % 37 == 0)
        {
            for v in [0x00u8, 0xff, good[at] ^ 0x01, good[at].wrapping_add(0x80)] {
                let mut b = good.clone();
                b[at] = v;
                if let Ok(ar) = Archive::open(b.clone()) {
                    opened += 1;
                    walk(&ar);
                }
                // Read ahead first, within a budget whatever the tables say.
                if let Ok(ar) = Archive::open(ReadAhead::new(b)) {
                    let planned = ar.source().plan(ar.metadata_region(), 3000);
                    assert!(planned <= 3000);
                    assert_eq!(ar.source().fill(), Ok(planned));
                    walk(&ar);
                }
            }
        }
        for len in (0..good.len()).step_by(97) {
            let _ = Archive::open(good[..len].to_vec()).map(|ar| walk(&ar));
        }
        assert!(opened > 100, "{comp}: only {opened} variants opened");
    }
}
