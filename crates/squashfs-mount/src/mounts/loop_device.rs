//! Loop devices bound to an image fd with LOOP_CONFIGURE (read-only,
//! autoclear), verified to be backed by that very file, each claimed
//! before it is opened and recorded once configured (`loop_records`).

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::config::LoopOptions;
use crate::mounts::image::Image;
use crate::mounts::loop_records::{Binding, DeviceClaim, Devices};
use crate::privilege::AsRoot;
use crate::system::error::Failure;
use crate::system::{self, Error, Uid};

/// The name the tool gives its loop devices (`lo_file_name`): this marker,
/// a NUL, then the decimal uid of the user whose launch attached it. Tools
/// such as losetup show the marker only; only root can read the name. Who
/// a device counts for is read from the tool's records, not from here
/// (reading a device's name means opening it: `loop_records`).
pub const MARKER: &[u8] = b"squashfs-mount";

/// What went wrong attaching a loop device (`/dev/loopN` as named).
#[derive(Debug)]
pub enum LoopError {
    Control(Error),
    NoFree(Error),
    Open(u32, Error),
    Claim(u32, Error),
    Configure(u32, Error),
    Record(u32, Error),
    Status(String, Error),
    /// Another process changed the device between configuring and checking.
    NotBacked(String),
    NotReadOnly(String),
    /// Every attempt raced with other launches.
    Busy {
        attempts: u32,
        seconds: f64,
        last: Error,
    },
}

impl fmt::Display for LoopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoopError::Control(e) => write!(
                f,
                "cannot open /dev/loop-control: {e}; is the loop driver available?"
            ),
            LoopError::NoFree(e) => write!(f, "no free loop device: {e}"),
            LoopError::Open(n, e) => write!(f, "cannot open /dev/loop{n}: {e}"),
            LoopError::Claim(n, e) => write!(f, "cannot claim /dev/loop{n}: {e}"),
            LoopError::Record(n, e) => write!(f, "cannot record /dev/loop{n}: {e}"),
            LoopError::Configure(n, e) => write!(f, "cannot configure /dev/loop{n}: {e}"),
            LoopError::Status(path, e) => write!(f, "cannot read the status of {path}: {e}"),
            LoopError::NotBacked(path) => write!(
                f,
                "{path} is not backed by the opened image (another process changed it); try again"
            ),
            LoopError::NotReadOnly(path) => write!(f, "{path} is not read-only and autoclear"),
            LoopError::Busy {
                attempts,
                seconds,
                last,
            } => write!(
                f,
                "could not get a loop device after {attempts} attempts in {seconds:.1} s (last error: {last}); too many parallel launches? try again"
            ),
        }
    }
}

crate::error_kind!(LoopError);

/// The `lo_file_name` of a device attached for `maker`.
pub(crate) fn device_name(maker: Uid) -> Vec<u8> {
    let mut name = MARKER.to_vec();
    name.push(0);
    name.extend_from_slice(maker.to_string().as_bytes());
    name
}

/// Attempts: a device another launch claimed, or found bound, costs one
/// (the next is a number nobody was given yet, without a pause); a device
/// that answers EBUSY (bound meanwhile by a process other than the tool's
/// launches) one more after a short jittered pause. Bounded by attempts
/// and by time.
const ATTACH_ATTEMPTS: u32 = 2000;
const ATTACH_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Pause before retry `attempt` (1-based): up to ~5 ms, jittered by the pid
/// so that contenders spread out.
fn backoff(attempt: u32) {
    let ceiling_us = u64::from(attempt.min(50)) * 100;
    let jitter = u64::from(
        std::process::id()
            .wrapping_mul(2_654_435_761)
            .wrapping_add(attempt.wrapping_mul(40_503)),
    );
    std::thread::sleep(std::time::Duration::from_micros(jitter % (ceiling_us + 1)));
}

/// The logical block size to configure: `wanted` only when the image size is
/// a multiple of it (a loop device's size is rounded down to its block size,
/// and the squashfs superblock would then lie beyond the end: mksquashfs pads
/// to 4 KiB by default, other packers may pad less); else the kernel default.
pub(crate) fn effective_block_size(wanted: u32, image_size: u64) -> u32 {
    if wanted == 0 || !image_size.is_multiple_of(u64::from(wanted)) {
        0
    } else {
        wanted
    }
}

/// A configured loop device. Because it is autoclear, it detaches by itself
/// when the last user (this fd, then the mounted superblock) goes away,
/// also when the process is killed.
#[derive(Debug)]
pub struct LoopDevice {
    pub number: u32,
    pub fd: OwnedFd,
    pub rdev: u64,
}

impl LoopDevice {
    pub(crate) fn path(&self) -> String {
        format!("/dev/loop{}", self.number)
    }

