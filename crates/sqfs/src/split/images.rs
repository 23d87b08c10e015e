//! Building the images one after the other, each correcting the estimate
//! for the rest.

use std::path::{Path, PathBuf};

use super::cut::{Cut, Unit};
use super::manifest::{entry, image_path, ManifestImage};
use super::plan::{excludes_for, plan};
use super::{SplitError, TooLarge};
use crate::error::FileError;
use crate::pack::{self, PackOptions};
use crate::progress::Bar;

/// Superblock, table indexes, compressor options and the 4 KiB padding.
pub(super) const PER_IMAGE: u64 = 8 << 10;
/// Images are planned this much below the limit (estimates are not exact).
pub(super) const MARGIN: f64 = 0.02;
/// An image this far below the limit, with units left for later images, is
/// planned and built again with the corrected estimate.
const UNDERFULL: f64 = 0.90;
/// Builds of one image at most.
const ATTEMPTS: usize = 5;

/// One split: the tree's units and their estimates, and the limits.
pub(super) struct Job<'a> {
    pub dir: &'a Path,
    pub prefix: &'a Path,
    pub max: u64,
    pub depth: usize,
    /// Bytes an image is planned to (the limit less overhead and margin).
    pub target: u64,
    pub opts: &'a PackOptions,
    pub cut: &'a Cut,
    /// What the exclusion patterns left out (relative paths).
    pub scanned_out: &'a [PathBuf],
    /// Estimated compressed size of each group of units.
    pub group_est: Vec<u64>,
}

/// An image built: its groups, file size and estimate.
type Built = (Vec<usize>, u64, u64);

