//! `sqfs pack --layer DIR IMAGE`: a kept writable layer
//! (`squashfs-mount --writable=DIR`) packed as an image to stack on top of
//! the images it was made on (`squashfs-mount --union=IMAGE,<images>:M`).
//!
//! The layer's upper directory is packed as it is, with what overlayfs
//! wrote there translated for a union that root mounts:
//! - a deleted name is a whiteout (a character device 0/0): kept as such,
//!   overlayfs honours whiteouts in any layer above the one they hide;
//! - a directory deleted and made again is marked opaque with the
//!   `user.overlay.opaque` attribute, which a union root mounts does not
//!   read (it reads `trusted.overlay.*`, which only root may write): each
//!   such directory gets an explicit whiteout for every name the images
//!   below have there and the layer does not (read from the images named
//!   in DIR's stamp, which must be unchanged), recursively for the
//!   directories it kept;
//! - extended attributes are left out (`user.overlay.*` are the layer's
//!   bookkeeping; file capabilities cannot be in a layer anyway).

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use squashfs_format::stamp::{Entry, Stamp};
use squashfs_format::FormatError;
use squashfs_reader::{Archive, FileSource, Kind};

use crate::error::FileError;

/// Why a layer cannot be packed.
#[derive(Debug)]
pub enum LayerError {
    /// No stamp: not a layer directory.
    NoStamp {
        dir: PathBuf,
        error: FileError,
    },
    /// The stamp cannot be parsed (the parser's sentence).
    Stamp(PathBuf, String),
    NoLayerOf {
        dir: PathBuf,
        mount_point: OsString,
        known: Vec<String>,
    },
    NoLayerYet(PathBuf),
    Several {
        dir: PathBuf,
        known: Vec<String>,
    },
    Reading(FileError),
    /// An image below the layer cannot be opened.
    ImageGone {
        image: String,
        error: std::io::Error,
    },
    ImageChanged(String),
    ImageUnreadable(String, std::io::Error),
    Image(String, FormatError),
    /// The images below cannot be listed.
    Below(FormatError),
    File(FileError),
    NewlineInName(PathBuf),
}

crate::error::wraps!(LayerError {
    File(FileError),
    Below(FormatError),
});

impl std::fmt::Display for LayerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use LayerError as E;
        match self {
            E::NoStamp { dir, error } => write!(
                f,
                "{error} (is {} a layer made by squashfs-mount --writable=DIR?)",
                dir.display()
            ),
            E::Stamp(path, e) => write!(f, "{}: {e}", path.display()),
            E::NoLayerOf { dir, mount_point, known } => write!(
                f,
                "{} holds no layer of {} (it has: {})",
                dir.display(),
                mount_point.to_string_lossy(),
                known.join(", ")
            ),
            E::NoLayerYet(dir) => write!(f, "{} holds no layer yet", dir.display()),
            E::Several { dir, known } => write!(
                f,
                "{} holds layers of several mount points ({}): say which with --mount-point",
                dir.display(),
                known.join(", ")
            ),
            E::Reading(e) => write!(f, "reading the layer: {e}"),
            E::ImageGone { image, error } => write!(
                f,
                "the layer has directories that hide what the images below it have there, and {image} (named in its stamp) cannot be opened: {}",
                crate::units::io_error(error)
            ),
            E::ImageChanged(image) => write!(
                f,
                "{image} changed since the layer was made (its stamp names another image): the names the layer's opaque directories hide cannot be known; pack the merged tree instead (squashfs-mount --writable=DIR ... -- sqfs pack <mount point> IMAGE)"
            ),
            E::ImageUnreadable(image, e) => write!(f, "{image}: {e}"),
            E::Image(image, e) => write!(f, "{image}: {e}"),
            E::Below(e) => e.fmt(f),
            E::File(e) => e.fmt(f),
            E::NewlineInName(rel) => write!(
                f,
                "{}: a name with a newline cannot be given to mksquashfs as a whiteout",
                rel.display()
            ),
        }
    }
}

impl std::error::Error for LayerError {}

