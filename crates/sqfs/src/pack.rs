//! `sqfs pack`: builds an image by driving mksquashfs (squashfs-tools) with
//! defaults chosen for software stacks, deterministically.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, Read};
use std::os::unix::ffi::OsStrExt;
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
    /// Every file owned by root (mksquashfs -all-root); implied by
    /// `reproducible`.
    pub all_root: bool,
    /// Leave extended attributes out (mksquashfs -no-xattrs); implied by
    /// `reproducible`.
    pub no_xattrs: bool,
    pub processors: Option<u32>,
    pub force: bool,
    /// Files to store first, in this order (`--order`, a hot list).
    pub order: Option<crate::order::HotList>,
    /// mksquashfs pseudo definitions added to the tree (`--layer`: the
    /// whiteouts of opaque directories).
    pub pseudo: Vec<std::ffi::OsString>,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            comp: DEFAULT_COMPRESSOR,
            level: None,
            block_size: DEFAULT_BLOCK_SIZE,
            reproducible: false,
            all_root: false,
            no_xattrs: false,
            processors: None,
            force: false,
            order: None,
            pseudo: Vec::new(),
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

/// What `sqfs pack` reports about an image it wrote; `--json` prints it.
/// Fields that `inspect --json` also has carry the same names and meaning.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Packed {
    pub image: String,
    /// The image file's size (padded to 4 KiB).
    pub file_size: u64,
    /// The file system's size in the file (the superblock's bytes_used).
    pub bytes_used: u64,
    /// Regular file data packed, each file once (hard links counted once).
    pub file_bytes: u64,
    /// `bytes_used / file_bytes`; null without file data.
    pub ratio: Option<f64>,
    /// Entries packed (the top directory not counted).
    pub entries: u64,
    /// Entries left out by --exclude patterns (a directory counts once).
    pub excluded: u64,
    pub seconds: f64,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: Compressor,
    pub level: Option<u32>,
    pub block_size: u32,
    /// The image's time stamp (superblock mkfs_time), Unix seconds.
    pub mkfs_time: u32,
    pub mkfs_time_utc: String,
    pub reproducible: bool,
    /// With `--order`: the hot files stored first (null without).
    pub ordered: Option<usize>,
}

/// Below this much file data an image at least as large as its data is
/// so because of its fixed overhead (superblock, tables, metadata); above
/// it, because the data does not compress.
const OVERHEAD_MATTERS_BELOW: u64 = 1 << 20;

/// The `bytes_used / file data` ratio as a phrase for the summary line:
/// "31.2% of 12.0 MiB of file data"; where the image is not smaller than
/// its data, why: the fixed overhead of a tiny tree (no percentage), or
/// data that is already compressed.
pub fn ratio_phrase(bytes_used: u64, file_bytes: u64) -> String {
    if file_bytes == 0 {
        "no file data".to_string()
    } else if bytes_used >= file_bytes && file_bytes < OVERHEAD_MATTERS_BELOW {
        format!(
            "{} of file data; metadata outweighs it",
            units::bytes(file_bytes)
        )
    } else if bytes_used >= file_bytes {
        format!(
            "{:.1}% of {} of file data: it does not compress (already compressed, as .gz files or media are)",
            bytes_used as f64 * 100.0 / file_bytes as f64,
            units::bytes(file_bytes)
        )
    } else {
        format!(
            "{:.1}% of {} of file data",
            bytes_used as f64 * 100.0 / file_bytes as f64,
            units::bytes(file_bytes)
        )
    }
}

/// The file system size recorded in the superblock of the image at `path`.
pub fn bytes_used(path: &Path) -> Result<u64, String> {
    use std::io::Read;
    let mut head = Vec::with_capacity(squashfs_format::SUPERBLOCK_SIZE);
    let f = std::fs::File::open(path)
        .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))?;
    let size = f
        .metadata()
        .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))?
        .len();
    f.take(squashfs_format::SUPERBLOCK_SIZE as u64)
        .read_to_end(&mut head)
        .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))?;
    squashfs_format::parse_superblock(&head, size)
        .map(|sb| sb.bytes_used)
        .map_err(|e| format!("{}: {e}", path.display()))
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
        .map_err(|e| format!("{}: {}", dir.display(), units::io_error(&e)))?;
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = parent
        .canonicalize()
        .map_err(|e| format!("{}: {}", parent.display(), units::io_error(&e)))?;
    if parent.starts_with(&dir) {
        return Err(format!(
            "the output {} would be inside the tree {} being packed; write it elsewhere",
            output.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Refuses, before anything is built, an output that cannot be written:
/// a directory, an existing file without `force`, or a directory the
/// caller cannot write in (tried with a probe file, as the build would).
pub fn check_output(image: &Path, force: bool) -> Result<(), String> {
    if image.is_dir() {
        return Err(format!(
            "{} is a directory; give the image a file name, e.g. {}",
            image.display(),
            image.join("image.sqfs").display()
        ));
    }
    if !force && std::fs::symlink_metadata(image).is_ok() {
        return Err(format!(
            "{} exists; pass --force to replace it",
            image.display()
        ));
    }
    let parent = match image.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = parent.join(format!(".sqfs-probe-{}", std::process::id()));
    match std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot write the image {}: cannot create files in {} ({}); write it into a directory of yours",
            image.display(),
            parent.display(),
            units::io_error(&e)
        )),
    }
}