impl Job<'_> {
    /// The units of group `g`, named for a message.
    fn name_of(&self, g: usize) -> String {
        let names: Vec<String> = self.cut.groups[g]
            .iter()
            .map(|&u| self.cut.units[u].rel.display().to_string())
            .collect();
        if names.len() == 1 {
            names[0].clone()
        } else {
            format!("{} (hard-linked together)", names.join(", "))
        }
    }

    fn too_large(&self, g: usize, how: TooLarge) -> SplitError {
        SplitError::TooLarge {
            names: self.name_of(g),
            how,
            max: self.max,
            depth: self.depth,
        }
    }

    /// The images of groups `groups` at these `costs`, or which is too large.
    fn plan(&self, groups: &[usize], costs: &[u64]) -> Result<Vec<usize>, SplitError> {
        plan(costs, self.target)
            .map_err(|k| self.too_large(groups[k], TooLarge::Estimated(costs[k])))
    }

    /// How many images the first estimate gives.
    pub fn first_count(&self) -> Result<usize, SplitError> {
        let all: Vec<usize> = (0..self.cut.groups.len()).collect();
        let first_plan = self.plan(&all, &self.group_est)?;
        Ok(first_plan.iter().max().map_or(1, |m| m + 1))
    }

    /// Builds every image, numbered `width` digits wide; returns them and
    /// the number of mksquashfs runs.
    pub fn build_all(&self, width: usize) -> Result<(Vec<ManifestImage>, usize), SplitError> {
        let mut remaining: Vec<usize> = (0..self.cut.groups.len()).collect();
        // Observed / estimated compressed size, over the images built so far.
        let (mut observed_sum, mut estimated_sum) = (0f64, 0f64);
        let mut images = Vec::new();
        let mut builds = 0usize;
        let bar = Bar::bytes("mksquashfs", 1);
        while !remaining.is_empty() {
            let i = images.len();
            let path = image_path(self.prefix, i, width);
            let factor = if estimated_sum > 0.0 {
                observed_sum / estimated_sum
            } else {
                1.0
            };
            let (chosen, file_size, est) =
                self.build_one(i, &path, &remaining, factor, &bar, &mut builds)?;
            observed_sum += file_size.saturating_sub(PER_IMAGE) as f64;
            estimated_sum += (est - PER_IMAGE) as f64;
            let mine: Vec<&Unit> = chosen
                .iter()
                .flat_map(|&g| &self.cut.groups[g])
                .map(|&u| &self.cut.units[u])
                .collect();
            let walked = mine.iter().map(|u| u.entries).sum();
            let stored = pack::read_back(&path, walked, self.dir)?;
            images.push(ManifestImage {
                image: path.display().to_string(),
                stored_entries: stored.entries,
                file_size,
                bytes_used: pack::bytes_used(&path)?,
                file_bytes: mine.iter().map(|u| u.bytes).sum(),
                estimated_bytes: est,
                entries: mine.iter().map(|u| entry(u)).collect(),
            });
            remaining.retain(|g| !chosen.contains(g));
        }
        bar.finish();
        Ok((images, builds))
    }

    /// Image `i` at `path` from the groups `remaining`: planned with the
    /// estimate corrected by `factor`, built, and planned and built again
    /// while it comes out over the limit or well under it.
    fn build_one(
        &self,
        i: usize,
        path: &Path,
        remaining: &[usize],
        mut factor: f64,
        bar: &Bar,
        builds: &mut usize,
    ) -> Result<Built, SplitError> {
        let mut built: Option<Built> = None;
        let mut attempts = 0;
        loop {
            let costs: Vec<u64> = remaining
                .iter()
                .map(|&g| (self.group_est[g] as f64 * factor).ceil() as u64)
                .collect();
            let bins = self.plan(remaining, &costs)?;
            let mine: Vec<usize> = remaining
                .iter()
                .zip(&bins)
                .filter(|(_, &b)| b == 0)
                .map(|(&g, _)| g)
                .collect();
            if let Some((set, size, est)) = &built {
                if *set == mine || attempts >= ATTEMPTS {
                    if *size <= self.max {
                        return Ok((set.clone(), *size, *est));
                    }
                    if attempts >= ATTEMPTS {
                        return Err(SplitError::OverLimit {
                            image: path.to_path_buf(),
                            size: *size,
                            max: self.max,
                            attempts,
                        });
                    }
                    // The same plan again, still too large: shrink harder.
                    factor *= *size as f64 / self.max as f64 * (1.0 + MARGIN);
                    continue;
                }
            }
            let size = self.build(i, path, &mine, built.is_some(), bar)?;
            *builds += 1;
            attempts += 1;
            let est: u64 = PER_IMAGE + mine.iter().map(|&g| self.group_est[g]).sum::<u64>();
            let everything = mine.len() == remaining.len();
            if size <= self.max && (everything || size as f64 >= UNDERFULL * self.max as f64) {
                return Ok((mine, size, est));
            }
            if size > self.max && mine.len() == 1 {
                return Err(self.too_large(mine[0], TooLarge::Built(size)));
            }
            let observed = size.saturating_sub(PER_IMAGE) as f64 / (est - PER_IMAGE).max(1) as f64;
            factor = if size > self.max {
                observed * (1.0 + MARGIN)
            } else {
                observed
            };
            built = Some((mine, size, est));
        }
    }

    /// Builds image `i` at `path` of the groups `mine` (over an earlier
    /// build of it with `again`); returns its file size.
    fn build(
        &self,
        i: usize,
        path: &Path,
        mine: &[usize],
        again: bool,
        bar: &Bar,
    ) -> Result<u64, SplitError> {
        let cut = self.cut;
        let mut unit_bin = vec![usize::MAX; cut.units.len()];
        for &g in mine {
            for &u in &cut.groups[g] {
                unit_bin[u] = i;
            }
        }
        let mut excluded: Vec<PathBuf> = excludes_for(cut, &unit_bin, i);
        excluded.extend(self.scanned_out.iter().cloned());
        let excluded: Vec<&std::ffi::OsStr> = excluded.iter().map(|p| p.as_os_str()).collect();
        let input: u64 = mine
            .iter()
            .flat_map(|&g| &cut.groups[g])
            .map(|&u| cut.units[u].bytes)
            .sum();
        bar.set_message(format!("image {} ({})", i + 1, path.display()));
        bar.set(0);
        let rebuild;
        let o = if again {
            rebuild = PackOptions {
                force: true,
                ..self.opts.clone()
            };
            &rebuild
        } else {
            self.opts
        };
        pack::build(self.dir, path, o, cut.newest_mtime, &excluded, input, bar)?;
        Ok(std::fs::metadata(path).map_err(FileError::at(path))?.len())
    }
}
