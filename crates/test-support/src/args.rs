//! Building squashfs-mount's arguments in the suites.

use std::path::Path;

/// A path as a string (for command lines and shell scripts).
pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `<image>:<mount point>`, as squashfs-mount takes it.
pub fn pair(img: &Path, mnt: &Path) -> String {
    format!("{}:{}", img.display(), mnt.display())
}
