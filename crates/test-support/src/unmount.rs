//! Taking a directory tree down: what is mounted under it, then its files.

use std::path::Path;
use std::process::Command;

/// Unmounts (lazily) whatever is mounted under `dir` in this namespace,
/// then removes it.
pub fn remove_tree(dir: &Path) {
    let mut mounts = crate::count::mounts_under(dir);
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounts {
        let _ = crate::cmd::try_run(Command::new("umount").args(["-l", &m]));
    }
    let _ = std::fs::remove_dir_all(dir);
}
