//! The first pass: each unit's compressed size, estimated by compressing
//! (a sample of) its data as mksquashfs would.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::cut::{Cut, Unit};
use super::SplitError;
use crate::error::FileError;
use crate::format::Compressor;
use crate::pack::{self, PackOptions};
use crate::progress::Bar;

/// How much of the data the first pass compresses at most.
const SAMPLE_BUDGET: u64 = 256 << 20;

/// Compresses a block as mksquashfs would with `opts`; the size stored
/// (a block that does not shrink is stored as it is). lzo, which sqfs
/// cannot compress, is estimated with lz4, which compresses less.
pub(super) fn compressed_size(block: &[u8], opts: &PackOptions) -> u64 {
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
pub(super) fn pick(path: &[u8], index: u64) -> f64 {
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
) -> Result<Sample, SplitError> {
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
     -> Result<(), FileError> {
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
        let f = std::fs::File::open(path).map_err(FileError::at(path))?;
        let read = |buf: &mut [u8], at: u64| f.read_exact_at(buf, at).map_err(FileError::at(path));
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
            let rel = p
                .strip_prefix(root)
                .expect("walk gives paths below its root");
            if excludes.matches(rel, meta.is_dir()).is_some() {
                return Ok::<_, FileError>(false);
            }
            if meta.is_file() {
                file(p, rel, meta.len(), &mut s, &mut fragment)?;
            }
            Ok(true)
        })?;
    } else {
        let meta = std::fs::symlink_metadata(&path).map_err(FileError::at(&path))?;
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
pub(super) fn estimate(
    root: &Path,
    cut: &Cut,
    excludes: &crate::exclude::Excludes,
    opts: &PackOptions,
    bar: &Bar,
) -> Result<Vec<u64>, SplitError> {
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
    let results: Vec<Result<Vec<(usize, Sample)>, SplitError>> = std::thread::scope(|scope| {
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
            .map(|h| h.join().unwrap_or(Err(SplitError::SamplerPanicked)))
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
