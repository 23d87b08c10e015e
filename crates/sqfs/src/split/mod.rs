//! `sqfs pack --split`: one tree into several images of bounded size, cut at
//! a chosen directory depth, for use with `squashfs-mount --union`.
//!
//! The tree is divided into *units*: the entries exactly `depth` levels
//! below the top, and non-directories above that depth. A unit is never
//! divided. Directories above `depth` (*containers*) appear in each image
//! that holds something below them.
//!
//! The limit bounds the compressed images. Each unit's compressed size is
//! estimated from a first pass that compresses (a sample of) its data with
//! the chosen compressor in blocks as mksquashfs does, plus its metadata.
//! Units are then placed largest first into the first image where they fit
//! (so every image but the last comes out close to the limit), images are
//! built one after the other, and each built image corrects the estimate
//! for the rest: an image that comes out over the limit, or well under it
//! while units are left, is planned and built again with the corrected
//! estimate.

use std::path::{Path, PathBuf};

use crate::exclude::Excludes;
use crate::pack::{self, PackError, PackOptions};
use crate::progress::Bar;
use crate::tree::Scan;

mod cut;
mod error;
mod estimate;
mod images;
mod manifest;
mod plan;

pub use cut::{cut, Cut, Unit};
pub use error::{SplitError, TooLarge};
pub use manifest::{Manifest, ManifestEntry, ManifestImage};
pub use plan::{excludes_for, plan};

use images::{MARGIN, PER_IMAGE};

/// `sqfs pack --split <max> <dir> <prefix>`.
pub fn split(
    dir: &Path,
    prefix: &Path,
    max: u64,
    depth: usize,
    opts: &PackOptions,
    excludes: &Excludes,
) -> Result<Manifest, SplitError> {
    if depth == 0 {
        return Err(SplitError::DepthZero);
    }
    // A symbolic link to a directory splits that directory (see source.rs).
    let given = dir;
    let dir = &crate::source::resolve(dir)?;
    pack::check_outside(dir, prefix)?;
    let room = max
        .checked_sub(PER_IMAGE)
        .filter(|&r| r > 0)
        .ok_or(SplitError::LimitTooSmall {
            max,
            overhead: PER_IMAGE,
        })?;
    let (cut, scanned_out) = scan(dir, depth, excludes)?;
    let total: u64 = cut.units.iter().map(|u| u.bytes).sum();
    let bar = Bar::bytes("estimating compressed sizes", total);
    let unit_est = estimate::estimate(dir, &cut, excludes, opts, &bar)?;
    bar.finish();
    let job = images::Job {
        dir,
        prefix,
        max,
        depth,
        target: (room as f64 * (1.0 - MARGIN)) as u64,
        opts,
        cut: &cut,
        scanned_out: &scanned_out,
        group_est: cut
            .groups
            .iter()
            .map(|g| g.iter().map(|&u| unit_est[u]).sum())
            .collect(),
    };
    // How many images the estimate gives: the width of their numbers.
    let k0 = job.first_count()?;
    let width = k0.to_string().len().max(2);
    let manifest_path = with_suffix(prefix, ".manifest.json");
    if !opts.force {
        refuse_existing(prefix, k0, width, &manifest_path)?;
    }
    let (mut images, builds) = job.build_all(width)?;
    renumber(prefix, &mut images, width)?;
    let manifest = Manifest {
        format: "sqfs-split-manifest/2",
        source: given.display().to_string(),
        max_size: max,
        depth,
        compressor: opts.comp,
        level: pack::effective_level(opts.comp, opts.level),
        block_size: opts.block_size,
        builds,
        union: images
            .iter()
            .map(|m| m.image.clone())
            .collect::<Vec<_>>()
            .join(","),
        images,
    };
    let text = serde_json::to_string_pretty(&manifest)? + "\n";
    std::fs::write(&manifest_path, text).map_err(crate::error::FileError::at(&manifest_path))?;
    Ok(manifest)
}