/// Builds `image` from `dir`, excluding `excludes` (paths relative to
/// `dir`, matched by mksquashfs on their inode). `newest_mtime` is the newest
/// modification time in the tree, used as the creation time.
pub fn build(
    dir: &Path,
    image: &Path,
    opts: &PackOptions,
    newest_mtime: i64,
    excludes: &[&OsStr],
    input_bytes: u64,
    bar: &Bar,
) -> Result<(u32, f64, Option<usize>), String> {
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

    // With --order mksquashfs runs in a staging directory (see below), so
    // every path it is given is absolute.
    let cwd = std::env::current_dir()
        .map_err(|e| format!("the current directory: {}", units::io_error(&e)))?;
    let absolute = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    let tmp = absolute(&tmp);
    let dir_abs = absolute(dir);
    let mut cmd = Command::new("mksquashfs");
    cmd.arg(&dir_abs).arg(&tmp);
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
    if opts.reproducible || opts.all_root {
        cmd.arg("-all-root");
    }
    if opts.reproducible || opts.no_xattrs {
        cmd.arg("-no-xattrs");
    }
    if let Some(p) = opts.processors {
        cmd.args(["-processors".to_string(), p.to_string()]);
    }
    // The exclusions go in a file (no limit of the command line), one path
    // a line, each behind a backslash so mksquashfs takes leading blanks
    // and '#' literally; the few names with a newline go on the command
    // line, after -e (which must be last).
    let mut exclude_file = tmp.clone().into_os_string();
    exclude_file.push(".exclude");
    let exclude_file = PathBuf::from(exclude_file);
    let _cleanup = RemoveOnDrop(exclude_file.clone());
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
        std::fs::write(&exclude_file, text).map_err(|e| {
            format!(
                "cannot write the list of exclusions {}: {}",
                exclude_file.display(),
                units::io_error(&e)
            )
        })?;
        cmd.arg("-ef").arg(&exclude_file);
    }
    // --order: every file gets a -sort priority (see order.rs).
    let mut sort_path = tmp.clone().into_os_string();
    sort_path.push(".sort");
    let sort_path = PathBuf::from(sort_path);
    let _cleanup_sort = RemoveOnDrop(sort_path.clone());
    let mut list_path = tmp.clone().into_os_string();
    list_path.push(".hot");
    let list_path = PathBuf::from(list_path);
    let _cleanup_list = RemoveOnDrop(list_path.clone());
    let mut stage = tmp.clone().into_os_string();
    stage.push(".stage");
    let stage = PathBuf::from(stage);
    let _cleanup_stage = RemoveTreeOnDrop(stage.clone());
    let mut ordered = None;
    if let Some(hot) = &opts.order {
        let excluded: Vec<PathBuf> = excludes.iter().map(PathBuf::from).collect();
        let files = crate::order::files_in_pack_order(dir, &excluded)?;
        let plan = crate::order::sort_file(&files, hot);
        if plan.missing_count > 0 {
            let shown: Vec<String> = plan
                .missing
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            eprintln!(
                "sqfs: warning: {} of the {} entries of the hot list are not files packed from {} ({}{}); they are ignored",
                plan.missing_count,
                hot.paths.len(),
                dir.display(),
                shown.join(", "),
                if plan.missing_count > shown.len() { ", ..." } else { "" }
            );
        }
        if plan.unlisted > 0 {
            eprintln!(
                "sqfs: warning: {} file names contain a newline, which mksquashfs's sort file cannot express; they are stored after the hot files",
                plan.unlisted
            );
        }
        std::fs::write(&sort_path, &plan.text).map_err(|e| {
            format!(
                "cannot write the sort file {}: {}",
                sort_path.display(),
                units::io_error(&e)
            )
        })?;
        cmd.arg("-sort").arg(&sort_path);
        ordered = Some(plan.hot);
        // The list goes into the image too, for squashfs-mount's prefetch,
        // unless it is empty or the tree has its own: pseudo files with the image's time.
        // mksquashfs 4.5 reads pseudo files by their path relative to its
        // working directory when -sort is given (instead of running their
        // command), so it runs in a staging directory that holds the list
        // at that path.
        if plan.hot == 0 {
            // Nothing to prefetch.
        } else if dir
            .join(crate::order::IMAGE_LIST_DIR)
            .symlink_metadata()
            .is_ok()
        {
            eprintln!(
                "sqfs: warning: {} has its own {}; the hot list is not stored in the image",
                dir.display(),
                crate::order::IMAGE_LIST_DIR
            );
        } else {
            let in_stage = stage.join(crate::order::IMAGE_LIST_DIR);
            std::fs::create_dir_all(&in_stage)
                .and_then(|()| std::fs::write(&list_path, &plan.list))
                .and_then(|()| std::fs::write(stage.join(crate::order::IMAGE_LIST), &plan.list))
                // What mksquashfs stores is this file's time (see above).
                .and_then(|()| {
                    std::fs::File::options()
                        .write(true)
                        .open(stage.join(crate::order::IMAGE_LIST))?
                        .set_modified(
                            std::time::UNIX_EPOCH
                                + std::time::Duration::from_secs(u64::from(mkfs_time)),
                        )
                })
                .map_err(|e| {
                    format!(
                        "cannot write {}: {}",
                        list_path.display(),
                        units::io_error(&e)
                    )
                })?;
            cmd.current_dir(&stage);
            let quoted = format!(
                "'{}'",
                list_path.display().to_string().replace('\'', "'\\''")
            );
            cmd.arg("-p").arg(format!(
                "{} D {mkfs_time} 755 0 0",
                crate::order::IMAGE_LIST_DIR
            ));
            cmd.arg("-p").arg(format!(
                "{} F {mkfs_time} 644 0 0 cat {quoted}",
                crate::order::IMAGE_LIST
            ));
        }
    }
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
        if let Some(advice) = unreadable_advice(dir, &msg) {
            return Err(advice);
        }
        return Err(format!("mksquashfs failed ({status}):\n{msg}"));
    }
    std::fs::rename(&tmp, image).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot move the new image to {}: {e}", image.display())
    })?;
    Ok((mkfs_time, seconds, ordered))
}

