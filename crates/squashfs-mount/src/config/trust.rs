//! Whether the kernel's squashfs driver may mount an image
//! (`kernel-images = trusted`): only when nobody outside the trusted
//! owners and groups can change its bytes. Pure: decided from facts
//! gathered on the opened fd (`image::Image::provenance`), the same for
//! every caller, root included.
//!
//! The invariant, for the file and for every directory on its real path:
//! - its owner is trusted (root always, and `trusted-owners`): an owner
//!   can chmod, so an untrusted owner could always write;
//! - whoever else can write it (its group with g+w, others with o+w, the
//!   users and groups its POSIX ACL names) is trusted (`trusted-groups`
//!   for groups), except that a sticky directory protects the entries of
//!   trusted owners from everyone else.
//!
//! `trusted-dirs` and `trusted-match = all` only narrow this down; they
//! never trust bytes an untrusted user can change. A file on a FUSE mount
//! is judged so only when root made the mount and the site trusts its
//! server to enforce ownership (`trusted-fuse`): the server decides every
//! byte and every owner it shows (s3fs, rclone or an sshfs gateway show
//! root's files whose bytes users change by another road).

use super::names::{self, FileNames, Names};
use super::policy::{KernelImages, Policy, Route, TrustedMatch};
pub(crate) use crate::config::provenance::{CallerAccess, Provenance, Writers};
use crate::system::{Gid, Uid};

impl Policy {
    /// Root, and the users of `trusted-owners`.
    pub(crate) fn owner_trusted(&self, uid: Uid) -> bool {
        uid.is_root() || self.trusted_owners.contains(&uid)
    }

    fn group_trusted(&self, gid: Gid) -> bool {
        self.trusted_groups.contains(&gid)
    }

    /// Whether the caller is one of those trusted to change images.
    fn caller_trusted(&self, c: &CallerAccess) -> bool {
        self.owner_trusted(c.uid) || c.gids.iter().any(|&g| self.group_trusted(g))
    }

    /// Who, besides its owner, could write an inode and is not trusted.
    fn untrusted_writers(&self, w: &Writers, n: &dyn Names) -> Vec<String> {
        let mut out = Vec::new();
        if w.mode & 0o020 != 0 && !self.group_trusted(w.gid) {
            out.push(format!(
                "its {}",
                names::group(n, w.gid, Some("mode g+w; not in trusted-groups"))
            ));
        }
        if w.mode & 0o002 != 0 {
            out.push("everyone (mode o+w)".into());
        }
        let users = w.acl.users.iter().filter(|&&u| !self.owner_trusted(u));
        // (Users of an ACL by id, as `getfacl -n` shows them.)
        out.extend(users.map(|u| format!("uid {u} (its ACL)")));
        let groups = w.acl.groups.iter().filter(|&&g| !self.group_trusted(g));
        out.extend(groups.map(|&g| names::group(n, g, Some("its ACL"))));
        if w.acl.unknown {
            out.push("whoever its ACL names (it cannot be read)".into());
        }
        out
    }

    /// What breaks the invariant for the file itself.
    fn file_breaches(&self, p: &Provenance, n: &dyn Names, out: &mut Vec<String>) {
        let f = &p.file;
        if !self.owner_trusted(f.uid) {
            out.push(format!(
                "the file is owned by {}, not a trusted owner (root, trusted-owners), who can change it",
                names::user(n, f.uid)
            ));
        }
        let w = self.untrusted_writers(f, n);
        if !w.is_empty() {
            out.push(format!(
                "the file (mode {:o}) can be written by {}",
                f.mode & 0o7777,
                w.join(", ")
            ));
        }
    }

    /// What breaks the invariant on the directories of the path.
    fn dir_breaches(&self, p: &Provenance, n: &dyn Names, out: &mut Vec<String>) {
        for d in &p.dirs {
            let name = d.path.to_string_lossy();
            let w = &d.writers;
            if !self.owner_trusted(w.uid) {
                out.push(format!(
                    "{name} is owned by {}, not a trusted owner, who can replace what is below it",
                    names::user(n, w.uid)
                ));
                continue;
            }
            let writers = self.untrusted_writers(w, n);
            let sticky_protects = w.mode & 0o1000 != 0 && self.owner_trusted(d.entry_uid);
            if !writers.is_empty() && !sticky_protects {
                out.push(format!(
                    "{name} (mode {:o}) can be written by {}, who can replace its entry on the path",
                    w.mode & 0o7777,
                    writers.join(", ")
                ));
            }
        }
    }

