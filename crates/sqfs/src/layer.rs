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
use squashfs_reader::{Archive, FileSource, Kind};

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
pub fn prepare(dir: &Path, mount_point: Option<&OsStr>) -> Result<Layer, String> {
    let stamp_path = dir.join(squashfs_format::stamp::STAMP_FILE);
    let text = std::fs::read(&stamp_path).map_err(|e| {
        format!(
            "{}: {} (is {} a layer made by squashfs-mount --writable=DIR?)",
            stamp_path.display(),
            crate::units::io_error(&e),
            dir.display()
        )
    })?;
    let stamp = Stamp::parse(&text).map_err(|e| format!("{}: {e}", stamp_path.display()))?;
    let entry = choose(&stamp, mount_point, dir)?;
    let upper = dir.join(entry.number.to_string()).join("upper");
    let mut opaque_dirs = Vec::new();
    let mut whiteouts = 0;
    crate::tree::walk(&upper, |path, meta, _| {
        if is_whiteout(meta) {
            whiteouts += 1;
        }
        if meta.is_dir() && is_opaque(path) {
            let rel = path.strip_prefix(&upper).map_err(|e| e.to_string())?;
            opaque_dirs.push(rel.to_path_buf());
        }
        Ok(true)
    })
    .map_err(|e| format!("reading the layer: {e}"))?;
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
) -> Result<&'a Entry, String> {
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
            .ok_or_else(|| {
                format!(
                    "{} holds no layer of {} (it has: {})",
                    dir.display(),
                    m.to_string_lossy(),
                    known.join(", ")
                )
            }),
        None => match stamp.entries.as_slice() {
            [one] => Ok(one),
            [] => Err(format!("{} holds no layer yet", dir.display())),
            _ => Err(format!(
                "{} holds layers of several mount points ({}): say which with --mount-point",
                dir.display(),
                known.join(", ")
            )),
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
    fn open(entry: &Entry) -> Result<Below, String> {
        let mut archives = Vec::new();
        for image in &entry.images {
            let shown = image.path.to_string_lossy();
            let file = File::open(&image.path).map_err(|e| {
                format!(
                    "the layer has directories that hide what the images below it have there, and {shown} (named in its stamp) cannot be opened: {}",
                    crate::units::io_error(&e)
                )
            })?;
            if identity(&file).as_deref() != Some(image.identity.as_str()) {
                return Err(format!(
                    "{shown} changed since the layer was made (its stamp names another image): the names the layer's opaque directories hide cannot be known; pack the merged tree instead (squashfs-mount --writable=DIR ... -- sqfs pack <mount point> IMAGE)"
                ));
            }
            let source = FileSource::new(file).map_err(|e| format!("{shown}: {e}"))?;
            archives.push(Archive::open(source).map_err(|e| format!("{shown}: {e}"))?);
        }
        Ok(Below { archives })
    }

    /// The names in directory `rel` of every image that has it as a
    /// directory, and the names among them that are directories there.
    fn names(&self, rel: &Path) -> Result<Names, String> {
        let (mut all, mut dirs) = (BTreeSet::new(), BTreeSet::new());
        for a in &self.archives {
            let Some(dir) = lookup_dir(a, rel).map_err(|e| e.to_string())? else {
                continue;
            };
            for e in &a.listing(&dir).map_err(|e| e.to_string())?.entries {
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
fn hide(below: &Below, upper: &Path, rel: &Path, pseudo: &mut Vec<OsString>) -> Result<(), String> {
    let (names, dirs) = below.names(rel)?;
    let here = upper.join(rel);
    let time = std::fs::symlink_metadata(&here)
        .map_err(|e| format!("{}: {e}", here.display()))?
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
pub fn whiteout_definition(rel: &Path, time: i64) -> Result<OsString, String> {
    let mut out = Vec::new();
    for &b in rel.as_os_str().as_bytes() {
        if b == b'\n' {
            return Err(format!(
                "{}: a name with a newline cannot be given to mksquashfs as a whiteout",
                rel.display()
            ));
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
