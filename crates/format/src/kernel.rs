//! Can the running kernel's squashfs driver mount an image? Answered from
//! the kernel's build configuration. One answer for both tools: `sqfs
//! inspect` says "not mountable here" exactly when squashfs-mount's kernel
//! path refuses.

use crate::compressor::Compressor;

/// A kernel configuration (`CONFIG_X=y` lines) and where it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    pub source: String,
    pub text: String,
}

/// Decompresses a gzip stream (`/proc/config.gz`), if it can.
pub type Gunzip<'a> = &'a dyn Fn(&[u8]) -> Option<Vec<u8>>;

/// Largest configuration read.
const LIMIT: usize = 16 << 20;

impl KernelConfig {
    /// The running kernel's configuration: `/proc/config.gz` when
    /// `gunzip` is given and it exists (sqfs passes a decompressor; the
    /// setuid squashfs-mount, which has none, passes `None`), else
    /// `/boot/config-<release>`. `None` when neither can be read.
    pub fn running(gunzip: Option<Gunzip<'_>>) -> Option<KernelConfig> {
        if let Some(gunzip) = gunzip {
            if let Some(text) = read_limited("/proc/config.gz").and_then(|gz| gunzip(&gz)) {
                return Some(KernelConfig {
                    source: "/proc/config.gz".into(),
                    text: lossy(text),
                });
            }
        }
        let release = read_limited("/proc/sys/kernel/osrelease")?;
        let release = String::from_utf8(release).ok()?;
        let source = format!("/boot/config-{}", release.trim());
        let text = read_limited(&source)?;
        Some(KernelConfig {
            source,
            text: lossy(text),
        })
    }

    /// The value of `option`: `Some("y")`, `Some("m")`, or `None` when it is
    /// not set.
    pub fn option(&self, option: &str) -> Option<&str> {
        self.text
            .lines()
            .find_map(|line| line.trim().strip_prefix(option)?.strip_prefix('='))
    }

    /// Whether the squashfs driver can mount an image compressed with `comp`
    /// (and, for xz, the branch/call/jump `xz_filters` it uses).
    pub fn squashfs_verdict(&self, comp: Compressor, xz_filters: &[&str]) -> Verdict {
        let no = |reason: String| Verdict {
            can_mount: false,
            reason,
        };
        match self.option("CONFIG_SQUASHFS") {
            Some("y") | Some("m") => {}
            _ => return no("this kernel has no squashfs support (CONFIG_SQUASHFS is not set); use squashfuse instead".into()),
        }
        let Some(opt) = comp.kernel_option() else {
            return no(format!("the image uses {comp}, which no Linux kernel can decompress; rebuild it with 'sqfs pack --comp zstd'"));
        };
        if self.option(opt) != Some("y") {
            let alternative = self
                .squashfs_compressors()
                .first()
                .map_or("zstd", |c| c.name());
            return no(format!(
                "the image uses {comp}, but this kernel lacks it ({opt} is not set); rebuild it with a compressor the kernel has, e.g. 'sqfs pack --comp {alternative}'"
            ));
        }
        for filter in xz_filters {
            let name = match *filter {
                "x86" => "CONFIG_XZ_DEC_X86",
                "powerpc" => "CONFIG_XZ_DEC_POWERPC",
                "ia64" => "CONFIG_XZ_DEC_IA64",
                "arm" => "CONFIG_XZ_DEC_ARM",
                "armthumb" => "CONFIG_XZ_DEC_ARMTHUMB",
                "sparc" => "CONFIG_XZ_DEC_SPARC",
                _ => continue,
            };
            if self.option(name) != Some("y") {
                return no(format!("the image uses the xz {filter} filter, but this kernel lacks it ({name} is not set); rebuild it without -Xbcj"));
            }
        }
        let module = if self.option("CONFIG_SQUASHFS") == Some("m") {
            " (squashfs is a module)"
        } else {
            ""
        };
        Verdict {
            can_mount: true,
            reason: format!("this kernel has squashfs with {comp} ({opt}=y){module}"),
        }
    }

    /// The compressors the kernel's squashfs can decompress, zstd first.
    pub fn squashfs_compressors(&self) -> Vec<Compressor> {
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
                .is_some_and(|o| self.option(o) == Some("y"))
        })
        .collect()
    }
}

/// Why a loop device cannot hold the end of an image of `file_size` bytes
/// whose file system is `bytes_used` long (`mksquashfs -nopad`), with the
/// command that fixes it; `None` when it fits. `image` names the file in
/// the command.
pub fn padding_refusal(bytes_used: u64, file_size: u64, image: &str) -> Option<String> {
    let needed = crate::superblock::loop_padding_needed(bytes_used, file_size)?;
    Some(format!(
        "the image is {file_size} bytes long, not padded to whole 1 KiB blocks (built with mksquashfs -nopad?), so the kernel cannot read its end from a loop device; pad it with 'truncate -s %4096 {image}' (or rebuild it without -nopad); {needed} bytes would do"
    ))
}

