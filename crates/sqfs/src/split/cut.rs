//! The tree cut into units at a depth, and the containers above them.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::SplitError;
use crate::error::FileError;
use crate::progress::Bar;
use crate::tree::Scan;

/// Metadata bytes per entry, compressed, assumed on top of file data:
/// inode (at most 56 bytes plus 4 per block), directory entry (8 + name),
/// headers, fragment and id tables, uncompressed about 64 + name bytes, of
/// which compression keeps about half.
const PER_ENTRY: u64 = 32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Path relative to the tree's top.
    pub rel: PathBuf,
    /// Estimated bytes of metadata in an image (compressed).
    pub meta_cost: u64,
    /// Regular file bytes (hard-linked files counted once), entries (the
    /// unit itself included).
    pub bytes: u64,
    pub entries: u64,
    pub newest_mtime: i64,
    pub is_dir: bool,
}

fn entry_meta_cost(path: &Path) -> u64 {
    PER_ENTRY + path.file_name().map_or(0, |n| n.len() as u64) / 2
}

/// The tree cut into units, plus the containers above them.
#[derive(Debug, Default)]
pub struct Cut {
    pub units: Vec<Unit>,
    /// Container directories (relative paths), top first; excludes the top.
    pub containers: Vec<PathBuf>,
    /// Groups of unit indexes that share a hard-linked inode and must go to
    /// the same image (mksquashfs excludes by inode).
    pub groups: Vec<Vec<usize>>,
    pub newest_mtime: i64,
}

/// Scans `root` and cuts it at `depth` (>= 1), leaving out what `scan`
/// excludes.
pub fn cut(root: &Path, depth: usize, scan: &mut Scan<'_>, bar: &Bar) -> Result<Cut, SplitError> {
    let top = std::fs::metadata(root).map_err(FileError::at(root))?;
    if !top.is_dir() {
        return Err(crate::tree::TreeError::NotADirectory(root.to_path_buf()).into());
    }
    let mut c = Cut {
        newest_mtime: top.mtime(),
        ..Cut::default()
    };
    // Hard-linked inodes (nlink > 1, not directories) -> first unit seen.
    let mut linked: HashMap<(u64, u64), usize> = HashMap::new();
    let mut parent = UnionFind::default();
    let mut unit_dirs: HashMap<PathBuf, usize> = HashMap::new();
    let mut seen = 0u64;
    scan.walk(root, |path, rel, meta, d| {
        seen += 1;
        if seen.is_multiple_of(1024) {
            bar.set(seen);
        }
        c.newest_mtime = c.newest_mtime.max(meta.mtime());
        let key = (meta.dev(), meta.ino());
        // File data counts once per inode.
        let first_name = meta.nlink() <= 1 || meta.is_dir() || !linked.contains_key(&key);
        let data = if meta.is_file() && first_name {
            meta.len()
        } else {
            0
        };
        if d < depth && meta.is_dir() {
            c.containers.push(rel.to_path_buf());
            return Ok::<_, SplitError>(true);
        }
        if d <= depth {
            // A unit: an entry at `depth`, or a non-directory above it.
            c.units.push(Unit {
                rel: rel.to_path_buf(),
                meta_cost: entry_meta_cost(path),
                bytes: data,
                entries: 1,
                newest_mtime: meta.mtime(),
                is_dir: meta.is_dir(),
            });
            let i = c.units.len() - 1;
            parent.add();
            if meta.is_dir() {
                unit_dirs.insert(rel.to_path_buf(), i);
            } else if meta.nlink() > 1 {
                link(&mut linked, &mut parent, key, i);
            }
            return Ok(meta.is_dir());
        }
        // Below a unit directory: its first `depth` components name it.
        let unit_key: PathBuf = rel.components().take(depth).collect();
        let i = *unit_dirs
            .get(&unit_key)
            .ok_or_else(|| SplitError::NoUnit(path.to_path_buf()))?;
        let u = &mut c.units[i];
        u.meta_cost += entry_meta_cost(path);
        u.entries += 1;
        u.bytes += data;
        u.newest_mtime = u.newest_mtime.max(meta.mtime());
        if !meta.is_dir() && meta.nlink() > 1 {
            link(&mut linked, &mut parent, key, i);
        }
        Ok(true)
    })?;
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..c.units.len() {
        groups.entry(parent.find(i)).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    groups.sort();
    c.groups = groups;
    Ok(c)
}

fn link(linked: &mut HashMap<(u64, u64), usize>, uf: &mut UnionFind, key: (u64, u64), unit: usize) {
    match linked.get(&key) {
        Some(&first) => uf.union(first, unit),
        None => {
            linked.insert(key, unit);
        }
    }
}

#[derive(Default)]
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn add(&mut self) {
        self.parent.push(self.parent.len());
    }
    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}
