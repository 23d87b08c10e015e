//! The options the image was compressed with: the compressor options block
//! after the superblock, or mksquashfs's defaults.

use super::{corrupt, flags, le16, le32, read_metadata_block, Source, SUPERBLOCK_SIZE};
use squashfs_format::{Compressor, FormatError, Superblock};

/// The options the image was compressed with, from the compressor options
/// block when there is one, otherwise mksquashfs's defaults for the
/// compressor (the block is written only when something differs from them).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CompressorOptions {
    /// Whether the image carries an options block (else these are defaults).
    pub stored: bool,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub level: Option<u32>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub window_size: Option<u16>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub strategies: Vec<&'static str>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dictionary_size: Option<u32>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub filters: Vec<&'static str>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub algorithm: Option<&'static str>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub high_compression: Option<bool>,
}

impl CompressorOptions {
    fn empty(stored: bool) -> Self {
        CompressorOptions {
            stored,
            level: None,
            window_size: None,
            strategies: Vec::new(),
            dictionary_size: None,
            filters: Vec::new(),
            algorithm: None,
            high_compression: None,
        }
    }

    /// mksquashfs's defaults, which an image without an options block used.
    pub fn defaults(comp: Compressor, block_size: u32) -> Self {
        let mut o = CompressorOptions::empty(false);
        match comp {
            Compressor::Gzip => {
                o.level = Some(9);
                o.window_size = Some(15);
            }
            Compressor::Xz => o.dictionary_size = Some(block_size),
            Compressor::Lz4 => o.high_compression = Some(false),
            Compressor::Zstd => o.level = Some(15),
            Compressor::Lzo => {
                o.algorithm = Some("lzo1x_999");
                o.level = Some(8);
            }
            Compressor::Lzma => {}
        }
        o
    }

    /// Parses the (decompressed) options block of `comp`.
    pub fn parse(comp: Compressor, b: &[u8]) -> Result<Self, FormatError> {
        let need = match comp {
            Compressor::Zstd => 4,
            Compressor::Lzma => 0,
            _ => 8,
        };
        if b.len() < need {
            return Err(corrupt(
                "compressor options",
                format!("{} bytes for {comp}, which needs {need}", b.len()),
            ));
        }
        let mut o = CompressorOptions::empty(true);
        match comp {
            Compressor::Gzip => {
                o.level = Some(le32(b, 0));
                o.window_size = Some(le16(b, 4));
                let s = le16(b, 6);
                for (bit, name) in [
                    (1, "default"),
                    (2, "filtered"),
                    (4, "huffman_only"),
                    (8, "run_length_encoded"),
                    (16, "fixed"),
                ] {
                    if s & bit != 0 {
                        o.strategies.push(name);
                    }
                }
            }
            Compressor::Xz => {
                o.dictionary_size = Some(le32(b, 0));
                let filters = le32(b, 4);
                for (bit, name) in [
                    (1, "x86"),
                    (2, "powerpc"),
                    (4, "ia64"),
                    (8, "arm"),
                    (16, "armthumb"),
                    (32, "sparc"),
                ] {
                    if filters & bit != 0 {
                        o.filters.push(name);
                    }
                }
            }
            Compressor::Lz4 => {
                let version = le32(b, 0);
                if version != 1 {
                    return Err(corrupt(
                        "compressor options",
                        format!("unknown lz4 format version {version}"),
                    ));
                }
                o.high_compression = Some(le32(b, 4) & 1 != 0);
            }
            Compressor::Zstd => o.level = Some(le32(b, 0)),
            Compressor::Lzo => {
                let algorithm = le32(b, 0);
                o.algorithm = Some(match algorithm {
                    0 => "lzo1x_1",
                    1 => "lzo1x_1_11",
                    2 => "lzo1x_1_12",
                    3 => "lzo1x_1_15",
                    4 => "lzo1x_999",
                    other => {
                        return Err(corrupt(
                            "compressor options",
                            format!("unknown lzo algorithm {other}"),
                        ))
                    }
                });
                if algorithm == 4 {
                    o.level = Some(le32(b, 4));
                }
            }
            Compressor::Lzma => {}
        }
        Ok(o)
    }
}

/// Reads the compressor options block that follows the superblock, if the
/// image has one; otherwise returns mksquashfs's defaults.
pub fn compressor_options(
    src: &(impl Source + ?Sized),
    sb: &Superblock,
) -> Result<CompressorOptions, FormatError> {
    if !sb.has(flags::COMPRESSOR_OPTIONS) {
        return Ok(CompressorOptions::defaults(sb.compressor, sb.block_size));
    }
    let mut block = Vec::new();
    // The options block is written uncompressed by mksquashfs, but the
    // kernel accepts a compressed one too.
    read_metadata_block(
        src,
        sb.compressor,
        SUPERBLOCK_SIZE as u64,
        sb.inode_table_start,
        &mut block,
    )
    .map_err(|e| match e {
        FormatError::Corrupt { detail, .. } => corrupt("compressor options", detail),
        other => other,
    })?;
    CompressorOptions::parse(sb.compressor, &block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let o = CompressorOptions::parse(Compressor::Gzip, &[4, 0, 0, 0, 12, 0, 3, 0]).unwrap();
        assert_eq!((o.level, o.window_size), (Some(4), Some(12)));
        assert_eq!(o.strategies, vec!["default", "filtered"]);
        let o = CompressorOptions::parse(Compressor::Xz, &[0, 0, 1, 0, 9, 0, 0, 0]).unwrap();
        assert_eq!(o.dictionary_size, Some(65536));
        assert_eq!(o.filters, vec!["x86", "arm"]);
        assert!(CompressorOptions::parse(Compressor::Zstd, &[1, 0]).is_err());
        assert!(CompressorOptions::parse(Compressor::Lzo, &[9, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(CompressorOptions::parse(Compressor::Lz4, &[2, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
