//! `sqfs diff A B`: what changed between two images: the entries added,
//! removed and changed (type, content, mode, owner, group, link target,
//! device number, extended attributes; timestamps with `--times`), read
//! with the shared reader in userspace (no mount, no root).
//!
//! Fast on large images: the two trees are walked together, directory
//! listings merged by name (entries are sorted in the image), so only
//! entries present in both are compared, on every processor. Metadata
//! decides first: a different size is changed content, whatever the data.
//! Files of equal size are compared as stored: their block lists (size
//! words) and the raw bytes of their blocks and fragment blocks, one read
//! of each without decompressing (a fragment block shared by many small
//! files is compared once per pair). Only blocks whose stored bytes differ
//! (a different compressor or block size, a fragment block packed
//! differently since an earlier file changed) are decompressed and
//! compared, so a change is never missed for want of a checksum.
//!
//! - `walk.rs`: the merged walk (metadata and the subtrees on one side);
//! - `parallel.rs`: the walk's threads and the work they share;
//! - `content.rs`: file contents;
//! - `render.rs`: the text `sqfs diff` prints.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use squashfs_format::FormatError;
use squashfs_reader::{Inode, InodeData, Kind};

mod content;
mod parallel;
mod render;
mod walk;

pub use render::render;

/// What to compare besides the tree's contents.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiffOptions {
    /// Modification times too (left out by default: every rebuild of a
    /// tree changes them).
    pub times: bool,
}

/// What changed between image `a` and image `b`.
#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    pub a: String,
    pub b: String,
    /// Entries below the root of each image.
    pub entries_a: u64,
    pub entries_b: u64,
    pub added: u64,
    pub removed: u64,
    pub changed: u64,
    /// Whether modification times were compared (`--times`).
    pub times: bool,
    /// Stored bytes of files of equal size compared as stored (both sides).
    pub stored_bytes_compared: u64,
    /// Bytes decompressed (both sides) where stored bytes could not decide.
    pub bytes_decompressed: u64,
    pub seconds: f64,
    /// Every added, removed and changed entry, in walk order (depth first,
    /// names sorted).
    pub changes: Vec<Change>,
}

/// One entry that differs.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The path from the image's root, e.g. "/lib/libz.so" (lossy if not
    /// UTF-8).
    pub path: String,
    /// The exact path bytes in hex, only when `path` is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    /// "added", "removed" or "changed".
    pub change: &'static str,
    /// For "changed": what differs, of "type", "content", "mode",
    /// "owner", "group", "target", "device", "xattrs", "mtime".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub what: Vec<&'static str>,
    /// The entry in A (absent when added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a: Option<Side>,
    /// The entry in B (absent when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b: Option<Side>,
    /// Which extended attributes differ, by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xattrs: Option<XattrChanges>,
    /// The sort key: the path with '/' as 0 (component order).
    #[serde(skip)]
    key: Vec<u8>,
}

/// An entry as one image has it.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    /// "file", "directory", "symlink", "block device", "character
    /// device", "fifo" or "socket".
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Permission bits in octal, e.g. "0755".
    pub mode: String,
    pub uid: u32,
    pub gid: u32,
    /// Files: bytes; symbolic links: the target's length; others 0.
    pub size: u64,
    pub mtime: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Devices: "major:minor".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// Extended attributes that differ, by name.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct XattrChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

/// Why two images cannot be compared.
#[derive(Debug)]
pub enum DiffError {
    /// An image cannot be opened, or its tables read.
    Open(String, crate::stored::StoredError),
    /// An entry of an image cannot be read.
    Read {
        image: String,
        path: String,
        error: FormatError,
    },
}

impl std::fmt::Display for DiffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiffError::Open(image, e) => write!(f, "{image}: {e}"),
            DiffError::Read { image, path, error } => write!(
                f,
                "{image}: {path}: {error}; 'sqfs check {image}' names the bad block"
            ),
        }
    }
}

impl std::error::Error for DiffError {}

/// Compares image `a` with image `b`.
pub fn diff(a: &Path, b: &Path, opts: DiffOptions) -> Result<Diff, DiffError> {
    let started = Instant::now();
    let name = |p: &Path| p.display().to_string();
    let setup = walk::Setup {
        a,
        b,
        a_name: name(a),
        b_name: name(b),
        times: opts.times,
    };
    let contents = {
        let (ar, br) = setup.open()?;
        content::Contents::new(ar.superblock(), br.superblock())
    };
    let walked = walk::walk(&setup, &contents)?;
    let mut changes = walked.changes;
    changes.sort_by(|x, y| x.key.cmp(&y.key));
    let count = |k: &str| changes.iter().filter(|c| c.change == k).count() as u64;
    Ok(Diff {
        a: name(a),
        b: name(b),
        entries_a: walked.entries_a,
        entries_b: walked.entries_b,
        added: count("added"),
        removed: count("removed"),
        changed: count("changed"),
        times: opts.times,
        stored_bytes_compared: contents.stored_bytes(),
        bytes_decompressed: contents.decompressed_bytes(),
        seconds: started.elapsed().as_secs_f64(),
        changes,
    })
}

/// The type's word.
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Dir => "directory",
        Kind::File => "file",
        Kind::Symlink => "symlink",
        Kind::BlockDev => "block device",
        Kind::CharDev => "character device",
        Kind::Fifo => "fifo",
        Kind::Socket => "socket",
    }
}

impl Side {
    fn of(i: &Inode) -> Side {
        let rdev = i.rdev();
        Side {
            kind: kind_name(i.kind),
            mode: format!("{:04o}", i.perm & 0o7777),
            uid: i.uid,
            gid: i.gid,
            size: i.size,
            mtime: i.mtime,
            target: match &i.data {
                InodeData::Symlink { target } => Some(String::from_utf8_lossy(target).into_owned()),
                _ => None,
            },
            device: matches!(i.kind, Kind::BlockDev | Kind::CharDev).then(|| {
                format!(
                    "{}:{}",
                    (rdev >> 8) & 0xfff,
                    (rdev & 0xff) | ((rdev >> 12) & 0xfff00)
                )
            }),
        }
    }
}

impl Change {
    fn new(path: &[u8], change: &'static str, a: Option<&Inode>, b: Option<&Inode>) -> Change {
        let utf8 = std::str::from_utf8(path).is_ok();
        Change {
            path: String::from_utf8_lossy(path).into_owned(),
            path_hex: (!utf8).then(|| path.iter().map(|b| format!("{b:02x}")).collect()),
            change,
            what: Vec::new(),
            a: a.map(Side::of),
            b: b.map(Side::of),
            xattrs: None,
            key: path
                .iter()
                .map(|&c| if c == b'/' { 0 } else { c })
                .collect(),
        }
    }
}
