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
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// Runs `command` (no shell) after evicting DIR's files from the page
/// cache, and writes the files it read to `output`. With `quiet_stdout`
/// (for `--json`, whose standard output is the JSON alone) the command's
/// standard output goes to standard error.
pub fn trace(
    dir: &Path,
    output: &Path,
    command: &[OsString],
    quiet_stdout: bool,
) -> Result<Traced, String> {
    let meta = std::fs::metadata(dir)
        .map_err(|e| format!("{}: {}", dir.display(), units::io_error(&e)))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let program = command.first().ok_or("no command given after --")?;
    if Command::new("fincore")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        return Err(
            "fincore not found; install util-linux (it asks the kernel which pages are cached)"
                .into(),
        );
    }
    let files = crate::order::files_in_pack_order(dir, &[])?;
    let mut unreadable = 0;
    let mut traced: Vec<&PathBuf> = Vec::with_capacity(files.len());
    for rel in &files {
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
    let before = resident(dir, &traced)?;
    // Files with data that the eviction emptied: none means mincore is not
    // answering truthfully (or nothing could be evicted).
    let evicted = traced
        .iter()
        .zip(&before)
        .filter(|(rel, r)| {
            *r == &Some(0) && std::fs::symlink_metadata(dir.join(rel)).is_ok_and(|m| m.len() > 0)
        })
        .count();
    if evicted == 0 && before.iter().any(|r| r.is_some_and(|r| r > 0)) {
        return Err(format!(
            "cannot trace in {}: every file still looks cached after eviction; Linux reports which pages are cached (mincore) only for files you own or may write, and says 'all of them' for others, so trace a tree whose files are yours (the tree you pack, or an image built from it), or run sqfs trace as root",
            dir.display()
        ));
    }
    let mut cmd = Command::new(program);
    cmd.args(&command[1..]);
    if quiet_stdout {
        let err = std::os::fd::AsFd::as_fd(&std::io::stderr())
            .try_clone_to_owned()
            .map_err(|e| format!("standard error: {}", units::io_error(&e)))?;
        cmd.stdout(Stdio::from(err));
    }
    let status = cmd.status().map_err(|e| {
        format!(
            "cannot run {}: {}",
            Path::new(program).display(),
            units::io_error(&e)
        )
    })?;
    let after = resident(dir, &traced)?;
    let mut hot: Vec<&PathBuf> = Vec::new();
    let (mut hot_bytes, mut resident_bytes, mut stayed, mut newline) = (0u64, 0u64, 0usize, 0usize);
    for (i, rel) in traced.iter().enumerate() {
        if before[i].is_some_and(|r| r > 0) {
            stayed += 1;
            continue;
        }
        if let Some(res) = after[i].filter(|&r| r > 0) {
            if rel.as_os_str().as_bytes().contains(&b'\n') {
                newline += 1;
                continue;
            }
            resident_bytes += res;
            hot_bytes += std::fs::symlink_metadata(dir.join(rel)).map_or(0, |m| m.len());
            hot.push(rel);
        }
    }
    if newline > 0 {
        eprintln!("sqfs: warning: {newline} files read have a newline in their name, which a hot list cannot hold; left out");
    }
    let mut text = Vec::new();
    let shown: Vec<String> = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    writeln!(
        text,
        "# sqfs trace: the files of {} that this command read: {}",
        dir.display(),
        shown.join(" ").replace('\n', " ")
    )
    .and_then(|()| {
        writeln!(
            text,
            "# {} of {} files, {} ({} of it read); paths relative to {}, for 'sqfs pack --order'",
            hot.len(),
            files.len(),
            units::bytes(hot_bytes),
            units::bytes(resident_bytes),
            dir.display()
        )
    })
    .map_err(|e| e.to_string())?;
    for rel in &hot {
        text.extend_from_slice(rel.as_os_str().as_bytes());
        text.push(b'\n');
    }
    write_atomically(output, &text)?;
    Ok(Traced {
        dir: dir.display().to_string(),
        output: output.display().to_string(),
        files: files.len(),
        hot: hot.len(),
        hot_bytes,
        resident_bytes,
        stayed_cached: stayed,
        unreadable,
        exit_status: status.code(),
    })
}

/// Writes `output` under a temporary name, then renames it.
fn write_atomically(output: &Path, text: &[u8]) -> Result<(), String> {
    let name = output
        .file_name()
        .ok_or_else(|| format!("{} is not a file name", output.display()))?;
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".partial-{}", std::process::id()));
    let tmp = output.with_file_name(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, output))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {}", output.display(), units::io_error(&e))
        })
}

/// The bytes of each file (relative to `dir`) in the page cache, by
/// `fincore`; None for a file it could not look at.
fn resident(dir: &Path, files: &[&PathBuf]) -> Result<Vec<Option<u64>>, String> {
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
            .map_err(|e| format!("cannot run fincore: {}", units::io_error(&e)))?;
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
