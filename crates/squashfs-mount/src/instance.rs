//! An image instance: a squashfs superblock on a loop device bound to the
//! caller's image fd, handed out as a detached mount (fsmount) ready to be
//! attached or stacked. Needs root.

use std::os::fd::{AsFd, OwnedFd};

use crate::cache::LaunchCache;
use crate::error::Failure;
use crate::image::Image;
use crate::loopdev::{LoopDevice, LoopOptions};
use crate::mount;
use crate::system::{self, Error};

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
/// the cache cannot be used: one warning at the end of the launch) a fresh
/// private one.
pub fn obtain(image: &Image, cache: &LaunchCache, options: LoopOptions, subject: &str) -> Result<OwnedFd, Failure> {
    if let Some(tree) = cache.obtain(image, options, subject)? {
        return Ok(tree);
    }
    fresh(image, options, subject)
}

/// Another detached mount of the instance `tree` (for an image used twice in
/// one call). A clone that came from the image cache can only be cloned
/// again from inside the cache's namespace (since Linux 6.15 the kernel
/// allows cloning a detached mount only in the namespace it was cloned
/// from), so that is where it is done then.
pub fn duplicate(tree: &OwnedFd, cache: &LaunchCache, image: &Image, subject: &str) -> Result<OwnedFd, Failure> {
    let failed = |e: String| Failure::about(subject, format!("cannot clone the mount of {}: {e}", image.path.to_string_lossy()));
    match system::clone_mount(tree.as_fd()) {
        Ok(copy) => Ok(copy),
        Err(Error::INVAL) => match cache.duplicate(tree) {
            Some(r) => r.map_err(failed),
            None => Err(failed(Error::INVAL.to_string())),
        },
        Err(e) => Err(failed(e.to_string())),
    }
}
