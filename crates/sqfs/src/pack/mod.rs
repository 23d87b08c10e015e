//! `sqfs pack`: builds an image by driving mksquashfs (squashfs-tools) with
//! defaults chosen for software stacks, deterministically.

use std::ffi::OsStr;
use std::path::Path;

use crate::error::FileError;
use crate::format::Compressor;
use crate::progress::Bar;
use crate::units;

mod checks;
mod error;
mod hot;
mod mksquashfs;
mod options;
mod temporaries;

pub use checks::{bytes_used, check_output, check_outside};
pub use error::PackError;
pub use mksquashfs::{build, unreadable_advice};
pub use options::{
    compressor_args, effective_level, parse_block_size, parse_compressor, PackOptions,
    DEFAULT_BLOCK_SIZE, DEFAULT_COMPRESSOR, DEFAULT_ZSTD_LEVEL, REPRODUCIBLE_EPOCH,
};

/// What `sqfs pack` reports about an image it wrote; `--json` prints it.
/// Fields that `inspect --json` also has carry the same names and meaning.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Packed {
    pub image: String,
    /// The image file's size (padded to 4 KiB).
    pub file_size: u64,
    /// The file system's size in the file (the superblock's bytes_used).
    pub bytes_used: u64,
    /// Regular file data packed, each file once (hard links counted once).
    pub file_bytes: u64,
    /// `bytes_used / file_bytes`; null without file data.
    pub ratio: Option<f64>,
    /// Entries the image stores (the top directory not counted), counted
    /// in the image.
    pub entries: u64,
    /// Entries left out by --exclude patterns (a directory counts once).
    pub excluded: u64,
    pub seconds: f64,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: Compressor,
    pub level: Option<u32>,
    pub block_size: u32,
    /// The image's time stamp (superblock mkfs_time), Unix seconds.
    pub mkfs_time: u32,
    pub mkfs_time_utc: String,
    pub reproducible: bool,
    /// With `--order`: the hot files stored first (null without).
    pub ordered: Option<usize>,
}

/// Below this much file data an image at least as large as its data is
/// so because of its fixed overhead (superblock, tables, metadata); above
/// it, because the data does not compress.
const OVERHEAD_MATTERS_BELOW: u64 = 1 << 20;

/// The `bytes_used / file data` ratio as a phrase for the summary line:
/// "31.2% of 12.0 MiB of file data"; where the image is not smaller than
/// its data, why: the fixed overhead of a tiny tree (no percentage), or
/// data that is already compressed.
pub fn ratio_phrase(bytes_used: u64, file_bytes: u64) -> String {
    if file_bytes == 0 {
        "no file data".to_string()
    } else if bytes_used >= file_bytes && file_bytes < OVERHEAD_MATTERS_BELOW {
        format!(
            "{} of file data; metadata outweighs it",
            units::bytes(file_bytes)
        )
    } else if bytes_used >= file_bytes {
        format!(
            "{:.1}% of {} of file data: it does not compress (already compressed, as .gz files or media are)",
            bytes_used as f64 * 100.0 / file_bytes as f64,
            units::bytes(file_bytes)
        )
    } else {
        format!(
            "{:.1}% of {} of file data",
            bytes_used as f64 * 100.0 / file_bytes as f64,
            units::bytes(file_bytes)
        )
    }
}

/// `sqfs pack <dir> <image>`, leaving out what `excludes` matches.
pub fn pack(
    dir: &Path,
    image: &Path,
    opts: &PackOptions,
    excludes: &crate::exclude::Excludes,
) -> Result<Packed, PackError> {
    // A symbolic link to a directory packs that directory (see source.rs).
    let dir = &crate::source::resolve(dir)?;
    check_outside(dir, image)?;
    check_output(image, opts.force)?;
    let bar = Bar::spinner("scanning the tree");
    let mut scan = crate::tree::Scan::new(excludes);
    let stats = crate::tree::stats(dir, &mut scan, &bar)?;
    bar.finish();
    scan.finish(dir, true)?;
    let excluded: Vec<&OsStr> = scan.excluded.iter().map(|p| p.as_os_str()).collect();
    let bar = Bar::bytes("mksquashfs", stats.bytes);
    let (mkfs_time, seconds, ordered) = build(
        dir,
        image,
        opts,
        stats.newest_mtime,
        &excluded,
        stats.bytes,
        &bar,
    )?;
    bar.finish();
    let stored = read_back(image, stats.entries, dir)?;
    let file_size = std::fs::metadata(image)
        .map_err(FileError::at(image))?
        .len();
    let bytes_used = bytes_used(image)?;
    Ok(Packed {
        image: image.display().to_string(),
        file_size,
        bytes_used,
        file_bytes: stats.file_bytes,
        ratio: (stats.file_bytes > 0).then(|| bytes_used as f64 / stats.file_bytes as f64),
        entries: stored.entries,
        excluded: stats.excluded,
        seconds,
        compressor: opts.comp,
        level: effective_level(opts.comp, opts.level),
        block_size: opts.block_size,
        mkfs_time,
        mkfs_time_utc: units::utc(i64::from(mkfs_time)),
        reproducible: opts.reproducible,
        ordered,
    })
}

/// Reads back what the new `image` stores. An image whose root holds
/// nothing but a symbolic link, from a tree that held more (or other)
/// than that, is removed and refused; from a tree that is just one link,
/// kept with a warning. Fewer entries than the walk of `dir` found
/// (`walked`) get a warning too.
pub fn read_back(
    image: &Path,
    walked: u64,
    dir: &Path,
) -> Result<crate::stored::Stored, PackError> {
    let stored =
        crate::stored::count(image).map_err(|e| PackError::NewImage(image.to_path_buf(), e))?;
    if let Some(link) = &stored.lone_symlink {
        if walked != 1 {
            let _ = std::fs::remove_file(image);
            return Err(PackError::LoneSymlink {
                image: image.to_path_buf(),
                dir: dir.to_path_buf(),
                walked,
                sentence: link.sentence(),
            });
        }
        eprintln!(
            "sqfs: warning: {}: {}; to pack what it points to, give that directory",
            image.display(),
            link.sentence()
        );
    } else if stored.entries < walked {
        eprintln!(
            "sqfs: warning: {} holds {} entries, fewer than the {walked} found in {} (did the tree change while it was packed?)",
            image.display(),
            stored.entries,
            dir.display()
        );
    }
    Ok(stored)
}

pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}
