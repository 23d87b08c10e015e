//! `sqfs trace DIR -- COMMAND`: which files of DIR a command reads, as a
//! hot list for `sqfs pack --order`.
//!
//! How, without privileges: the page cache is the record. The pages of
//! every regular file under DIR are first evicted (`posix_fadvise
//! (DONTNEED)` on a read-only descriptor: any user may do that to files they
//! can open; pages that running programs map, or that are dirty, stay),
//! (after writing back any dirty pages) then the command runs, and afterwards the files with pages in the cache
//! are the ones it read (`fincore` from util-linux asks the kernel with
//! `mincore`). Files still cached before the command started cannot be
//! told apart and are left out (and counted). Linux answers `mincore`
//! truthfully only for files the caller owns or may write (for others it
//! says every page is cached, since 5.0, against page-cache side
//! channels): the files traced must be the caller's (a tree they pack, an
//! image built from it), or sqfs trace runs as root; a tree where every
//! file still looks cached after eviction is refused with that
//! explanation. Within that, it works the same on a
//! plain directory, on an image squashfs-mount mounted through the kernel
//! (a cached instance too) and on a FUSE mount, since all of them keep file
//! data in the page cache; it needs no ptrace, no LD_PRELOAD (which misses
//! the dynamic loader's own reads and static programs) and no fanotify
//! (which needs CAP_SYS_ADMIN for whole-mount marks). It sees what the
//! kernel read, readahead included, which is what a cold start pays for.
//! It records whole files in directory order, not the order of access:
//! squashfs reads whole blocks, and `pack --order` stores the set
//! together, which is what makes the reads contiguous.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::FileError;
use crate::units;

/// Files per fincore run (keeps each command line short).
const BATCH: usize = 512;

#[derive(Debug, serde::Serialize)]
pub struct Traced {
    pub dir: String,
    pub output: String,
    /// Regular files under DIR.
    pub files: usize,
    /// Files the command read (written to the list).
    pub hot: usize,
    /// Their sizes added up.
    pub hot_bytes: u64,
    /// Their bytes in the page cache after the command.
    pub resident_bytes: u64,
    /// Files whose pages could not be evicted before the command (in use);
    /// left out of the list.
    pub stayed_cached: usize,
    /// Files that could not be opened (not traced).
    pub unreadable: usize,
    /// The command's exit status (None: killed by a signal).
    pub exit_status: Option<i32>,
}

/// Why a trace cannot be made.
#[derive(Debug)]
pub enum TraceError {
    File(FileError),
    NotADirectory(PathBuf),
    NoCommand,
    NoFincore,
    /// mincore says every file is cached: not the caller's files.
    NotTruthful(PathBuf),
    Stderr(std::io::Error),
    CannotRun {
        program: PathBuf,
        error: std::io::Error,
    },
    Fincore(std::io::Error),
    NotAFileName(PathBuf),
    CannotWrite {
        output: PathBuf,
        error: std::io::Error,
    },
}

crate::error::wraps!(TraceError { File(FileError) });

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use TraceError as E;
        match self {
            E::File(e) => e.fmt(f),
            E::NotADirectory(dir) => write!(f, "{} is not a directory", dir.display()),
            E::NoCommand => f.write_str("no command given after --"),
            E::NoFincore => f.write_str(
                "fincore not found; install util-linux (it asks the kernel which pages are cached)",
            ),
            E::NotTruthful(dir) => write!(
                f,
                "cannot trace in {}: every file still looks cached after eviction; Linux reports which pages are cached (mincore) only for files you own or may write, and says 'all of them' for others, so trace a tree whose files are yours (the tree you pack, or an image built from it), or run sqfs trace as root",
                dir.display()
            ),
            E::Stderr(e) => write!(f, "standard error: {}", units::io_error(e)),
            E::CannotRun { program, error } => write!(
                f,
                "cannot run {}: {}",
                program.display(),
                units::io_error(error)
            ),
            E::Fincore(e) => write!(f, "cannot run fincore: {}", units::io_error(e)),
            E::NotAFileName(output) => write!(f, "{} is not a file name", output.display()),
            E::CannotWrite { output, error } => write!(
                f,
                "cannot write {}: {}",
                output.display(),
                units::io_error(error)
            ),
        }
    }
}

