//! `sqfs inspect`: what an image is made of, and whether this kernel can
//! mount it. The image is opened and read with the caller's own rights.

use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use serde::Serialize;

use crate::format::{self, flags, CompressorOptions, FormatError, InodeCounts, Source, Superblock};
use crate::kernel::{self, Verdict};
use crate::units;

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
    fn of(sb: &Superblock) -> Self {
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

/// An image opened for reading, with a small read-ahead window so the
/// metadata walk does not issue one system call per block.
pub struct ImageFile {
    file: File,
    len: u64,
    window: std::cell::RefCell<(u64, Vec<u8>)>,
}

const WINDOW: usize = 256 << 10;

/// Why an image cannot be inspected.
#[derive(Debug)]
pub enum InspectError {
    Open(std::io::Error),
    Stat(std::io::Error),
    DeviceSize(std::io::Error),
    /// Neither a regular file nor a block device: what it is.
    NotAnImage(&'static str),
    Image(FormatError),
}

impl std::fmt::Display for InspectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InspectError::Open(e) => write!(f, "cannot open it: {e}"),
            InspectError::Stat(e) => write!(f, "cannot stat it: {}", units::io_error(e)),
            InspectError::DeviceSize(e) => {
                write!(f, "cannot size the block device: {}", units::io_error(e))
            }
            InspectError::NotAnImage(kind) => write!(f, "it is {kind}, not an image file"),
            InspectError::Image(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for InspectError {}

impl ImageFile {
    /// Opens `path` as the caller; refuses anything but a regular file or a
    /// block device (a FIFO must not make us wait, so open non-blocking).
    pub fn open(path: &Path) -> Result<Self, InspectError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(
                rustix::fs::OFlags::NONBLOCK.bits() as i32
                    | rustix::fs::OFlags::NOCTTY.bits() as i32,
            )
            .open(path)
            .map_err(InspectError::Open)?;
        let meta = file.metadata().map_err(InspectError::Stat)?;
        let ft = meta.file_type();
        let len = if ft.is_file() {
            meta.len()
        } else if ft.is_block_device() {
            use std::io::{Seek, SeekFrom};
            let mut f = &file;
            f.seek(SeekFrom::End(0)).map_err(InspectError::DeviceSize)?
        } else {
            let kind = if ft.is_dir() {
                "a directory"
            } else if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_char_device() {
                "a character device"
            } else {
                "not a regular file"
            };
            return Err(InspectError::NotAnImage(kind));
        };
        Ok(ImageFile {
            file,
            len,
            window: std::cell::RefCell::new((0, Vec::new())),
        })
    }
}

impl Source for ImageFile {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FormatError> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| {
                FormatError::Io(format!(
                    "read of {} bytes at {offset} is past the end of the file",
                    buf.len()
                ))
            })?;
        let mut w = self.window.borrow_mut();
        let (start, data) = &mut *w;
        if offset < *start || end > *start + data.len() as u64 {
            if buf.len() > WINDOW {
                return self
                    .file
                    .read_exact_at(buf, offset)
                    .map_err(|e| FormatError::Io(units::io_error(&e)));
            }
            let n = (self.len - offset).min(WINDOW as u64) as usize;
            data.resize(n, 0);
            self.file
                .read_exact_at(data, offset)
                .map_err(|e| FormatError::Io(units::io_error(&e)))?;
            *start = offset;
        }
        let at = (offset - *start) as usize;
        buf.copy_from_slice(&data[at..at + buf.len()]);
        Ok(())
    }
}

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

/// The human-readable form of a report.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    render_format(&mut s, r);
    render_contents(&mut s, r);
    render_mountable(&mut s, r);
    s
}

/// The compressor's options, or "none".
fn compressor_options(o: &CompressorOptions) -> String {
    let mut opts = Vec::new();
    if let Some(l) = o.level {
        opts.push(format!("level {l}"));
    }
    if let Some(w) = o.window_size {
        opts.push(format!("window size {w}"));
    }
    if !o.strategies.is_empty() {
        opts.push(format!("strategies {}", o.strategies.join(",")));
    }
    if let Some(d) = o.dictionary_size {
        opts.push(format!("dictionary {}", units::bytes(u64::from(d))));
    }
    if !o.filters.is_empty() {
        opts.push(format!("filters {}", o.filters.join(",")));
    }
    if let Some(a) = o.algorithm {
        opts.push(format!("algorithm {a}"));
    }
    if let Some(hc) = o.high_compression {
        opts.push(if hc {
            "high compression (-Xhc)".into()
        } else {
            "fast (not -Xhc)".into()
        });
    }
    if opts.is_empty() {
        "none".to_string()
    } else {
        opts.join(", ")
    }
}

