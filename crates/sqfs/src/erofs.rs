//! `sqfs pack --format erofs`: an EROFS image (mkfs.erofs from erofs-utils)
//! of a tree, deterministically, for measuring EROFS against SquashFS
//! (BENCHMARKS.md, "Cold starts"). squashfs-mount does not mount EROFS
//! images (yet); Linux 6.12 and later mount them straight from the file.
//!
//! Deterministic: the file system UUID is derived from the tree's summary
//! (entries, bytes, newest time) and the build time is the newest
//! modification time in the tree (SOURCE_DATE_EPOCH for mkfs.erofs, with
//! every file keeping its own time), so the same tree gives the same image.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::format::Compressor;
use crate::pack::PackOptions;
use crate::units;

#[derive(Clone, Debug, serde::Serialize)]
pub struct ErofsPacked {
    pub image: String,
    pub format: &'static str,
    pub file_size: u64,
    pub file_bytes: u64,
    pub ratio: Option<f64>,
    pub entries: u64,
    pub seconds: f64,
    pub compressor: String,
    pub mkfs_time: u32,
    pub reproducible: bool,
}

/// mkfs.erofs's compressor for `opts` (erofs-utils 1.5 has lz4 and lz4hc).
fn compressor(opts: &PackOptions, comp_given: bool) -> Result<String, String> {
    match (opts.comp, opts.level) {
        (Compressor::Lz4, None) if comp_given => Ok("lz4".into()),
        (Compressor::Lz4, Some(l)) | (Compressor::Zstd, Some(l)) if comp_given && !(1..=12).contains(&l) => {
            Err(format!("EROFS lz4hc levels are 1..12, not {l}"))
        }
        (Compressor::Lz4, Some(l)) => Ok(format!("lz4hc,{l}")),
        (Compressor::Zstd, None) if !comp_given => Ok("lz4hc".into()),
        (c, _) => Err(format!(
            "EROFS images are compressed with lz4 or lz4hc here (erofs-utils 1.5); --comp {c} is for SquashFS images (use --comp lz4, or leave --comp out for lz4hc)"
        )),
    }
}

/// Builds `image` from `dir` with mkfs.erofs.
pub fn pack(
    dir: &Path,
    image: &Path,
    opts: &PackOptions,
    comp_given: bool,
) -> Result<ErofsPacked, String> {
    let z = compressor(opts, comp_given)?;
    crate::pack::check_outside(dir, image)?;
    if !opts.force && std::fs::symlink_metadata(image).is_ok() {
        return Err(format!(
            "{} exists; pass --force to replace it",
            image.display()
        ));
    }
    let excludes = crate::exclude::Excludes::new();
    let bar = crate::progress::Bar::spinner("scanning the tree");
    let mut scan = crate::tree::Scan::new(&excludes);
    let stats = crate::tree::stats(dir, &mut scan, &bar)?;
    bar.finish();
    scan.finish(dir, false)?;
    let t = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("SOURCE_DATE_EPOCH={v} is not a number of seconds since 1970"))?,
        _ if opts.reproducible => crate::pack::REPRODUCIBLE_EPOCH,
        _ => u32::try_from(stats.newest_mtime.max(0)).unwrap_or(u32::MAX),
    };
    // A UUID from what the tree is (version 4 layout, not random).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in [stats.entries, stats.bytes, stats.file_bytes, u64::from(t)] {
        for b in v.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let uuid = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (h >> 20) & 0xfff,
        h.rotate_left(17) & 0xffff_ffff_ffff
    );
    let name = image
        .file_name()
        .ok_or_else(|| format!("{} is not a file name", image.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".partial-{}", std::process::id()));
    let tmp = image.with_file_name(tmp_name);
    let mut cmd = Command::new("mkfs.erofs");
    cmd.arg("--quiet")
        .arg(format!("-z{z}"))
        .arg(format!("-U{uuid}"));
    if opts.reproducible {
        cmd.arg(format!("-T{t}"));
    } else {
        cmd.arg("--preserve-mtime");
    }
    if opts.reproducible || opts.all_root {
        cmd.arg("--all-root");
    }
    if opts.reproducible || opts.no_xattrs {
        cmd.arg("-x-1");
    }
    cmd.arg(&tmp)
        .arg(dir)
        .env("SOURCE_DATE_EPOCH", t.to_string());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let o = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "mkfs.erofs not found; install erofs-utils (Debian: apt-get install erofs-utils)"
                .to_string()
        } else {
            format!("cannot run mkfs.erofs: {e}")
        }
    })?;
    let seconds = started.elapsed().as_secs_f64();
    if !o.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "mkfs.erofs failed ({}):\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim(),
            String::from_utf8_lossy(&o.stdout).trim()
        ));
    }
    std::fs::rename(&tmp, image).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot move the new image to {}: {e}", image.display())
    })?;
    let file_size = std::fs::metadata(image)
        .map_err(|e| format!("{}: {}", image.display(), units::io_error(&e)))?
        .len();
    Ok(ErofsPacked {
        image: image.display().to_string(),
        format: "erofs",
        file_size,
        file_bytes: stats.file_bytes,
        ratio: (stats.file_bytes > 0).then(|| file_size as f64 / stats.file_bytes as f64),
        entries: stats.entries,
        seconds,
        compressor: z,
        mkfs_time: t,
        reproducible: opts.reproducible,
    })
}
