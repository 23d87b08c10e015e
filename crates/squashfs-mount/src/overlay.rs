//! Unions and writable layers with overlayfs, built from detached mounts.
//!
//! Layers are passed to overlayfs as file descriptors (fsconfig
//! FSCONFIG_SET_FD "lowerdir+", "upperdir", "workdir"): no path strings, no
//! option string assembled from user input. The upper layer is always a
//! fresh tmpfs made here (nosuid, nodev, size- and inode-limited), never a
//! directory a user chose, because overlayfs copies up with the mounter's
//! (root's) credentials. Overlay features that interpret trusted.overlay.*
//! xattrs found in layers are turned off, so crafted xattrs inside an image
//! cannot redirect lookups or pull data from elsewhere.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};

use crate::cli::LayerSize;
use crate::error::Failure;
use crate::system::{self, FsContext};
use rustix::mount::MountAttrFlags;

/// Inode limit of a writable layer's tmpfs.
pub const WRITABLE_MAX_INODES: u64 = 1 << 20;

/// Owner and mode of the union's root directory: the top image's root, so a
/// writable layer does not change who may create files at the top level.
#[derive(Clone, Copy, Debug)]
pub struct RootAttributes {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// Overlay parameters, each set on its own through fsconfig.
const SAFE_OVERLAY_PARAMETERS: [(&str, &str); 5] = [
    // Neither create nor follow trusted.overlay.redirect.
    ("redirect_dir", "nofollow"),
    // Do not follow trusted.overlay.metacopy (data from another layer).
    ("metacopy", "off"),
    // No trusted.overlay.origin/index bookkeeping.
    ("index", "off"),
    ("nfs_export", "off"),
    ("xino", "off"),
];

/// A fresh tmpfs holding `upper/` and `work/`, as detached mount + dir fds.
struct WritableLayer {
    _tmpfs: OwnedFd,
    upper: OwnedFd,
    work: OwnedFd,
}

fn sys_err(subject: &str, what: &str, e: system::Error) -> Failure {
    Failure::about(subject, format!("{what} failed: {e}"))
}

fn writable_layer(size: LayerSize, root: RootAttributes, subject: &str) -> Result<WritableLayer, Failure> {
    let ctx = FsContext::open("tmpfs").map_err(|e| sys_err(subject, "fsopen(tmpfs)", e))?;
    let size_value = size.tmpfs_value();
    for (key, value) in [
        ("size", size_value.as_str()),
        ("nr_inodes", &WRITABLE_MAX_INODES.to_string()),
        ("mode", "0755"),
    ] {
        ctx.set_string(key, OsStr::new(value))
            .map_err(|e| sys_err(subject, &format!("tmpfs {key}={value}"), e))?;
    }
    if let Err((e, log)) = ctx.create() {
        return Err(Failure::about(subject, format!("cannot create the writable layer's tmpfs: {e} {}", log.join("; "))));
    }
    let tmpfs = ctx
        .mount(MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV)
        .map_err(|e| sys_err(subject, "fsmount(tmpfs)", e))?;
    let upper = system::make_directory_in(tmpfs.as_fd(), "upper", root.mode & 0o7777, root.uid, root.gid)
        .map_err(|e| sys_err(subject, "creating the upper directory", e))?;
    let work = system::make_directory_in(tmpfs.as_fd(), "work", 0o700, 0, 0)
        .map_err(|e| sys_err(subject, "creating the work directory", e))?;
    Ok(WritableLayer { _tmpfs: tmpfs, upper, work })
}

/// Stacks `layers` (detached read-only mounts, top first) with overlayfs,
/// with a writable tmpfs layer on top when `writable` is given. Returns the
/// detached overlay mount (nosuid, nodev; read-only without a writable
/// layer). Needs root.
pub fn stack(
    layers: &[OwnedFd],
    writable: Option<LayerSize>,
    root: RootAttributes,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    let ctx = FsContext::open("overlay")
        .map_err(|e| Failure::about(subject, format!("the kernel offers no overlay filesystem ({e}); unions and --writable need overlayfs")))?;
    for (key, value) in SAFE_OVERLAY_PARAMETERS {
        ctx.set_string(key, OsStr::new(value))
            .map_err(|e| sys_err(subject, &format!("overlay {key}={value}"), e))?;
    }
    for layer in layers {
        ctx.set_fd("lowerdir+", layer.as_fd())
            .map_err(|e| sys_err(subject, "overlay lowerdir+ (this needs Linux 6.8 or later)", e))?;
    }
    let upper = match writable {
        Some(size) => {
            let layer = writable_layer(size, root, subject)?;
            ctx.set_fd("upperdir", layer.upper.as_fd()).map_err(|e| sys_err(subject, "overlay upperdir", e))?;
            ctx.set_fd("workdir", layer.work.as_fd()).map_err(|e| sys_err(subject, "overlay workdir", e))?;
            Some(layer)
        }
        None => None,
    };
    if let Err((e, log)) = ctx.create() {
        return Err(Failure::about(
            subject,
            format!("overlayfs refused the layers: {e}{}", if log.is_empty() { String::new() } else { format!(" (kernel: {})", log.join("; ")) }),
        ));
    }
    let attrs = if upper.is_some() {
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV
    } else {
        system::safe_mount_attributes()
    };
    let mount = ctx.mount(attrs).map_err(|e| sys_err(subject, "fsmount(overlay)", e))?;
    // `upper` (the tmpfs and its dir fds) may close now: the overlay
    // superblock holds its own references to the layers.
    drop(upper);
    Ok(mount)
}
