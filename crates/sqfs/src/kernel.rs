//! Can the running kernel mount an image? Answered from the kernel's build
//! configuration (/proc/config.gz, else /boot/config-<release>).

use std::io::Read;
use std::path::PathBuf;

use crate::format::{Compressor, CompressorOptions};

/// The running kernel's configuration text and where it came from.
pub struct KernelConfig {
    pub source: PathBuf,
    pub text: String,
}

/// Reads the configuration of the running kernel, if it can be found.
pub fn running_config() -> Result<KernelConfig, String> {
    const LIMIT: u64 = 16 << 20;
    let proc = PathBuf::from("/proc/config.gz");
    let mut tried = Vec::new();
    match std::fs::File::open(&proc) {
        Ok(f) => {
            let mut text = String::new();
            match flate2::read::GzDecoder::new(f)
                .take(LIMIT)
                .read_to_string(&mut text)
            {
                Ok(_) => return Ok(KernelConfig { source: proc, text }),
                Err(e) => tried.push(format!("{}: {e}", proc.display())),
            }
        }
        Err(e) => tried.push(format!("{}: {e}", proc.display())),
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_err(|e| format!("cannot read the kernel release: {e}"))?;
    let boot = PathBuf::from(format!("/boot/config-{}", release.trim()));
    match std::fs::File::open(&boot) {
        Ok(f) => {
            let mut text = String::new();
            f.take(LIMIT)
                .read_to_string(&mut text)
                .map_err(|e| format!("{}: {e}", boot.display()))?;
            Ok(KernelConfig { source: boot, text })
        }
        Err(e) => {
            tried.push(format!("{}: {e}", boot.display()));
            Err(format!(
                "kernel configuration not found ({})",
                tried.join("; ")
            ))
        }
    }
}

/// The value of `option` in a kernel configuration: `Some("y")`, `Some("m")`,
/// or `None` when it is not set.
pub fn option<'a>(config: &'a str, option: &str) -> Option<&'a str> {
    config.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(option)?;
        rest.strip_prefix('=')
    })
}

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

/// Decides whether a kernel with `config` can mount an image compressed
/// with `comp` and `options`.
pub fn verdict(
    config: &str,
    source: &str,
    comp: Compressor,
    options: &CompressorOptions,
) -> Verdict {
    let v = |can: bool, reason: String| Verdict {
        can_mount: Some(can),
        reason,
        config: Some(source.to_string()),
    };
    match option(config, "CONFIG_SQUASHFS") {
        Some("y") | Some("m") => {}
        _ => return v(false, "this kernel has no squashfs support (CONFIG_SQUASHFS is not set); use squashfuse instead".into()),
    }
    let Some(opt) = comp.kernel_option() else {
        return v(false, format!("the image uses {comp}, which no Linux kernel can decompress; rebuild it with 'sqfs pack --comp zstd'"));
    };
    if option(config, opt) != Some("y") {
        return v(
            false,
            format!("the image uses {comp}, but this kernel lacks it ({opt} is not set); rebuild it with a compressor the kernel has, e.g. 'sqfs pack --comp {}'",
                supported(config).first().map_or("zstd", |c| c.name())),
        );
    }
    // XZ branch/call/jump filters need their own decoder options.
    for filter in &options.filters {
        let name = match *filter {
            "x86" => "CONFIG_XZ_DEC_X86",
            "powerpc" => "CONFIG_XZ_DEC_POWERPC",
            "ia64" => "CONFIG_XZ_DEC_IA64",
            "arm" => "CONFIG_XZ_DEC_ARM",
            "armthumb" => "CONFIG_XZ_DEC_ARMTHUMB",
            "sparc" => "CONFIG_XZ_DEC_SPARC",
            _ => continue,
        };
        if option(config, name) != Some("y") {
            return v(false, format!("the image uses the xz {filter} filter, but this kernel lacks it ({name} is not set); rebuild it without -Xbcj"));
        }
    }
    let module = if option(config, "CONFIG_SQUASHFS") == Some("m") {
        " (squashfs is a module)"
    } else {
        ""
    };
    v(
        true,
        format!("this kernel has squashfs with {comp} ({opt}=y){module}"),
    )
}

/// The compressors the kernel's squashfs can decompress, zstd first.
pub fn supported(config: &str) -> Vec<Compressor> {
    [
        Compressor::Zstd,
        Compressor::Gzip,
        Compressor::Lz4,
        Compressor::Lzo,
        Compressor::Xz,
    ]
    .into_iter()
    .filter(|c| {
        c.kernel_option()
            .is_some_and(|o| option(config, o) == Some("y"))
    })
    .collect()
}

/// The verdict for the running kernel.
pub fn verdict_here(comp: Compressor, options: &CompressorOptions) -> Verdict {
    match running_config() {
        Ok(cfg) => verdict(&cfg.text, &cfg.source.display().to_string(), comp, options),
        Err(e) => Verdict {
            can_mount: None,
            reason: format!("unknown: {e}"),
            config: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: &str = "CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_ZLIB=y\nCONFIG_SQUASHFS_ZSTD=y\n# CONFIG_SQUASHFS_XZ is not set\nCONFIG_SQUASHFS_XZ_EXTRA=y\n";

    #[test]
    fn options() {
        assert_eq!(option(CFG, "CONFIG_SQUASHFS"), Some("y"));
        assert_eq!(option(CFG, "CONFIG_SQUASHFS_XZ"), None);
        assert_eq!(option(CFG, "CONFIG_SQUASHFS_LZ4"), None);
    }

    #[test]
    fn verdicts() {
        let d = |c| CompressorOptions::defaults(c, 131072);
        assert_eq!(
            verdict(CFG, "t", Compressor::Zstd, &d(Compressor::Zstd)).can_mount,
            Some(true)
        );
        let xz = verdict(CFG, "t", Compressor::Xz, &d(Compressor::Xz));
        assert_eq!(xz.can_mount, Some(false));
        assert!(
            xz.reason.contains("CONFIG_SQUASHFS_XZ is not set"),
            "{}",
            xz.reason
        );
        assert!(xz.reason.contains("--comp zstd"));
        assert_eq!(
            verdict(CFG, "t", Compressor::Lzma, &d(Compressor::Lzma)).can_mount,
            Some(false)
        );
        assert_eq!(
            verdict(
                "CONFIG_EXT4_FS=y\n",
                "t",
                Compressor::Zstd,
                &d(Compressor::Zstd)
            )
            .can_mount,
            Some(false)
        );
        let cfg = format!("{CFG}CONFIG_SQUASHFS_XZ=y\n");
        let mut bcj = d(Compressor::Xz);
        bcj.filters = vec!["x86"];
        assert_eq!(
            verdict(&cfg, "t", Compressor::Xz, &bcj).can_mount,
            Some(false)
        );
        let cfg = format!("{cfg}CONFIG_XZ_DEC_X86=y\n");
        assert_eq!(
            verdict(&cfg, "t", Compressor::Xz, &bcj).can_mount,
            Some(true)
        );
        assert_eq!(supported(CFG), vec![Compressor::Zstd, Compressor::Gzip]);
    }
}
