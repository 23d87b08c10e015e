//! An image instance: a squashfs superblock on a loop device bound to the
//! caller's image fd, handed out as a detached mount (fsmount) ready to be
//! attached or stacked. Needs root.

use std::os::fd::OwnedFd;

use crate::error::Failure;
use crate::image::Image;
use crate::loopdev::{LoopDevice, LoopOptions};
use crate::mount;

/// A fresh, private instance of `image` as a detached read-only mount.
/// The loop device fd closes on return; the superblock keeps the device
/// busy and autoclear detaches it once the last mount of it is gone.
pub fn fresh(image: &Image, options: LoopOptions, subject: &str) -> Result<OwnedFd, Failure> {
    let device = LoopDevice::attach(image, options, subject)?;
    mount::squashfs_on(&device, image, subject)
}
