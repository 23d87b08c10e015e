//! The site policy of `/etc/squashfs-mount.conf`: who may use the setuid
//! tool, where images may be mounted, what may be combined, and which
//! images the kernel's squashfs driver may mount (the others are served by
//! a FUSE server running as the caller: `trust.rs`). Pure.

use std::ffi::OsString;
use std::fmt;

use crate::config::paths::Places;
use crate::privilege::Caller;
use crate::system::{Gid, Uid};

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
    pub trusted_owners: Vec<Uid>,
    /// Groups that may write images and directories on their paths.
    pub trusted_groups: Vec<Gid>,
    /// Absolute, tidy directories: when any, trusted images lie below one.
    pub trusted_dirs: Places,
    pub trusted_match: TrustedMatch,
    /// FUSE file systems root mounts (by the mount table's subtype,
    /// `fuse.NAME`) whose images may be trusted as on a disk: their
    /// servers enforce ownership, as a disk's permissions do. An image on
    /// any other FUSE mount root made goes to FUSE.
    pub trusted_fuse: Vec<String>,
    /// Empty: everyone may use the setuid tool.
    pub allowed_users: Vec<Uid>,
    pub allowed_groups: Vec<Gid>,
    /// Empty: any mount point the built-in rules allow.
    pub mount_points: Places,
    pub allow_writable: bool,
    pub allow_union: bool,
    /// `-r` (`--mutable-root`): missing mount points made in the view.
    pub allow_mutable_root: bool,
    pub max_images_per_call: usize,
}

/// The FUSE file systems trusted by default (`trusted-fuse`): cluster
/// file systems whose servers enforce each file's owner and mode, as a
/// disk's permissions do (GlusterFS's and CephFS's clients).
pub const DEFAULT_TRUSTED_FUSE: [&str; 2] = ["glusterfs", "ceph-fuse"];

/// The hard ceiling of images (counting union layers) in one call.
pub const MAX_IMAGES_PER_CALL: usize = 500;

impl Default for Policy {
    fn default() -> Self {
        Policy {
            kernel_images: KernelImages::Trusted,
            trusted_owners: vec![Uid::ROOT],
            trusted_groups: Vec::new(),
            trusted_dirs: Places::default(),
            trusted_match: TrustedMatch::Any,
            trusted_fuse: DEFAULT_TRUSTED_FUSE.iter().map(|n| n.to_string()).collect(),
            allowed_users: Vec::new(),
            allowed_groups: Vec::new(),
            mount_points: Places::default(),
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
    pub(crate) fn kernel(reason: String) -> Route {
        Route {
            kernel: true,
            reason,
        }
    }
}

/// What the site policy refuses outright.
#[derive(Debug, PartialEq, Eq)]
pub enum PolicyError {
    /// The caller is not among `allowed-users` and `allowed-groups`.
    NotAdmitted,
    /// A mount point outside `mount-points`.
    MountPointNotAllowed { path: OsString, places: String },
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::NotAdmitted => f.write_str("the site policy does not allow you to use squashfs-mount (allowed-users, allowed-groups in /etc/squashfs-mount.conf); ask your administrator"),
            PolicyError::MountPointNotAllowed { path, places } => write!(
                f,
                "refusing to mount on {}: the site policy allows mount points only at or below {places} (mount-points in /etc/squashfs-mount.conf)",
                path.to_string_lossy()
            ),
        }
    }
}

crate::error_kind!(PolicyError);

impl Policy {
    /// Whether the caller may use the setuid tool (root always may).
    pub(crate) fn admits(&self, caller: &Caller) -> Result<(), PolicyError> {
        if self.allowed_users.is_empty() && self.allowed_groups.is_empty() {
            return Ok(());
        }
        if caller.uid.is_root()
            || self.allowed_users.contains(&caller.uid)
            || caller
                .all_gids()
                .iter()
                .any(|g| self.allowed_groups.contains(g))
        {
            return Ok(());
        }
        Err(PolicyError::NotAdmitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(uid: u32, groups: &[u32]) -> Caller {
        Caller {
            uid: Uid::from_raw(uid),
            gid: Gid::from_raw(uid),
            groups: groups.iter().map(|&g| Gid::from_raw(g)).collect(),
        }
    }

    #[test]
    fn who_may_use_the_tool_and_where() {
        let p = Policy {
            allowed_groups: vec![Gid::from_raw(100)],
            allowed_users: vec![Uid::from_raw(7)],
            ..Policy::default()
        };
        assert!(p.admits(&caller(7, &[])).is_ok());
        assert!(p.admits(&caller(8, &[100])).is_ok());
        assert!(p.admits(&caller(0, &[])).is_ok());
        assert_eq!(p.admits(&caller(8, &[])), Err(PolicyError::NotAdmitted));
        let words = PolicyError::NotAdmitted.to_string();
        assert!(words.contains("allowed-users") && words.contains("allowed-groups"));
        assert!(Policy::default().admits(&caller(8, &[])).is_ok());
        let m = Places::from(vec!["/user-environment".into()]);
        assert!(m.allow("/user-environment/x".as_ref()));
        assert!(!m.allow("/user-environment2".as_ref()));
        assert!(Places::default().allow("/anywhere".as_ref()));
    }
}
