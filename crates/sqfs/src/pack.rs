//! `sqfs pack`: builds an image by driving mksquashfs (squashfs-tools) with
//! defaults chosen for software stacks, deterministically.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::format::Compressor;
use crate::progress::Bar;
use crate::units;

/// Default compressor: zstd decompresses about as fast as lz4/lzo and much
/// faster than xz, and compresses nearly as well as xz.
pub const DEFAULT_COMPRESSOR: Compressor = Compressor::Zstd;
/// Default zstd level; see `level_help`.
pub const DEFAULT_ZSTD_LEVEL: u32 = 15;
/// Default block size: mksquashfs's default. See the man page.
pub const DEFAULT_BLOCK_SIZE: u32 = 128 << 10;
/// The time `--reproducible` gives every file when SOURCE_DATE_EPOCH is not
/// set: 1980-01-01T00:00:00Z, the earliest time zip and other tools that
/// may later copy the files out can represent.
pub const REPRODUCIBLE_EPOCH: u32 = 315_532_800;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackOptions {
    pub comp: Compressor,
    pub level: Option<u32>,
    pub block_size: u32,
    pub reproducible: bool,
    pub processors: Option<u32>,
    pub force: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            comp: DEFAULT_COMPRESSOR,
            level: None,
            block_size: DEFAULT_BLOCK_SIZE,
            reproducible: false,
            processors: None,
            force: false,
        }
    }
}

/// The compressor-specific mksquashfs options for `comp` at `level`, or why
/// that level does not exist.
pub fn compressor_args(comp: Compressor, level: Option<u32>) -> Result<Vec<String>, String> {
    let mut a = vec!["-comp".to_string(), comp.name().to_string()];
    let range = |lo: u32, hi: u32, l: u32| {
        if (lo..=hi).contains(&l) {
            Ok(())
        } else {
            Err(format!("{comp} levels are {lo}..{hi}, not {l}"))
        }
    };
    match (comp, level) {
        (Compressor::Zstd, l) => {
            let l = l.unwrap_or(DEFAULT_ZSTD_LEVEL);
            range(1, 22, l)?;
            a.extend(["-Xcompression-level".into(), l.to_string()]);
        }
        (Compressor::Gzip, Some(l)) => {
            range(1, 9, l)?;
            a.extend(["-Xcompression-level".into(), l.to_string()]);
        }
        (Compressor::Lzo, Some(l)) => {
            range(1, 9, l)?;
            a.extend(["-Xalgorithm".into(), "lzo1x_999".into(), "-Xcompression-level".into(), l.to_string()]);
        }
        (Compressor::Lz4, Some(1)) => {}
        (Compressor::Lz4, Some(9)) => a.push("-Xhc".into()),
        (Compressor::Lz4, Some(l)) => {
            return Err(format!("lz4 has two levels in mksquashfs: 1 (fast, default) and 9 (high compression, -Xhc), not {l}"))
        }
        (Compressor::Xz, Some(_)) => {
            return Err("xz has no compression levels in mksquashfs 4.5; leave out --level".into())
        }
        (Compressor::Lzma, _) => return Err("lzma images cannot be mounted by Linux; use zstd, gzip, lz4, lzo or xz".into()),
        (_, None) => {}
    }
    Ok(a)
}

/// What `sqfs pack` reports about an image it wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Packed {
    pub image: String,
    pub bytes: u64,
    pub input_bytes: u64,
    pub entries: u64,
    pub seconds: f64,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: Compressor,
    pub level: Option<u32>,
    pub block_size: u32,
    pub mkfs_time: u32,
    pub reproducible: bool,
}

