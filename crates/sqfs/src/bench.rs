//! `sqfs bench`: for each compressor, build the image and measure its size,
//! build time, and the cold and warm time of a command run inside it
//! through squashfs-mount, plus a full-tree walk. Prints a table and writes
//! an SVG chart.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use crate::format::Compressor;
use crate::pack::{self, PackOptions};
use crate::progress::Bar;
use crate::svg;
use crate::units;

/// Compressors measured when `--comp` is not given: every one the kernel
/// can mount, and zstd at a fast level and at the default level.
pub const DEFAULT_VARIANTS: &str = "gzip,lzo,lz4,xz,zstd:3,zstd:15";

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    pub label: String,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: Compressor,
    pub level: Option<u32>,
    /// `@SIZE`: this variant's block size (else `--block-size`).
    pub block_size: Option<u32>,
}

/// Parses `gzip,lz4:9,zstd:3,zstd:15@32K,...` (NAME[:LEVEL][@BLOCK_SIZE]).
pub fn parse_variants(list: &str) -> Result<Vec<Variant>, String> {
    let mut out: Vec<Variant> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (spec, block_size) = match item.split_once('@') {
            Some((spec, b)) => (
                spec,
                Some(pack::parse_block_size(b).map_err(|e| format!("'{item}': {e}"))?),
            ),
            None => (item, None),
        };
        let (name, level) = match spec.split_once(':') {
            Some((n, l)) => (
                n,
                Some(
                    l.parse::<u32>()
                        .map_err(|_| format!("'{item}': the level must be a number"))?,
                ),
            ),
            None => (spec, None),
        };
        let compressor = pack::parse_compressor(name)?;
        pack::compressor_args(compressor, level).map_err(|e| format!("'{item}': {e}"))?;
        if out.iter().any(|v| v.label == item) {
            return Err(format!("'{item}' is listed twice"));
        }
        out.push(Variant {
            label: item.to_string(),
            compressor,
            level,
            block_size,
        });
    }
    if out.is_empty() {
        return Err("no compressor given".into());
    }
    Ok(out)
}

/// How cold runs are made cold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColdMethod {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` before each run: nothing
    /// is cached, on the whole machine.
    DropCaches,
    /// posix_fadvise(POSIX_FADV_DONTNEED) on the image and a fresh mount:
    /// the image's pages are evicted, files outside it (the command's own
    /// binary and libraries) may stay cached.
    Fadvise,
}

impl ColdMethod {
    pub fn detect() -> Self {
        if std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/sys/vm/drop_caches")
            .is_ok()
        {
            ColdMethod::DropCaches
        } else {
            ColdMethod::Fadvise
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            ColdMethod::DropCaches => "cold (drop_caches)",
            ColdMethod::Fadvise => "cold* (image evicted)",
        }
    }
    pub fn explain(self) -> &'static str {
        match self {
            ColdMethod::DropCaches => "cold: all caches dropped (echo 3 > /proc/sys/vm/drop_caches) before each run",
            ColdMethod::Fadvise => "cold*: not allowed to drop caches (needs root), so before each run the image's pages are evicted with posix_fadvise(DONTNEED) and it is mounted afresh; files outside the image stay cached",
        }
    }

    fn make_cold(self, image: &Path) -> Result<(), String> {
        match self {
            ColdMethod::DropCaches => {
                rustix::fs::sync();
                std::fs::write("/proc/sys/vm/drop_caches", "3\n")
                    .map_err(|e| format!("cannot drop caches: {}", units::io_error(&e)))
            }
            ColdMethod::Fadvise => {
                let f =
                    std::fs::File::open(image).map_err(|e| format!("{}: {e}", image.display()))?;
                rustix::fs::fdatasync(&f)
                    .map_err(|e| format!("{}: fdatasync: {e}", image.display()))?;
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
                    .map_err(|e| format!("{}: posix_fadvise: {e}", image.display()))
            }
        }
    }
}

