//! The overlays of a kept layer, made by the caller in the user namespace
//! the caller's stage created: the lowers (what root mounted, copied into
//! this mount namespace with their flags locked) are opened by path before
//! anything is stacked; then, in path order, each image mount point gets an
//! overlay (lower: that mount; upper and work: `DIR/<n>/upper`, `work`,
//! opened relative to the working directory, which is DIR).
//!
//! Options: `userxattr` (the layer's own marks are user.overlay.*: this
//! mounter may not write trusted.*; without it overlayfs would mount but
//! lose opaque directories), the safe options every overlay of the tool
//! sets (`mounts::overlay::SAFE_OPTIONS`: `redirect_dir=nofollow`,
//! `metacopy=off`, `index=off`, `nfs_export=off`, `xino=off`, so nothing in
//! any layer can redirect a lookup or pull data from elsewhere),
//! `uuid=null`; the mount
//! is nosuid and nodev. A layer mounted read-only (overlayfs does that
//! silently when it cannot use the work directory) is refused.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::mount::MountAttrFlags;

use super::mount_order::{Step, ViewMount};
use super::LayerError;
use crate::mounts::overlay::{self, OverlayOptions};
use crate::system::error::Failure;
use crate::system::{self, FsContext};

/// The options of a kept layer's overlays: `userxattr`, every option of
/// the one list ([`overlay::SAFE_OPTIONS`]), `uuid=null`.
pub(crate) fn layer_options(ctx: &impl OverlayOptions) -> Result<(), overlay::OptionFailed> {
    ctx.set_flag("userxattr").map_err(|e| {
        (
            "overlay userxattr (this needs Linux 5.11 or later)".to_string(),
            e,
        )
    })?;
    overlay::set_safe_options(ctx)?;
    overlay::set_option(ctx, "uuid", "null")
}

/// statfs f_type of overlayfs (root's read-only unions).
const OVERLAY_MAGIC: u64 = 0x794C_7630;

fn shown(p: &OsStr) -> String {
    p.to_string_lossy().into_owned()
}

/// Opens, before anything is stacked, the image mounts (the lowers).
pub(crate) fn open_lowers(
    mounts: &[ViewMount],
    steps: &[Step],
) -> Result<Vec<Option<OwnedFd>>, Failure> {
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
pub(crate) fn shows_the_image(fd: BorrowedFd<'_>, path: &OsStr) -> Result<(), Failure> {
    let magic = system::filesystem_type(fd).unwrap_or(0);
    if [system::SQUASHFS_MAGIC, system::FUSE_MAGIC, OVERLAY_MAGIC].contains(&magic) {
        return Ok(());
    }
    Err(Failure::about(&shown(path), LayerError::NotTheImage(magic)))
}

/// Stacks, in order, an overlay on each image mount point (the sub-layer
/// numbers in `numbers`, one per image mount).
pub(crate) fn stack(
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
    layer_options(&ctx).map_err(|(what, e)| fail(&what, e))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Records the options set, `key=value` or `key`.
    #[derive(Default)]
    struct OptionRecorder(RefCell<Vec<String>>);

    impl OverlayOptions for OptionRecorder {
        fn set_option(&self, key: &str, value: &str) -> Result<(), system::Error> {
            self.0.borrow_mut().push(format!("{key}={value}"));
            Ok(())
        }
        fn set_flag(&self, key: &str) -> Result<(), system::Error> {
            self.0.borrow_mut().push(key.to_string());
            Ok(())
        }
    }

    #[test]
    fn root_unions_and_kept_layers_set_every_safe_option() {
        let union = OptionRecorder::default();
        overlay::union_options(&union).unwrap();
        let layer = OptionRecorder::default();
        layer_options(&layer).unwrap();
        for (key, value) in overlay::SAFE_OPTIONS {
            let option = format!("{key}={value}");
            assert!(union.0.borrow().contains(&option), "union lacks {option}");
            assert!(layer.0.borrow().contains(&option), "layer lacks {option}");
        }
        // The kept layer's own: user.overlay.* marks, no uuid needed.
        let layer = layer.0.into_inner();
        assert_eq!(layer.first().map(String::as_str), Some("userxattr"));
        assert_eq!(layer.last().map(String::as_str), Some("uuid=null"));
        assert_eq!(layer.len(), overlay::SAFE_OPTIONS.len() + 2);
    }
}
