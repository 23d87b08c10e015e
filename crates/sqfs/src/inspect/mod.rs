//! `sqfs inspect`: what an image is made of, and whether this kernel can
//! mount it. The image is opened and read with the caller's own rights.
//!
//! - this file: reading an image's tables ([`examine`], [`inspect_file`]);
//! - `report.rs`: what is reported (`--json` prints it);
//! - `image_file.rs`: the image file, read through a small window;
//! - `render.rs`: the text `sqfs inspect` prints.

use std::path::Path;

use crate::format::{self, flags, FormatError, Source, Superblock};
use crate::kernel::{self, Verdict};
use crate::units;

mod image_file;
mod render;
mod report;

pub use image_file::{ImageFile, InspectError};
pub use render::render;
pub use report::{Flags, Report, Xattrs};

/// Reads everything `inspect` reports from `src` (the kernel verdict is
/// filled in by the caller; see [`inspect_file`]).
pub fn examine(
    src: &(impl Source + ?Sized),
    name: &str,
    progress: impl FnMut(u64),
) -> Result<(Superblock, Report), FormatError> {
    let size = src.len();
    let mut head = vec![0u8; size.min(4096) as usize];
    src.read_at(0, &mut head)?;
    let sb = format::parse_superblock(&head, size)?;
    let options = format::compressor_options(src, &sb)?;
    let ids = format::id_table(src, &sb)?;
    let xattr_ids = format::xattr_ids(src, &sb)?;
    let files = format::count_inodes(src, &sb, progress)?;
    let ratio = (files.file_bytes > 0).then(|| sb.bytes_used as f64 / files.file_bytes as f64);
    let report = Report {
        image: name.to_string(),
        version: "4.0",
        compressor: sb.compressor,
        compressor_options: options,
        block_size: sb.block_size,
        flags: Flags::of(&sb),
        mkfs_time: sb.mkfs_time,
        mkfs_time_utc: units::utc(i64::from(sb.mkfs_time)),
        newest_file_time: files.newest_mtime,
        file_size: size,
        bytes_used: sb.bytes_used,
        inodes: sb.inodes,
        files,
        fragments: sb.fragments,
        ids,
        xattrs: Xattrs {
            sets: xattr_ids.unwrap_or(0),
            inodes: files.with_xattrs,
            left_out: sb.has(flags::NO_XATTRS),
        },
        ratio,
        kernel: Verdict {
            can_mount: None,
            reason: String::new(),
            config: None,
        },
        mount_path: None,
    };
    Ok((sb, report))
}

/// Inspects the image at `path`. Errors are one line naming what is wrong.
pub fn inspect_file(path: &Path) -> Result<Report, InspectError> {
    let image = ImageFile::open(path)?;
    let total = image.len();
    let bar = crate::progress::Bar::bytes("reading inode table", total);
    let (_, mut report) = examine(&image, &path.display().to_string(), |done| bar.set(done))
        .map_err(InspectError::Image)?;
    bar.finish();
    report.kernel = kernel::image_verdict_here(
        report.compressor,
        &report.compressor_options,
        report.bytes_used,
        report.file_size,
        &path.to_string_lossy(),
    );
    Ok(report)
}
