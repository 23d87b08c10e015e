//! The site policy of `/etc/squashfs-mount.conf`: who may use the setuid
//! tool, where images may be mounted, what may be combined, and which
//! images the kernel's squashfs driver may mount (the others are served by
//! a FUSE server running as the caller). Pure: decisions are made from
//! facts gathered on the opened fd (`image::Provenance`).

use std::ffi::OsString;

use crate::paths;

/// Which images the kernel's squashfs driver may mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelImages {
    /// Every image the caller can read (the C tool's behaviour). Any local
    /// user can then make the kernel parse bytes they chose.
    All,
    /// Only images whose bytes the administrator controls.
    Trusted,
    /// None: every image through FUSE.
    None,
}

/// How the `trusted-*` lists combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrustedMatch {
    /// Any listed condition is enough (owner, group, or directory).
    Any,
    /// Every condition that has a list must hold.
    All,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub kernel_images: KernelImages,
    pub trusted_owners: Vec<u32>,
    pub trusted_groups: Vec<u32>,
    /// Absolute, tidy directories.
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

/// What is known about an opened image file, judged on its fd: owner,
/// group, its real path, whether the caller can write it or any directory
/// on that path, and whether its file system is one the caller controls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    pub uid: u32,
    pub gid: u32,
    /// The file's permission bits.
    pub mode: u32,
    /// The kernel's name of the opened file.
    pub real_path: OsString,
    /// The caller can write the file, or change its mode (owns it). Root
    /// can write everything, so for root this is false and the directories
    /// are judged by who else could change them.
    pub caller_can_write_file: bool,
    /// The first directory on the real path where the caller (for root:
    /// group or others) could replace the next entry, if any.
    pub caller_writable_dir: Option<OsString>,
    /// The file system serving the file is a FUSE mount not made by root:
    /// its server, not the file's owner, decides every byte.
    pub user_filesystem: bool,
    /// The path could not be walked from `/` to the same file (renamed or
    /// replaced meanwhile, or a directory on it cannot be searched).
    pub path_unverified: bool,
}

/// Which way an image is mounted, and why (for `--policy` and messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub kernel: bool,
    pub reason: String,
}

impl Policy {
    /// Whether the kernel's squashfs driver may mount the image.
    pub fn route(&self, p: &Provenance) -> Route {
        let fuse = |why: String| Route {
            kernel: false,
            reason: why,
        };
        match self.kernel_images {
            KernelImages::All => {
                return Route {
                    kernel: true,
                    reason: "kernel-images = all".into(),
                }
            }
            KernelImages::None => return fuse("kernel-images = none".into()),
            KernelImages::Trusted => {}
        }
        if p.user_filesystem {
            return fuse("the file is on a FUSE file system not mounted by root (its server decides its bytes)".into());
        }
        if p.caller_can_write_file {
            return fuse("you can write (or own) the file".into());
        }
        if p.mode & 0o002 != 0 {
            return fuse("anyone can write the file (mode o+w)".into());
        }
        if p.mode & 0o020 != 0 && !self.trusted_groups.contains(&p.gid) {
            return fuse(format!(
                "its group {} can write the file (mode g+w) and is not in trusted-groups",
                p.gid
            ));
        }
        if let Some(dir) = &p.caller_writable_dir {
            return fuse(format!(
                "{}, a directory on its path, lets you (root: its group or others) replace the file",
                dir.to_string_lossy()
            ));
        }
        if p.path_unverified {
            return fuse("its path could not be verified from / to the opened file".into());
        }
        let owner = self
            .trusted_owners
            .contains(&p.uid)
            .then(|| format!("owned by uid {} (trusted-owners)", p.uid));
        let group = self
            .trusted_groups
            .contains(&p.gid)
            .then(|| format!("group {} (trusted-groups)", p.gid));
        let dir = self
            .trusted_dirs
            .iter()
            .find(|d| paths::is_within(&p.real_path, d))
            .map(|d| format!("below {} (trusted-dirs)", d.to_string_lossy()));
        let listed = [
            (!self.trusted_owners.is_empty(), &owner),
            (!self.trusted_groups.is_empty(), &group),
            (!self.trusted_dirs.is_empty(), &dir),
        ];
        let trusted = match self.trusted_match {
            TrustedMatch::Any => listed.iter().any(|(_, hit)| hit.is_some()),
            TrustedMatch::All => {
                listed.iter().any(|(has, _)| *has)
                    && listed.iter().all(|(has, hit)| !has || hit.is_some())
            }
        };
        let hits: Vec<&str> = listed.iter().filter_map(|(_, h)| h.as_deref()).collect();
        if trusted {
            Route {
                kernel: true,
                reason: format!(
                    "trusted: {}, and you cannot write it or its directories",
                    hits.join(", ")
                ),
            }
        } else {
            fuse(format!(
                "not trusted: owned by uid {} group {}, not matching trusted-owners/trusted-groups/trusted-dirs ({})",
                p.uid,
                p.gid,
                match self.trusted_match {
                    TrustedMatch::Any => "any",
                    TrustedMatch::All => "all",
                }
            ))
        }
    }

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

