//! What `sqfs inspect` reports; `--json` prints it.

use serde::Serialize;

use crate::format::{self, flags, CompressorOptions, InodeCounts, Superblock};
use crate::kernel::Verdict;

#[derive(Clone, Debug, Serialize)]
pub struct Flags {
    pub fragments: bool,
    pub always_use_fragments: bool,
    pub duplicates_removed: bool,
    pub exportable: bool,
    pub compressed_inodes: bool,
    pub compressed_data: bool,
    pub compressed_fragments: bool,
    pub compressed_xattrs: bool,
    pub compressed_ids: bool,
}

impl Flags {
    pub(super) fn of(sb: &Superblock) -> Self {
        Flags {
            fragments: !sb.has(flags::NO_FRAGMENTS),
            always_use_fragments: sb.has(flags::ALWAYS_FRAGMENTS),
            duplicates_removed: sb.has(flags::DUPLICATES),
            exportable: sb.has(flags::EXPORTABLE),
            compressed_inodes: !sb.has(flags::UNCOMPRESSED_INODES),
            compressed_data: !sb.has(flags::UNCOMPRESSED_DATA),
            compressed_fragments: !sb.has(flags::UNCOMPRESSED_FRAGMENTS),
            compressed_xattrs: !sb.has(flags::UNCOMPRESSED_XATTRS),
            compressed_ids: !sb.has(flags::UNCOMPRESSED_IDS),
        }
    }
}

/// Extended attributes: what the text's "Xattrs:" line says.
#[derive(Clone, Debug, Serialize)]
pub struct Xattrs {
    /// Distinct sets of extended attributes stored (the xattr id table).
    pub sets: u32,
    /// Inodes that have extended attributes.
    pub inodes: u64,
    /// Built with `mksquashfs -no-xattrs` (or `sqfs pack --no-xattrs`,
    /// `--reproducible`): any the tree had were left out.
    pub left_out: bool,
}

/// Everything `inspect` reports; `--json` prints this. Fields that `pack
/// --json` also has carry the same names and meaning.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub image: String,
    pub version: &'static str,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: format::Compressor,
    pub compressor_options: CompressorOptions,
    pub block_size: u32,
    pub flags: Flags,
    /// The image's time stamp (superblock mkfs_time), Unix seconds: the
    /// newest file time for images of `sqfs pack`; for mksquashfs, when it
    /// was built unless -mkfs-time or SOURCE_DATE_EPOCH set it.
    pub mkfs_time: u32,
    pub mkfs_time_utc: String,
    /// The newest modification time of the files in the image.
    pub newest_file_time: u32,
    pub file_size: u64,
    pub bytes_used: u64,
    pub inodes: u32,
    pub files: InodeCounts,
    pub fragments: u32,
    pub ids: Vec<u32>,
    pub xattrs: Xattrs,
    /// `bytes_used` divided by the uncompressed size of the files' data.
    pub ratio: Option<f64>,
    pub kernel: Verdict,
    /// Which way squashfs-mount would mount it for the caller (null when
    /// no squashfs-mount answers `--policy --json`).
    pub mount_path: Option<crate::mountable::PolicyPath>,
}
