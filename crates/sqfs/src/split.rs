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

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::exclude::Excludes;
use crate::format::Compressor;
use crate::pack::{self, PackOptions};
use crate::progress::Bar;
use crate::tree::Scan;
use crate::units;

/// Metadata bytes per entry, compressed, assumed on top of file data:
/// inode (at most 56 bytes plus 4 per block), directory entry (8 + name),
/// headers, fragment and id tables, uncompressed about 64 + name bytes, of
/// which compression keeps about half.
const PER_ENTRY: u64 = 32;
/// Superblock, table indexes, compressor options and the 4 KiB padding.
const PER_IMAGE: u64 = 8 << 10;
/// How much of the data the first pass compresses at most.
const SAMPLE_BUDGET: u64 = 256 << 20;
/// Images are planned this much below the limit (estimates are not exact).
const MARGIN: f64 = 0.02;
/// An image this far below the limit, with units left for later images, is
/// planned and built again with the corrected estimate.
const UNDERFULL: f64 = 0.90;
/// Builds of one image at most.
const ATTEMPTS: usize = 5;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Path relative to the tree's top.
    pub rel: PathBuf,
    /// Estimated bytes of metadata in an image (compressed).
    pub meta_cost: u64,
    /// Regular file bytes (hard-linked files counted once), entries (the
    /// unit itself included).
    pub bytes: u64,
    pub entries: u64,
    pub newest_mtime: i64,
    pub is_dir: bool,
}

fn entry_meta_cost(path: &Path) -> u64 {
    PER_ENTRY + path.file_name().map_or(0, |n| n.len() as u64) / 2
}

/// The tree cut into units, plus the containers above them.
#[derive(Debug, Default)]
pub struct Cut {
    pub units: Vec<Unit>,
    /// Container directories (relative paths), top first; excludes the top.
    pub containers: Vec<PathBuf>,
    /// Groups of unit indexes that share a hard-linked inode and must go to
    /// the same image (mksquashfs excludes by inode).
    pub groups: Vec<Vec<usize>>,
    pub newest_mtime: i64,
}

/// Scans `root` and cuts it at `depth` (>= 1), leaving out what `scan`
/// excludes.
pub fn cut(root: &Path, depth: usize, scan: &mut Scan<'_>, bar: &Bar) -> Result<Cut, String> {
    let top = std::fs::metadata(root)
        .map_err(|e| format!("{}: {}", root.display(), units::io_error(&e)))?;
    if !top.is_dir() {
        return Err(format!("{} is not a directory", root.display()));
    }
    let mut c = Cut {
        newest_mtime: top.mtime(),
        ..Cut::default()
    };
    // Hard-linked inodes (nlink > 1, not directories) -> first unit seen.
    let mut linked: HashMap<(u64, u64), usize> = HashMap::new();
    let mut parent = UnionFind::default();
    let mut unit_dirs: HashMap<PathBuf, usize> = HashMap::new();
    let mut seen = 0u64;
    scan.walk(root, |path, rel, meta, d| {
        seen += 1;
        if seen.is_multiple_of(1024) {
            bar.set(seen);
        }
        c.newest_mtime = c.newest_mtime.max(meta.mtime());
        let key = (meta.dev(), meta.ino());
        // File data counts once per inode.
        let first_name = meta.nlink() <= 1 || meta.is_dir() || !linked.contains_key(&key);
        let data = if meta.is_file() && first_name {
            meta.len()
        } else {
            0
        };
        if d < depth && meta.is_dir() {
            c.containers.push(rel.to_path_buf());
            return Ok(true);
        }
        if d <= depth {
            // A unit: an entry at `depth`, or a non-directory above it.
            c.units.push(Unit {
                rel: rel.to_path_buf(),
                meta_cost: entry_meta_cost(path),
                bytes: data,
                entries: 1,
                newest_mtime: meta.mtime(),
                is_dir: meta.is_dir(),
            });
            let i = c.units.len() - 1;
            parent.add();
            if meta.is_dir() {
                unit_dirs.insert(rel.to_path_buf(), i);
            } else if meta.nlink() > 1 {
                link(&mut linked, &mut parent, key, i);
            }
            return Ok(meta.is_dir());
        }
        // Below a unit directory: its first `depth` components name it.
        let unit_key: PathBuf = rel.components().take(depth).collect();
        let i = *unit_dirs
            .get(&unit_key)
            .ok_or_else(|| format!("internal error: {} belongs to no unit", path.display()))?;
        let u = &mut c.units[i];
        u.meta_cost += entry_meta_cost(path);
        u.entries += 1;
        u.bytes += data;
        u.newest_mtime = u.newest_mtime.max(meta.mtime());
        if !meta.is_dir() && meta.nlink() > 1 {
            link(&mut linked, &mut parent, key, i);
        }
        Ok(true)
    })?;
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..c.units.len() {
        groups.entry(parent.find(i)).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    groups.sort();
    c.groups = groups;
    Ok(c)
}

fn link(linked: &mut HashMap<(u64, u64), usize>, uf: &mut UnionFind, key: (u64, u64), unit: usize) {
    match linked.get(&key) {
        Some(&first) => uf.union(first, unit),
        None => {
            linked.insert(key, unit);
        }
    }
}

#[derive(Default)]
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn add(&mut self) {
        self.parent.push(self.parent.len());
    }
    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}

