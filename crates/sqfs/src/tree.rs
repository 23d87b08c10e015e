//! Walking a directory tree without following symbolic links.

use std::collections::HashMap;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::exclude::Excludes;
use crate::units;

/// Why a tree cannot be walked or packed.
#[derive(Debug)]
pub enum TreeError {
    File(FileError),
    NotADirectory(PathBuf),
    /// A symbolic link given as the tree, whose target does not resolve.
    DanglingLink {
        link: PathBuf,
        target: PathBuf,
        error: std::io::Error,
    },
    /// A symbolic link given as the tree, to something not a directory.
    LinkToNonDirectory {
        link: PathBuf,
        target: PathBuf,
    },
    /// Entries the caller cannot read, so mksquashfs would fail.
    Unreadable(Unreadable),
}

crate::error::wraps!(TreeError { File(FileError) });

impl std::fmt::Display for TreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TreeError::File(e) => e.fmt(f),
            TreeError::NotADirectory(p) => write!(f, "{} is not a directory", p.display()),
            TreeError::DanglingLink { link, target, error } => write!(
                f,
                "{} is a symbolic link to {}, which cannot be followed ({}); give the directory to pack",
                link.display(),
                target.display(),
                units::io_error(error)
            ),
            TreeError::LinkToNonDirectory { link, target } => write!(
                f,
                "{} is a symbolic link to {}, which is not a directory; give the directory to pack",
                link.display(),
                target.display()
            ),
            TreeError::Unreadable(u) => u.fmt(f),
        }
    }
}

impl std::error::Error for TreeError {}

/// The entries of `root` the caller cannot read (relative path, why),
/// sorted; `can_exclude` (`sqfs pack`) adds how to leave them out.
#[derive(Debug)]
pub struct Unreadable {
    pub root: PathBuf,
    pub entries: Vec<(PathBuf, String)>,
    pub can_exclude: bool,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.entries.len();
        let mut shown: Vec<String> = self
            .entries
            .iter()
            .take(5)
            .map(|(p, why)| format!("{} ({why})", p.display()))
            .collect();
        if n > 5 {
            shown.push(format!("and {} more", n - 5));
        }
        let it = if n == 1 { "it" } else { "them" };
        let leave_out = match self.entries.first() {
            Some((first, _)) if self.can_exclude => format!(
                " or leave {it} out with --exclude, e.g. --exclude '{}'",
                crate::exclude::literal(first.as_os_str())
            ),
            _ => String::new(),
        };
        write!(
            f,
            "cannot read {} in {}, so mksquashfs would fail: {}; make {it} readable to you (chmod a+r for files, a+rx for directories, or ask the owner){leave_out}",
            if n == 1 { "1 entry".to_string() } else { format!("{n} entries") },
            self.root.display(),
            shown.join(", "),
        )
    }
}

