//! `sqfs bench`: for each compressor, build the image and measure its size,
//! build time, and the cold and warm time of a command run inside it
//! through squashfs-mount, plus a full-tree walk. Prints a table and writes
//! an SVG chart.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::FileError;
use crate::progress::Bar;
use crate::svg;

mod error;
mod methods;
mod report;
mod rounds;
mod runner;
mod variants;

pub use error::BenchError;
pub use methods::{ColdMethod, MountPath, WarmMethod};
pub use report::{chart, table};
pub use runner::find_squashfs_mount;
use runner::{mount_flags, Runner};
pub use variants::{parse_variants, Variant, DEFAULT_VARIANTS};

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

fn self_command(args: &[&OsStr]) -> Result<Vec<OsString>, BenchError> {
    let exe = std::env::current_exe().map_err(BenchError::OwnExecutable)?;
    let mut v = vec![exe.into_os_string()];
    v.extend(args.iter().map(|a| a.to_os_string()));
    Ok(v)
}

pub fn bench(o: &BenchOptions) -> Result<Report, BenchError> {
    let dir = o.dir.canonicalize().map_err(FileError::at(&o.dir))?;
    let mountpoint = mount_point(o, &dir)?;
    let bar = Bar::spinner("scanning the tree");
    let no_excludes = crate::exclude::Excludes::new();
    let mut scan = crate::tree::Scan::new(&no_excludes);
    let stats = crate::tree::stats(&dir, &mut scan, &bar)?;
    bar.finish();
    scan.finish(&dir, false)?;
    let (runner, cold) = if o.no_run {
        (None, None)
    } else {
        let exe = find_squashfs_mount().ok_or(BenchError::NoSquashfsMount)?;
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
    let result = rounds::run_all(
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
        variants: result?,
        svg: o.svg.display().to_string(),
    };
    let chart = chart(&report);
    std::fs::write(&o.svg, svg::render(&chart)).map_err(FileError::at(&o.svg))?;
    Ok(report)
}

/// Where the images are mounted: `--mountpoint`, else the tree itself.
fn mount_point(o: &BenchOptions, dir: &Path) -> Result<PathBuf, BenchError> {
    let mountpoint = match &o.mountpoint {
        Some(m) => m
            .canonicalize()
            .map_err(|e| BenchError::MountPoint(FileError::new(m, e)))?,
        None => dir.to_path_buf(),
    };
    if mountpoint.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(BenchError::ColonInMountPoint(mountpoint));
    }
    Ok(mountpoint)
}

fn tempdir_in(parent: &Path) -> Result<PathBuf, BenchError> {
    for i in 0..100u32 {
        let p = parent.join(format!("sqfs-bench-{}-{i}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(FileError::new(&p, e).into()),
        }
    }
    Err(BenchError::NoWorkDir(parent.to_path_buf()))
}