/// Places groups (with their estimated costs) into images of `room` bytes:
/// largest first, each into the first image where it fits (first-fit
/// decreasing), so every image but the last is nearly full. Returns the
/// image of each group, or the index of a group larger than `room`.
pub fn plan(costs: &[u64], room: u64) -> Result<Vec<usize>, usize> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    // Largest first; ties in input order, so the plan is deterministic.
    order.sort_by(|&a, &b| costs[b].cmp(&costs[a]).then(a.cmp(&b)));
    let mut load: Vec<u64> = Vec::new();
    let mut assign = vec![0usize; costs.len()];
    for g in order {
        if costs[g] > room {
            return Err(g);
        }
        let bin = match load.iter().position(|&l| l + costs[g] <= room) {
            Some(b) => b,
            None => {
                load.push(0);
                load.len() - 1
            }
        };
        load[bin] += costs[g];
        assign[g] = bin;
    }
    Ok(assign)
}

/// Compresses a block as mksquashfs would with `opts`; the size stored
/// (a block that does not shrink is stored as it is). lzo, which sqfs
/// cannot compress, is estimated with lz4, which compresses less.
fn compressed_size(block: &[u8], opts: &PackOptions) -> u64 {
    use std::io::Write;
    let n = match opts.comp {
        Compressor::Zstd => {
            let level = opts.level.unwrap_or(pack::DEFAULT_ZSTD_LEVEL) as i32;
            zstd::bulk::compress(block, level).map_or(block.len(), |c| c.len())
        }
        Compressor::Gzip => {
            let level = flate2::Compression::new(opts.level.unwrap_or(9));
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(block)
                .and_then(|()| e.finish())
                .map_or(block.len(), |c| c.len())
        }
        Compressor::Xz | Compressor::Lzma => {
            liblzma::encode_all(block, 6).map_or(block.len(), |c| c.len())
        }
        Compressor::Lz4 | Compressor::Lzo => lz4_flex::block::compress(block).len(),
    };
    n.min(block.len()) as u64
}

/// A deterministic number in 0..1 for (path, index): which blocks the
/// first pass samples.
fn pick(path: &[u8], index: u64) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in path.iter().chain(&index.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Raw and compressed bytes of the sampled data of one unit.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    raw: u64,
    compressed: u64,
}

