//! What `sqfs pack` refuses before it builds anything, and the size of
//! what it built.

use std::path::{Path, PathBuf};

use super::PackError;
use crate::error::FileError;

/// Refuses an output path inside the tree being packed.
pub fn check_outside(dir: &Path, output: &Path) -> Result<(), PackError> {
    let dir = dir.canonicalize().map_err(FileError::at(dir))?;
    let parent = parent_of(output);
    let parent = parent.canonicalize().map_err(FileError::at(&parent))?;
    if parent.starts_with(&dir) {
        return Err(PackError::InsideTree {
            output: output.to_path_buf(),
            dir,
        });
    }
    Ok(())
}

/// The directory a file is written in (`.` for a bare name).
fn parent_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Refuses an existing `image` unless `force`.
pub(super) fn refuse_existing(image: &Path, force: bool) -> Result<(), PackError> {
    if !force && std::fs::symlink_metadata(image).is_ok() {
        return Err(PackError::Exists(image.to_path_buf()));
    }
    Ok(())
}

/// Refuses, before anything is built, an output that cannot be written:
/// a directory, an existing file without `force`, or a directory the
/// caller cannot write in (tried with a probe file, as the build would).
pub fn check_output(image: &Path, force: bool) -> Result<(), PackError> {
    if image.is_dir() {
        return Err(PackError::IsADirectory(image.to_path_buf()));
    }
    refuse_existing(image, force)?;
    let parent = parent_of(image);
    let probe = parent.join(format!(".sqfs-probe-{}", std::process::id()));
    match std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(error) => Err(PackError::CannotWrite {
            image: image.to_path_buf(),
            parent,
            error,
        }),
    }
}

/// The file system size recorded in the superblock of the image at `path`.
pub fn bytes_used(path: &Path) -> Result<u64, PackError> {
    use std::io::Read;
    let mut head = Vec::with_capacity(squashfs_format::SUPERBLOCK_SIZE);
    let f = std::fs::File::open(path).map_err(FileError::at(path))?;
    let size = f.metadata().map_err(FileError::at(path))?.len();
    f.take(squashfs_format::SUPERBLOCK_SIZE as u64)
        .read_to_end(&mut head)
        .map_err(FileError::at(path))?;
    squashfs_format::parse_superblock(&head, size)
        .map(|sb| sb.bytes_used)
        .map_err(|e| PackError::Superblock(path.to_path_buf(), e))
}