/// Scans `dir` and cuts it at `depth`; returns the cut and what the
/// exclusion patterns left out.
fn scan(dir: &Path, depth: usize, excludes: &Excludes) -> Result<(Cut, Vec<PathBuf>), SplitError> {
    let bar = Bar::spinner("scanning the tree");
    let mut scan = Scan::new(excludes);
    let cut = cut(dir, depth, &mut scan, &bar)?;
    bar.finish();
    scan.finish(dir, true)?;
    if cut.units.is_empty() {
        return Err(SplitError::NothingToPack {
            dir: dir.to_path_buf(),
            depth,
        });
    }
    Ok((cut, scan.excluded))
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut p = prefix.as_os_str().to_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

/// Refuses to replace the images (as many as the estimate gives) or the
/// manifest.
fn refuse_existing(
    prefix: &Path,
    count: usize,
    width: usize,
    manifest: &Path,
) -> Result<(), SplitError> {
    for p in (0..count)
        .map(|i| manifest::image_path(prefix, i, width))
        .chain([manifest.to_path_buf()])
    {
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(PackError::Exists(p).into());
        }
    }
    Ok(())
}

/// More images than the first estimate said, past its numbering width:
/// renumbers them all with the wider width.
fn renumber(prefix: &Path, images: &mut [ManifestImage], width: usize) -> Result<(), SplitError> {
    let final_width = images.len().to_string().len().max(2);
    if final_width > width {
        for (i, img) in images.iter_mut().enumerate() {
            let to = manifest::image_path(prefix, i, final_width);
            std::fs::rename(&img.image, &to).map_err(|error| SplitError::CannotRename {
                from: img.image.clone(),
                to: to.clone(),
                error,
            })?;
            img.image = to.display().to_string();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::estimate::{compressed_size, pick};
    use super::*;
    use crate::format::Compressor;

    #[test]
    fn plan_fills_images_in_turn() {
        let room = 1000;
        let costs = [600, 500, 400, 300, 200, 100];
        let a = plan(&costs, room).unwrap();
        let k = a.iter().max().unwrap() + 1;
        assert_eq!(k, 3); // 2100 / 1000 -> 3
        let mut load = vec![0; k];
        for (g, &b) in a.iter().enumerate() {
            load[b] += costs[g];
        }
        assert!(load.iter().all(|&l| l <= room), "{load:?}");
        // First fit, largest first: 600+400, 500+300+200, 100.
        assert_eq!(load, vec![1000, 1000, 100]);
        // One item too big.
        assert_eq!(plan(&[10, 1001], room), Err(1));
        assert_eq!(plan(&[600, 600, 600], room).unwrap(), vec![0, 1, 2]);
    }

    #[test]
    fn compressed_sizes_follow_the_data() {
        let zeros = vec![0u8; 131072];
        let mut x = 1u64;
        let noise: Vec<u8> = (0..131072)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for comp in [
            Compressor::Zstd,
            Compressor::Gzip,
            Compressor::Xz,
            Compressor::Lz4,
            Compressor::Lzo,
        ] {
            let o = PackOptions {
                comp,
                level: None,
                ..PackOptions::default()
            };
            assert!(compressed_size(&zeros, &o) < 2000, "{comp}");
            // Incompressible blocks are stored as they are.
            assert_eq!(compressed_size(&noise, &o), 131072, "{comp}");
        }
        assert!((0.0..1.0).contains(&pick(b"a", 1)));
        assert_ne!(pick(b"a", 1), pick(b"a", 2));
    }

    #[test]
    fn excludes_pick_largest_subtrees() {
        let u = |p: &str| Unit {
            rel: p.into(),
            meta_cost: 1,
            bytes: 1,
            entries: 1,
            newest_mtime: 0,
            is_dir: true,
        };
        let cut = Cut {
            units: vec![u("a/x"), u("a/y"), u("b/z"), u("top")],
            containers: vec!["a".into(), "b".into(), "empty".into()],
            groups: vec![],
            newest_mtime: 0,
        };
        let bins = [0, 1, 1, 0];
        let e0: Vec<String> = excludes_for(&cut, &bins, 0)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(e0, ["a/y", "b"]);
        let e1: Vec<String> = excludes_for(&cut, &bins, 1)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(e1, ["a/x", "empty", "top"]);
    }
}
