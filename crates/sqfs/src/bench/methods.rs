//! How the runs are made cold and warm, and which way squashfs-mount
//! mounts the images.

use std::path::Path;

use serde::Serialize;

use super::BenchError;
use crate::error::FileError;

/// How cold runs are made cold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColdMethod {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` before each run: nothing
    /// is cached, on the whole machine.
    DropCaches,
    /// posix_fadvise(POSIX_FADV_DONTNEED) on the image and a fresh mount:
    /// the image's pages are evicted, files outside it (the command's own
    /// binary and libraries) may stay cached.
    Fadvise,
}

impl ColdMethod {
    pub fn detect() -> Self {
        if std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/sys/vm/drop_caches")
            .is_ok()
        {
            ColdMethod::DropCaches
        } else {
            ColdMethod::Fadvise
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            ColdMethod::DropCaches => "cold (drop_caches)",
            ColdMethod::Fadvise => "cold* (image evicted)",
        }
    }
    pub fn explain(self) -> &'static str {
        match self {
            ColdMethod::DropCaches => "cold: all caches dropped (echo 3 > /proc/sys/vm/drop_caches) before each run",
            ColdMethod::Fadvise => "cold*: not allowed to drop caches (needs root), so before each run the image's pages are evicted with posix_fadvise(DONTNEED) and it is mounted afresh; files outside the image stay cached",
        }
    }

    pub(super) fn make_cold(self, image: &Path) -> Result<(), BenchError> {
        match self {
            ColdMethod::DropCaches => {
                rustix::fs::sync();
                std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(BenchError::DropCaches)
            }
            ColdMethod::Fadvise => {
                let f = std::fs::File::open(image).map_err(FileError::at(image))?;
                let failed = |call| {
                    move |error| BenchError::Syscall {
                        path: image.to_path_buf(),
                        call,
                        error,
                    }
                };
                rustix::fs::fdatasync(&f).map_err(failed("fdatasync"))?;
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
                    .map_err(failed("posix_fadvise"))
            }
        }
    }
}

/// What warm runs measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmMethod {
    /// A second launch of the same image through squashfs-mount's image
    /// cache, right after a first one: what users get when they start
    /// something again. The instance (and its page, inode and dentry
    /// caches) is reused; nothing is decompressed again.
    ImageCache,
    /// A fresh mount right after the cold run: the image file's pages are
    /// cached, decompression is redone. Used when squashfs-mount has no
    /// usable image cache.
    PageCache,
}

impl WarmMethod {
    pub fn explain(self, why: &str) -> String {
        match self {
            WarmMethod::ImageCache => "warm: a second launch of the same image right after a first one, through squashfs-mount's image cache (what users get on a second start: the mounted instance and its caches are reused); cold runs use --no-cache, a fresh mount".to_string(),
            WarmMethod::PageCache => format!("warm: a fresh mount right after the cold run; the image file's pages are cached, decompression is redone ({why})"),
        }
    }
}

/// Which way squashfs-mount mounts the benchmark's images, and why, as its
/// `--policy` says: the kernel's squashfs (loop device) or the FUSE server
/// (in userspace, running as the user); both kinds of instance are kept in
/// squashfs-mount's image cache (a FUSE instance for its user alone). A
/// user's own images go to FUSE under the default site policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MountPath {
    /// "kernel", "FUSE" or "unknown" (a squashfs-mount without `--policy`).
    pub path: String,
    pub reason: String,
}

impl MountPath {
    /// From `squashfs-mount --policy IMAGE`'s output: the line
    /// `<image>: kernel (<reason>)` or `<image>: FUSE (<reason>)`.
    pub fn parse(policy_output: &str) -> Option<MountPath> {
        policy_output.lines().find_map(|l| {
            ["kernel", "FUSE"].iter().find_map(|kind| {
                let at = l.find(&format!(": {kind} ("))?;
                let reason = l[at + kind.len() + 4..].strip_suffix(')')?;
                Some(MountPath {
                    path: kind.to_string(),
                    reason: reason.to_string(),
                })
            })
        })
    }

    /// One line for the table and the chart: the path and the first
    /// clause of its reason, at most about 120 characters, never cut inside
    /// a parenthesis (the whole reason is in `--json` and `squashfs-mount
    /// --policy IMAGE`).
    pub fn explain(&self) -> String {
        const MAX_REASON: usize = 60;
        let short = crate::mountable::first_clause(&self.reason, MAX_REASON);
        let what = match self.path.as_str() {
            "kernel" => "kernel",
            "FUSE" => "FUSE, as you",
            _ => "unknown",
        };
        format!("path: {what} ({short}); see squashfs-mount --policy")
    }
}

#[cfg(test)]
mod path_tests {
    use super::MountPath;

    #[test]
    fn the_path_line_is_short() {
        let long = "not trusted: the file is owned by uid 1000, not a trusted owner (root, trusted-owners), who can change it; /home/u (mode 755) can be written by everyone (mode o+w), who can replace its entry on the path";
        for path in ["kernel", "FUSE"] {
            for reason in [long, "kernel-images = all"] {
                let line = MountPath {
                    path: path.into(),
                    reason: reason.into(),
                }
                .explain();
                assert!(line.len() <= 120, "{} chars: {line}", line.len());
                assert!(line.starts_with(&format!("path: {path}")), "{line}");
                assert!(line.contains("--policy"), "{line}");
            }
        }
    }
}

#[cfg(test)]
mod policy_tests {
    use super::MountPath;

    #[test]
    fn mount_path_from_policy_output() {
        let setuid = "# site policy in force (/etc/squashfs-mount.conf, or built-in defaults where it sets nothing)\nkernel-images = trusted\n/tmp/w/lz4.sqfs: FUSE (not trusted: owned by uid 1000 (trusted-owners lists 0); yours)\n";
        assert_eq!(
            MountPath::parse(setuid),
            Some(MountPath {
                path: "FUSE".into(),
                reason: "not trusted: owned by uid 1000 (trusted-owners lists 0); yours".into()
            })
        );
        let kernel = "/a b/x.sqfs: kernel (trusted: owned by uid 0 (trusted-owners))\n";
        assert_eq!(MountPath::parse(kernel).unwrap().path, "kernel");
        let rootless = "# not installed setuid root: every image is served through FUSE in a user namespace (rootless mode)\n/w/x.sqfs: FUSE (rootless mode)\n";
        assert_eq!(MountPath::parse(rootless).unwrap().reason, "rootless mode");
        assert_eq!(
            MountPath::parse("squashfs-mount: x.sqfs: cannot open\n"),
            None
        );
    }
}
