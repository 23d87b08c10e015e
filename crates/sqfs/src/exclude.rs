//! `sqfs pack --exclude PATTERN` / `--exclude-from FILE`: which entries of
//! the tree are left out of the image.
//!
//! Pattern syntax (that of `.gitignore` and `rsync --exclude`, without
//! negation), matched against paths relative to the packed directory:
//!
//! - a pattern without `/` matches the name of an entry at any depth
//!   (`*.pyc`, `__pycache__`, `.git`);
//! - a pattern with a `/` at its start or inside is matched against the
//!   whole relative path, anchored at the top (`/build`, `docs/*.pdf`,
//!   `src/**/test_*.py`);
//! - a trailing `/` matches directories only (`cache/`);
//! - `*` matches any characters but `/` (leading dots included), `?` one
//!   character but `/`, `[abc]`, `[a-z]`, `[!a-z]` one of a set, `{a,b}`
//!   either word, `**` as a whole path component any number of
//!   directories, and `\` makes the next character literal.
//!
//! An excluded directory is left out with everything in it.
//!
//! sqfs matches the patterns itself while it scans the tree (so the sizes it
//! reports and plans with are those of what is packed), and gives mksquashfs
//! the exact paths to leave out. mksquashfs leaves out files, not names: the
//! other names (hard links) of an excluded file go too; sqfs warns when that
//! happens.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use globset::{GlobBuilder, GlobMatcher};

use crate::error::FileError;

/// Why an exclusion pattern cannot be used.
#[derive(Debug)]
pub enum ExcludeError {
    /// An empty pattern (or `/`).
    Empty(String),
    /// A pattern globset refuses, and why.
    Glob(String, globset::ErrorKind),
    /// The `--exclude-from` file cannot be read.
    Unreadable(FileError),
    NotUtf8(PathBuf),
    /// A bad pattern in an `--exclude-from` file.
    InFile(Box<ExcludeError>, PathBuf),
}

impl std::fmt::Display for ExcludeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExcludeError::Empty(text) => write!(
                f,
                "--exclude '{text}': an empty pattern would exclude nothing (or everything); name what to leave out, e.g. '*.pyc' or 'build/'"
            ),
            ExcludeError::Glob(text, kind) => write!(f, "--exclude '{text}': {kind}"),
            ExcludeError::Unreadable(e) => write!(f, "--exclude-from {e}"),
            ExcludeError::NotUtf8(file) => write!(
                f,
                "--exclude-from {}: not UTF-8 text; write the patterns as UTF-8",
                file.display()
            ),
            ExcludeError::InFile(e, file) => write!(f, "{e} (in {})", file.display()),
        }
    }
}

impl std::error::Error for ExcludeError {}

/// One pattern as given, compiled.
struct Pattern {
    text: String,
    matcher: GlobMatcher,
    dirs_only: bool,
    /// Warn when it matches nothing (patterns typed on the command line).
    warn_unused: bool,
    hits: AtomicU64,
}

/// The exclusion patterns of one `pack`.
#[derive(Default)]
pub struct Excludes {
    patterns: Vec<Pattern>,
}

/// Where a pattern came from, for messages and for the no-match warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `--exclude` on the command line: warned about when it matches nothing.
    CommandLine,
    /// `--exclude-from` or a translated mksquashfs `-e`/`-ef`: silent.
    Quiet,
}

