//! `sqfs bench`: for each compressor, build the image and measure its size,
//! build time, and the cold and warm time of a command run inside it
//! through squashfs-mount, plus a full-tree walk. Prints a table and writes
//! an SVG chart.

use std::path::{Path, PathBuf};

use crate::error::FileError;
use crate::progress::Bar;
use crate::svg;

mod error;
mod methods;
mod options;
mod report;
mod rounds;
mod runner;
mod variants;

pub use error::BenchError;
pub use methods::{ColdMethod, MountPath, WarmMethod};
pub use options::BenchOptions;
pub use report::{chart, table, Report, VariantResult};
use runner::{mount_flags, Runner};
pub use variants::{parse_variants, Variant, DEFAULT_VARIANTS};

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
        let exe = crate::mountable::find_squashfs_mount().ok_or(BenchError::NoSquashfsMount)?;
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
