//! An image instance: a squashfs superblock on a loop device bound to the
//! caller's image fd, handed out as a detached mount (fsmount) ready to be
//! attached or stacked. Needs root.

use std::os::fd::OwnedFd;

use crate::cache::Cache;
use crate::error::Failure;
use crate::image::Image;
use crate::loopdev::{LoopDevice, LoopOptions};
use crate::mount;

/// A fresh instance with the loop device it sits on.
#[derive(Debug)]
pub struct Fresh {
    pub mount: OwnedFd,
    pub loop_number: u32,
    pub loop_rdev: u64,
}

/// A fresh, private instance of `image` as a detached read-only mount.
/// The loop device fd closes on return; the superblock keeps the device
/// busy and autoclear detaches it once the last mount of it is gone.
pub fn fresh(image: &Image, options: LoopOptions, subject: &str) -> Result<OwnedFd, Failure> {
    fresh_instance(image, options, subject).map(|f| f.mount)
}

/// As [`fresh`], also naming the loop device (for the cache's records).
pub fn fresh_instance(image: &Image, options: LoopOptions, subject: &str) -> Result<Fresh, Failure> {
    let device = LoopDevice::attach(image, options, subject)?;
    let mount = mount::squashfs_on(&device, image, options.threads, subject)?;
    Ok(Fresh { mount, loop_number: device.number, loop_rdev: device.rdev })
}

/// An instance of `image` as a detached read-only mount: a clone of the
/// cached instance (made now if needed) when there is a cache, else (or if
/// the cache cannot be used: one warning) a fresh private one.
pub fn obtain(image: &Image, cache: Option<&Cache>, options: LoopOptions, subject: &str) -> Result<OwnedFd, Failure> {
    if let Some(cache) = cache {
        if let Some(tree) = cache.obtain(image, options, subject)? {
            return Ok(tree);
        }
    }
    fresh(image, options, subject)
}