/// What the image is: format, compressor, blocks, time.
fn render_format(s: &mut String, r: &Report) {
    use std::fmt::Write;
    let o = &r.compressor_options;
    let opts = compressor_options(o);
    let source = if o.stored {
        "stored in the image"
    } else {
        "mksquashfs defaults"
    };
    let _ = writeln!(s, "Image:            {}", r.image);
    let _ = writeln!(s, "Format:           SquashFS {}", r.version);
    let _ = writeln!(s, "Compressor:       {} ({opts}; {source})", r.compressor);
    let _ = writeln!(
        s,
        "Block size:       {}",
        units::bytes(u64::from(r.block_size))
    );
    let _ = writeln!(
        s,
        "Fragments:        {} ({} fragment blocks{})",
        if r.flags.fragments { "on" } else { "off" },
        r.fragments,
        if r.flags.always_use_fragments {
            ", always used"
        } else {
            ""
        }
    );
    let time_is = if r.mkfs_time == r.newest_file_time {
        "the newest file time in the image, as sqfs pack sets it".to_string()
    } else {
        format!(
            "set when the image was built (or by -mkfs-time, SOURCE_DATE_EPOCH); the newest file is from {}",
            units::utc(i64::from(r.newest_file_time))
        )
    };
    let _ = writeln!(
        s,
        "Image time:       {} ({}): {time_is}",
        r.mkfs_time_utc, r.mkfs_time
    );
}

/// What the image holds: sizes, files, owners, attributes, options.
fn render_contents(s: &mut String, r: &Report) {
    use std::fmt::Write;
    let yes = |b: bool| if b { "yes" } else { "no" };
    let f = &r.files;
    let _ = writeln!(
        s,
        "Image size:       {} ({} bytes; file {} bytes)",
        units::bytes(r.bytes_used),
        r.bytes_used,
        r.file_size
    );
    let _ = writeln!(
        s,
        "File data:        {} uncompressed{}",
        units::bytes(f.file_bytes),
        match r.ratio {
            Some(x) if x < 1.0 => format!(", image is {:.1}% of it", x * 100.0),
            Some(_) => ", less than the image's metadata".to_string(),
            None => String::new(),
        }
    );
    let _ = writeln!(s, "Inodes:           {}", r.inodes);
    let _ = writeln!(
        s,
        "Files:            {} regular, {} directories, {} symlinks, {} devices, {} fifos, {} sockets",
        f.regular_files,
        f.directories,
        f.symlinks,
        f.block_devices + f.char_devices,
        f.fifos,
        f.sockets
    );
    let _ = writeln!(s, "Hard links:       {} extra names", f.extra_links);
    let _ = writeln!(s, "Owners (ids):     {}", crate::names::ids(&r.ids));
    let x = &r.xattrs;
    let _ = writeln!(
        s,
        "Xattrs:           {}",
        if x.left_out {
            "none (left out when it was built: -no-xattrs)".to_string()
        } else if x.sets == 0 && x.inodes == 0 {
            "none".to_string()
        } else {
            format!("{} distinct sets, on {} inodes", x.sets, x.inodes)
        }
    );
    let _ = writeln!(
        s,
        "Options:          duplicates removed: {}, NFS-exportable: {}, compressed inodes/data/fragments: {}/{}/{}",
        yes(r.flags.duplicates_removed),
        yes(r.flags.exportable),
        yes(r.flags.compressed_inodes),
        yes(r.flags.compressed_data),
        yes(r.flags.compressed_fragments)
    );
}

/// Whether this machine can mount it, and which way.
fn render_mountable(s: &mut String, r: &Report) {
    use std::fmt::Write;
    let word = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "NO, not mountable here",
        None => "unknown",
    };
    match &r.mount_path {
        None => {
            let _ = writeln!(
                s,
                "Mountable here:   {}: {}",
                word(r.kernel.can_mount),
                r.kernel.reason
            );
        }
        Some(p) => {
            let (v, why) =
                crate::mountable::verdict(p, (r.kernel.can_mount, r.kernel.reason.as_str()));
            let _ = writeln!(s, "Mountable here:   {}: {why}", word(v));
            if p.path != "kernel" {
                let _ = writeln!(
                    s,
                    "Kernel squashfs:  {}: {}",
                    word(r.kernel.can_mount),
                    r.kernel.reason
                );
            }
        }
    }
}