impl Excludes {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Adds one pattern (see the module documentation).
    pub fn add(&mut self, pattern: &str, origin: Origin) -> Result<(), ExcludeError> {
        let text = pattern.to_string();
        let mut p = pattern;
        let dirs_only = p.len() > 1 && p.ends_with('/') && !p.ends_with("\\/");
        if dirs_only {
            p = p.trim_end_matches('/');
        }
        if p.is_empty() || p == "/" {
            return Err(ExcludeError::Empty(text));
        }
        let glob = if let Some(anchored) = p.strip_prefix('/') {
            anchored.to_string()
        } else if p.contains('/') {
            p.to_string()
        } else {
            format!("**/{p}")
        };
        let matcher = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| ExcludeError::Glob(text.clone(), e.kind().clone()))?
            .compile_matcher();
        self.patterns.push(Pattern {
            text,
            matcher,
            dirs_only,
            warn_unused: origin == Origin::CommandLine,
            hits: AtomicU64::new(0),
        });
        Ok(())
    }

    /// Adds the patterns of a file, one a line; empty lines and lines
    /// starting with `#` are skipped (a leading `\` keeps a `#` or a space),
    /// leading and trailing white space is removed.
    pub fn add_file(&mut self, file: &Path, origin: Origin) -> Result<(), ExcludeError> {
        let text =
            std::fs::read(file).map_err(|e| ExcludeError::Unreadable(FileError::new(file, e)))?;
        let text =
            String::from_utf8(text).map_err(|_| ExcludeError::NotUtf8(file.to_path_buf()))?;
        for line in text.lines() {
            let line = line.trim_end_matches('\r').trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            self.add(line, origin)
                .map_err(|e| ExcludeError::InFile(Box::new(e), file.to_path_buf()))?;
        }
        Ok(())
    }

    /// The first pattern that excludes `rel` (a path relative to the top),
    /// counting the hit.
    pub fn matches(&self, rel: &Path, is_dir: bool) -> Option<&str> {
        let p = self
            .patterns
            .iter()
            .find(|p| (!p.dirs_only || is_dir) && p.matcher.is_match(rel))?;
        p.hits.fetch_add(1, Ordering::Relaxed);
        Some(&p.text)
    }

    /// The command-line patterns that matched nothing.
    pub fn unused(&self) -> Vec<&str> {
        self.patterns
            .iter()
            .filter(|p| p.warn_unused && p.hits.load(Ordering::Relaxed) == 0)
            .map(|p| p.text.as_str())
            .collect()
    }
}

/// Escapes `path` so that it matches itself only, anchored at the top.
pub fn literal(path: &OsStr) -> String {
    let mut out = String::from("/");
    for c in path.to_string_lossy().chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(patterns: &[&str]) -> Excludes {
        let mut e = Excludes::new();
        for p in patterns {
            e.add(p, Origin::CommandLine).unwrap();
        }
        e
    }

    #[test]
    fn names_match_at_any_depth_paths_are_anchored() {
        let e = ex(&[
            "*.pyc",
            "/build",
            "docs/*.pdf",
            "cache/",
            "src/**/t_*.py",
            "x\\*",
        ]);
        let m = |p: &str, dir: bool| e.matches(Path::new(p), dir).map(str::to_string);
        assert_eq!(m("a.pyc", false).as_deref(), Some("*.pyc"));
        assert_eq!(
            m("lib/py/__pycache__/a.pyc", false).as_deref(),
            Some("*.pyc")
        );
        assert_eq!(m(".hidden.pyc", false).as_deref(), Some("*.pyc"));
        assert_eq!(m("a.pyc.txt", false), None);
        assert_eq!(m("build", true).as_deref(), Some("/build"));
        assert_eq!(m("sub/build", true), None, "anchored");
        assert_eq!(m("docs/a.pdf", false).as_deref(), Some("docs/*.pdf"));
        assert_eq!(m("docs/x/a.pdf", false), None, "* stops at /");
        assert_eq!(m("other/docs/a.pdf", false), None);
        assert_eq!(m("a/cache", true).as_deref(), Some("cache/"));
        assert_eq!(m("a/cache", false), None, "trailing / is for directories");
        assert_eq!(m("src/t_a.py", false).as_deref(), Some("src/**/t_*.py"));
        assert_eq!(m("src/a/b/t_a.py", false).as_deref(), Some("src/**/t_*.py"));
        assert_eq!(m("x*", false).as_deref(), Some("x\\*"));
        assert_eq!(m("xy", false), None);
        assert_eq!(e.unused(), Vec::<&str>::new());
        let e = ex(&["nothing-here", "*.pyc"]);
        e.matches(Path::new("a.pyc"), false);
        assert_eq!(e.unused(), vec!["nothing-here"]);
    }

    #[test]
    fn bad_patterns_are_refused() {
        let mut e = Excludes::new();
        assert!(e.add("", Origin::CommandLine).is_err());
        assert!(e.add("/", Origin::CommandLine).is_err());
        let err = e.add("a[", Origin::CommandLine).unwrap_err().to_string();
        assert!(err.contains("'a['"), "{err}");
    }

    #[test]
    fn literals_match_only_themselves() {
        let e = ex(&[&literal(OsStr::new("a [1]/*x?"))]);
        assert!(e.matches(Path::new("a [1]/*x?"), false).is_some());
        assert!(e.matches(Path::new("a 1/yx!"), false).is_none());
        assert!(e.matches(Path::new("b/a [1]/*x?"), false).is_none());
    }
}
