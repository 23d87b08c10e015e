//! Why `sqfs pack` (and the builds of `--split` and `bench`) cannot go on.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;

use crate::error::FileError;
use crate::format::Compressor;
use crate::order::OrderError;
use crate::tree::TreeError;
use crate::units;

#[derive(Debug)]
pub enum PackError {
    /// A compression level outside the compressor's range.
    Level {
        comp: Compressor,
        lo: u32,
        hi: u32,
        level: u32,
    },
    Lz4Level(u32),
    XzLevel,
    /// `lzma` given with a level (it cannot be mounted).
    LzmaImage,
    /// `lzma` named on the command line.
    LzmaRefused,
    UnknownCompressor(String),
    BlockSize(String),
    Size(units::SizeError),
    SourceDateEpoch(String),
    File(FileError),
    /// The superblock of a new image cannot be read.
    Superblock(PathBuf, squashfs_format::FormatError),
    InsideTree {
        output: PathBuf,
        dir: PathBuf,
    },
    IsADirectory(PathBuf),
    Exists(PathBuf),
    /// The directory of the image refuses new files.
    CannotWrite {
        image: PathBuf,
        parent: PathBuf,
        error: std::io::Error,
    },
    NotAFileName(PathBuf),
    CurrentDir(std::io::Error),
    ExclusionList(FileError),
    SortFile(FileError),
    HotList(FileError),
    MksquashfsMissing,
    CannotRun(std::io::Error),
    Waiting(std::io::Error),
    /// mksquashfs could not read a file: what to do about it.
    Unreadable(String),
    Failed {
        status: ExitStatus,
        output: String,
    },
    CannotMove {
        image: PathBuf,
        error: std::io::Error,
    },
    Tree(TreeError),
    Order(OrderError),
    /// The new image cannot be read back.
    NewImage(PathBuf, crate::stored::StoredError),
    /// The new image's root holds only a symbolic link, the tree did not.
    LoneSymlink {
        image: PathBuf,
        dir: PathBuf,
        walked: u64,
        sentence: String,
    },
}

crate::error::wraps!(PackError {
    File(FileError),
    Size(units::SizeError),
    Tree(TreeError),
    Order(OrderError),
});

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use PackError as E;
        match self {
            E::Level { comp, lo, hi, level } => {
                write!(f, "{comp} levels are {lo}..{hi}, not {level}")
            }
            E::Lz4Level(l) => write!(f, "lz4 has two levels in mksquashfs: 1 (fast, default) and 9 (high compression, -Xhc), not {l}"),
            E::XzLevel => f.write_str("xz has no compression levels in mksquashfs 4.5; leave out --level"),
            E::LzmaImage => f.write_str("lzma images cannot be mounted by Linux; use zstd, gzip, lz4, lzo or xz"),
            E::LzmaRefused => f.write_str("lzma is refused: no Linux kernel can mount lzma images (choose zstd, gzip, lz4, lzo or xz)"),
            E::UnknownCompressor(s) => write!(f, "unknown compressor '{s}' (choose zstd, gzip, lz4, lzo or xz)"),
            E::BlockSize(s) => write!(f, "block size must be a power of two from 4K to 1M, not {s}"),
            E::Size(e) => e.fmt(f),
            E::SourceDateEpoch(v) => write!(f, "SOURCE_DATE_EPOCH={v} is not a number of seconds since 1970 (0..4294967295)"),
            E::File(e) => e.fmt(f),
            E::Superblock(path, e) => write!(f, "{}: {e}", path.display()),
            E::InsideTree { output, dir } => write!(
                f,
                "the output {} would be inside the tree {} being packed; write it elsewhere",
                output.display(),
                dir.display()
            ),
            E::IsADirectory(image) => write!(
                f,
                "{} is a directory; give the image a file name, e.g. {}",
                image.display(),
                image.join("image.sqfs").display()
            ),
            E::Exists(image) => write!(f, "{} exists; pass --force to replace it", image.display()),
            E::CannotWrite { image, parent, error } => write!(
                f,
                "cannot write the image {}: cannot create files in {} ({}); write it into a directory of yours",
                image.display(),
                parent.display(),
                units::io_error(error)
            ),
            E::NotAFileName(image) => write!(f, "{} is not a file name", image.display()),
            E::CurrentDir(e) => write!(f, "the current directory: {}", units::io_error(e)),
            E::ExclusionList(e) => write!(f, "cannot write the list of exclusions {e}"),
            E::SortFile(e) => write!(f, "cannot write the sort file {e}"),
            E::HotList(e) => write!(f, "cannot write {e}"),
            E::MksquashfsMissing => f.write_str("mksquashfs not found; install squashfs-tools (Debian: apt-get install squashfs-tools)"),
            E::CannotRun(e) => write!(f, "cannot run mksquashfs: {e}"),
            E::Waiting(e) => write!(f, "waiting for mksquashfs: {e}"),
            E::Unreadable(advice) => f.write_str(advice),
            E::Failed { status, output } => write!(f, "mksquashfs failed ({status}):\n{output}"),
            E::CannotMove { image, error } => {
                write!(f, "cannot move the new image to {}: {error}", image.display())
            }
            E::Tree(e) => e.fmt(f),
            E::Order(e) => e.fmt(f),
            E::NewImage(image, e) => write!(f, "cannot read the new image {} back: {e}", image.display()),
            E::LoneSymlink { image, dir, walked, sentence } => write!(
                f,
                "{}: {sentence}, not the {walked} entries of {}; the image is removed (is {} a symbolic link? give the directory it points to)",
                image.display(),
                dir.display(),
                dir.display()
            ),
        }
    }
}

impl std::error::Error for PackError {}
