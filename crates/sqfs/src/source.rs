//! The directory a pack reads. `sqfs pack ./HCP hcp.sqfs`, where HCP is a
//! symbolic link to a directory (on clusters `$SCRATCH` and project
//! directories often are), packs the directory it leads to, exactly as
//! `./HCP/` does. mksquashfs given a symbolic link as its one source
//! stores the link itself under a made-up root directory (mode 0777): an
//! image whose launches read the host's tree through the link.

use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::tree::TreeError;

/// `dir`, or, when `dir` is a symbolic link, the directory it leads to
/// (the canonical path, links all followed). Refuses a link that leads
/// nowhere or to something other than a directory, and a `dir` that is
/// not a directory.
pub fn resolve(dir: &Path) -> Result<PathBuf, TreeError> {
    let meta = std::fs::symlink_metadata(dir).map_err(FileError::at(dir))?;
    if !meta.file_type().is_symlink() {
        if !meta.is_dir() {
            return Err(TreeError::NotADirectory(dir.to_path_buf()));
        }
        return Ok(dir.to_path_buf());
    }
    let target = std::fs::read_link(dir).map_err(FileError::at(dir))?;
    match std::fs::canonicalize(dir) {
        Ok(p) if p.is_dir() => Ok(p),
        Ok(p) => Err(TreeError::LinkToNonDirectory {
            link: dir.to_path_buf(),
            target: p,
        }),
        Err(error) => Err(TreeError::DanglingLink {
            link: dir.to_path_buf(),
            target,
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_followed_to_their_directory() {
        let t = std::env::temp_dir().join(format!("sqfs-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(t.join("data/sub")).unwrap();
        std::fs::write(t.join("file"), "x").unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, t.join(name)).unwrap();
            t.join(name)
        };
        let real = t.join("data").canonicalize().unwrap();
        // A link, a link to a link, and a trailing '/' (followed already).
        assert_eq!(resolve(&link("data", "HCP")).unwrap(), real);
        assert_eq!(resolve(&link("HCP", "HCP2")).unwrap(), real);
        assert_eq!(resolve(&t.join("HCP/")).unwrap(), t.join("HCP/"));
        assert_eq!(resolve(&t.join("data")).unwrap(), t.join("data"));
        let dangling = resolve(&link("gone", "D")).unwrap_err().to_string();
        assert!(dangling.contains("symbolic link to gone"), "{dangling}");
        let to_file = resolve(&link("file", "F")).unwrap_err().to_string();
        assert!(to_file.contains("not a directory"), "{to_file}");
        let file = resolve(&t.join("file")).unwrap_err().to_string();
        assert!(file.ends_with("is not a directory"), "{file}");
        std::fs::remove_dir_all(&t).unwrap();
    }
}
