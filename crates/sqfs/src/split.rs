//! `sqfs pack --split`: one tree into several images of bounded size, cut at
//! a chosen directory depth, for use with `squashfs-mount --union`.
//!
//! The tree is divided into *units*: the entries exactly `depth` levels
//! below the top, and non-directories above that depth. A unit is never
//! divided. Directories above `depth` (*containers*) appear in each image
//! that holds something below them. Units are assigned to images by
//! largest-first onto the least-filled image, starting from the fewest
//! images the total allows and adding one until every image fits.
//!
//! The limit is kept with an upper bound of each unit's size in an image:
//! its file data uncompressed (mksquashfs stores a block uncompressed when
//! compression does not shrink it) plus generous metadata per entry. Images
//! of compressible data therefore come out well below the limit.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::pack::{self, PackOptions};
use crate::progress::Bar;
use crate::units;

/// Bytes per inode assumed on top of file data: inode (at most 56 bytes
/// plus block list), directory entry (8 + name), headers, fragment and id
/// tables; counted uncompressed.
const PER_ENTRY: u64 = 128;
/// Superblock, table indexes, compressor options and the 4 KiB padding.
const PER_IMAGE: u64 = 64 << 10;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Path relative to the tree's top.
    pub rel: PathBuf,
    /// Upper bound of its bytes in an image.
    pub cost: u64,
    /// Regular file bytes, entries (the unit itself included).
    pub bytes: u64,
    pub entries: u64,
    pub newest_mtime: i64,
    pub is_dir: bool,
}