/// What warm runs measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmMethod {
    /// A second launch of the same image through squashfs-mount's image
    /// cache, right after a first one: what users get when they start
    /// something again. The instance (and its page, inode and dentry
    /// caches) is reused; nothing is decompressed again.
    ImageCache,
    /// A fresh mount right after the cold run: the image file's pages are
    /// cached, decompression is redone. Used when squashfs-mount has no
    /// usable image cache.
    PageCache,
}

impl WarmMethod {
    pub fn explain(self, why: &str) -> String {
        match self {
            WarmMethod::ImageCache => "warm: a second launch of the same image right after a first one, through squashfs-mount's image cache (what users get on a second start: the mounted instance and its caches are reused); cold runs use --no-cache, a fresh mount".to_string(),
            WarmMethod::PageCache => format!("warm: a fresh mount right after the cold run; the image file's pages are cached, decompression is redone ({why})"),
        }
    }
}

/// Which way squashfs-mount mounts the benchmark's images, and why, as its
/// `--policy` says: the kernel's squashfs (loop device) or the FUSE server
/// (in userspace, running as the user); both kinds of instance are kept in
/// squashfs-mount's image cache (a FUSE instance for its user alone). A
/// user's own images go to FUSE under the default site policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MountPath {
    /// "kernel", "FUSE" or "unknown" (a squashfs-mount without `--policy`).
    pub path: String,
    pub reason: String,
}

impl MountPath {
    /// From `squashfs-mount --policy IMAGE`'s output: the line
    /// `<image>: kernel (<reason>)` or `<image>: FUSE (<reason>)`.
    pub fn parse(policy_output: &str) -> Option<MountPath> {
        policy_output.lines().find_map(|l| {
            ["kernel", "FUSE"].iter().find_map(|kind| {
                let at = l.find(&format!(": {kind} ("))?;
                let reason = l[at + kind.len() + 4..].strip_suffix(')')?;
                Some(MountPath {
                    path: kind.to_string(),
                    reason: reason.to_string(),
                })
            })
        })
    }

    /// One line for the table and the chart: the path and the first
    /// clause of its reason, at most about 120 characters (the whole
    /// reason is in `--json` and `squashfs-mount --policy IMAGE`).
    pub fn explain(&self) -> String {
        const MAX_REASON: usize = 60;
        let first = self.reason.split(';').next().unwrap_or_default().trim();
        let short = if first.chars().count() > MAX_REASON {
            let cut: String = first.chars().take(MAX_REASON - 3).collect();
            format!("{}...", cut.trim_end())
        } else {
            first.to_string()
        };
        let what = match self.path.as_str() {
            "kernel" => "kernel",
            "FUSE" => "FUSE, as you",
            _ => "unknown",
        };
        format!("path: {what} ({short}); see squashfs-mount --policy")
    }
}

#[cfg(test)]
mod path_tests {
    use super::MountPath;

    #[test]
    fn the_path_line_is_short() {
        let long = "not trusted: the file is owned by uid 1000, not a trusted owner (root, trusted-owners), who can change it; /home/u (mode 755) can be written by everyone (mode o+w), who can replace its entry on the path";
        for path in ["kernel", "FUSE"] {
            for reason in [long, "kernel-images = all"] {
                let line = MountPath {
                    path: path.into(),
                    reason: reason.into(),
                }
                .explain();
                assert!(line.len() <= 120, "{} chars: {line}", line.len());
                assert!(line.starts_with(&format!("path: {path}")), "{line}");
                assert!(line.contains("--policy"), "{line}");
            }
        }
    }
}

/// Finds squashfs-mount: next to this executable, else on PATH.
pub fn find_squashfs_mount() -> Option<PathBuf> {
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        let p = dir.join("squashfs-mount");
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("squashfs-mount"))
            .find(|p| p.is_file())
    })
}

/// Extra flags for squashfs-mount: `--no-cache` when it has an image cache,
/// so every run measures a fresh mount.
fn mount_flags(squashfs_mount: &Path) -> Vec<OsString> {
    let help = Command::new(squashfs_mount)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if help.contains("--no-cache") {
        vec!["--no-cache".into()]
    } else {
        Vec::new()
    }
}

