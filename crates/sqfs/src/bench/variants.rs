//! The compressors to compare: `--comp gzip,lz4:9,zstd:3@32K,...`.

use serde::Serialize;

use super::BenchError;
use crate::format::Compressor;
use crate::pack;

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

/// Parses `gzip,lz4:9,zstd:3,zstd:15@32K,...` (`NAME[:LEVEL][@BLOCK_SIZE]`).
pub fn parse_variants(list: &str) -> Result<Vec<Variant>, BenchError> {
    let mut out: Vec<Variant> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (spec, block_size) = match item.split_once('@') {
            Some((spec, b)) => (
                spec,
                Some(pack::parse_block_size(b).map_err(|e| BenchError::variant(item, e))?),
            ),
            None => (item, None),
        };
        let (name, level) = match spec.split_once(':') {
            Some((n, l)) => (
                n,
                Some(
                    l.parse::<u32>()
                        .map_err(|_| BenchError::Level(item.to_string()))?,
                ),
            ),
            None => (spec, None),
        };
        let compressor = pack::parse_compressor(name)?;
        pack::compressor_args(compressor, level).map_err(|e| BenchError::variant(item, e))?;
        if out.iter().any(|v| v.label == item) {
            return Err(BenchError::Twice(item.to_string()));
        }
        out.push(Variant {
            label: item.to_string(),
            compressor,
            level,
            block_size,
        });
    }
    if out.is_empty() {
        return Err(BenchError::NoCompressor);
    }
    Ok(out)
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
}