/// What to pack for one sub-layer.
#[derive(Debug)]
pub struct Layer {
    /// `DIR/<n>/upper`.
    pub upper: PathBuf,
    pub mount_point: OsString,
    /// The images it was made on, top first.
    pub images: Vec<OsString>,
    /// mksquashfs pseudo definitions: the opaque directories' whiteouts.
    pub pseudo: Vec<OsString>,
    pub whiteouts: usize,
    pub opaque: usize,
}

/// Reads DIR's stamp and prepares the sub-layer of `mount_point` (the
/// only one when not given).
pub fn prepare(dir: &Path, mount_point: Option<&OsStr>) -> Result<Layer, LayerError> {
    let stamp_path = dir.join(squashfs_format::stamp::STAMP_FILE);
    let text = std::fs::read(&stamp_path).map_err(|e| LayerError::NoStamp {
        dir: dir.to_path_buf(),
        error: FileError::new(&stamp_path, e),
    })?;
    let stamp =
        Stamp::parse(&text).map_err(|e| LayerError::Stamp(stamp_path.clone(), e.to_string()))?;
    let entry = choose(&stamp, mount_point, dir)?;
    let upper = dir.join(entry.number.to_string()).join("upper");
    let mut opaque_dirs = Vec::new();
    let mut whiteouts = 0;
    crate::tree::walk(&upper, |path, meta, _| {
        if is_whiteout(meta) {
            whiteouts += 1;
        }
        if meta.is_dir() && is_opaque(path) {
            let rel = path
                .strip_prefix(&upper)
                .expect("walk gives paths below its root");
            opaque_dirs.push(rel.to_path_buf());
        }
        Ok(true)
    })
    .map_err(LayerError::Reading)?;
    let mut pseudo = Vec::new();
    if !opaque_dirs.is_empty() {
        let below = Below::open(entry)?;
        // Directories inside an opaque one are handled with it.
        let tops: Vec<&PathBuf> = opaque_dirs
            .iter()
            .filter(|d| !opaque_dirs.iter().any(|o| o != *d && d.starts_with(o)))
            .collect();
        for d in tops {
            hide(&below, &upper, d, &mut pseudo)?;
        }
    }
    Ok(Layer {
        upper,
        mount_point: entry.mount_point.clone(),
        images: entry.images.iter().map(|i| i.path.clone()).collect(),
        pseudo,
        whiteouts,
        opaque: opaque_dirs.len(),
    })
}

fn choose<'a>(
    stamp: &'a Stamp,
    mount_point: Option<&OsStr>,
    dir: &Path,
) -> Result<&'a Entry, LayerError> {
    let known: Vec<String> = stamp
        .entries
        .iter()
        .map(|e| e.mount_point.to_string_lossy().into_owned())
        .collect();
    match mount_point {
        Some(m) => stamp
            .entries
            .iter()
            .find(|e| e.mount_point == m)
            .ok_or_else(|| LayerError::NoLayerOf {
                dir: dir.to_path_buf(),
                mount_point: m.to_os_string(),
                known,
            }),
        None => match stamp.entries.as_slice() {
            [one] => Ok(one),
            [] => Err(LayerError::NoLayerYet(dir.to_path_buf())),
            _ => Err(LayerError::Several {
                dir: dir.to_path_buf(),
                known,
            }),
        },
    }
}