pub struct BenchOptions {
    pub dir: PathBuf,
    pub variants: Vec<Variant>,
    /// The command, run with `sh -c`; `None`: read every file.
    pub run: Option<String>,
    pub runs: usize,
    pub block_size: u32,
    pub mountpoint: Option<PathBuf>,
    pub work_dir: Option<PathBuf>,
    pub svg: PathBuf,
    pub no_run: bool,
    pub keep: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct VariantResult {
    #[serde(flatten)]
    pub variant: Variant,
    pub bytes: u64,
    pub build_seconds: f64,
    pub cold: Vec<f64>,
    pub warm: Vec<f64>,
    pub walk_cold: Vec<f64>,
    pub walk_warm: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub tree: String,
    pub tree_bytes: u64,
    pub tree_entries: u64,
    pub block_size: u32,
    pub command: Option<String>,
    pub mountpoint: String,
    pub runs: usize,
    pub cold_method: Option<ColdMethod>,
    pub cold_explained: Option<String>,
    pub warm_method: Option<WarmMethod>,
    pub warm_explained: Option<String>,
    /// Which way squashfs-mount mounted the images (kernel or FUSE) and why.
    pub mount_path: Option<MountPath>,
    pub squashfs_mount: Option<String>,
    /// Passed to squashfs-mount for cold runs (and warm runs without the
    /// image cache).
    pub squashfs_mount_flags: Vec<String>,
    pub variants: Vec<VariantResult>,
    pub svg: String,
}

struct Runner {
    exe: PathBuf,
    /// Flags for fresh mounts (`--no-cache` when squashfs-mount has a cache).
    flags: Vec<OsString>,
    mountpoint: PathBuf,
}

impl Runner {
    /// Runs `command` with `image` mounted (through the image cache when
    /// `cached`); returns the wall time of the whole squashfs-mount run.
    fn time(&self, image: &Path, command: &[OsString], cached: bool) -> Result<f64, String> {
        let mut spec = image.as_os_str().to_os_string();
        spec.push(":");
        spec.push(&self.mountpoint);
        let started = Instant::now();
        let mut child = Command::new(&self.exe)
            .args(if cached { &[][..] } else { &self.flags[..] })
            .arg(&spec)
            .arg("--")
            .args(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {}", self.exe.display(), units::io_error(&e)))?;
        let mut err = Vec::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_end(&mut err);
        }
        let status = child.wait().map_err(|e| {
            format!(
                "waiting for {}: {}",
                self.exe.display(),
                units::io_error(&e)
            )
        })?;
        let t = started.elapsed().as_secs_f64();
        if !status.success() {
            let err = String::from_utf8_lossy(&err);
            let err = err.trim();
            return Err(format!(
                "the run inside {} failed ({status}){}",
                image.display(),
                if err.is_empty() {
                    String::new()
                } else {
                    format!(":\n{err}")
                }
            ));
        }
        Ok(t)
    }