    fn prov(uid: u32, path: &str) -> Provenance {
        Provenance {
            uid,
            gid: uid,
            mode: 0o644,
            real_path: path.into(),
            caller_can_write_file: false,
            caller_writable_dir: None,
            user_filesystem: false,
            path_unverified: false,
        }
    }

    #[test]
    fn the_default_trusts_root_owned_images_the_caller_cannot_change() {
        let p = Policy::default();
        assert!(p.route(&prov(0, "/apps/stack.sqfs")).kernel);
        assert!(!p.route(&prov(1000, "/home/u/stack.sqfs")).kernel);
        let writable = Provenance {
            caller_can_write_file: true,
            ..prov(0, "/x.sqfs")
        };
        assert!(p.route(&writable).reason.contains("write"));
        let dir = Provenance {
            caller_writable_dir: Some("/scratch/u".into()),
            ..prov(0, "/scratch/u/x.sqfs")
        };
        assert!(!p.route(&dir).kernel);
        assert!(
            !p.route(&Provenance {
                user_filesystem: true,
                ..prov(0, "/x")
            })
            .kernel
        );
        assert!(
            !p.route(&Provenance {
                path_unverified: true,
                ..prov(0, "/x")
            })
            .kernel
        );
    }

    #[test]
    fn modes_and_lists() {
        let all = Policy {
            kernel_images: KernelImages::All,
            ..Policy::default()
        };
        assert!(
            all.route(&Provenance {
                caller_can_write_file: true,
                ..prov(1000, "/x")
            })
            .kernel
        );
        let none = Policy {
            kernel_images: KernelImages::None,
            ..Policy::default()
        };
        assert!(!none.route(&prov(0, "/x")).kernel);
        let dirs = Policy {
            trusted_owners: vec![],
            trusted_dirs: vec!["/apps/images".into()],
            ..Policy::default()
        };
        assert!(dirs.route(&prov(500, "/apps/images/a/b.sqfs")).kernel);
        // Whole components, never string prefixes.
        assert!(!dirs.route(&prov(0, "/apps/images2/b.sqfs")).kernel);
        let both = Policy {
            trusted_dirs: vec!["/apps".into()],
            trusted_match: TrustedMatch::All,
            ..Policy::default()
        };
        assert!(both.route(&prov(0, "/apps/b.sqfs")).kernel);
        assert!(!both.route(&prov(0, "/opt/b.sqfs")).kernel);
        assert!(!both.route(&prov(7, "/apps/b.sqfs")).kernel);
        let group = Policy {
            trusted_owners: vec![],
            trusted_groups: vec![42],
            ..Policy::default()
        };
        assert!(
            group
                .route(&Provenance {
                    gid: 42,
                    ..prov(7, "/x")
                })
                .kernel
        );
        // A file others can write is never trusted; a group-writable one
        // only when its group is trusted.
        for (mode, gid, kernel) in [(0o666, 0, false), (0o664, 0, false), (0o664, 42, true)] {
            let f = Provenance {
                mode,
                gid,
                ..prov(0, "/x")
            };
            let g = Policy {
                trusted_groups: vec![42],
                ..Policy::default()
            };
            assert_eq!(g.route(&f).kernel, kernel, "{mode:o} {gid}");
        }
        // Nothing listed at all: nothing is trusted.
        let nothing = Policy {
            trusted_owners: vec![],
            ..Policy::default()
        };
        assert!(!nothing.route(&prov(0, "/x")).kernel);
    }

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
