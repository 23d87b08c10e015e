//! Can the running kernel mount an image? The answer of the format crate
//! (shared with squashfs-mount's kernel path), read from /proc/config.gz
//! (which only sqfs can decompress) or `/boot/config-<release>`.

use std::io::Read;

use squashfs_format::kernel::KernelConfig;

use crate::format::{Compressor, CompressorOptions};

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// `Some(true)`: this kernel can mount the image; `Some(false)`: it
    /// cannot; `None`: unknown (configuration not readable).
    pub can_mount: Option<bool>,
    /// One sentence saying why, and what to do if it cannot.
    pub reason: String,
    /// Where the kernel configuration was read from.
    pub config: Option<String>,
}

fn gunzip(gz: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .take(16 << 20)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

/// The running kernel's configuration.
pub fn running_config() -> Option<KernelConfig> {
    KernelConfig::running(Some(&gunzip))
}

/// Decides whether a kernel with `config` can mount an image compressed
/// with `comp` and `options`.
pub fn verdict(config: &KernelConfig, comp: Compressor, options: &CompressorOptions) -> Verdict {
    let v = config.squashfs_verdict(comp, &options.filters);
    Verdict {
        can_mount: Some(v.can_mount),
        reason: v.reason,
        config: Some(config.source.clone()),
    }
}

/// The compressors the kernel's squashfs can decompress, zstd first.
pub fn supported(config: &KernelConfig) -> Vec<Compressor> {
    config.squashfs_compressors()
}

/// The verdict for an image on the running kernel: the verdict of
/// squashfs-mount's kernel path (`squashfs_format::kernel::image_verdict`:
/// padding, lzma, the compressor and xz filters the kernel has).
pub fn image_verdict_here(
    comp: Compressor,
    options: &CompressorOptions,
    bytes_used: u64,
    file_size: u64,
    image: &str,
) -> Verdict {
    let config = running_config();
    match squashfs_format::kernel::image_verdict(
        config.as_ref(),
        comp,
        &options.filters,
        bytes_used,
        file_size,
        image,
    ) {
        Some(v) => Verdict {
            can_mount: Some(v.can_mount),
            reason: v.reason,
            config: config.map(|c| c.source),
        },
        None => Verdict {
            can_mount: None,
            reason: "unknown: the kernel configuration (/proc/config.gz, /boot/config-<release>) cannot be read".into(),
            config: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_name_the_configuration() {
        let cfg = KernelConfig {
            source: "t".into(),
            text: "CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_ZSTD=y\n".into(),
        };
        let d = |c| CompressorOptions::defaults(c, 131072);
        let v = verdict(&cfg, Compressor::Zstd, &d(Compressor::Zstd));
        assert_eq!((v.can_mount, v.config.as_deref()), (Some(true), Some("t")));
        assert_eq!(
            verdict(&cfg, Compressor::Xz, &d(Compressor::Xz)).can_mount,
            Some(false)
        );
    }
}
