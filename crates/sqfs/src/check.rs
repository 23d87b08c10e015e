//! `sqfs check IMAGE`: reads and decompresses every metadata and data block
//! an image's tree reaches, in userspace with the caller's rights (never
//! the kernel), and names the first bad block and the files it belongs to.
//! SquashFS has no checksums: a block is bad when it cannot be read,
//! decompressed, or does not give the size its inode promises; bytes that
//! decompress to the right size but wrong contents cannot be told apart.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use squashfs_format::FormatError;
use squashfs_reader::{Archive, FileSource, Kind};

use crate::units;

/// The most files named for a bad block.
const MAX_NAMED: usize = 20;

/// The first bad block found, and what it belongs to.
#[derive(Clone, Debug, Serialize)]
pub struct Bad {
    /// The reader's words for it (which table or block, at which byte).
    pub error: String,
    /// The paths (from the image's root) whose reads failed so, in the
    /// order found; at most 20.
    pub paths: Vec<String>,
    /// How many paths failed so in all.
    pub count: usize,
}

/// What `check` read.
#[derive(Clone, Debug, Serialize)]
pub struct Checked {
    pub image: String,
    pub directories: u64,
    pub files: u64,
    pub other_entries: u64,
    /// Bytes of file data read (decompressed).
    pub data_bytes: u64,
    pub seconds: f64,
    /// Paths whose reads failed, with any error.
    pub bad_paths: usize,
    /// None: every block read well.
    pub first_bad: Option<Bad>,
    /// The symbolic link that is all the image's root holds, if so: the
    /// image is not the tree it was meant to be (flagged, exit status 1).
    pub lone_symlink: Option<crate::stored::LoneSymlink>,
}

impl Checked {
    /// Whether `check` fails: a bad block, or a root that holds only a
    /// symbolic link.
    pub fn failed(&self) -> bool {
        self.first_bad.is_some() || self.lone_symlink.is_some()
    }
}

struct Walk {
    checked: Checked,
}

impl Walk {
    fn failed(&mut self, path: &str, error: String) {
        self.checked.bad_paths += 1;
        match &mut self.checked.first_bad {
            None => {
                self.checked.first_bad = Some(Bad {
                    error,
                    paths: vec![path.to_string()],
                    count: 1,
                })
            }
            Some(b) if b.error == error => {
                b.count += 1;
                if b.paths.len() < MAX_NAMED {
                    b.paths.push(path.to_string());
                }
            }
            Some(_) => {}
        }
    }
}

fn join(dir: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Why an image cannot be checked at all.
#[derive(Debug)]
pub enum CheckError {
    Open(std::io::Error),
    Stat(std::io::Error),
    /// Its superblock or tables cannot be read.
    Image(FormatError),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Open(e) => write!(f, "cannot open it: {}", units::io_error(e)),
            CheckError::Stat(e) => write!(f, "cannot stat it: {}", units::io_error(e)),
            CheckError::Image(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {}

/// Reads every block of `file` (a regular file's inode); the error, if any.
fn read_file(
    archive: &Archive<FileSource>,
    inode: &squashfs_reader::Inode,
    buf: &mut [u8],
) -> Result<u64, FormatError> {
    let layout = archive.layout(inode)?;
    let mut offset = 0u64;
    loop {
        let n = archive.read(&layout, offset, buf)?;
        if n == 0 {
            return Ok(offset);
        }
        offset += n as u64;
    }
}

/// Checks the image at `path`.
pub fn check(path: &Path) -> Result<Checked, CheckError> {
    let started = Instant::now();
    let file = std::fs::File::open(path).map_err(CheckError::Open)?;
    let source = FileSource::new(file).map_err(CheckError::Stat)?;
    let archive = Archive::open(source).map_err(CheckError::Image)?;
    let mut w = Walk {
        checked: Checked {
            image: path.display().to_string(),
            directories: 0,
            files: 0,
            other_entries: 0,
            data_bytes: 0,
            seconds: 0.0,
            bad_paths: 0,
            first_bad: None,
            lone_symlink: None,
        },
    };
    if let Ok(link) = crate::stored::lone_symlink(&archive) {
        w.checked.lone_symlink = link;
    }
    let mut files = Vec::new();
    let mut queue = VecDeque::from([("/".to_string(), archive.root())]);
    while let Some((dir_path, reference)) = queue.pop_front() {
        w.checked.directories += 1;
        let listing = archive
            .inode(reference)
            .and_then(|dir| archive.listing(&dir));
        let listing = match listing {
            Ok(l) => l,
            Err(e) => {
                w.failed(&dir_path, e.to_string());
                continue;
            }
        };
        for entry in &listing.entries {
            let child = join(&dir_path, &entry.name);
            let inode = match archive.inode(entry.inode) {
                Ok(i) => i,
                Err(e) => {
                    w.failed(&child, e.to_string());
                    continue;
                }
            };
            if inode.xattr.is_some() {
                if let Err(e) = archive.xattrs(&inode) {
                    w.failed(&child, e.to_string());
                }
            }
            match inode.kind {
                Kind::Dir => queue.push_back((child, entry.inode)),
                Kind::File => files.push((child, inode)),
                _ => w.checked.other_entries += 1,
            }
        }
    }
    // The files' data, on every processor; results in walk order.
    w.checked.files = files.len() as u64;
    for (path, result) in files.iter().map(|(p, _)| p).zip(read_all(&archive, &files)) {
        match result {
            Some(Ok(n)) => w.checked.data_bytes += n,
            Some(Err(e)) => w.failed(path, e.to_string()),
            None => w.failed(path, "not read".to_string()),
        }
    }
    w.checked.seconds = started.elapsed().as_secs_f64();
    Ok(w.checked)
}

/// Reads every file of `files` with one thread per processor (the reader
/// is shared: its caches are thread-safe); each file's result, in order.
fn read_all(
    archive: &Archive<FileSource>,
    files: &[(String, std::sync::Arc<squashfs_reader::Inode>)],
) -> Vec<Option<Result<u64, FormatError>>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<u64, FormatError>>>> =
        Mutex::new(files.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                // Large reads: every block of a file in a few calls.
                let mut buf = vec![0u8; 4 << 20];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((_, inode)) = files.get(i) else {
                        break;
                    };
                    let r = read_file(archive, inode, &mut buf);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// The one line for standard output (all good) or standard error (a bad
/// block), without the program's name.
pub fn summary(c: &Checked) -> String {
    match &c.first_bad {
        None if c.lone_symlink.is_some() => format!(
            "{}: every block reads well, but {}; it was likely packed from a symbolic link to a directory, which mksquashfs (and sqfs pack before it followed links) stores as the link: pack it again with sqfs pack, from the link or the directory",
            c.image,
            c.lone_symlink.as_ref().map(|l| l.sentence()).unwrap_or_default()
        ),
        None => format!(
            "{}: every block reads well: {} files ({} of data), {} directories, {} other entries, in {}",
            c.image,
            c.files,
            units::bytes(c.data_bytes),
            c.directories,
            c.other_entries,
            units::seconds(c.seconds)
        ),
        Some(b) => {
            let more = b.count.saturating_sub(b.paths.len());
            format!(
                "{}: bad block: {}; it belongs to {}{}{}; the image is damaged: build or copy it again (its data cannot be trusted)",
                c.image,
                b.error,
                b.paths.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() },
                match c.bad_paths - b.count {
                    0 => String::new(),
                    n => format!(" ({n} other paths fail with other errors)"),
                }
            )
        }
    }
}