/// The verdict of squashfs-mount's kernel path on an image before the
/// kernel sees it, and of `sqfs inspect`'s "Mountable here": refused when
/// a loop device cannot hold its end ([`padding_refusal`]), when it uses
/// lzma (no Linux kernel can decompress it), or when `config` says the
/// kernel lacks squashfs, the compressor or an xz filter. `None`: nothing
/// refuses it, but without a configuration it is not known whether the
/// kernel has the compressor.
pub fn image_verdict(
    config: Option<&KernelConfig>,
    comp: Compressor,
    xz_filters: &[&str],
    bytes_used: u64,
    file_size: u64,
    image: &str,
) -> Option<Verdict> {
    if let Some(reason) = padding_refusal(bytes_used, file_size, image) {
        return Some(Verdict {
            can_mount: false,
            reason,
        });
    }
    match config {
        Some(config) => Some(config.squashfs_verdict(comp, xz_filters)),
        None if comp.kernel_option().is_none() => {
            let any = KernelConfig {
                source: String::new(),
                text: "CONFIG_SQUASHFS=y\n".into(),
            };
            Some(any.squashfs_verdict(comp, xz_filters))
        }
        None => None,
    }
}

/// Whether the kernel can mount an image, and one sentence saying why (and
/// what to do if it cannot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub can_mount: bool,
    pub reason: String,
}

fn lossy(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn read_limited(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(LIMIT as u64)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> KernelConfig {
        KernelConfig {
            source: "test".into(),
            text: text.into(),
        }
    }
    const CFG: &str = "CONFIG_SQUASHFS=y\nCONFIG_SQUASHFS_ZLIB=y\nCONFIG_SQUASHFS_ZSTD=y\n# CONFIG_SQUASHFS_XZ is not set\nCONFIG_SQUASHFS_XZ_EXTRA=y\n";

    #[test]
    fn options() {
        let c = cfg(CFG);
        assert_eq!(c.option("CONFIG_SQUASHFS"), Some("y"));
        assert_eq!(c.option("CONFIG_SQUASHFS_XZ"), None);
        assert_eq!(c.option("CONFIG_SQUASHFS_LZ4"), None);
    }

    #[test]
    fn verdicts() {
        let c = cfg(CFG);
        assert!(c.squashfs_verdict(Compressor::Zstd, &[]).can_mount);
        let xz = c.squashfs_verdict(Compressor::Xz, &[]);
        assert!(!xz.can_mount);
        assert!(
            xz.reason.contains("CONFIG_SQUASHFS_XZ is not set"),
            "{}",
            xz.reason
        );
        assert!(xz.reason.contains("--comp zstd"));
        assert!(!c.squashfs_verdict(Compressor::Lzma, &[]).can_mount);
        assert!(
            !cfg("CONFIG_EXT4_FS=y\n")
                .squashfs_verdict(Compressor::Zstd, &[])
                .can_mount
        );
        let with_xz = cfg(&format!("{CFG}CONFIG_SQUASHFS_XZ=y\n"));
        assert!(!with_xz.squashfs_verdict(Compressor::Xz, &["x86"]).can_mount);
        let with_bcj = cfg(&format!("{CFG}CONFIG_SQUASHFS_XZ=y\nCONFIG_XZ_DEC_X86=y\n"));
        assert!(
            with_bcj
                .squashfs_verdict(Compressor::Xz, &["x86"])
                .can_mount
        );
        assert_eq!(
            c.squashfs_compressors(),
            vec![Compressor::Zstd, Compressor::Gzip]
        );
    }

    #[test]
    fn image_verdicts_refuse_what_the_kernel_path_refuses() {
        let c = cfg(CFG);
        let v = |cfg: Option<&KernelConfig>, comp, used, size| {
            image_verdict(cfg, comp, &[], used, size, "x.sqfs")
        };
        assert!(v(Some(&c), Compressor::Zstd, 5000, 8192).unwrap().can_mount);
        // Not padded: refused whatever the compressor, with the fix.
        let nopad = v(Some(&c), Compressor::Zstd, 1_272_171, 1_272_171).unwrap();
        assert!(!nopad.can_mount);
        assert!(
            nopad.reason.contains("truncate -s %4096 x.sqfs"),
            "{}",
            nopad.reason
        );
        assert!(
            !v(None, Compressor::Zstd, 1_272_171, 1_272_171)
                .unwrap()
                .can_mount
        );
        // lzma: refused with or without a configuration.
        assert!(!v(Some(&c), Compressor::Lzma, 5000, 8192).unwrap().can_mount);
        assert!(!v(None, Compressor::Lzma, 5000, 8192).unwrap().can_mount);
        // A compressor the kernel lacks.
        assert!(!v(Some(&c), Compressor::Xz, 5000, 8192).unwrap().can_mount);
        // Unknown configuration, nothing else wrong: unknown.
        assert_eq!(v(None, Compressor::Xz, 5000, 8192), None);
        assert_eq!(padding_refusal(4096, 4096, "x"), None);
    }
}
