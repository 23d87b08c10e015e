//! `sqfs pack --order LIST`: the files a command reads at start-up (a hot
//! list, as `sqfs trace` writes it) are stored first and together, so a
//! cold start reads a few contiguous blocks of the image instead of blocks
//! spread through it.
//!
//! mksquashfs writes files in the order of their `-sort` priorities
//! (highest first). Within one priority it writes them in the reverse of
//! its scan order, so every file gets a priority here: the hot files
//! 32767, 32766, ... in list order (beyond 32767 hot files the rest share
//! priority 1), and every other file a negative priority that follows
//! mksquashfs's own order (depth first, names sorted by bytes), one per
//! file while there are at most 32768 of them, else in runs of equal
//! priority (reversed inside a run, which readahead does not mind). The
//! sort file depends only on the tree's names and the list, so the same
//! tree and list give the same image.
//!
//! The list of the files found is stored in the image as
//! `/.squashfs-mount/hot.list` (pseudo files with the image's time stamp),
//! which squashfs-mount prefetches at launch.

/// Where the image carries its hot list (squashfs-mount reads it there).
pub const IMAGE_LIST_DIR: &str = ".squashfs-mount";
pub const IMAGE_LIST: &str = ".squashfs-mount/hot.list";

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::FileError;

/// Why a hot list cannot be used.
#[derive(Debug)]
pub enum OrderError {
    /// The list file cannot be read.
    Unreadable(FileError),
    /// A line names a path outside the tree.
    LeavesTheTree {
        list: PathBuf,
        line: usize,
        path: PathBuf,
    },
}

impl std::fmt::Display for OrderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrderError::Unreadable(e) => write!(f, "cannot read the hot list {e}"),
            OrderError::LeavesTheTree { list, line, path } => write!(
                f,
                "{}:{line}: '{}' leaves the tree; hot lists name files inside it, relative to its top",
                list.display(),
                path.display()
            ),
        }
    }
}

impl std::error::Error for OrderError {}

/// Highest and lowest priorities mksquashfs accepts.
const TOP: i32 = 32767;
const BOTTOM: i32 = -32768;

/// A hot list read from a file: paths relative to the tree, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HotList {
    pub paths: Vec<PathBuf>,
}

/// Parses a hot list: one path a line, relative to the packed directory
/// (a leading `/` or `./` is ignored); empty lines and lines starting with
/// `#` are skipped. A path with `..` is refused.
pub fn parse(text: &[u8], origin: &Path) -> Result<HotList, OrderError> {
    let mut paths = Vec::new();
    let mut seen = HashSet::new();
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let p = Path::new(OsStr::from_bytes(line));
        let mut rel = PathBuf::new();
        for c in p.components() {
            match c {
                Component::Normal(s) => rel.push(s),
                Component::RootDir | Component::CurDir => {}
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(OrderError::LeavesTheTree {
                        list: origin.to_path_buf(),
                        line: n + 1,
                        path: p.to_path_buf(),
                    })
                }
            }
        }
        if !rel.as_os_str().is_empty() && seen.insert(rel.clone()) {
            paths.push(rel);
        }
    }
    Ok(HotList { paths })
}

/// Reads and parses the hot list in `file`.
pub fn read(file: &Path) -> Result<HotList, OrderError> {
    let text = std::fs::read(file).map_err(|e| OrderError::Unreadable(FileError::new(file, e)))?;
    parse(&text, file)
}

/// The regular files of `root` that mksquashfs will pack, in its own
/// order: depth first, each directory's entries sorted by their bytes,
/// subdirectories entered where they sort. `excluded` (relative paths)
/// are left out with everything below them.
pub fn files_in_pack_order(root: &Path, excluded: &[PathBuf]) -> Result<Vec<PathBuf>, FileError> {
    let excluded: HashSet<&Path> = excluded.iter().map(|p| p.as_path()).collect();
    let mut out = Vec::new();
    // A stack of directory listings still to finish: (entries, next).
    let mut stack: Vec<(Vec<Entry>, usize)> = vec![(list(root, Path::new(""))?, 0)];
    while let Some((entries, next)) = stack.last_mut() {
        let Some((rel, is_dir, is_file)) = entries.get(*next).cloned() else {
            stack.pop();
            continue;
        };
        *next += 1;
        if excluded.contains(rel.as_path()) {
            continue;
        }
        if is_dir {
            stack.push((list(root, &rel)?, 0));
        } else if is_file {
            out.push(rel);
        }
    }
    Ok(out)
}

/// A directory entry: (path relative to the top, is a directory, is a
/// regular file), symbolic links not followed.
type Entry = (PathBuf, bool, bool);