/// Calls `visit(path, metadata, depth)` for `root`'s entries (not `root`
/// itself) in sorted order, depth first; `depth` is 1 for `root`'s
/// children. `descend` decides whether to enter a directory.
pub fn walk<E: From<FileError>>(
    root: &Path,
    mut visit: impl FnMut(&Path, &Metadata, usize) -> Result<bool, E>,
) -> Result<(), E> {
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(FileError::at(&dir))?
            .map(|e| e.map(|e| e.path()).map_err(FileError::at(&dir)))
            .collect::<Result<_, _>>()?;
        entries.sort();
        let mut subdirs = Vec::new();
        for path in entries {
            let meta = std::fs::symlink_metadata(&path).map_err(FileError::at(&path))?;
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

/// A walk of a tree to pack: leaves out what the exclusion patterns match
/// and notes what mksquashfs would fail to read, so that both are known
/// before mksquashfs starts.
pub struct Scan<'a> {
    excludes: &'a Excludes,
    /// The excluded entries, relative to the top, in walk order: what
    /// mksquashfs is told to leave out.
    pub excluded: Vec<PathBuf>,
    /// Entries the caller cannot read (relative path, why).
    pub unreadable: Vec<(PathBuf, String)>,
    /// Excluded non-directories with other names: (dev, ino) -> name.
    excluded_inodes: HashMap<(u64, u64), PathBuf>,
    /// Packed non-directories with several names: (dev, ino) -> first name.
    kept_links: HashMap<(u64, u64), PathBuf>,
}

impl<'a> Scan<'a> {
    pub fn new(excludes: &'a Excludes) -> Self {
        Scan {
            excludes,
            excluded: Vec::new(),
            unreadable: Vec::new(),
            excluded_inodes: HashMap::new(),
            kept_links: HashMap::new(),
        }
    }

    /// Walks `root` as [`walk`] does, calling `visit(path, relative path,
    /// metadata, depth)` for the entries that will be packed only.
    pub fn walk<E: From<TreeError> + From<FileError>>(
        &mut self,
        root: &Path,
        mut visit: impl FnMut(&Path, &Path, &Metadata, usize) -> Result<bool, E>,
    ) -> Result<(), E> {
        let top = std::fs::metadata(root).map_err(|e| TreeError::from(FileError::new(root, e)))?;
        if !top.is_dir() {
            return Err(TreeError::NotADirectory(root.to_path_buf()).into());
        }
        walk(root, |path, meta, depth| {
            let rel = path
                .strip_prefix(root)
                .expect("walk gives the paths below its root");
            let key = (meta.dev(), meta.ino());
            if self.excludes.matches(rel, meta.is_dir()).is_some() {
                if !meta.is_dir() && meta.nlink() > 1 {
                    self.excluded_inodes
                        .entry(key)
                        .or_insert_with(|| rel.to_path_buf());
                }
                self.excluded.push(rel.to_path_buf());
                return Ok(false);
            }
            let need = if meta.is_dir() {
                Some(rustix::fs::Access::READ_OK | rustix::fs::Access::EXEC_OK)
            } else if meta.is_file() {
                Some(rustix::fs::Access::READ_OK)
            } else {
                None
            };
            if let Some(need) = need {
                if let Err(e) = rustix::fs::access(path, need) {
                    self.unreadable
                        .push((rel.to_path_buf(), units::io_error(&std::io::Error::from(e))));
                    return Ok(false);
                }
            }
            if !meta.is_dir() && meta.nlink() > 1 {
                self.kept_links
                    .entry(key)
                    .or_insert_with(|| rel.to_path_buf());
            }
            visit(path, rel, meta, depth)
        })
    }

    /// After the walk: refuses a tree with unreadable entries (saying
    /// which, and what to do: with `can_exclude`, `sqfs pack`, also how to
    /// leave them out) and warns about exclusions that go wrong.
    pub fn finish(&self, root: &Path, can_exclude: bool) -> Result<(), TreeError> {
        if !self.unreadable.is_empty() {
            let mut entries = self.unreadable.clone();
            entries.sort();
            return Err(TreeError::Unreadable(Unreadable {
                root: root.to_path_buf(),
                entries,
                can_exclude,
            }));
        }
        for (key, excluded) in &self.excluded_inodes {
            if let Some(kept) = self.kept_links.get(key) {
                eprintln!(
                    "sqfs: warning: {} is excluded, and {} is another name (hard link) of the same file; mksquashfs leaves out files, not names, so {} is left out too (exclude it as well, or break the link with cp)",
                    excluded.display(),
                    kept.display(),
                    kept.display()
                );
            }
        }
        for p in self.excludes.unused() {
            eprintln!(
                "sqfs: warning: --exclude '{p}' matched nothing in {}",
                root.display()
            );
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Entries packed (the top directory not counted).
    pub entries: u64,
    pub regular_files: u64,
    pub directories: u64,
    /// Sizes of the regular files, per name (what mksquashfs reads).
    pub bytes: u64,
    /// Sizes of the regular files, each file once (hard links counted
    /// once): `inspect`'s `file_bytes`.
    pub file_bytes: u64,
    pub newest_mtime: i64,
    /// Entries left out by exclusion patterns (excluded directories count
    /// once, not their contents).
    pub excluded: u64,
}

/// Counts a tree (the root directory's own mtime included), without what
/// `scan` excludes.
pub fn stats(
    root: &Path,
    scan: &mut Scan<'_>,
    progress: &crate::progress::Bar,
) -> Result<Stats, TreeError> {
    let meta = std::fs::metadata(root).map_err(FileError::at(root))?;
    if !meta.is_dir() {
        return Err(TreeError::NotADirectory(root.to_path_buf()));
    }
    let mut s = Stats {
        newest_mtime: meta.mtime(),
        ..Stats::default()
    };
    let mut seen = std::collections::HashSet::new();
    scan.walk(root, |_, _, m, _| {
        s.entries += 1;
        if m.is_file() {
            s.regular_files += 1;
            s.bytes += m.len();
            if m.nlink() <= 1 || seen.insert((m.dev(), m.ino())) {
                s.file_bytes += m.len();
            }
        } else if m.is_dir() {
            s.directories += 1;
        }
        s.newest_mtime = s.newest_mtime.max(m.mtime());
        if s.entries.is_multiple_of(1024) {
            progress.set(s.entries);
        }
        Ok::<_, TreeError>(true)
    })?;
    s.excluded = scan.excluded.len() as u64;
    Ok(s)
}

/// Reads every regular file under `root` to the end (for `bench`'s default
/// command); returns (files, bytes).
pub fn read_all(root: &Path) -> Result<(u64, u64), FileError> {
    let mut buf = vec![0u8; 1 << 20];
    let (mut files, mut bytes) = (0u64, 0u64);
    walk(root, |path, meta, _| {
        if meta.is_file() {
            let mut f = std::fs::File::open(path).map_err(FileError::at(path))?;
            loop {
                let n = f.read(&mut buf).map_err(FileError::at(path))?;
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
            files += 1;
        }
        Ok::<_, FileError>(true)
    })?;
    Ok((files, bytes))
}

/// Stats every entry under `root` (the full-tree walk); returns the count.
pub fn stat_all(root: &Path) -> Result<u64, FileError> {
    let mut n = 0u64;
    walk(root, |_, _, _| {
        n += 1;
        Ok::<_, FileError>(true)
    })?;
    Ok(n)
}