    /// squashfs-mount with `args`, its standard output if it succeeded.
    fn maintenance(&self, args: &[&OsStr]) -> Option<String> {
        let o = Command::new(&self.exe)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Which way `image` is mounted (`--policy IMAGE`).
    fn mount_path(&self, image: &Path) -> MountPath {
        self.maintenance(&[OsStr::new("--policy"), image.as_os_str()])
            .and_then(|out| MountPath::parse(&out))
            .unwrap_or_else(|| MountPath {
                path: "unknown".into(),
                reason: "this squashfs-mount does not say (no --policy)".into(),
            })
    }

    /// Whether warm runs can go through the image cache: squashfs-mount has
    /// a cache, can evict one image's
    /// instances (`--gc IMAGE`, so that the bench leaves none behind), and
    /// a launch of `image` left an instance that `--cache-status` lists.
    /// The reason when not, and whether cached instances may have been made
    /// (then the images are evicted at the end).
    fn warm_method(&self, image: &Path) -> (WarmMethod, String, bool) {
        if self.flags.is_empty() {
            return (
                WarmMethod::PageCache,
                "this squashfs-mount has no image cache".into(),
                false,
            );
        }
        if self
            .maintenance(&[OsStr::new("--gc"), image.as_os_str()])
            .is_none()
        {
            return (
                WarmMethod::PageCache,
                "this squashfs-mount cannot evict one image's cached instances (--gc IMAGE), so its image cache is not used".into(),
                false,
            );
        }
        if self.time(image, &[OsString::from("true")], true).is_err() {
            return (
                WarmMethod::PageCache,
                "a launch through the image cache failed".into(),
                true,
            );
        }
        let listed = self
            .maintenance(&[OsStr::new("--cache-status")])
            .is_some_and(|out| out.contains(&*image.to_string_lossy()));
        if listed {
            (WarmMethod::ImageCache, String::new(), true)
        } else {
            (
                WarmMethod::PageCache,
                "squashfs-mount kept no cached instance: cache off in /etc/squashfs-mount.conf, or unavailable here".into(),
                true,
            )
        }
    }

    /// Evicts the cached instances of `image` (`--gc IMAGE`).
    fn evict(&self, image: &Path) {
        let _ = self.maintenance(&[OsStr::new("--gc"), image.as_os_str()]);
    }
}

fn self_command(args: &[&OsStr]) -> Result<Vec<OsString>, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find sqfs's own executable: {e}"))?;
    let mut v = vec![exe.into_os_string()];
    v.extend(args.iter().map(|a| a.to_os_string()));
    Ok(v)
}

pub fn bench(o: &BenchOptions) -> Result<Report, String> {
    let dir = o
        .dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", o.dir.display()))?;
    let mountpoint = match &o.mountpoint {
        Some(m) => m
            .canonicalize()
            .map_err(|e| format!("mount point {}: {e}", m.display()))?,
        None => dir.clone(),
    };
    if mountpoint.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(format!(
            "the mount point {} contains ':', which squashfs-mount cannot take; pass --mountpoint",
            mountpoint.display()
        ));
    }
    let bar = Bar::spinner("scanning the tree");
    let no_excludes = crate::exclude::Excludes::new();
    let mut scan = crate::tree::Scan::new(&no_excludes);
    let stats = crate::tree::stats(&dir, &mut scan, &bar)?;
    bar.finish();
    scan.finish(&dir, false)?;

    let (runner, cold) = if o.no_run {
        (None, None)
    } else {
        let exe = find_squashfs_mount().ok_or(
            "squashfs-mount not found next to sqfs nor on PATH; install it (make install), or pass --no-run to measure only sizes and build times",
        )?;
        let flags = mount_flags(&exe);
        (
            Some(Runner {
                exe,
                flags,
                mountpoint: mountpoint.clone(),
            }),
            Some(ColdMethod::detect()),
        )
    };
    let work = match &o.work_dir {
        Some(w) => w.clone(),
        None => std::env::temp_dir(),
    };
    let work = tempdir_in(&work)?;
    let mut warm: Option<(WarmMethod, String)> = None;
    let mut mount_path: Option<MountPath> = None;
    let result = run_all(
        o,
        &dir,
        &stats,
        runner.as_ref(),
        cold,
        &work,
        &mut warm,
        &mut mount_path,
    );
    if !o.keep {
        let _ = std::fs::remove_dir_all(&work);
    } else {
        eprintln!("sqfs bench: images kept in {}", work.display());
    }
    let variants = result?;
    let report = Report {
        tree: dir.display().to_string(),
        tree_bytes: stats.bytes,
        tree_entries: stats.entries,
        block_size: o.block_size,
        command: if o.no_run {
            None
        } else {
            Some(o.run.clone().unwrap_or_else(|| "(read every file)".into()))
        },
        mountpoint: mountpoint.display().to_string(),
        runs: if o.no_run { 0 } else { o.runs },
        cold_method: cold,
        cold_explained: cold.map(|c| c.explain().to_string()),
        warm_method: warm.as_ref().map(|w| w.0),
        warm_explained: warm.as_ref().map(|(m, why)| m.explain(why)),
        mount_path,
        squashfs_mount: runner.as_ref().map(|r| r.exe.display().to_string()),
        squashfs_mount_flags: runner.as_ref().map_or(Vec::new(), |r| {
            r.flags
                .iter()
                .map(|f| f.to_string_lossy().into_owned())
                .collect()
        }),
        variants,
        svg: o.svg.display().to_string(),
    };
    let chart = chart(&report);
    std::fs::write(&o.svg, svg::render(&chart)).map_err(|e| format!("{}: {e}", o.svg.display()))?;
    Ok(report)
}

