//! The benchmark's work: every image built, then the timed runs in rounds.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::error::BenchError;
use super::methods::{ColdMethod, MountPath, WarmMethod};
use super::options::BenchOptions;
use super::report::VariantResult;
use super::runner::Runner;
use crate::error::FileError;
use crate::pack::{self, PackOptions};
use crate::progress::Bar;
use crate::tree::Stats;

#[allow(clippy::too_many_arguments)]
pub(super) fn run_all(
    o: &BenchOptions,
    dir: &Path,
    stats: &Stats,
    runner: Option<&Runner>,
    cold: Option<ColdMethod>,
    work: &Path,
    warm: &mut Option<(WarmMethod, String)>,
    mount_path: &mut Option<MountPath>,
) -> Result<Vec<VariantResult>, BenchError> {
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
    let (mut results, images) = build_images(o, dir, stats, work, &bar)?;
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

/// Builds every variant's image in `work`; returns their results so far
/// (size, build time) and the images.
fn build_images(
    o: &BenchOptions,
    dir: &Path,
    stats: &Stats,
    work: &Path,
    bar: &Bar,
) -> Result<(Vec<VariantResult>, Vec<PathBuf>), BenchError> {
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
            .map_err(FileError::at(&image))?
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
    Ok((results, images))
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
) -> Result<(), BenchError> {
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

/// This program with `args`: the benchmark runs sqfs itself for some steps.
fn self_command(args: &[&OsStr]) -> Result<Vec<OsString>, BenchError> {
    let exe = std::env::current_exe().map_err(BenchError::OwnExecutable)?;
    let mut v = vec![exe.into_os_string()];
    v.extend(args.iter().map(|a| a.to_os_string()));
    Ok(v)
}
