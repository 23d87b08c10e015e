//! The overlays of a kept layer, made by the caller in the user namespace
//! the caller's stage created: the lowers (what root mounted, copied into
//! this mount namespace with their flags locked) are opened by path before
//! anything is stacked; then, in path order, each image mount point gets an
//! overlay (lower: that mount; upper and work: `DIR/<n>/upper`, `work`,
//! opened relative to the working directory, which is DIR).
//!
//! Options: `userxattr` (the layer's own marks are user.overlay.*: this
//! mounter may not write trusted.*; without it overlayfs would mount but
//! lose opaque directories), `redirect_dir=nofollow`, `metacopy=off`,
//! `index=off`, `nfs_export=off`, `xino=off` (nothing in any layer can
//! redirect a lookup or pull data from elsewhere), `uuid=null`; the mount
//! is nosuid and nodev. A layer mounted read-only (overlayfs does that
//! silently when it cannot use the work directory) is refused.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::mount::MountAttrFlags;

use super::mount_order::{Step, ViewMount};
use super::LayerError;
use crate::system::error::Failure;
use crate::system::{self, FsContext};

/// Overlay parameters of a kept layer, each set on its own.
const PARAMETERS: [(&str, &str); 6] = [
    ("redirect_dir", "nofollow"),
    ("metacopy", "off"),
    ("index", "off"),
    ("nfs_export", "off"),
    ("xino", "off"),
    ("uuid", "null"),
];

/// statfs f_type of overlayfs (root's read-only unions).
const OVERLAY_MAGIC: u64 = 0x794C_7630;

fn shown(p: &OsStr) -> String {
    p.to_string_lossy().into_owned()
}

/// Opens, before anything is stacked, the image mounts (the lowers).
pub fn open_lowers(mounts: &[ViewMount], steps: &[Step]) -> Result<Vec<Option<OwnedFd>>, Failure> {
    let mut out = Vec::with_capacity(mounts.len());
    for (m, step) in mounts.iter().zip(steps) {
        if *step == Step::Leave {
            out.push(None);
            continue;
        }
        let fd = system::open_dir_nofollow(system::working_dir(), &m.path)
            .map_err(|e| Failure::about(&shown(&m.path), LayerError::OpenLower(e)))?;
        shows_the_image(fd.as_fd(), &m.path)?;
        out.push(Some(fd));
    }
    Ok(out)
}

/// Refuses a mount point `fd` (at `path`) that does not show what root
/// mounted there (squashfs, FUSE, or root's union).
pub fn shows_the_image(fd: BorrowedFd<'_>, path: &OsStr) -> Result<(), Failure> {
    let magic = system::filesystem_type(fd).unwrap_or(0);
    if [system::SQUASHFS_MAGIC, system::FUSE_MAGIC, OVERLAY_MAGIC].contains(&magic) {
        return Ok(());
    }
    Err(Failure::about(&shown(path), LayerError::NotTheImage(magic)))
}

/// Stacks, in order, an overlay on each image mount point (the sub-layer
/// numbers in `numbers`, one per image mount).
pub fn stack(
    mounts: &[ViewMount],
    lowers: &[Option<OwnedFd>],
    numbers: &[u32],
) -> Result<(), Failure> {
    let mut numbers = numbers.iter();
    for (m, lower) in mounts.iter().zip(lowers) {
        let Some(lower) = lower else { continue };
        let subject = shown(&m.path);
        let n = numbers
            .next()
            .ok_or_else(|| Failure::about(&subject, LayerError::Internal("no sub-layer")))?;
        let mount = overlay(lower.as_fd(), *n, &subject)?;
        system::open_dir_nofollow(system::working_dir(), &m.path)
            .and_then(|t| system::attach_mount(mount.as_fd(), t.as_fd()))
            .map_err(|e| Failure::about(&subject, LayerError::Attach(e)))?;
    }
    Ok(())
}

/// One overlay: `lower` below, `DIR/<n>/upper` above (the working
/// directory is DIR).
fn overlay(lower: BorrowedFd<'_>, n: u32, subject: &str) -> Result<OwnedFd, Failure> {
    let fail = |step: &str, e: system::Error| {
        let step = step.to_string();
        Failure::about(subject, LayerError::Overlay { step, e })
    };
    let ctx = FsContext::open("overlay").map_err(|e| {
        fail(
            "the kernel offers no overlay file system (--writable=DIR needs overlayfs)",
            e,
        )
    })?;
    ctx.set_flag("userxattr")
        .map_err(|e| fail("overlay userxattr (this needs Linux 5.11 or later)", e))?;
    for (key, value) in PARAMETERS {
        ctx.set_string(key, OsStr::new(value))
            .map_err(|e| fail(&format!("overlay {key}={value}"), e))?;
    }
    ctx.set_fd("lowerdir+", lower)
        .map_err(|e| fail("overlay lowerdir+ (this needs Linux 6.8 or later)", e))?;
    for (key, name) in [("upperdir", "upper"), ("workdir", "work")] {
        let path = OsString::from(format!("{n}/{name}"));
        let fd = system::open_dir_nofollow(system::working_dir(), &path).map_err(|e| {
            fail(
                &format!("opening the layer's {name} directory {n}/{name}"),
                e,
            )
        })?;
        ctx.set_fd(key, fd.as_fd())
            .map_err(|e| fail(&format!("overlay {key}"), e))?;
    }
    if let Err(system::Refused { errno: e, log }) = ctx.create() {
        return Err(Failure::about(
            subject,
            LayerError::OverlayRefused { e, log },
        ));
    }
    let mount = ctx
        .mount(MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV)
        .map_err(|e| fail("fsmount(overlay)", e))?;
    if system::on_read_only_filesystem(mount.as_fd()).map_err(|e| fail("statvfs", e))? {
        let log = ctx.messages();
        return Err(Failure::about(subject, LayerError::ReadOnlyOverlay { log }));
    }
    Ok(mount)
}