fn tempdir_in(parent: &Path) -> Result<PathBuf, String> {
    for i in 0..100u32 {
        let p = parent.join(format!("sqfs-bench-{}-{i}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", p.display())),
        }
    }
    Err(format!(
        "cannot create a work directory in {}",
        parent.display()
    ))
}

#[allow(clippy::too_many_arguments)]
fn run_all(
    o: &BenchOptions,
    dir: &Path,
    stats: &crate::tree::Stats,
    runner: Option<&Runner>,
    cold: Option<ColdMethod>,
    work: &Path,
    warm: &mut Option<(WarmMethod, String)>,
    mount_path: &mut Option<MountPath>,
) -> Result<Vec<VariantResult>, String> {
    let mountpoint = runner.map_or(dir, |r| r.mountpoint.as_path());
    let command: Vec<OsString> = match &o.run {
        Some(c) => vec!["sh".into(), "-c".into(), c.into()],
        None => self_command(&[
            OsStr::new("__tree"),
            OsStr::new("read"),
            mountpoint.as_os_str(),
        ])?,
    };
    let walk = self_command(&[
        OsStr::new("__tree"),
        OsStr::new("stat"),
        mountpoint.as_os_str(),
    ])?;
    let runs_per_round = if runner.is_some() { 4 } else { 0 };
    let total = o.variants.len() as u64 * (1 + runs_per_round * o.runs as u64);
    let bar = Bar::steps("bench", total);
    // Build every image first.
    let mut results = Vec::new();
    let mut images = Vec::new();
    for v in &o.variants {
        bar.set_message(format!("building {}", v.label));
        let image = work.join(format!("{}.sqfs", v.label.replace([':', '@'], "-")));
        let opts = PackOptions {
            comp: v.compressor,
            level: v.level,
            block_size: v.block_size.unwrap_or(o.block_size),
            force: true,
            ..PackOptions::default()
        };
        let quiet = Bar::hidden(); // the bench bar counts whole builds
        let (_, build_seconds, _) = pack::build(
            dir,
            &image,
            &opts,
            stats.newest_mtime,
            &[],
            stats.bytes,
            &quiet,
        )?;
        bar.inc(1);
        let bytes = std::fs::metadata(&image)
            .map_err(|e| format!("{}: {}", image.display(), units::io_error(&e)))?
            .len();
        results.push(VariantResult {
            variant: v.clone(),
            bytes,
            build_seconds,
            cold: Vec::new(),
            warm: Vec::new(),
            walk_cold: Vec::new(),
            walk_warm: Vec::new(),
        });
        images.push(image);
    }
    // Then measure in rounds: each round visits every compressor once (in
    // an order rotated from round to round), so a passing disturbance on the
    // machine spreads over all of them rather than spoiling one.
    if let (Some(runner), Some(cold)) = (runner, cold) {
        bar.set_message("checking squashfs-mount's policy and image cache");
        let path = runner.mount_path(&images[0]);
        let (method, why, cached) = runner.warm_method(&images[0]);
        *warm = Some((method, why));
        *mount_path = Some(path);
        let measured = measure(
            o,
            runner,
            cold,
            method,
            &images,
            &command,
            &walk,
            &mut results,
            &bar,
        );
        if cached {
            for image in &images {
                runner.evict(image);
            }
        }
        measured?;
    }
    if !o.keep {
        for image in &images {
            let _ = std::fs::remove_file(image);
        }
    }
    bar.finish();
    Ok(results)
}

