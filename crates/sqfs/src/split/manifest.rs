//! The images of a split and the manifest that lists them.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cut::Unit;

#[derive(Clone, Debug, Serialize)]
pub struct ManifestEntry {
    /// The path relative to the tree's top (lossy if not UTF-8).
    pub path: String,
    /// The exact path bytes in hex, only when `path` is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    pub file_bytes: u64,
    pub entries: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ManifestImage {
    pub image: String,
    /// As in `inspect --json`: the image file's size, the file system's
    /// size in it, the regular file data it holds.
    pub file_size: u64,
    pub bytes_used: u64,
    pub file_bytes: u64,
    /// What the first pass estimated (with the corrections of the images
    /// built before).
    pub estimated_bytes: u64,
    /// The entries the image stores, counted in it: its units with what
    /// they hold, and the directories above them.
    pub stored_entries: u64,
    /// The units it holds (entries at the cut depth, files above it).
    pub entries: Vec<ManifestEntry>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    pub format: &'static str,
    pub source: String,
    pub max_size: u64,
    pub depth: usize,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: crate::format::Compressor,
    pub level: Option<u32>,
    pub block_size: u32,
    /// mksquashfs runs it took (more than the images when one was built
    /// again after the estimate was corrected).
    pub builds: usize,
    pub images: Vec<ManifestImage>,
    /// The `--union=` argument of squashfs-mount for these images.
    pub union: String,
}

pub(super) fn entry(u: &Unit) -> ManifestEntry {
    let bytes = u.rel.as_os_str().as_bytes();
    let utf8 = std::str::from_utf8(bytes).is_ok();
    ManifestEntry {
        path: u.rel.to_string_lossy().into_owned(),
        path_hex: (!utf8).then(|| bytes.iter().map(|b| format!("{b:02x}")).collect()),
        file_bytes: u.bytes,
        entries: u.entries,
    }
}

pub(super) fn image_path(prefix: &Path, i: usize, width: usize) -> PathBuf {
    let mut name = prefix.as_os_str().to_os_string();
    name.push(format!("-{:0width$}.sqfs", i + 1));
    PathBuf::from(name)
}
