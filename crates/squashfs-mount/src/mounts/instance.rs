//! A kernel instance of an image: a squashfs superblock on a loop device
//! bound to the caller's image fd, handed out as a detached mount
//! (fsmount) ready to be attached, stacked or cached.

use std::os::fd::{AsFd, OwnedFd};

use crate::config::LoopOptions;
use crate::mounts::image::Image;
use crate::mounts::loop_device::LoopDevice;
use crate::mounts::squashfs;
use crate::privilege::AsRoot;
use crate::system::error::Failure;

/// A fresh instance with the loop device it sits on.
#[derive(Debug)]
pub struct Fresh {
    pub mount: OwnedFd,
    pub loop_number: u32,
    pub loop_rdev: u64,
}

/// Mounts the squashfs superblock on a loop device `attach`ed before (under
/// the loop budget). This is where the kernel reads the image: no lock is
/// held. The loop device fd closes on return; the superblock keeps the
/// device busy and autoclear detaches it once the last mount of it is gone.
pub(crate) fn on_device(
    root: &AsRoot,
    device: LoopDevice,
    image: &Image,
    options: LoopOptions,
    subject: &str,
) -> Result<Fresh, Failure> {
    let mount = squashfs::squashfs_on(root, &device, image, options.threads, subject)?;
    Ok(Fresh {
        mount,
        loop_number: device.number,
        loop_rdev: device.rdev,
    })
}

/// Another detached mount of the instance `tree` (for an image used twice
/// in one call), made where `tree` was made.
pub(crate) fn clone(
    _root: &AsRoot,
    tree: &OwnedFd,
    image: &Image,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    crate::system::clone_mount(tree.as_fd())
        .map_err(|e| Failure::about(subject, squashfs::MountError::Clone(image.path.clone(), e)))
}