    /// What the kernel says the caller could change although the modes and
    /// ACLs did not show it (another mechanism: an NFSv4 ACL, a network
    /// file system's own rules): asked only when nothing else was found,
    /// for callers who are not trusted themselves.
    fn caller_breaches(&self, p: &Provenance, out: &mut Vec<String>) {
        let c = &p.caller;
        if !out.is_empty() || self.caller_trusted(c) {
            return;
        }
        if c.can_write_file {
            out.push(
                "you can write the file (the kernel says so; its mode and ACL do not show why)"
                    .into(),
            );
        }
        if let Some(d) = &c.writable_dir {
            out.push(format!(
                "you can replace its entry in {} (the kernel says so)",
                d.to_string_lossy()
            ));
        }
    }

    /// The restrictions of `trusted-dirs` and `trusted-match = all`.
    fn restriction_breaches(&self, p: &Provenance, n: &dyn Names, out: &mut Vec<String>) {
        if !self.trusted_dirs.allow(&p.real_path) {
            out.push(format!(
                "it is not below {} (trusted-dirs)",
                self.trusted_dirs.list()
            ));
        }
        let all = self.trusted_match == TrustedMatch::All;
        if all && !self.trusted_groups.is_empty() && !self.group_trusted(p.file.gid) {
            out.push(format!(
                "its {} is not in trusted-groups (trusted-match = all)",
                names::group(n, p.file.gid, None)
            ));
        }
    }

    /// Why an image on root's FUSE mount `name` (not in `trusted-fuse`)
    /// goes to FUSE.
    fn untrusted_fuse(&self, name: &str) -> String {
        let listed = match self.trusted_fuse.is_empty() {
            true => "none".to_string(),
            false => self.trusted_fuse.join(", "),
        };
        format!(
            "the file is on a FUSE file system root mounted, fuse.{name}, whose server decides its bytes and is not one trusted to enforce ownership (trusted-fuse: {listed})"
        )
    }

    /// Whether the kernel's squashfs driver may mount the image, and why
    /// (every reason that sends it to FUSE), users and groups named from
    /// /etc/passwd and /etc/group.
    pub(crate) fn route(&self, p: &Provenance) -> Route {
        self.route_named(p, &FileNames::default())
    }

    /// [`Policy::route`], users and groups named by `n`.
    pub(crate) fn route_named(&self, p: &Provenance, n: &dyn Names) -> Route {
        let fuse = |reason: String| Route {
            kernel: false,
            reason,
        };
        match self.kernel_images {
            KernelImages::All => return Route::kernel("kernel-images = all".into()),
            KernelImages::None => return fuse("kernel-images = none".into()),
            KernelImages::Trusted => {}
        }
        if p.user_filesystem {
            return fuse("the file is on a FUSE file system that a user, or this tool, serves (its server decides its bytes)".into());
        }
        if let Some(name) = p.root_fuse.as_deref() {
            if !self.trusted_fuse.iter().any(|t| t == name) {
                return fuse(self.untrusted_fuse(name));
            }
        }
        let mut why = Vec::new();
        self.file_breaches(p, n, &mut why);
        self.dir_breaches(p, n, &mut why);
        self.caller_breaches(p, &mut why);
        if p.path_unverified {
            why.push("its path could not be verified from / to the opened file".into());
        }
        self.restriction_breaches(p, n, &mut why);
        if !why.is_empty() {
            return fuse(format!("not trusted: {}", why.join("; ")));
        }
        let below = self
            .trusted_dirs
            .containing(&p.real_path)
            .map(|d| format!(", below {} (trusted-dirs)", d.to_string_lossy()))
            .unwrap_or_default();
        Route::kernel(format!(
            "trusted: owned by {} (root, trusted-owners){below}, and nobody outside trusted-owners and trusted-groups can change it or a directory on its path",
            names::user(n, p.file.uid)
        ))
    }
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
