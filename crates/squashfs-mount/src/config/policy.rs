//! The site policy of `/etc/squashfs-mount.conf`: who may use the setuid
//! tool, where images may be mounted, what may be combined, and which
//! images the kernel's squashfs driver may mount (the others are served by
//! a FUSE server running as the caller: `trust.rs`). Pure.

use std::ffi::OsString;

pub use super::trust::Provenance;
use crate::paths;

/// Which images the kernel's squashfs driver may mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelImages {
    /// Every image the caller can read (the C tool's behaviour). Any local
    /// user can then make the kernel parse bytes they chose.
    All,
    /// Only images whose bytes nobody outside the trusted owners and
    /// groups can change.
    Trusted,
    /// None: every image through FUSE.
    None,
}

/// What the `trusted-*` lists require of an image besides the invariant
/// (`trust.rs`), which always holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustedMatch {
    /// A trusted owner; below one of `trusted-dirs` when it lists any.
    Any,
    /// Also a group of `trusted-groups` when it lists any.
    All,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub kernel_images: KernelImages,
    /// Owners whose images (and directories) may be trusted; root always
    /// is, listed or not.
    pub trusted_owners: Vec<u32>,
    /// Groups that may write images and directories on their paths.
    pub trusted_groups: Vec<u32>,
    /// Absolute, tidy directories: when any, trusted images lie below one.
    pub trusted_dirs: Vec<OsString>,
    pub trusted_match: TrustedMatch,
    /// Empty: everyone may use the setuid tool.
    pub allowed_users: Vec<u32>,
    pub allowed_groups: Vec<u32>,
    /// Empty: any mount point the built-in rules allow.
    pub mount_points: Vec<OsString>,
    pub allow_writable: bool,
    pub allow_union: bool,
    /// `-r` (`--mutable-root`): missing mount points made in the view.
    pub allow_mutable_root: bool,
    pub max_images_per_call: usize,
}

/// The hard ceiling of images (counting union layers) in one call.
pub const MAX_IMAGES_PER_CALL: usize = 500;

impl Default for Policy {
    fn default() -> Self {
        Policy {
            kernel_images: KernelImages::Trusted,
            trusted_owners: vec![0],
            trusted_groups: Vec::new(),
            trusted_dirs: Vec::new(),
            trusted_match: TrustedMatch::Any,
            allowed_users: Vec::new(),
            allowed_groups: Vec::new(),
            mount_points: Vec::new(),
            allow_writable: true,
            allow_union: true,
            allow_mutable_root: true,
            max_images_per_call: MAX_IMAGES_PER_CALL,
        }
    }
}

/// Which way an image is mounted, and why (for `--policy` and messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub kernel: bool,
    pub reason: String,
}

impl Route {
    pub fn kernel(reason: String) -> Route {
        Route {
            kernel: true,
            reason,
        }
    }
}

impl Policy {
    /// Whether the user (uid, gids) may use the setuid tool; the refusal
    /// names the keys.
    pub fn admits(&self, uid: u32, gids: &[u32]) -> Result<(), String> {
        if self.allowed_users.is_empty() && self.allowed_groups.is_empty() {
            return Ok(());
        }
        if uid == 0
            || self.allowed_users.contains(&uid)
            || gids.iter().any(|g| self.allowed_groups.contains(g))
        {
            return Ok(());
        }
        Err("the site policy does not allow you to use squashfs-mount (allowed-users, allowed-groups in /etc/squashfs-mount.conf); ask your administrator".into())
    }

    /// Whether images may be mounted on `real` (a resolved mount point).
    pub fn allows_mount_point(&self, real: &std::ffi::OsStr) -> Result<(), String> {
        if self.mount_points.is_empty()
            || self.mount_points.iter().any(|m| paths::is_within(real, m))
        {
            return Ok(());
        }
        let list: Vec<String> = self
            .mount_points
            .iter()
            .map(|m| m.to_string_lossy().into_owned())
            .collect();
        Err(format!(
            "refusing to mount on {}: the site policy allows mount points only at or below {} (mount-points in /etc/squashfs-mount.conf)",
            real.to_string_lossy(),
            list.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_and_mount_points() {
        let p = Policy {
            allowed_groups: vec![100],
            allowed_users: vec![7],
            ..Policy::default()
        };
        assert!(p.admits(7, &[7]).is_ok());
        assert!(p.admits(8, &[8, 100]).is_ok());
        let e = p.admits(8, &[8]).unwrap_err();
        assert!(e.contains("allowed-users") && e.contains("allowed-groups"));
        assert!(Policy::default().admits(8, &[]).is_ok());
        let m = Policy {
            mount_points: vec!["/user-environment".into()],
            ..Policy::default()
        };
        assert!(m.allows_mount_point("/user-environment/x".as_ref()).is_ok());
        assert!(m
            .allows_mount_point("/user-environment2".as_ref())
            .unwrap_err()
            .contains("mount-points"));
    }
}
