//! What `sqfs diff` reports: the changes, and each entry as one image has it.

use serde::Serialize;
use squashfs_reader::{Inode, InodeData, Kind};

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
    pub(super) key: Vec<u8>,
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
    pub(super) fn new(
        path: &[u8],
        change: &'static str,
        a: Option<&Inode>,
        b: Option<&Inode>,
    ) -> Change {
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