fn entry_cost(path: &Path, meta: &std::fs::Metadata, block_size: u64) -> u64 {
    let name = path.file_name().map_or(0, |n| n.len() as u64);
    let mut c = PER_ENTRY + name;
    if meta.is_file() {
        c += meta.len() + 4 * meta.len().div_ceil(block_size);
    } else if meta.file_type().is_symlink() {
        c += meta.len();
    }
    c
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

/// Scans `root` and cuts it at `depth` (>= 1).
pub fn cut(root: &Path, depth: usize, block_size: u32, bar: &Bar) -> Result<Cut, String> {
    let top = std::fs::metadata(root).map_err(|e| format!("{}: {e}", root.display()))?;
    if !top.is_dir() {
        return Err(format!("{} is not a directory", root.display()));
    }
    let bs = u64::from(block_size);
    let mut c = Cut {
        newest_mtime: top.mtime(),
        ..Cut::default()
    };
    // Hard-linked inodes (nlink > 1, not directories) -> first unit seen.
    let mut linked: HashMap<(u64, u64), usize> = HashMap::new();
    let mut parent = UnionFind::default();
    let mut unit_dirs: HashMap<PathBuf, usize> = HashMap::new();
    let mut seen = 0u64;
    crate::tree::walk(root, |path, meta, d| {
        seen += 1;
        if seen.is_multiple_of(1024) {
            bar.set(seen);
        }
        c.newest_mtime = c.newest_mtime.max(meta.mtime());
        let rel = path
            .strip_prefix(root)
            .map_err(|e| e.to_string())?
            .to_path_buf();
        if d < depth && meta.is_dir() {
            c.containers.push(rel);
            return Ok(true);
        }
        if d <= depth {
            // A unit: an entry at `depth`, or a non-directory above it.
            c.units.push(Unit {
                rel: rel.clone(),
                cost: entry_cost(path, meta, bs),
                bytes: if meta.is_file() { meta.len() } else { 0 },
                entries: 1,
                newest_mtime: meta.mtime(),
                is_dir: meta.is_dir(),
            });
            let i = c.units.len() - 1;
            parent.add();
            if meta.is_dir() {
                unit_dirs.insert(rel, i);
            } else if meta.nlink() > 1 {
                link(&mut linked, &mut parent, (meta.dev(), meta.ino()), i);
            }
            return Ok(meta.is_dir());
        }
        // Below a unit directory: its first `depth` components name it.
        let key: PathBuf = rel.components().take(depth).collect();
        let i = *unit_dirs
            .get(&key)
            .ok_or_else(|| format!("internal error: {} belongs to no unit", path.display()))?;
        let u = &mut c.units[i];
        u.cost += entry_cost(path, meta, bs);
        u.entries += 1;
        if meta.is_file() {
            u.bytes += meta.len();
        }
        u.newest_mtime = u.newest_mtime.max(meta.mtime());
        if !meta.is_dir() && meta.nlink() > 1 {
            link(&mut linked, &mut parent, (meta.dev(), meta.ino()), i);
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

/// Assigns groups of units (with their costs) to as few images as the
/// limit allows, balanced by cost. Returns the image index of each group.
pub fn plan(costs: &[u64], max: u64) -> Result<Vec<usize>, String> {
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
    if let Some((i, &c)) = costs.iter().enumerate().max_by_key(|(_, &c)| c) {
        if c > room {
            return Err(format!("#{i}:{c}"));
        }
    }
    let total: u64 = costs.iter().sum();
    let mut order: Vec<usize> = (0..costs.len()).collect();
    // Largest first; ties in input order, so the plan is deterministic.
    order.sort_by(|&a, &b| costs[b].cmp(&costs[a]).then(a.cmp(&b)));
    let mut k = total.div_ceil(room).max(1) as usize;
    loop {
        let mut load = vec![0u64; k];
        let mut assign = vec![0usize; costs.len()];
        let mut ok = true;
        for &g in &order {
            // Least-filled image, lowest index on ties.
            let (b, _) = load
                .iter()
                .enumerate()
                .min_by_key(|(i, &l)| (l, *i))
                .expect("k >= 1");
            if load[b] + costs[g] > room {
                ok = false;
                break;
            }
            load[b] += costs[g];
            assign[g] = b;
        }
        if ok {
            return Ok(assign);
        }
        k += 1;
    }
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
    pub bytes: u64,
    pub entries: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ManifestImage {
    pub image: String,
    pub bytes: u64,
    pub input_bytes: u64,
    pub estimated_max_bytes: u64,
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
        bytes: u.bytes,
        entries: u.entries,
    }
}

/// `sqfs pack --split <max> <dir> <prefix>`.
pub fn split(
    dir: &Path,
    prefix: &Path,
    max: u64,
    depth: usize,
    opts: &PackOptions,
) -> Result<Manifest, String> {
    if depth == 0 {
        return Err("--depth must be at least 1".into());
    }
    pack::check_outside(dir, prefix)?;
    let scan = Bar::spinner("scanning the tree");
    let cut = cut(dir, depth, opts.block_size, &scan)?;
    scan.finish();
    if cut.units.is_empty() {
        return Err(format!(
            "{} has nothing at depth {depth} or above to pack",
            dir.display()
        ));
    }
    let costs: Vec<u64> = cut
        .groups
        .iter()
        .map(|g| g.iter().map(|&u| cut.units[u].cost).sum())
        .collect();
    let group_bin = plan(&costs, max).map_err(|e| {
        if let Some(rest) = e.strip_prefix('#') {
            let (g, c) = rest.split_once(':').unwrap_or((rest, "0"));
            let g: usize = g.parse().unwrap_or(0);
            let names: Vec<String> =
                cut.groups[g].iter().map(|&u| cut.units[u].rel.display().to_string()).collect();
            let what = if names.len() == 1 {
                names[0].clone()
            } else {
                format!("{} (hard-linked together)", names.join(", "))
            };
            format!(
                "{what} needs up to {} in an image, more than the limit {} allows; split deeper (--depth {}) or raise the limit",
                units::bytes(c.parse().unwrap_or(0)),
                units::bytes(max),
                depth + 1
            )
        } else {
            e
        }
    })?;
    let mut unit_bin = vec![0usize; cut.units.len()];
    for (g, members) in cut.groups.iter().enumerate() {
        for &u in members {
            unit_bin[u] = group_bin[g];
        }
    }
    let k = group_bin.iter().max().map_or(1, |m| m + 1);
    let width = k.to_string().len().max(2);
    let image_path = |i: usize| {
        let mut name = prefix.as_os_str().to_os_string();
        name.push(format!("-{:0width$}.sqfs", i + 1));
        PathBuf::from(name)
    };
    let mut manifest_path = prefix.as_os_str().to_os_string();
    manifest_path.push(".manifest.json");
    let manifest_path = PathBuf::from(manifest_path);
    if !opts.force {
        for p in (0..k).map(image_path).chain([manifest_path.clone()]) {
            if std::fs::symlink_metadata(&p).is_ok() {
                return Err(format!(
                    "{} exists; pass --force to replace it",
                    p.display()
                ));
            }
        }
    }
    let mut images = Vec::new();
    let bar = Bar::bytes("mksquashfs", 1);
    for i in 0..k {
        let excludes: Vec<OsString> = excludes_for(&cut, &unit_bin, i)
            .into_iter()
            .map(PathBuf::into_os_string)
            .collect();
        let path = image_path(i);
        let mine: Vec<&Unit> = cut
            .units
            .iter()
            .zip(&unit_bin)
            .filter(|(_, &b)| b == i)
            .map(|(u, _)| u)
            .collect();
        bar.set_message(format!("image {}/{k} ({})", i + 1, path.display()));
        bar.set(0);
        let input: u64 = mine.iter().map(|u| u.bytes).sum();
        pack::build(dir, &path, opts, cut.newest_mtime, &excludes, input, &bar)?;
        let bytes = std::fs::metadata(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        let estimated = PER_IMAGE + mine.iter().map(|u| u.cost).sum::<u64>();
        images.push(ManifestImage {
            image: path.display().to_string(),
            bytes,
            input_bytes: mine.iter().map(|u| u.bytes).sum(),
            estimated_max_bytes: estimated,
            entries: mine.iter().map(|u| entry(u)).collect(),
        });
        if bytes > max {
            return Err(format!(
                "{} came out {} bytes, over the limit of {max} (estimate was {estimated}); please report this, and split deeper meanwhile",
                path.display(),
                bytes
            ));
        }
    }
    bar.finish();
    let union = images
        .iter()
        .map(|m| m.image.clone())
        .collect::<Vec<_>>()
        .join(",");
    let manifest = Manifest {
        format: "sqfs-split-manifest/1",
        source: dir.display().to_string(),
        max_size: max,
        depth,
        compressor: opts.comp,
        level: pack::effective_level(opts.comp, opts.level),
        block_size: opts.block_size,
        images,
        union,
    };
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&manifest_path, text)
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_respects_room_and_balances() {
        let room = 1000;
        let max = room + PER_IMAGE;
        let costs = [600, 500, 400, 300, 200, 100];
        let a = plan(&costs, max).unwrap();
        let k = a.iter().max().unwrap() + 1;
        assert_eq!(k, 3); // 2100 / 1000 -> 3
        let mut load = vec![0; k];
        for (g, &b) in a.iter().enumerate() {
            load[b] += costs[g];
        }
        assert!(load.iter().all(|&l| l <= room), "{load:?}");
        assert_eq!(load, vec![700, 700, 700]);
        // one item too big
        assert!(plan(&[1001], max).unwrap_err().starts_with("#0:"));
        // needs more images than the total suggests
        let a = plan(&[600, 600, 600], max).unwrap();
        assert_eq!(a, vec![0, 1, 2]);
        assert!(plan(&[1], PER_IMAGE).is_err());
    }

    #[test]
    fn excludes_pick_largest_subtrees() {
        let u = |p: &str| Unit {
            rel: p.into(),
            cost: 1,
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
