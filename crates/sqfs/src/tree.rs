//! Walking a directory tree without following symbolic links.

use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Calls `visit(path, metadata, depth)` for `root`'s entries (not `root`
/// itself) in sorted order, depth first; `depth` is 1 for `root`'s
/// children. `descend` decides whether to enter a directory.
pub fn walk(
    root: &Path,
    mut visit: impl FnMut(&Path, &Metadata, usize) -> Result<bool, String>,
) -> Result<(), String> {
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .map(|e| {
                e.map(|e| e.path())
                    .map_err(|e| format!("{}: {e}", dir.display()))
            })
            .collect::<Result<_, _>>()?;
        entries.sort();
        let mut subdirs = Vec::new();
        for path in entries {
            let meta =
                std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let descend = visit(&path, &meta, depth + 1)?;
            if descend && meta.is_dir() {
                subdirs.push((path, depth + 1));
            }
        }
        // Reverse so the stack pops them in sorted order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub entries: u64,
    pub regular_files: u64,
    pub directories: u64,
    pub bytes: u64,
    pub newest_mtime: i64,
}

/// Counts a tree (the root directory's own mtime included).
pub fn stats(root: &Path, progress: &crate::progress::Bar) -> Result<Stats, String> {
    let meta = std::fs::metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", root.display()));
    }
    let mut s = Stats {
        newest_mtime: meta.mtime(),
        ..Stats::default()
    };
    walk(root, |_, m, _| {
        s.entries += 1;
        if m.is_file() {
            s.regular_files += 1;
            s.bytes += m.len();
        } else if m.is_dir() {
            s.directories += 1;
        }
        s.newest_mtime = s.newest_mtime.max(m.mtime());
        if s.entries.is_multiple_of(1024) {
            progress.set(s.entries);
        }
        Ok(true)
    })?;
    Ok(s)
}

/// Reads every regular file under `root` to the end (for `bench`'s default
/// command); returns (files, bytes).
pub fn read_all(root: &Path) -> Result<(u64, u64), String> {
    let mut buf = vec![0u8; 1 << 20];
    let (mut files, mut bytes) = (0u64, 0u64);
    walk(root, |path, meta, _| {
        if meta.is_file() {
            let mut f =
                std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
            loop {
                let n = f
                    .read(&mut buf)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
            files += 1;
        }
        Ok(true)
    })?;
    Ok((files, bytes))
}

/// Stats every entry under `root` (the full-tree walk); returns the count.
pub fn stat_all(root: &Path) -> Result<u64, String> {
    let mut n = 0u64;
    walk(root, |_, _, _| {
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}