impl std::error::Error for TraceError {}

/// Runs `command` (no shell) after evicting DIR's files from the page
/// cache, and writes the files it read to `output`. With `quiet_stdout`
/// (for `--json`, whose standard output is the JSON alone) the command's
/// standard output goes to standard error.
pub fn trace(
    dir: &Path,
    output: &Path,
    command: &[OsString],
    quiet_stdout: bool,
) -> Result<Traced, TraceError> {
    let meta = std::fs::metadata(dir).map_err(FileError::at(dir))?;
    if !meta.is_dir() {
        return Err(TraceError::NotADirectory(dir.to_path_buf()));
    }
    let program = command.first().ok_or(TraceError::NoCommand)?;
    if Command::new("fincore")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        return Err(TraceError::NoFincore);
    }
    let files = crate::order::files_in_pack_order(dir, &[])?;
    let (traced, unreadable) = evict(dir, &files);
    let before = resident(dir, &traced)?;
    refuse_untruthful(dir, &traced, &before)?;
    let status = run(program, &command[1..], quiet_stdout)?;
    let after = resident(dir, &traced)?;
    let hot = Hot::of(dir, &traced, &before, &after);
    let mut text = heading(dir, command, &hot, files.len()).into_bytes();
    for rel in &hot.files {
        text.extend_from_slice(rel.as_os_str().as_bytes());
        text.push(b'\n');
    }
    write_atomically(output, &text)?;
    Ok(Traced {
        dir: dir.display().to_string(),
        output: output.display().to_string(),
        files: files.len(),
        hot: hot.files.len(),
        hot_bytes: hot.bytes,
        resident_bytes: hot.resident_bytes,
        stayed_cached: hot.stayed,
        unreadable,
        exit_status: status.code(),
    })
}

/// Evicts the pages of `files` (relative to `dir`); returns the files
/// traced and how many could not be opened.
fn evict<'a>(dir: &Path, files: &'a [PathBuf]) -> (Vec<&'a PathBuf>, usize) {
    let mut unreadable = 0;
    let mut traced: Vec<&PathBuf> = Vec::with_capacity(files.len());
    for rel in files {
        match std::fs::File::open(dir.join(rel)) {
            Ok(f) => {
                // Dirty pages (a file just written) cannot be dropped:
                // write them back first (nothing to do for clean files).
                // Best effort: a file whose pages stay is found below.
                let _ = rustix::fs::fdatasync(&f);
                let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed);
                traced.push(rel);
            }
            Err(_) => unreadable += 1,
        }
    }
    (traced, unreadable)
}

/// Files with data that the eviction emptied: none means mincore is not
/// answering truthfully (or nothing could be evicted).
fn refuse_untruthful(
    dir: &Path,
    traced: &[&PathBuf],
    before: &[Option<u64>],
) -> Result<(), TraceError> {
    let evicted = traced
        .iter()
        .zip(before)
        .filter(|(rel, r)| {
            *r == &Some(0) && std::fs::symlink_metadata(dir.join(rel)).is_ok_and(|m| m.len() > 0)
        })
        .count();
    if evicted == 0 && before.iter().any(|r| r.is_some_and(|r| r > 0)) {
        return Err(TraceError::NotTruthful(dir.to_path_buf()));
    }
    Ok(())
}

/// Runs the traced command and waits for it.
fn run(
    program: &OsString,
    args: &[OsString],
    quiet_stdout: bool,
) -> Result<std::process::ExitStatus, TraceError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    if quiet_stdout {
        let err = std::os::fd::AsFd::as_fd(&std::io::stderr())
            .try_clone_to_owned()
            .map_err(TraceError::Stderr)?;
        cmd.stdout(Stdio::from(err));
    }
    cmd.status().map_err(|error| TraceError::CannotRun {
        program: PathBuf::from(program),
        error,
    })
}

/// The files the command read: cached after it, not before.
struct Hot<'a> {
    files: Vec<&'a PathBuf>,
    /// Their sizes added up, and their bytes in the page cache.
    bytes: u64,
    resident_bytes: u64,
    /// Files whose pages could not be evicted.
    stayed: usize,
}

