//! The metadata read ahead (`ReadAhead`): on an image of 20,000 files, the
//! tables arrive in a few large reads, after which a walk of the whole tree
//! (every listing, every inode: what a `find` that stats does) reads
//! nothing more from the image; without it the same walk reads them 8 KiB
//! at a time. The budget bounds what is read and held.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use sqfsmnt_test_support::tree::TempDir;
use squashfs_reader::readahead::CHUNK;
use squashfs_reader::table::Source;
use squashfs_reader::{Archive, FileSource, FormatError, Kind, ReadAhead};

/// A source that records the length of every read that reaches it.
struct Counting {
    file: FileSource,
    reads: Mutex<Vec<usize>>,
}

impl Counting {
    fn open(img: &Path) -> Counting {
        Counting {
            file: FileSource::new(fs::File::open(img).unwrap()).unwrap(),
            reads: Mutex::new(Vec::new()),
        }
    }
    fn take(&self) -> Vec<usize> {
        std::mem::take(&mut *self.reads.lock().unwrap())
    }
}

impl Source for Counting {
    fn len(&self) -> u64 {
        self.file.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        self.reads.lock().unwrap().push(buf.len());
        self.file.read_at(offset, buf)
    }
}

/// 200 directories of 100 files each, packed by mksquashfs with its
/// metadata stored uncompressed (about 1 MiB of tables: several chunks).
fn image(t: &TempDir) -> std::path::PathBuf {
    let src = t.0.join("src");
    for d in 0..200 {
        let dir = src.join(format!("dir-{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            fs::write(dir.join(format!("file-{f:03}")), format!("{d} {f}\n")).unwrap();
        }
    }
    let img = t.0.join("img.sqfs");
    sqfsmnt_test_support::cmd::run(Command::new("mksquashfs").arg(&src).arg(&img).args([
        "-noappend",
        "-quiet",
        "-no-progress",
        "-noI",
    ]))
    .ok_as("mksquashfs (apt-get install squashfs-tools)");
    img
}

/// Every listing and every inode of the tree; returns the entries seen.
fn walk<S: Source>(ar: &Archive<S>) -> usize {
    let mut queue = vec![ar.root()];
    let mut seen = 0;
    while let Some(r) = queue.pop() {
        let dir = ar.inode(r).unwrap();
        for e in ar.listing(&dir).unwrap().entries.iter() {
            seen += 1;
            if ar.inode(e.inode).unwrap().kind == Kind::Dir {
                queue.push(e.inode);
            }
        }
    }
    seen
}

/// The image opened through a read-ahead over a counting source, with
/// caches too small to hide a read (64 KiB).
fn open(img: &Path) -> Archive<ReadAhead<Counting>> {
    Archive::open_with_cache(ReadAhead::new(Counting::open(img)), 64 << 10).unwrap()
}

#[test]
fn the_tables_arrive_in_large_reads() {
    let t = TempDir::new("readahead");
    let img = image(&t);
    let ar = open(&img);
    let region = ar.metadata_region();
    let len = region.end - region.start;
    assert!(len > 2 * CHUNK as u64, "a region of {len} bytes");
    ar.source().inner().take();
    assert_eq!(ar.source().plan(region, 64 << 20), len);
    assert_eq!(ar.source().fill().unwrap(), len);
    let reads = ar.source().inner().take();
    assert_eq!(reads.len() as u64, len.div_ceil(CHUNK as u64), "{reads:?}");
    assert!(
        reads[..reads.len() - 1].iter().all(|&n| n == CHUNK),
        "{reads:?}"
    );
    assert_eq!(ar.source().held() as u64, len);
    // The whole tree, and not one read more from the image.
    assert_eq!(walk(&ar), 20_200);
    let after = ar.source().inner().take();
    assert!(after.is_empty(), "{} reads reached the image", after.len());
    assert!(ar.source().served() > 200, "{}", ar.source().served());

    // Without it: the same walk reads the tables block by block.
    let ar = open(&img);
    ar.source().inner().take();
    assert_eq!(walk(&ar), 20_200);
    let reads = ar.source().inner().take();
    assert!(reads.len() > 200, "{} reads", reads.len());
    assert!(reads.iter().all(|&n| n <= 8192), "{reads:?}");
}

#[test]
fn the_budget_bounds_what_is_read_and_held() {
    let t = TempDir::new("readahead-budget");
    let img = image(&t);
    let ar = open(&img);
    ar.source().inner().take();
    let budget = CHUNK + 1000;
    assert_eq!(
        ar.source().plan(ar.metadata_region(), budget),
        budget as u64
    );
    assert_eq!(ar.source().fill().unwrap(), budget as u64);
    let reads = ar.source().inner().take();
    assert_eq!(reads, [CHUNK, 1000]);
    assert_eq!(ar.source().held(), budget);
    // The rest is read as before, and the tree is whole.
    assert_eq!(walk(&ar), 20_200);
    assert!(!ar.source().inner().take().is_empty());
}