/// Removes a file when dropped (a temporary file of a build).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Removes a directory tree when dropped (a build's staging directory).
struct RemoveTreeOnDrop(PathBuf);

impl Drop for RemoveTreeOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

/// `sqfs pack <dir> <image>`, leaving out what `excludes` matches.
pub fn pack(
    dir: &Path,
    image: &Path,
    opts: &PackOptions,
    excludes: &crate::exclude::Excludes,
) -> Result<Packed, String> {
    check_outside(dir, image)?;
    check_output(image, opts.force)?;
    let bar = Bar::spinner("scanning the tree");
    let mut scan = crate::tree::Scan::new(excludes);
    let stats = crate::tree::stats(dir, &mut scan, &bar)?;
    bar.finish();
    scan.finish(dir, true)?;
    let excluded: Vec<&OsStr> = scan.excluded.iter().map(|p| p.as_os_str()).collect();
    let bar = Bar::bytes("mksquashfs", stats.bytes);
    let (mkfs_time, seconds, ordered) = build(
        dir,
        image,
        opts,
        stats.newest_mtime,
        &excluded,
        stats.bytes,
        &bar,
    )?;
    bar.finish();
    let file_size = std::fs::metadata(image)
        .map_err(|e| format!("{}: {}", image.display(), units::io_error(&e)))?
        .len();
    let bytes_used = bytes_used(image)?;
    Ok(Packed {
        image: image.display().to_string(),
        file_size,
        bytes_used,
        file_bytes: stats.file_bytes,
        ratio: (stats.file_bytes > 0).then(|| bytes_used as f64 / stats.file_bytes as f64),
        entries: stats.entries,
        excluded: stats.excluded,
        seconds,
        compressor: opts.comp,
        level: effective_level(opts.comp, opts.level),
        block_size: opts.block_size,
        mkfs_time,
        mkfs_time_utc: units::utc(i64::from(mkfs_time)),
        reproducible: opts.reproducible,
        ordered,
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
        Some(Compressor::Lzma) => Err(
            "lzma is refused: no Linux kernel can mount lzma images (choose zstd, gzip, lz4, lzo or xz)"
                .into(),
        ),
        None => Err(format!(
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
        assert!(parse_compressor("lzma")
            .unwrap_err()
            .contains("no Linux kernel can mount lzma"));
        assert!(parse_compressor("brotli")
            .unwrap_err()
            .contains("unknown compressor 'brotli'"));
    }
}