/// The timestamps to give mksquashfs: (extra arguments, whether
/// SOURCE_DATE_EPOCH must be removed from its environment).
fn time_args(opts: &PackOptions, newest_mtime: i64) -> Result<(Vec<String>, bool, u32), String> {
    let sde = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.is_empty() => Some(v.trim().parse::<u32>().map_err(|_| {
            format!("SOURCE_DATE_EPOCH={v} is not a number of seconds since 1970 (0..4294967295)")
        })?),
        _ => None,
    };
    Ok(if opts.reproducible {
        let t = sde.unwrap_or(REPRODUCIBLE_EPOCH);
        (
            vec![
                "-all-time".into(),
                t.to_string(),
                "-mkfs-time".into(),
                t.to_string(),
            ],
            true,
            t,
        )
    } else if let Some(t) = sde {
        // mksquashfs's own handling: creation time = SOURCE_DATE_EPOCH and
        // later file times clamped to it.
        (Vec::new(), false, t)
    } else {
        let t = u32::try_from(newest_mtime.max(0)).unwrap_or(u32::MAX);
        (vec!["-mkfs-time".into(), t.to_string()], true, t)
    })
}

/// Refuses an output path inside the tree being packed.
pub fn check_outside(dir: &Path, output: &Path) -> Result<(), String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = parent
        .canonicalize()
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    if parent.starts_with(&dir) {
        return Err(format!(
            "the output {} would be inside the tree {} being packed; write it elsewhere",
            output.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Builds `image` from `dir`, excluding `excludes` (paths relative to
/// `dir`, matched by mksquashfs on their inode). `newest_mtime` is the newest
/// modification time in the tree, used as the creation time.
pub fn build(
    dir: &Path,
    image: &Path,
    opts: &PackOptions,
    newest_mtime: i64,
    excludes: &[OsString],
    input_bytes: u64,
    bar: &Bar,
) -> Result<(u32, f64), String> {
    if !opts.force && std::fs::symlink_metadata(image).is_ok() {
        return Err(format!(
            "{} exists; pass --force to replace it",
            image.display()
        ));
    }
    let name = image
        .file_name()
        .ok_or_else(|| format!("{} is not a file name", image.display()))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".partial-{}", std::process::id()));
    let tmp = image.with_file_name(tmp_name);
    let (times, drop_sde, mkfs_time) = time_args(opts, newest_mtime)?;

    let mut cmd = Command::new("mksquashfs");
    cmd.arg(dir).arg(&tmp);
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
    cmd.args(&times);
    if opts.reproducible {
        cmd.args(["-all-root", "-no-xattrs"]);
    }
    if let Some(p) = opts.processors {
        cmd.args(["-processors".to_string(), p.to_string()]);
    }
    if !excludes.is_empty() {
        let size: usize = excludes.iter().map(|e| e.len() + 1).sum();
        if size > 1 << 20 {
            return Err(format!(
                "{} entries ({} of names) would have to be excluded from one image, more than mksquashfs's command line can take; use a smaller --depth",
                excludes.len(),
                units::bytes(size as u64)
            ));
        }
        cmd.arg("-e");
        cmd.args(excludes);
    }
    if drop_sde {
        cmd.env_remove("SOURCE_DATE_EPOCH");
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "mksquashfs not found; install squashfs-tools (Debian: apt-get install squashfs-tools)"
                .to_string()
        } else {
            format!("cannot run mksquashfs: {e}")
        }
    })?;
    let mut stderr = child.stderr.take().expect("piped");
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    // mksquashfs draws its own progress bar only on a terminal; with -info
    // it names every file as it is written, with its size. Progress is the
    // sum of those sizes out of the tree's.
    let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let out_reader = {
        let written = written.clone();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            let mut tail = std::collections::VecDeque::new();
            for line in std::io::BufReader::new(stdout)
                .split(b'\n')
                .map_while(Result::ok)
            {
                if let Some(n) = written_size(&line) {
                    written.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
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
    };
    bar.set_length(input_bytes.max(1));
    // Poll often so the build time measured stays exact to ~10 ms.
    let mut polls = 0u32;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| format!("waiting for mksquashfs: {e}"))?
        {
            break status;
        }
        if polls.is_multiple_of(10) {
            bar.set(
                written
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .min(input_bytes),
            );
        }
        polls = polls.wrapping_add(1);
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let err = err_reader.join().unwrap_or_default();
    let other_output = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        let _ = std::fs::remove_file(&tmp);
        let mut msg = String::from_utf8_lossy(&err).trim().to_string();
        if msg.is_empty() {
            msg = other_output.trim().to_string();
        }
        return Err(format!("mksquashfs failed ({status}):\n{msg}"));
    }
    std::fs::rename(&tmp, image).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot move the new image to {}: {e}", image.display())
    })?;
    Ok((mkfs_time, seconds))
}