/// A whiteout: a character device 0/0.
fn is_whiteout(meta: &std::fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Marked opaque by overlayfs mounted with `userxattr`.
fn is_opaque(path: &Path) -> bool {
    let mut v = [0u8; 8];
    matches!(rustix::fs::lgetxattr(path, "user.overlay.opaque", &mut v), Ok(1) if v[0] == b'y')
}

/// Names in a directory of the images below: all, and those that are
/// directories there.
type Names = (BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>);

/// The images below the layer, opened and checked against the stamp.
struct Below {
    archives: Vec<Archive<FileSource>>,
}

impl Below {
    fn open(entry: &Entry) -> Result<Below, LayerError> {
        let mut archives = Vec::new();
        for image in &entry.images {
            let shown = image.path.to_string_lossy().into_owned();
            let file = File::open(&image.path).map_err(|error| LayerError::ImageGone {
                image: shown.clone(),
                error,
            })?;
            if identity(&file).as_deref() != Some(image.identity.as_str()) {
                return Err(LayerError::ImageChanged(shown));
            }
            let source =
                FileSource::new(file).map_err(|e| LayerError::ImageUnreadable(shown.clone(), e))?;
            archives.push(Archive::open(source).map_err(|e| LayerError::Image(shown, e))?);
        }
        Ok(Below { archives })
    }

    /// The names in directory `rel` of every image that has it as a
    /// directory, and the names among them that are directories there.
    fn names(&self, rel: &Path) -> Result<Names, LayerError> {
        let (mut all, mut dirs) = (BTreeSet::new(), BTreeSet::new());
        for a in &self.archives {
            let Some(dir) = lookup_dir(a, rel)? else {
                continue;
            };
            for e in &a.listing(&dir)?.entries {
                all.insert(e.name.to_vec());
                if e.kind == Kind::Dir {
                    dirs.insert(e.name.to_vec());
                }
            }
        }
        Ok((all, dirs))
    }
}

/// The inode of directory `rel` in `a`, if it is one there.
fn lookup_dir(
    a: &Archive<FileSource>,
    rel: &Path,
) -> Result<Option<std::sync::Arc<squashfs_reader::Inode>>, squashfs_format::FormatError> {
    let mut dir = a.inode(a.root())?;
    for c in rel.components() {
        let name = c.as_os_str().as_bytes();
        let Some(entry) = a.lookup(&dir, name)? else {
            return Ok(None);
        };
        let inode = a.inode(entry.inode)?;
        if inode.kind != Kind::Dir {
            return Ok(None);
        }
        dir = inode;
    }
    Ok(Some(dir))
}

/// Whiteouts in `rel` (opaque in the layer) for every name below that the
/// layer does not have; the same for the layer's directories there that
/// are directories below too.
fn hide(
    below: &Below,
    upper: &Path,
    rel: &Path,
    pseudo: &mut Vec<OsString>,
) -> Result<(), LayerError> {
    let (names, dirs) = below.names(rel)?;
    let here = upper.join(rel);
    let time = std::fs::symlink_metadata(&here)
        .map_err(FileError::at(&here))?
        .mtime()
        .max(0);
    for name in &names {
        let own = here.join(OsStr::from_bytes(name));
        match std::fs::symlink_metadata(&own) {
            Err(_) => pseudo.push(whiteout_definition(
                &rel.join(OsStr::from_bytes(name)),
                time,
            )?),
            Ok(m) if m.is_dir() && dirs.contains(name) => {
                hide(below, upper, &rel.join(OsStr::from_bytes(name)), pseudo)?
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

/// A mksquashfs pseudo definition of a whiteout at `rel` (every byte but
/// letters, digits and `/._-` escaped with a backslash).
pub fn whiteout_definition(rel: &Path, time: i64) -> Result<OsString, LayerError> {
    let mut out = Vec::new();
    for &b in rel.as_os_str().as_bytes() {
        if b == b'\n' {
            return Err(LayerError::NewlineInName(rel.to_path_buf()));
        }
        if !(b.is_ascii_alphanumeric() || b"/._-".contains(&b)) {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.extend_from_slice(format!(" C {time} 0 0 0 0 0").as_bytes());
    Ok(OsString::from_vec(out))
}

/// The image's identity (squashfs_format::identity) from its file.
fn identity(file: &File) -> Option<String> {
    let mut sb = [0u8; squashfs_format::SUPERBLOCK_SIZE];
    file.read_exact_at(&mut sb, 0).ok()?;
    let size = file.metadata().ok()?.len();
    let superblock = squashfs_format::parse_superblock(&sb, size).ok()?;
    let (start, end) = squashfs_format::identity::tail_range(superblock.bytes_used);
    let mut tail = vec![0u8; (end - start) as usize];
    file.read_exact_at(&mut tail, start).ok()?;
    Some(squashfs_format::identity::identity(&sb, &tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whiteout_definitions_escape_names() {
        assert_eq!(
            whiteout_definition(Path::new("venv/lib/old pkg\"x"), 7).unwrap(),
            "venv/lib/old\\ pkg\\\"x C 7 0 0 0 0 0"
        );
        assert!(whiteout_definition(Path::new("a\nb"), 0).is_err());
    }
}
