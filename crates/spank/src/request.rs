//! The plugin's options, parsed with squashfs-mount's own grammar into the
//! request its engine takes (`engine::mount_all`), which checks them like
//! the command line's:
//!
//! ```text
//! --squashfs=<image>:<mountpoint>[,<image>:<mountpoint>...]    ($SLURM_SQUASHFS)
//! --squashfs-union=<image>,<image>[,...]:<mountpoint>[;...]    ($SLURM_SQUASHFS_UNION)
//! --squashfs-writable[=SIZE]                                   ($SLURM_SQUASHFS_WRITABLE)
//! ```
//! Pure.

use std::ffi::OsString;

use squashfs_mount::cli::{self, LayerSize, RunRequest};

/// The options' names, as in `srun --squashfs=...`.
pub const OPTION: &str = "squashfs";
pub const OPTION_UNION: &str = "squashfs-union";
pub const OPTION_WRITABLE: &str = "squashfs-writable";
/// Read when the option is not given.
pub const ENV_FALLBACK: &str = "SLURM_SQUASHFS";
pub const ENV_UNION: &str = "SLURM_SQUASHFS_UNION";
pub const ENV_WRITABLE: &str = "SLURM_SQUASHFS_WRITABLE";

/// The values given, each as bytes (absent: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    pub pairs: Option<Vec<u8>>,
    pub unions: Option<Vec<u8>>,
    /// `Some(empty)`: `--squashfs-writable` without a size.
    pub writable: Option<Vec<u8>>,
}

impl Given {
    pub fn is_empty(&self) -> bool {
        self.pairs.as_ref().is_none_or(|p| p.is_empty()) && self.unions.as_ref().is_none_or(|u| u.is_empty())
    }
}

/// Builds the request (no command: the tasks are the command).
pub fn parse(given: &Given) -> Result<RunRequest, String> {
    let mut mounts = Vec::new();
    if let Some(spec) = given.pairs.as_deref().filter(|s| !s.is_empty()) {
        for pair in spec.split(|&b| b == b',') {
            mounts.push(cli::parse_pair(pair).map_err(|e| format!("--{OPTION}: {}", e.0))?);
        }
    }
    if let Some(spec) = given.unions.as_deref().filter(|s| !s.is_empty()) {
        for union in spec.split(|&b| b == b';') {
            mounts.push(cli::parse_union(union).map_err(|e| format!("--{OPTION_UNION}: {}", e.0))?);
        }
    }
    let writable = match given.writable.as_deref() {
        None => None,
        Some([]) => Some(LayerSize::DEFAULT),
        Some(size) => Some(LayerSize::parse(size).map_err(|e| format!("--{OPTION_WRITABLE}: {}", e.0))?),
    };
    if mounts.is_empty() && writable.is_some() {
        return Err(format!("--{OPTION_WRITABLE} needs images: give --{OPTION}= or --{OPTION_UNION}="));
    }
    Ok(RunRequest { mounts, writable, command: vec![OsString::from("(tasks)")], no_cache: false, verbose: false, quiet: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(pairs: &str, unions: &str, writable: Option<&str>) -> Given {
        let opt = |s: &str| (!s.is_empty()).then(|| s.as_bytes().to_vec());
        Given { pairs: opt(pairs), unions: opt(unions), writable: writable.map(|w| w.as_bytes().to_vec()) }
    }

    #[test]
    fn pairs_unions_writable() {
        let r = parse(&g("/s/a.sqfs:/user-environment,/s/b.sqfs:/user-tools", "/x,/y:/user-environment/u;/p,/q:/user-tools/v", Some("2G"))).unwrap();
        let got: Vec<_> = r.mounts.iter().map(|m| m.describe()).collect();
        assert_eq!(got, ["/s/a.sqfs:/user-environment", "/s/b.sqfs:/user-tools", "/x,/y:/user-environment/u", "/p,/q:/user-tools/v"]);
        assert!(r.mounts[2].union);
        assert_eq!(r.writable, Some(LayerSize::Bytes(2 << 30)));
        assert_eq!(parse(&g("/a:/m", "", Some(""))).unwrap().writable, Some(LayerSize::DEFAULT));
        assert!(g("", "", None).is_empty());
    }

    #[test]
    fn refused() {
        assert!(parse(&g("/a:/user-environment,", "", None)).unwrap_err().contains("not of the form"));
        assert!(parse(&g("/a:/b:/user-environment", "", None)).unwrap_err().contains("more than one ':'"));
        assert!(parse(&g("/a\n:/user-environment", "", None)).unwrap_err().contains("newline"));
        assert!(parse(&g("", "/a,,/b:/u", None)).unwrap_err().contains("--squashfs-union"));
        assert!(parse(&g("/a:/m", "", Some("1Q"))).unwrap_err().contains("--squashfs-writable"));
        assert!(parse(&g("", "", Some("1G"))).unwrap_err().contains("needs images"));
    }
}