/// `dir`'s entries (relative to `root`), sorted by name bytes.
fn list(root: &Path, dir: &Path) -> Result<Vec<Entry>, FileError> {
    let full = root.join(dir);
    let mut v = Vec::new();
    for e in std::fs::read_dir(&full).map_err(FileError::at(&full))? {
        let e = e.map_err(FileError::at(&full))?;
        let t = e
            .file_type()
            .map_err(|err| FileError::new(&e.path(), err))?;
        v.push((dir.join(e.file_name()), t.is_dir(), t.is_file()));
    }
    v.sort_by(|a, b| a.0.as_os_str().as_bytes().cmp(b.0.as_os_str().as_bytes()));
    Ok(v)
}

/// What `sort_file` made: the text for mksquashfs `-sort`, and what of the
/// hot list it used.
#[derive(Debug, Default)]
pub struct SortPlan {
    pub text: Vec<u8>,
    /// Hot files found in the tree (packed first).
    pub hot: usize,
    /// The hot list as stored in the image: the files found, in order.
    pub list: Vec<u8>,
    /// Hot list entries that are not regular files to be packed (missing,
    /// excluded, directories, links), the first few named.
    pub missing: Vec<PathBuf>,
    pub missing_count: usize,
    /// Files whose names mksquashfs cannot read from a sort file (a
    /// newline in the name): left at priority 0, between hot and the rest.
    pub unlisted: usize,
}

/// The `-sort` file for `files` (in pack order) with `hot` first.
pub fn sort_file(files: &[PathBuf], hot: &HotList) -> SortPlan {
    let in_tree: HashSet<&Path> = files.iter().map(|p| p.as_path()).collect();
    let mut plan = SortPlan::default();
    let mut hot_set: HashSet<&Path> = HashSet::new();
    let mut lines: Vec<(&Path, i32)> = Vec::with_capacity(files.len());
    for p in &hot.paths {
        if in_tree.contains(p.as_path()) {
            let prio = (TOP - plan.hot as i32).max(1);
            lines.push((p, prio));
            hot_set.insert(p);
            plan.hot += 1;
            if !p.as_os_str().as_bytes().contains(&b'\n') {
                plan.list.extend_from_slice(p.as_os_str().as_bytes());
                plan.list.push(b'\n');
            }
        } else {
            plan.missing_count += 1;
            if plan.missing.len() < 5 {
                plan.missing.push(p.clone());
            }
        }
    }
    let cold: Vec<&PathBuf> = files
        .iter()
        .filter(|p| !hot_set.contains(p.as_path()))
        .collect();
    let slots = (-(BOTTOM as i64)) as usize; // -1 ..= -32768
    let run = cold.len().div_ceil(slots).max(1);
    for (i, p) in cold.iter().enumerate() {
        lines.push((p, -1 - (i / run) as i32));
    }
    for (p, prio) in lines {
        let bytes = p.as_os_str().as_bytes();
        if bytes.contains(&b'\n') {
            plan.unlisted += 1;
            continue;
        }
        plan.text.extend_from_slice(&escape(bytes));
        plan.text.extend_from_slice(format!(" {prio}\n").as_bytes());
    }
    plan
}

/// A name as mksquashfs's sort file reads it: white space and backslashes
/// behind a backslash.
fn escape(name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(name.len() + 4);
    for &b in name {
        if matches!(b, b' ' | b'\t' | b'\\' | b'\r' | b'\x0b' | b'\x0c') {
            v.push(b'\\');
        }
        v.push(b);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn lists_are_relative_deduplicated_and_commented() {
        let l = parse(
            b"# comment\n/bin/python\n./lib/a.py\n\nlib/a.py\r\nx y\n",
            Path::new("l"),
        )
        .unwrap();
        assert_eq!(l.paths, [p("bin/python"), p("lib/a.py"), p("x y")]);
        assert!(parse(b"../etc/passwd\n", Path::new("l")).is_err());
        assert!(parse(b"a/../../b\n", Path::new("l")).is_err());
    }

    #[test]
    fn hot_files_first_the_rest_in_pack_order() {
        let files = [p("a/1"), p("a/2"), p("b/3"), p("c d")];
        let hot = HotList {
            paths: vec![p("b/3"), p("nope"), p("c d")],
        };
        let plan = sort_file(&files, &hot);
        assert_eq!(
            String::from_utf8(plan.text).unwrap(),
            "b/3 32767\nc\\ d 32766\na/1 -1\na/2 -2\n"
        );
        assert_eq!((plan.hot, plan.missing_count), (2, 1));
        assert_eq!(plan.missing, [p("nope")]);
    }

    #[test]
    fn many_files_share_priorities_in_runs() {
        let files: Vec<PathBuf> = (0..70_000).map(|i| p(&format!("f{i:06}"))).collect();
        let plan = sort_file(&files, &HotList::default());
        let text = String::from_utf8(plan.text).unwrap();
        let prios: Vec<i32> = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
            .collect();
        assert_eq!(prios.len(), 70_000);
        assert_eq!((prios[0], prios[2], prios[3]), (-1, -1, -2));
        assert!(prios.windows(2).all(|w| w[0] >= w[1]));
        assert!(*prios.last().unwrap() >= BOTTOM);
    }
}
