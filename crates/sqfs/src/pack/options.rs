//! A pack's options and their defaults, the mksquashfs options they
//! choose (compressor and level, block size, time stamps), and the
//! command-line parsers that check them.

use super::PackError;
use crate::format::Compressor;
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
pub fn compressor_args(comp: Compressor, level: Option<u32>) -> Result<Vec<String>, PackError> {
    let mut a = vec!["-comp".to_string(), comp.name().to_string()];
    let range = |lo: u32, hi: u32, l: u32| {
        if (lo..=hi).contains(&l) {
            Ok(())
        } else {
            Err(PackError::Level {
                comp,
                lo,
                hi,
                level: l,
            })
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
            a.extend([
                "-Xalgorithm".into(),
                "lzo1x_999".into(),
                "-Xcompression-level".into(),
                l.to_string(),
            ]);
        }
        (Compressor::Lz4, Some(1)) => {}
        (Compressor::Lz4, Some(9)) => a.push("-Xhc".into()),
        (Compressor::Lz4, Some(l)) => return Err(PackError::Lz4Level(l)),
        (Compressor::Xz, Some(_)) => return Err(PackError::XzLevel),
        (Compressor::Lzma, _) => return Err(PackError::LzmaImage),
        (_, None) => {}
    }
    Ok(a)
}

/// The timestamps to give mksquashfs: (extra arguments, whether
/// SOURCE_DATE_EPOCH must be removed from its environment, the image's
/// creation time).
pub(super) fn time_args(
    opts: &PackOptions,
    newest_mtime: i64,
) -> Result<(Vec<String>, bool, u32), PackError> {
    let sde = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.is_empty() => Some(
            v.trim()
                .parse::<u32>()
                .map_err(|_| PackError::SourceDateEpoch(v.clone()))?,
        ),
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
pub fn parse_block_size(s: &str) -> Result<u32, PackError> {
    let n = units::parse_size(s)?;
    if !(4096..=1 << 20).contains(&n) || !n.is_power_of_two() {
        return Err(PackError::BlockSize(s.to_string()));
    }
    Ok(n as u32)
}

pub fn parse_compressor(s: &str) -> Result<Compressor, PackError> {
    match Compressor::from_name(s) {
        Some(Compressor::Lzma) => Err(PackError::LzmaRefused),
        None => Err(PackError::UnknownCompressor(s.to_string())),
        Some(c) => Ok(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .to_string()
            .contains("no Linux kernel can mount lzma"));
        assert!(parse_compressor("brotli")
            .unwrap_err()
            .to_string()
            .contains("unknown compressor 'brotli'"));
        assert_eq!(
            compressor_args(Compressor::Gzip, Some(0))
                .unwrap_err()
                .to_string(),
            "gzip levels are 1..9, not 0"
        );
    }
}
