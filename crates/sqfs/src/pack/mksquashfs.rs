//! One build: the mksquashfs command for a pack, run with its progress
//! followed, and the image moved into place.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::checks::refuse_existing;
use super::options::PackOptions;
use super::options::{compressor_args, time_args};
use super::temporaries::Temporaries;
use super::{hot, PackError};
use crate::error::FileError;
use crate::progress::Bar;

/// Builds `image` from `dir`, excluding `excludes` (paths relative to
/// `dir`, matched by mksquashfs on their inode). `newest_mtime` is the newest
/// modification time in the tree, used as the creation time. Returns the
/// creation time, the build's seconds and, with `--order`, the number of
/// hot files stored first.
pub fn build(
    dir: &Path,
    image: &Path,
    opts: &PackOptions,
    newest_mtime: i64,
    excludes: &[&OsStr],
    input_bytes: u64,
    bar: &Bar,
) -> Result<(u32, f64, Option<usize>), PackError> {
    refuse_existing(image, opts.force)?;
    let tmp = partial_name(image)?;
    let (times, drop_sde, mkfs_time) = time_args(opts, newest_mtime)?;
    // With --order mksquashfs runs in a staging directory (see hot.rs), so
    // every path it is given is absolute.
    let cwd = std::env::current_dir().map_err(PackError::CurrentDir)?;
    let tmp = cwd.join(tmp);
    let files = Temporaries::beside(&tmp);
    let mut cmd = command(&cwd.join(dir), &tmp, opts, &times)?;
    let on_line = exclusions(&mut cmd, excludes, &files.exclude)?;
    let ordered = match &opts.order {
        Some(list) => Some(hot::store_first(
            &mut cmd, dir, excludes, list, &files, mkfs_time,
        )?),
        None => None,
    };
    for p in &opts.pseudo {
        cmd.arg("-p").arg(p);
    }
    if !on_line.is_empty() {
        cmd.arg("-e");
        cmd.args(&on_line);
    }
    if drop_sde {
        cmd.env_remove("SOURCE_DATE_EPOCH");
    }
    let ran = run(cmd, input_bytes, bar)?;
    let seconds = ran.seconds;
    finish(dir, &tmp, image, ran)?;
    Ok((mkfs_time, seconds, ordered))
}

/// The temporary name the image is built under, beside it:
/// `.NAME.partial-PID`.
fn partial_name(image: &Path) -> Result<PathBuf, PackError> {
    let name = image
        .file_name()
        .ok_or_else(|| PackError::NotAFileName(image.to_path_buf()))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".partial-{}", std::process::id()));
    Ok(image.with_file_name(tmp_name))
}

/// mksquashfs with the options of `opts`, writing `dir` into `tmp`.
fn command(
    dir: &Path,
    tmp: &Path,
    opts: &PackOptions,
    times: &[String],
) -> Result<Command, PackError> {
    let mut cmd = Command::new("mksquashfs");
    cmd.arg(dir).arg(tmp);
    cmd.args([
        "-noappend",
        "-quiet",
        "-info",
        "-no-progress",
        "-exit-on-error",
        "-no-exports",
    ]);
    cmd.args(compressor_args(opts.comp, opts.level)?);
    cmd.args(["-b".to_string(), opts.block_size.to_string()]);
    cmd.args(times);
    if opts.reproducible || opts.all_root {
        cmd.arg("-all-root");
    }
    if opts.reproducible || opts.no_xattrs {
        cmd.arg("-no-xattrs");
    }
    if let Some(p) = opts.processors {
        cmd.args(["-processors".to_string(), p.to_string()]);
    }
    Ok(cmd)
}

/// The exclusions go in a file (no limit of the command line), one path
/// a line, each behind a backslash so mksquashfs takes leading blanks
/// and '#' literally; the few names with a newline are returned, for the
/// command line after -e (which must be last).
fn exclusions<'a>(
    cmd: &mut Command,
    excludes: &[&'a OsStr],
    file: &Path,
) -> Result<Vec<&'a OsStr>, PackError> {
    let (in_file, on_line): (Vec<&OsStr>, Vec<&OsStr>) = excludes
        .iter()
        .partition(|e| !e.as_bytes().contains(&b'\n'));
    if !in_file.is_empty() {
        let mut text = Vec::new();
        for e in &in_file {
            text.push(b'\\');
            text.extend_from_slice(e.as_bytes());
            text.push(b'\n');
        }
        std::fs::write(file, text)
            .map_err(|e| PackError::ExclusionList(FileError::new(file, e)))?;
        cmd.arg("-ef").arg(file);
    }
    Ok(on_line)
}

/// What a finished mksquashfs left: its status, standard error, the
/// other lines of its standard output, and how long it ran.
struct Ran {
    status: ExitStatus,
    stderr: Vec<u8>,
    other_output: String,
    seconds: f64,
}