/// The size in a line of mksquashfs -info output
/// (`file /a/b, uncompressed size 4911 bytes [DUPLICATE]`).
fn written_size(line: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(line.strip_prefix(b"file ")?).ok()?;
    let rest = &line[line.rfind(", uncompressed size ")? + ", uncompressed size ".len()..];
    rest.split(' ').next()?.parse().ok()
}

/// `sqfs pack <dir> <image>`.
pub fn pack(dir: &Path, image: &Path, opts: &PackOptions) -> Result<Packed, String> {
    check_outside(dir, image)?;
    let scan = Bar::spinner("scanning the tree");
    let stats = crate::tree::stats(dir, &scan)?;
    scan.finish();
    let bar = Bar::bytes("mksquashfs", stats.bytes);
    let (mkfs_time, seconds) = build(dir, image, opts, stats.newest_mtime, &[], stats.bytes, &bar)?;
    bar.finish();
    let bytes = std::fs::metadata(image)
        .map_err(|e| format!("{}: {e}", image.display()))?
        .len();
    Ok(Packed {
        image: image.display().to_string(),
        bytes,
        input_bytes: stats.bytes,
        entries: stats.entries,
        seconds,
        compressor: opts.comp,
        level: effective_level(opts.comp, opts.level),
        block_size: opts.block_size,
        mkfs_time,
        reproducible: opts.reproducible,
    })
}

/// The level an image is built with, as `inspect` will report it.
pub fn effective_level(comp: Compressor, level: Option<u32>) -> Option<u32> {
    match comp {
        Compressor::Zstd => Some(level.unwrap_or(DEFAULT_ZSTD_LEVEL)),
        Compressor::Gzip => Some(level.unwrap_or(9)),
        Compressor::Lzo => Some(level.unwrap_or(8)),
        Compressor::Lz4 => level,
        _ => None,
    }
}

/// Checks a block size given on the command line.
pub fn parse_block_size(s: &str) -> Result<u32, String> {
    let n = units::parse_size(s)?;
    if !(4096..=1 << 20).contains(&n) || !n.is_power_of_two() {
        return Err(format!(
            "block size must be a power of two from 4K to 1M, not {s}"
        ));
    }
    Ok(n as u32)
}

pub fn parse_compressor(s: &str) -> Result<Compressor, String> {
    match Compressor::from_name(s) {
        Some(Compressor::Lzma) | None => Err(format!(
            "unknown compressor '{s}' (choose zstd, gzip, lz4, lzo or xz)"
        )),
        Some(c) => Ok(c),
    }
}

pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
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

    #[test]
    fn levels() {
        assert_eq!(
            compressor_args(Compressor::Zstd, None).unwrap(),
            ["-comp", "zstd", "-Xcompression-level", "15"]
        );
        assert!(compressor_args(Compressor::Zstd, Some(23)).is_err());
        assert!(compressor_args(Compressor::Gzip, Some(0)).is_err());
        assert_eq!(
            compressor_args(Compressor::Lz4, Some(9)).unwrap(),
            ["-comp", "lz4", "-Xhc"]
        );
        assert!(compressor_args(Compressor::Lz4, Some(5)).is_err());
        assert!(compressor_args(Compressor::Xz, Some(6)).is_err());
        assert_eq!(
            compressor_args(Compressor::Xz, None).unwrap(),
            ["-comp", "xz"]
        );
        assert!(parse_block_size("128K").is_ok());
        assert!(parse_block_size("3K").is_err());
        assert!(parse_block_size("2M").is_err());
        assert!(parse_compressor("lzma").is_err());
    }
}