/// The timed runs. Cold: the caches dropped (or the image evicted), a
/// fresh mount. Warm, through the image cache: a first launch (untimed,
/// it fills the caches the cold run's drop emptied), then the timed
/// second launch; without it: a fresh mount right after the cold run.
#[allow(clippy::too_many_arguments)]
fn measure(
    o: &BenchOptions,
    runner: &Runner,
    cold: ColdMethod,
    warm: WarmMethod,
    images: &[PathBuf],
    command: &[OsString],
    walk: &[OsString],
    results: &mut [VariantResult],
    bar: &Bar,
) -> Result<(), String> {
    let n = o.variants.len();
    for round in 0..o.runs {
        for k in 0..n {
            let i = (round + k) % n;
            let image = &images[i];
            let r = &mut results[i];
            let label = &r.variant.label;
            for (what, cmd) in [("command", command), ("walk", walk)] {
                bar.set_message(format!("round {}/{}: {label}, {what}", round + 1, o.runs));
                cold.make_cold(image)?;
                let c = runner.time(image, cmd, false)?;
                let w = match warm {
                    WarmMethod::ImageCache => {
                        runner.time(image, cmd, true)?;
                        runner.time(image, cmd, true)?
                    }
                    WarmMethod::PageCache => runner.time(image, cmd, false)?,
                };
                if what == "command" {
                    r.cold.push(c);
                    r.warm.push(w);
                } else {
                    r.walk_cold.push(c);
                    r.walk_warm.push(w);
                }
                bar.inc(2);
            }
        }
    }
    Ok(())
}

fn median(v: &[f64]) -> Option<f64> {
    let s = svg::sorted(v);
    (!s.is_empty()).then(|| svg::quantile(&s, 0.5))
}

fn spread(v: &[f64]) -> String {
    let s = svg::sorted(v);
    match (median(v), s.first(), s.last()) {
        (Some(m), Some(lo), Some(hi)) => format!("{} [{}-{}]", units::seconds(m), ms(*lo), ms(*hi)),
        _ => "-".into(),
    }
}

fn ms(s: f64) -> String {
    if s < 10.0 {
        format!("{:.0}", s * 1000.0)
    } else {
        format!("{s:.1}s")
    }
}

pub fn chart(r: &Report) -> svg::Chart {
    let mut notes = vec![format!(
        "Tree: {} ({}, {} entries), block size {}",
        r.tree,
        units::bytes(r.tree_bytes),
        r.tree_entries,
        units::bytes(u64::from(r.block_size))
    )];
    match (&r.command, r.cold_method) {
        (Some(c), Some(m)) => {
            notes.push(format!("Command: {c}; mounted on {}; {} runs each (box: quartiles, line: median, whiskers: min-max)", r.mountpoint, r.runs));
            if let Some(p) = &r.mount_path {
                notes.push(p.explain());
            }
            notes.push(m.explain().to_string());
            if let Some(w) = &r.warm_explained {
                notes.push(w.clone());
            }
        }
        _ => notes.push("Launch times not measured (--no-run): sizes and build times only".into()),
    }
    svg::Chart {
        title: "sqfs bench: SquashFS compressors compared".into(),
        notes,
        cold_label: r.cold_method.map_or("cold", |m| m.label()).to_string(),
        warm_label: "warm".into(),
        series: r
            .variants
            .iter()
            .map(|v| svg::Series {
                label: v.variant.label.clone(),
                size_bytes: v.bytes,
                build_seconds: v.build_seconds,
                cold: v.cold.clone(),
                warm: v.warm.clone(),
                walk_cold: v.walk_cold.clone(),
                walk_warm: v.walk_warm.clone(),
            })
            .collect(),
    }
}