/// Runs mksquashfs, moving `bar` as it writes files.
fn run(mut cmd: Command, input_bytes: u64, bar: &Bar) -> Result<Ran, PackError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            PackError::MksquashfsMissing
        } else {
            PackError::CannotRun(e)
        }
    })?;
    let mut stderr = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let written = Arc::new(AtomicU64::new(0));
    let out_reader = follow(child.stdout.take().expect("piped"), written.clone());
    bar.set_length(input_bytes.max(1));
    // Poll often so the build time measured stays exact to ~10 ms.
    let mut polls = 0u32;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(PackError::Waiting)? {
            break status;
        }
        if polls.is_multiple_of(10) {
            bar.set(written.load(Ordering::Relaxed).min(input_bytes));
        }
        polls = polls.wrapping_add(1);
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let stderr = err_reader.join().unwrap_or_default();
    let other_output = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    Ok(Ran {
        status,
        stderr,
        other_output,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// mksquashfs draws its own progress bar only on a terminal; with -info
/// it names every file as it is written, with its size. Progress is the
/// sum of those sizes out of the tree's, added to `written`; the thread
/// returns the last 20 other lines.
fn follow(
    stdout: std::process::ChildStdout,
    written: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut tail = std::collections::VecDeque::new();
        for line in std::io::BufReader::new(stdout)
            .split(b'\n')
            .map_while(Result::ok)
        {
            if let Some(n) = written_size(&line) {
                written.fetch_add(n, Ordering::Relaxed);
            } else {
                tail.push_back(line);
                if tail.len() > 20 {
                    tail.pop_front();
                }
            }
        }
        tail.into_iter()
            .flat_map(|mut l| {
                l.push(b'\n');
                l
            })
            .collect::<Vec<u8>>()
    })
}

/// Moves the built image into place, or says why mksquashfs failed.
fn finish(dir: &Path, tmp: &Path, image: &Path, ran: Ran) -> Result<(), PackError> {
    if !ran.status.success() {
        let _ = std::fs::remove_file(tmp);
        let mut msg = String::from_utf8_lossy(&ran.stderr).trim().to_string();
        if msg.is_empty() {
            msg = ran.other_output.trim().to_string();
        }
        if let Some(advice) = unreadable_advice(dir, &msg) {
            return Err(PackError::Unreadable(advice));
        }
        return Err(PackError::Failed {
            status: ran.status,
            output: msg,
        });
    }
    std::fs::rename(tmp, image).map_err(|error| {
        let _ = std::fs::remove_file(tmp);
        PackError::CannotMove {
            image: image.to_path_buf(),
            error,
        }
    })
}

/// When mksquashfs failed because it could not read a file or directory
/// ("Failed to read file X", "Could not open X"), one line naming it and
/// saying what to do.
pub fn unreadable_advice(dir: &Path, mksquashfs_output: &str) -> Option<String> {
    let path = mksquashfs_output.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("Failed to read file ")
            .or_else(|| l.strip_prefix("Could not open "))
            .or_else(|| l.strip_prefix("FATAL ERROR: Failed to read file "))
            .or_else(|| l.strip_prefix("FATAL ERROR: Could not open "))
    })?;
    let path = path.trim_end_matches(|c: char| c == ',' || c == '.' || c.is_whitespace());
    let p = Path::new(path);
    let rel = p
        .strip_prefix(dir)
        .ok()
        .map(|r| crate::exclude::literal(r.as_os_str()))
        .or_else(|| {
            let canonical = dir.canonicalize().ok()?;
            p.strip_prefix(&canonical)
                .ok()
                .map(|r| crate::exclude::literal(r.as_os_str()))
        });
    Some(format!(
        "mksquashfs cannot read {path}; make it readable to you (chmod a+r for a file, a+rx for a directory, or ask its owner) or leave it out{}",
        match rel {
            Some(r) => format!(" with --exclude '{r}'"),
            None => " with --exclude".to_string(),
        }
    ))
}

/// The size in a line of mksquashfs -info output
/// (`file /a/b, uncompressed size 4911 bytes [DUPLICATE]`).
fn written_size(line: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(line.strip_prefix(b"file ")?).ok()?;
    let rest = &line[line.rfind(", uncompressed size ")? + ", uncompressed size ".len()..];
    rest.split(' ').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lines() {
        assert_eq!(
            written_size(b"file /a, b, uncompressed size 4911 bytes "),
            Some(4911)
        );
        assert_eq!(
            written_size(b"file /x, uncompressed size 97 bytes DUPLICATE"),
            Some(97)
        );
        assert_eq!(written_size(b"directory /__phello__ inode 0x120"), None);
        assert_eq!(written_size(b"file /\xff, uncompressed size x bytes"), None);
    }
}