/// Samples one unit: a fraction `rate` of its full blocks, each compressed
/// alone, and of its files' tails (files below the block size entirely),
/// packed together into fragment blocks.
fn sample_unit(
    root: &Path,
    unit: &Unit,
    excludes: &crate::exclude::Excludes,
    rate: f64,
    opts: &PackOptions,
) -> Result<Sample, String> {
    use std::os::unix::fs::FileExt;
    let bs = opts.block_size as usize;
    let mut s = Sample::default();
    let mut fragment: Vec<u8> = Vec::with_capacity(2 * bs);
    let mut block = vec![0u8; bs];
    let mut file = |path: &Path,
                    rel: &Path,
                    size: u64,
                    s: &mut Sample,
                    fragment: &mut Vec<u8>|
     -> Result<(), String> {
        let key = rel.as_os_str().as_bytes();
        let full = size / bs as u64;
        let tail = (size % bs as u64) as usize;
        let wanted: Vec<u64> = (0..full)
            .filter(|&j| rate >= 1.0 || pick(key, j) < rate)
            .collect();
        let tail_wanted = tail > 0 && (rate >= 1.0 || pick(key, u64::MAX) < rate);
        if wanted.is_empty() && !tail_wanted {
            return Ok(());
        }
        let f = std::fs::File::open(path)
            .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))?;
        let read = |buf: &mut [u8], at: u64| {
            f.read_exact_at(buf, at)
                .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))
        };
        for j in wanted {
            read(&mut block, j * bs as u64)?;
            s.raw += bs as u64;
            s.compressed += compressed_size(&block, opts);
        }
        if tail_wanted {
            let start = fragment.len();
            fragment.resize(start + tail, 0);
            read(&mut fragment[start..], full * bs as u64)?;
            while fragment.len() >= bs {
                s.raw += bs as u64;
                s.compressed += compressed_size(&fragment[..bs], opts);
                fragment.drain(..bs);
            }
        }
        Ok(())
    };
    let path = root.join(&unit.rel);
    if unit.is_dir {
        crate::tree::walk(&path, |p, meta, _| {
            let rel = p.strip_prefix(root).map_err(|e| e.to_string())?;
            if excludes.matches(rel, meta.is_dir()).is_some() {
                return Ok(false);
            }
            if meta.is_file() {
                file(p, rel, meta.len(), &mut s, &mut fragment)?;
            }
            Ok(true)
        })?;
    } else {
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))?;
        if meta.is_file() {
            file(&path, &unit.rel, meta.len(), &mut s, &mut fragment)?;
        }
    }
    if !fragment.is_empty() {
        s.raw += fragment.len() as u64;
        s.compressed += compressed_size(&fragment, opts);
    }
    Ok(s)
}

/// The first pass: an estimate of each unit's compressed size in an image
/// (data, from the sampled compression ratio of the unit, leaning on the
/// ratio of the whole tree where the unit's sample is small; plus
/// metadata). Runs on every processor.
fn estimate(
    root: &Path,
    cut: &Cut,
    excludes: &crate::exclude::Excludes,
    opts: &PackOptions,
    bar: &Bar,
) -> Result<Vec<u64>, String> {
    let total: u64 = cut.units.iter().map(|u| u.bytes).sum();
    let rate = if total <= SAMPLE_BUDGET {
        1.0
    } else {
        SAMPLE_BUDGET as f64 / total as f64
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicU64::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(cut.units.len().max(1));
    let results: Vec<Result<Vec<(usize, Sample)>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(u) = cut.units.get(i) else { break };
                        out.push((i, sample_unit(root, u, excludes, rate, opts)?));
                        done.fetch_add(u.bytes, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(out)
                })
            })
            .collect();
        while handles.iter().any(|h| !h.is_finished()) {
            bar.set(done.load(std::sync::atomic::Ordering::Relaxed));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("internal error: a sampling thread panicked".into()))
            })
            .collect()
    });
    let mut samples = vec![Sample::default(); cut.units.len()];
    for r in results {
        for (i, s) in r? {
            samples[i] = s;
        }
    }
    let all = samples.iter().fold(Sample::default(), |a, s| Sample {
        raw: a.raw + s.raw,
        compressed: a.compressed + s.compressed,
    });
    let global = if all.raw > 0 {
        all.compressed as f64 / all.raw as f64
    } else {
        1.0
    };
    // One block's worth of the global ratio in every unit's estimate.
    let weight = f64::from(opts.block_size);
    Ok(cut
        .units
        .iter()
        .zip(&samples)
        .map(|(u, s)| {
            let ratio = (s.compressed as f64 + weight * global) / (s.raw as f64 + weight);
            u.meta_cost + (u.bytes as f64 * ratio).ceil() as u64
        })
        .collect())
}