impl<'a> Hot<'a> {
    fn of(
        dir: &Path,
        traced: &[&'a PathBuf],
        before: &[Option<u64>],
        after: &[Option<u64>],
    ) -> Self {
        let mut hot = Hot {
            files: Vec::new(),
            bytes: 0,
            resident_bytes: 0,
            stayed: 0,
        };
        let mut newline = 0usize;
        for (i, rel) in traced.iter().enumerate() {
            if before[i].is_some_and(|r| r > 0) {
                hot.stayed += 1;
                continue;
            }
            if let Some(res) = after[i].filter(|&r| r > 0) {
                if rel.as_os_str().as_bytes().contains(&b'\n') {
                    newline += 1;
                    continue;
                }
                hot.resident_bytes += res;
                hot.bytes += std::fs::symlink_metadata(dir.join(rel)).map_or(0, |m| m.len());
                hot.files.push(rel);
            }
        }
        if newline > 0 {
            eprintln!("sqfs: warning: {newline} files read have a newline in their name, which a hot list cannot hold; left out");
        }
        hot
    }
}

/// The comment lines at the top of the list.
fn heading(dir: &Path, command: &[OsString], hot: &Hot<'_>, files: usize) -> String {
    let shown: Vec<String> = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!(
        "# sqfs trace: the files of {} that this command read: {}\n# {} of {} files, {} ({} of it read); paths relative to {}, for 'sqfs pack --order'\n",
        dir.display(),
        shown.join(" ").replace('\n', " "),
        hot.files.len(),
        files,
        units::bytes(hot.bytes),
        units::bytes(hot.resident_bytes),
        dir.display()
    )
}

/// Writes `output` under a temporary name, then renames it.
fn write_atomically(output: &Path, text: &[u8]) -> Result<(), TraceError> {
    let name = output
        .file_name()
        .ok_or_else(|| TraceError::NotAFileName(output.to_path_buf()))?;
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".partial-{}", std::process::id()));
    let tmp = output.with_file_name(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, output))
        .map_err(|error| {
            let _ = std::fs::remove_file(&tmp);
            TraceError::CannotWrite {
                output: output.to_path_buf(),
                error,
            }
        })
}

/// The bytes of each file (relative to `dir`) in the page cache, by
/// `fincore`; None for a file it could not look at.
fn resident(dir: &Path, files: &[&PathBuf]) -> Result<Vec<Option<u64>>, TraceError> {
    let mut out = Vec::with_capacity(files.len());
    for batch in files.chunks(BATCH) {
        let o = Command::new("fincore")
            .args([
                "--raw",
                "--noheadings",
                "--bytes",
                "--output",
                "RES,FILE",
                "--",
            ])
            .args(batch.iter().map(|p| p.as_os_str()))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(TraceError::Fincore)?;
        let mut found: std::collections::HashMap<Vec<u8>, u64> = std::collections::HashMap::new();
        for line in o.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if let Some((res, name)) = parse_line(line) {
                found.insert(name, res);
            }
        }
        out.extend(
            batch
                .iter()
                .map(|p| found.get(p.as_os_str().as_bytes()).copied()),
        );
    }
    Ok(out)
}

/// One line of `fincore --raw -o RES,FILE`: the bytes cached, and the name
/// with libsmartcols' `\xHH` escapes undone.
fn parse_line(line: &[u8]) -> Option<(u64, Vec<u8>)> {
    let sp = line.iter().position(|&b| b == b' ')?;
    let res = std::str::from_utf8(&line[..sp]).ok()?.parse().ok()?;
    Some((res, unescape(&line[sp + 1..])))
}

fn unescape(s: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && s.get(i + 1) == Some(&b'x') && i + 3 < s.len() {
            if let Some(b) = std::str::from_utf8(&s[i + 2..i + 4])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                v.push(b);
                i += 4;
                continue;
            }
        }
        v.push(s[i]);
        i += 1;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fincore_lines() {
        assert_eq!(parse_line(b"4096 a/b"), Some((4096, b"a/b".to_vec())));
        assert_eq!(
            parse_line(b"0 with\\x20space\\x5cx"),
            Some((0, b"with space\\x".to_vec()))
        );
        assert_eq!(parse_line(b"8192 \\xff"), Some((8192, vec![0xff])));
        assert_eq!(parse_line(b"x y"), None);
    }
}
