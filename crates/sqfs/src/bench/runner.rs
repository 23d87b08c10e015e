//! squashfs-mount as the benchmark runs it: timed and asked (found by
//! `mountable::find_squashfs_mount`).

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::methods::{MountPath, WarmMethod};
use super::BenchError;

/// Extra flags for squashfs-mount: `--no-cache` when it has an image cache,
/// so every run measures a fresh mount.
pub(super) fn mount_flags(squashfs_mount: &Path) -> Vec<OsString> {
    let help = Command::new(squashfs_mount)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if help.contains("--no-cache") {
        vec!["--no-cache".into()]
    } else {
        Vec::new()
    }
}

pub(super) struct Runner {
    pub exe: PathBuf,
    /// Flags for fresh mounts (`--no-cache` when squashfs-mount has a cache).
    pub flags: Vec<OsString>,
    pub mountpoint: PathBuf,
}

impl Runner {
    /// Runs `command` with `image` mounted (through the image cache when
    /// `cached`); returns the wall time of the whole squashfs-mount run.
    pub(super) fn time(
        &self,
        image: &Path,
        command: &[OsString],
        cached: bool,
    ) -> Result<f64, BenchError> {
        let mut spec = image.as_os_str().to_os_string();
        spec.push(":");
        spec.push(&self.mountpoint);
        let started = Instant::now();
        let mut child = Command::new(&self.exe)
            .args(if cached { &[][..] } else { &self.flags[..] })
            .arg(&spec)
            .arg("--")
            .args(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| BenchError::CannotRun {
                exe: self.exe.clone(),
                error,
            })?;
        let mut err = Vec::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_end(&mut err);
        }
        let status = child.wait().map_err(|error| BenchError::Waiting {
            exe: self.exe.clone(),
            error,
        })?;
        let t = started.elapsed().as_secs_f64();
        if !status.success() {
            return Err(BenchError::RunFailed {
                image: image.to_path_buf(),
                status,
                stderr: String::from_utf8_lossy(&err).trim().to_string(),
            });
        }
        Ok(t)
    }

    /// squashfs-mount with `args`, its standard output if it succeeded.
    fn maintenance(&self, args: &[&OsStr]) -> Option<String> {
        let o = Command::new(&self.exe)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Which way `image` is mounted (`--policy IMAGE`).
    pub(super) fn mount_path(&self, image: &Path) -> MountPath {
        self.maintenance(&[OsStr::new("--policy"), image.as_os_str()])
            .and_then(|out| MountPath::parse(&out))
            .unwrap_or_else(|| MountPath {
                path: "unknown".into(),
                reason: "this squashfs-mount does not say (no --policy)".into(),
            })
    }

    /// Whether warm runs can go through the image cache: squashfs-mount has
    /// a cache, can evict one image's
    /// instances (`--gc IMAGE`, so that the bench leaves none behind), and
    /// a launch of `image` left an instance that `--cache-status` lists.
    /// The reason when not, and whether cached instances may have been made
    /// (then the images are evicted at the end).
    pub(super) fn warm_method(&self, image: &Path) -> (WarmMethod, String, bool) {
        if self.flags.is_empty() {
            return (
                WarmMethod::PageCache,
                "this squashfs-mount has no image cache".into(),
                false,
            );
        }
        if self
            .maintenance(&[OsStr::new("--gc"), image.as_os_str()])
            .is_none()
        {
            return (
                WarmMethod::PageCache,
                "this squashfs-mount cannot evict one image's cached instances (--gc IMAGE), so its image cache is not used".into(),
                false,
            );
        }
        if self.time(image, &[OsString::from("true")], true).is_err() {
            return (
                WarmMethod::PageCache,
                "a launch through the image cache failed".into(),
                true,
            );
        }
        let listed = self
            .maintenance(&[OsStr::new("--cache-status")])
            .is_some_and(|out| out.contains(&*image.to_string_lossy()));
        if listed {
            (WarmMethod::ImageCache, String::new(), true)
        } else {
            (
                WarmMethod::PageCache,
                "squashfs-mount kept no cached instance: cache off in /etc/squashfs-mount.conf, or unavailable here".into(),
                true,
            )
        }
    }

    /// Evicts the cached instances of `image` (`--gc IMAGE`).
    pub(super) fn evict(&self, image: &Path) {
        let _ = self.maintenance(&[OsStr::new("--gc"), image.as_os_str()]);
    }
}