/// The exclusions that make the image for `bin` hold exactly its units:
/// the largest subtrees (units, or containers with nothing for this image)
/// that are not its own. Empty containers go to image 0.
pub fn excludes_for(cut: &Cut, unit_bin: &[usize], bin: usize) -> Vec<PathBuf> {
    // Does a container hold (at any depth) something for this bin?
    let mut needed: HashMap<&Path, bool> = HashMap::new();
    let mut has_units: HashMap<&Path, bool> = HashMap::new();
    for (u, &b) in cut.units.iter().zip(unit_bin) {
        let mut p = u.rel.parent();
        while let Some(dir) = p {
            if dir.as_os_str().is_empty() {
                break;
            }
            has_units.insert(dir, true);
            if b == bin {
                needed.insert(dir, true);
            }
            p = dir.parent();
        }
    }
    let keep = |dir: &Path| -> bool {
        needed.get(dir).copied().unwrap_or(false)
            || (bin == 0 && !has_units.get(dir).copied().unwrap_or(false))
    };
    let mut out = Vec::new();
    let parent_kept = |p: &Path| -> bool {
        match p.parent() {
            None => true,
            Some(q) if q.as_os_str().is_empty() => true,
            Some(q) => keep(q),
        }
    };
    for dir in &cut.containers {
        if !keep(dir) && parent_kept(dir) {
            out.push(dir.clone());
        }
    }
    for (u, &b) in cut.units.iter().zip(unit_bin) {
        if b != bin && parent_kept(&u.rel) {
            out.push(u.rel.clone());
        }
    }
    out.sort();
    out
}