/// The table `bench` prints.
pub fn table(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tree: {} ({}, {} entries)",
        r.tree,
        units::bytes(r.tree_bytes),
        r.tree_entries
    );
    let _ = writeln!(s, "block size: {}", units::bytes(u64::from(r.block_size)));
    if let (Some(c), Some(m)) = (&r.command, r.cold_method) {
        let _ = writeln!(
            s,
            "command: {c}  (mounted on {}, {} runs each)",
            r.mountpoint, r.runs
        );
        if let Some(p) = &r.mount_path {
            let _ = writeln!(s, "{}", p.explain());
        }
        let _ = writeln!(s, "{}", m.explain());
        if let Some(w) = &r.warm_explained {
            let _ = writeln!(s, "{w}");
        }
        let _ = writeln!(
            s,
            "times: median [min-max in ms] of the whole squashfs-mount run"
        );
    } else {
        let _ = writeln!(s, "launch times not measured (--no-run)");
    }
    let cold = r.cold_method.map_or("cold", |m| {
        if m == ColdMethod::Fadvise {
            "cold*"
        } else {
            "cold"
        }
    });
    let header = [
        "compressor".to_string(),
        "size".into(),
        "% of tree".into(),
        "build".into(),
        format!("{cold} command"),
        "warm command".into(),
        format!("{cold} walk"),
        "warm walk".into(),
    ];
    let mut rows = vec![header.to_vec()];
    for v in &r.variants {
        rows.push(vec![
            v.variant.label.clone(),
            units::bytes(v.bytes),
            if r.tree_bytes > 0 {
                format!("{:.1}%", v.bytes as f64 * 100.0 / r.tree_bytes as f64)
            } else {
                "-".into()
            },
            units::seconds(v.build_seconds),
            spread(&v.cold),
            spread(&v.warm),
            spread(&v.walk_cold),
            spread(&v.walk_warm),
        ]);
    }
    if r.cold_method.is_none() {
        // Sizes and build times only: leave out the empty timing columns.
        for row in &mut rows {
            row.truncate(4);
        }
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        let _ = writeln!(s, "{}", cells.join("  ").trim_end());
    }
    let _ = writeln!(s, "chart: {}", r.svg);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants() {
        let v = parse_variants(DEFAULT_VARIANTS).unwrap();
        assert_eq!(v.len(), 6);
        assert_eq!(
            v[4],
            Variant {
                label: "zstd:3".into(),
                compressor: Compressor::Zstd,
                level: Some(3),
                block_size: None,
            }
        );
        let v = parse_variants("zstd:15@32K,zstd:15,lz4@1M").unwrap();
        assert_eq!(
            v.iter()
                .map(|v| (v.level, v.block_size))
                .collect::<Vec<_>>(),
            [
                (Some(15), Some(32 << 10)),
                (Some(15), None),
                (None, Some(1 << 20))
            ]
        );
        assert!(parse_variants("zstd@3K").is_err());
        assert!(parse_variants("zstd:3@").is_err());
        assert!(parse_variants("zstd:30").is_err());
        assert!(parse_variants("xz:3").is_err());
        assert!(parse_variants("lzma").is_err());
        assert!(parse_variants("gzip,gzip").is_err());
        assert!(parse_variants(",").is_err());
        assert!(parse_variants("zstd:x").is_err());
    }

    #[test]
    fn mount_path_from_policy_output() {
        let setuid = "# site policy in force (/etc/squashfs-mount.conf, or built-in defaults where it sets nothing)\nkernel-images = trusted\n/tmp/w/lz4.sqfs: FUSE (not trusted: owned by uid 1000 (trusted-owners lists 0); yours)\n";
        assert_eq!(
            MountPath::parse(setuid),
            Some(MountPath {
                path: "FUSE".into(),
                reason: "not trusted: owned by uid 1000 (trusted-owners lists 0); yours".into()
            })
        );
        let kernel = "/a b/x.sqfs: kernel (trusted: owned by uid 0 (trusted-owners))\n";
        assert_eq!(MountPath::parse(kernel).unwrap().path, "kernel");
        let rootless = "# not installed setuid root: every image is served through FUSE in a user namespace (rootless mode)\n/w/x.sqfs: FUSE (rootless mode)\n";
        assert_eq!(MountPath::parse(rootless).unwrap().reason, "rootless mode");
        assert_eq!(
            MountPath::parse("squashfs-mount: x.sqfs: cannot open\n"),
            None
        );
    }
}