    /// Binds `image.fd` to a free loop device, read-only and autoclear,
    /// for `maker`. The device is claimed (without waiting) before it is
    /// opened, and recorded before the claim is let go (`devices`: None
    /// where the state directory cannot be used); never opened: a device
    /// another launch claimed, or one bound already. Users see the backing
    /// file's path in sysfs, as with any loop device.
    pub(crate) fn attach(
        root: &AsRoot,
        image: &Image,
        options: LoopOptions,
        dev_dir: BorrowedFd<'_>,
        (devices, maker): (Option<&Devices>, Uid),
        subject: &str,
    ) -> Result<LoopDevice, Failure> {
        let name = device_name(maker);
        let fail = |e: LoopError| Failure::about(subject, e);
        let control = system::open_loop_control().map_err(|e| fail(LoopError::Control(e)))?;
        let mut flags = system::LO_FLAGS_READ_ONLY | system::LO_FLAGS_AUTOCLEAR;
        if options.direct_io {
            flags |= system::LO_FLAGS_DIRECT_IO;
        }
        let block_size = effective_block_size(options.block_size, image.id.size);
        let mut last = Error::BUSY;
        let started = std::time::Instant::now();
        let (mut attempts, mut fresh) = (0, false);
        while attempts < ATTACH_ATTEMPTS && started.elapsed() < ATTACH_TIME_LIMIT {
            attempts += 1;
            // The lowest free device; after a conflict, one nobody has been
            // handed (LOOP_CTL_GET_FREE would name the same one again).
            let number = match fresh {
                false => system::loop_get_free(control.as_fd()),
                true => system::loop_add_fresh(control.as_fd()),
            }
            .map_err(|e| fail(LoopError::NoFree(e)))?;
            let claim = match devices.map(|d| d.claim(root, number)) {
                Some(Ok(Some(claim))) => Some(claim),
                None => None,
                Some(Ok(None)) => {
                    (last, fresh) = (Error::BUSY, true);
                    continue;
                }
                Some(Err(e)) => return Err(fail(LoopError::Claim(number, e))),
            };
            if system::loop_bound(number) {
                (last, fresh) = (Error::BUSY, true);
                continue;
            }
            let fd = match system::open_loop_device(dev_dir, number) {
                Ok(fd) => fd,
                Err(e @ (Error::NOENT | Error::NXIO | Error::BUSY | Error::AGAIN)) => {
                    (last, fresh) = (e, true);
                    continue;
                }
                Err(e) => return Err(fail(LoopError::Open(number, e))),
            };
            match system::loop_configure(fd.as_fd(), image.fd.as_fd(), flags, block_size, &name) {
                Ok(()) => {}
                Err(e @ (Error::BUSY | Error::AGAIN)) => {
                    (last, fresh) = (e, false);
                    backoff(attempts);
                    continue;
                }
                Err(e) => return Err(fail(LoopError::Configure(number, e))),
            }
            let rdev = system::fstat(fd.as_fd()).map(|s| s.rdev).unwrap_or(0);
            let dev = LoopDevice { number, fd, rdev };
            let recorded = dev
                .verify_backed_by(image)
                .and_then(|()| dev.record(claim.as_ref(), image, maker));
            if let Err(e) = recorded {
                let _ = system::loop_clear(dev.fd.as_fd());
                return Err(fail(e));
            }
            return Ok(dev);
        }
        Err(fail(LoopError::Busy {
            attempts,
            seconds: started.elapsed().as_secs_f64(),
            last,
        }))
    }

    /// Records this device's binding for `maker` under its claim (none
    /// where there are no records): its disk sequence number, read from
    /// the device's own descriptor, names this binding only.
    fn record(
        &self,
        claim: Option<&DeviceClaim>,
        image: &Image,
        maker: Uid,
    ) -> Result<(), LoopError> {
        let Some(claim) = claim else {
            return Ok(());
        };
        system::disk_sequence(self.fd.as_fd())
            .and_then(|seq| {
                claim.record(&Binding {
                    maker,
                    seq,
                    backing: (image.id.dev, image.id.ino),
                    left: None,
                })
            })
            .map_err(|e| LoopError::Record(self.number, e))
    }

    /// Checks with LOOP_GET_STATUS64 that the device is backed by the file
    /// `image.fd` refers to (device and inode), read-only and autoclear.
    pub(crate) fn verify_backed_by(&self, image: &Image) -> Result<(), LoopError> {
        let info =
            system::loop_status(self.fd.as_fd()).map_err(|e| LoopError::Status(self.path(), e))?;
        if info.lo_device != image.id.dev || info.lo_inode != image.id.ino {
            return Err(LoopError::NotBacked(self.path()));
        }
        let want = system::LO_FLAGS_READ_ONLY | system::LO_FLAGS_AUTOCLEAR;
        if info.lo_flags & want != want {
            return Err(LoopError::NotReadOnly(self.path()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_name_their_maker() {
        assert_eq!(
            device_name(Uid::from_raw(1234)),
            b"squashfs-mount\x001234".to_vec()
        );
    }

    #[test]
    fn block_size_only_when_the_image_fills_whole_blocks() {
        assert_eq!(effective_block_size(4096, 8192), 4096);
        assert_eq!(effective_block_size(4096, 1024), 0);
        assert_eq!(effective_block_size(4096, 0), 4096);
        assert_eq!(effective_block_size(512, 1024), 512);
        assert_eq!(effective_block_size(0, 4096), 0);
    }
}