#[derive(Clone, Debug, Serialize)]
pub struct ManifestEntry {
    /// The path relative to the tree's top (lossy if not UTF-8).
    pub path: String,
    /// The exact path bytes in hex, only when `path` is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    pub file_bytes: u64,
    pub entries: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ManifestImage {
    pub image: String,
    /// As in `inspect --json`: the image file's size, the file system's
    /// size in it, the regular file data it holds.
    pub file_size: u64,
    pub bytes_used: u64,
    pub file_bytes: u64,
    /// What the first pass estimated (with the corrections of the images
    /// built before).
    pub estimated_bytes: u64,
    pub entries: Vec<ManifestEntry>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    pub format: &'static str,
    pub source: String,
    pub max_size: u64,
    pub depth: usize,
    #[serde(serialize_with = "crate::format::serialize_compressor")]
    pub compressor: crate::format::Compressor,
    pub level: Option<u32>,
    pub block_size: u32,
    /// mksquashfs runs it took (more than the images when one was built
    /// again after the estimate was corrected).
    pub builds: usize,
    pub images: Vec<ManifestImage>,
    /// The `--union=` argument of squashfs-mount for these images.
    pub union: String,
}

fn entry(u: &Unit) -> ManifestEntry {
    let bytes = u.rel.as_os_str().as_bytes();
    let utf8 = std::str::from_utf8(bytes).is_ok();
    ManifestEntry {
        path: u.rel.to_string_lossy().into_owned(),
        path_hex: (!utf8).then(|| bytes.iter().map(|b| format!("{b:02x}")).collect()),
        file_bytes: u.bytes,
        entries: u.entries,
    }
}

fn image_path(prefix: &Path, i: usize, width: usize) -> PathBuf {
    let mut name = prefix.as_os_str().to_os_string();
    name.push(format!("-{:0width$}.sqfs", i + 1));
    PathBuf::from(name)
}

/// `sqfs pack --split <max> <dir> <prefix>`.
pub fn split(
    dir: &Path,
    prefix: &Path,
    max: u64,
    depth: usize,
    opts: &PackOptions,
    excludes: &Excludes,
) -> Result<Manifest, String> {
    if depth == 0 {
        return Err("--depth must be at least 1".into());
    }
    pack::check_outside(dir, prefix)?;
    let room = max
        .checked_sub(PER_IMAGE)
        .filter(|&r| r > 0)
        .ok_or_else(|| {
            format!(
                "the limit {} is too small; images need at least {} of overhead",
                units::bytes(max),
                units::bytes(PER_IMAGE)
            )
        })?;
    let target = (room as f64 * (1.0 - MARGIN)) as u64;
    let bar = Bar::spinner("scanning the tree");
    let mut scan = Scan::new(excludes);
    let cut = cut(dir, depth, &mut scan, &bar)?;
    bar.finish();
    scan.finish(dir, true)?;
    if cut.units.is_empty() {
        return Err(format!(
            "{} has nothing at depth {depth} or above to pack",
            dir.display()
        ));
    }
    let total: u64 = cut.units.iter().map(|u| u.bytes).sum();
    let bar = Bar::bytes("estimating compressed sizes", total);
    let unit_est = estimate(dir, &cut, excludes, opts, &bar)?;
    bar.finish();
    let group_est: Vec<u64> = cut
        .groups
        .iter()
        .map(|g| g.iter().map(|&u| unit_est[u]).sum())
        .collect();
    let name_of = |g: usize| {
        let names: Vec<String> = cut.groups[g]
            .iter()
            .map(|&u| cut.units[u].rel.display().to_string())
            .collect();
        if names.len() == 1 {
            names[0].clone()
        } else {
            format!("{} (hard-linked together)", names.join(", "))
        }
    };
    let too_large = |g: usize, what: String| {
        format!(
            "{} {what}, more than the limit {} allows; split deeper (--depth {}) or raise the limit",
            name_of(g),
            units::bytes(max),
            depth + 1
        )
    };
    // How many images the estimate gives: the width of their numbers.
    let first_plan = plan(&group_est, target).map_err(|g| {
        too_large(
            g,
            format!(
                "needs about {} in an image (estimated, compressed)",
                units::bytes(group_est[g])
            ),
        )
    })?;
    let k0 = first_plan.iter().max().map_or(1, |m| m + 1);
    let width = k0.to_string().len().max(2);
    let mut manifest_path = prefix.as_os_str().to_os_string();
    manifest_path.push(".manifest.json");
    let manifest_path = PathBuf::from(manifest_path);
    if !opts.force {
        for p in (0..k0)
            .map(|i| image_path(prefix, i, width))
            .chain([manifest_path.clone()])
        {
            if std::fs::symlink_metadata(&p).is_ok() {
                return Err(format!(
                    "{} exists; pass --force to replace it",
                    p.display()
                ));
            }
        }
    }
    let rebuild = PackOptions {
        force: true,
        ..opts.clone()
    };
    let mut remaining: Vec<usize> = (0..cut.groups.len()).collect();
    // Observed / estimated compressed size, over the images built so far.
    let (mut observed_sum, mut estimated_sum) = (0f64, 0f64);
    let mut images = Vec::new();
    let mut builds = 0usize;
    let bar = Bar::bytes("mksquashfs", 1);
    while !remaining.is_empty() {
        let i = images.len();
        let path = image_path(prefix, i, width);
        let mut factor = if estimated_sum > 0.0 {
            observed_sum / estimated_sum
        } else {
            1.0
        };
        // The image on disk: its groups, file size and estimate.
        let mut built: Option<(Vec<usize>, u64, u64)> = None;
        let mut attempts = 0;
        let (chosen, file_size, est) = loop {
            let costs: Vec<u64> = remaining
                .iter()
                .map(|&g| (group_est[g] as f64 * factor).ceil() as u64)
                .collect();
            let bins = plan(&costs, target).map_err(|k| {
                too_large(
                    remaining[k],
                    format!(
                        "needs about {} in an image (estimated, compressed)",
                        units::bytes(costs[k])
                    ),
                )
            })?;
            let mine: Vec<usize> = remaining
                .iter()
                .zip(&bins)
                .filter(|(_, &b)| b == 0)
                .map(|(&g, _)| g)
                .collect();
            if let Some((set, size, est)) = &built {
                if *set == mine || attempts >= ATTEMPTS {
                    if *size <= max {
                        break (set.clone(), *size, *est);
                    }
                    if attempts >= ATTEMPTS {
                        return Err(format!(
                            "{} came out {} bytes, over the limit of {max}, after {attempts} attempts; please report this, and split deeper meanwhile",
                            path.display(),
                            size
                        ));
                    }
                    // The same plan again, still too large: shrink harder.
                    factor *= *size as f64 / max as f64 * (1.0 + MARGIN);
                    continue;
                }
            }
            let mut unit_bin = vec![usize::MAX; cut.units.len()];
            for &g in &mine {
                for &u in &cut.groups[g] {
                    unit_bin[u] = i;
                }
            }
            let mut excluded: Vec<PathBuf> = excludes_for(&cut, &unit_bin, i);
            excluded.extend(scan.excluded.iter().cloned());
            let excluded: Vec<&std::ffi::OsStr> = excluded.iter().map(|p| p.as_os_str()).collect();
            let input: u64 = mine
                .iter()
                .flat_map(|&g| &cut.groups[g])
                .map(|&u| cut.units[u].bytes)
                .sum();
            bar.set_message(format!("image {} ({})", i + 1, path.display()));
            bar.set(0);
            let o = if built.is_some() { &rebuild } else { opts };
            pack::build(dir, &path, o, cut.newest_mtime, &excluded, input, &bar)?;
            builds += 1;
            attempts += 1;
            let size = std::fs::metadata(&path)
                .map_err(|e| format!("{}: {}", path.display(), units::io_error(&e)))?
                .len();
            let est: u64 = PER_IMAGE + mine.iter().map(|&g| group_est[g]).sum::<u64>();
            let everything = mine.len() == remaining.len();
            if size <= max && (everything || size as f64 >= UNDERFULL * max as f64) {
                break (mine, size, est);
            }
            if size > max && mine.len() == 1 {
                return Err(too_large(
                    mine[0],
                    format!("alone makes an image of {}", units::bytes(size)),
                ));
            }
            let observed = size.saturating_sub(PER_IMAGE) as f64 / (est - PER_IMAGE).max(1) as f64;
            factor = if size > max {
                observed * (1.0 + MARGIN)
            } else {
                observed
            };
            built = Some((mine, size, est));
        };
        observed_sum += file_size.saturating_sub(PER_IMAGE) as f64;
        estimated_sum += (est - PER_IMAGE) as f64;
        let mine: Vec<&Unit> = chosen
            .iter()
            .flat_map(|&g| &cut.groups[g])
            .map(|&u| &cut.units[u])
            .collect();
        images.push(ManifestImage {
            image: path.display().to_string(),
            file_size,
            bytes_used: pack::bytes_used(&path)?,
            file_bytes: mine.iter().map(|u| u.bytes).sum(),
            estimated_bytes: est,
            entries: mine.iter().map(|u| entry(u)).collect(),
        });
        remaining.retain(|g| !chosen.contains(g));
    }
    bar.finish();
    // More images than the first estimate said, past its numbering width:
    // renumber them all with the wider width.
    let final_width = images.len().to_string().len().max(2);
    if final_width > width {
        for (i, img) in images.iter_mut().enumerate() {
            let to = image_path(prefix, i, final_width);
            std::fs::rename(&img.image, &to).map_err(|e| {
                format!(
                    "cannot rename {} to {}: {}",
                    img.image,
                    to.display(),
                    units::io_error(&e)
                )
            })?;
            img.image = to.display().to_string();
        }
    }
    let union = images
        .iter()
        .map(|m| m.image.clone())
        .collect::<Vec<_>>()
        .join(",");
    let manifest = Manifest {
        format: "sqfs-split-manifest/2",
        source: dir.display().to_string(),
        max_size: max,
        depth,
        compressor: opts.comp,
        level: pack::effective_level(opts.comp, opts.level),
        block_size: opts.block_size,
        builds,
        images,
        union,
    };
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&manifest_path, text)
        .map_err(|e| format!("{}: {}", manifest_path.display(), units::io_error(&e)))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

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
