//! Loop devices bound to an image fd with LOOP_CONFIGURE (read-only,
//! autoclear), verified to be backed by that very file.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::config::LoopOptions;
use crate::mounts::image::Image;
use crate::privilege::AsRoot;
use crate::system::error::Failure;
use crate::system::{self, Error, Uid};

/// The name the tool gives its loop devices (`lo_file_name`): this marker,
/// a NUL, then the decimal uid of the user whose launch attached it. The
/// device counts for that user, except while the cache holds its instance
/// (the cache's own record says so, see [`CachedDevice`]): shared by every
/// user then, bounded by the cache's own limits and each user's share of
/// it. An evicted instance thus counts for its maker again, with nothing
/// to rename. (Versions before round 34 renamed a device `cache` when the
/// cache took it: one LOOP_SET_STATUS64 each, which freezes the device's
/// queue and waited about 16 ms here; such devices still count for the
/// cache.) Tools such as losetup show the marker only; only root can read
/// the name.
pub const MARKER: &[u8] = b"squashfs-mount";
const CACHED: &[u8] = b"cache";

/// What went wrong attaching a loop device (`/dev/loopN` as named).
#[derive(Debug)]
pub enum LoopError {
    Control(Error),
    NoFree(Error),
    Open(u32, Error),
    Configure(u32, Error),
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

/// Whom a loop device of the tool counts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A private instance of this user's.
    User(Uid),
    /// A cached instance (held by the cache now, or named so by a version
    /// before round 34).
    Cache,
}

/// The `lo_file_name` of a device counted for `owner`.
pub fn device_name(owner: Owner) -> Vec<u8> {
    let mut name = MARKER.to_vec();
    name.push(0);
    match owner {
        Owner::User(uid) => name.extend_from_slice(uid.to_string().as_bytes()),
        Owner::Cache => name.extend_from_slice(CACHED),
    }
    name
}

/// Whether a `lo_file_name` is the tool's, and whom it counts for (None
/// for devices of older versions, which recorded nobody).
fn owner_of(name: &[u8]) -> Option<Option<Owner>> {
    let rest = name.strip_prefix(MARKER)?.strip_prefix(&[0u8])?;
    let tag: &[u8] = rest.split(|&b| b == 0).next().unwrap_or(&[]);
    if tag == CACHED {
        return Some(Some(Owner::Cache));
    }
    Some(
        std::str::from_utf8(tag)
            .ok()
            .and_then(|d| d.parse().ok())
            .and_then(Uid::checked)
            .map(Owner::User),
    )
}

/// A loop device whose instance the cache holds, as the cache's record
/// names it: its number and the backing file (device, inode). A device
/// reused since for another file is not it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedDevice {
    pub number: u32,
    pub backing: (u64, u64),
}

/// Whom a device of the tool counts for: the cache while it holds the
/// instance, else whom its name records (nobody for older versions').
fn counted_for(named: Option<Owner>, in_cache: bool) -> Option<Owner> {
    if in_cache {
        Some(Owner::Cache)
    } else {
        named
    }
}

/// Loop devices the tool has attached now (cached and private instances
/// of every user): those bound and named [`MARKER`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttachedCount {
    pub all: usize,
    /// The private instances of the user asked about.
    pub users: usize,
}

/// Counts the tool's loop devices, and those of them counted for `uid`:
/// named for it and not among the devices the cache holds (its private
/// instances, fresh ones not yet in the cache, evicted ones still held).
/// Root reads each bound device's status first, then the cache's records
/// (`cached`): a device then counted for the cache was held by it after
/// its status was read, so no record read earlier (by a launch stopped
/// meanwhile) can hide a device its caller holds now.
pub fn attached(
    _root: &AsRoot,
    dev_dir: BorrowedFd<'_>,
    uid: Uid,
    cached: impl FnOnce() -> Vec<CachedDevice>,
) -> AttachedCount {
    let Ok((names, _)) = system::list_dir(system::working_dir(), "/sys/block", 1 << 20) else {
        return AttachedCount::default();
    };
    let devices: Vec<(Option<Owner>, CachedDevice)> = names
        .iter()
        .filter_map(|n| n.to_str()?.strip_prefix("loop")?.parse::<u32>().ok())
        .filter(|n| {
            system::stat_at(system::working_dir(), &format!("/sys/block/loop{n}/loop")).is_ok()
        })
        .filter_map(|n| {
            let info = system::open_loop_device(dev_dir, n)
                .and_then(|fd| system::loop_status(fd.as_fd()))
                .ok()?;
            let device = CachedDevice {
                number: n,
                backing: (info.lo_device, info.lo_inode),
            };
            owner_of(&info.lo_file_name).map(|o| (o, device))
        })
        .collect();
    // The records can only move a device named for `uid` to the cache: a
    // caller with none needs no visit to the cache.
    let cached = if devices
        .iter()
        .any(|(named, _)| *named == Some(Owner::User(uid)))
    {
        cached()
    } else {
        Vec::new()
    };
    devices
        .iter()
        .map(|(named, device)| counted_for(*named, cached.contains(device)))
        .fold(AttachedCount::default(), |a, owner| AttachedCount {
            all: a.all + 1,
            users: a.users + usize::from(owner == Some(Owner::User(uid))),
        })
}

/// Attempts on EBUSY/EAGAIN races with other processes taking the same free
/// device between LOOP_CTL_GET_FREE and LOOP_CONFIGURE.
/// Many launches at once all get the same number from LOOP_CTL_GET_FREE
/// and only one wins each round, and a device being torn down by autoclear
/// answers EBUSY for a while: retry with a growing, jittered pause, bounded
/// by attempts and by time.
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
pub fn effective_block_size(wanted: u32, image_size: u64) -> u32 {
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
    pub fn path(&self) -> String {
        format!("/dev/loop{}", self.number)
    }

    /// Binds `image.fd` to a free loop device, read-only and autoclear,
    /// counted for `owner`. The device's name (`lo_file_name`,
    /// which only root can read) marks it as the tool's and whose, for
    /// [`attached`]; users see the backing file's path in sysfs, as with
    /// any loop device.
    pub fn attach(
        _root: &AsRoot,
        image: &Image,
        options: LoopOptions,
        dev_dir: BorrowedFd<'_>,
        owner: Owner,
        subject: &str,
    ) -> Result<LoopDevice, Failure> {
        let name = device_name(owner);
        let fail = |e: LoopError| Failure::about(subject, e);
        let control = system::open_loop_control().map_err(|e| fail(LoopError::Control(e)))?;
        let mut flags = system::LO_FLAGS_READ_ONLY | system::LO_FLAGS_AUTOCLEAR;
        if options.direct_io {
            flags |= system::LO_FLAGS_DIRECT_IO;
        }
        let block_size = effective_block_size(options.block_size, image.id.size);
        let mut last = Error::BUSY;
        let started = std::time::Instant::now();
        let mut attempts = 0;
        while attempts < ATTACH_ATTEMPTS && started.elapsed() < ATTACH_TIME_LIMIT {
            if attempts > 0 {
                backoff(attempts);
            }
            attempts += 1;
            let number =
                system::loop_get_free(control.as_fd()).map_err(|e| fail(LoopError::NoFree(e)))?;
            let fd = match system::open_loop_device(dev_dir, number) {
                Ok(fd) => fd,
                Err(e @ (Error::NOENT | Error::NXIO | Error::BUSY | Error::AGAIN)) => {
                    last = e;
                    continue;
                }
                Err(e) => return Err(fail(LoopError::Open(number, e))),
            };
            match system::loop_configure(fd.as_fd(), image.fd.as_fd(), flags, block_size, &name) {
                Ok(()) => {}
                Err(e @ (Error::BUSY | Error::AGAIN)) => {
                    last = e;
                    continue;
                }
                Err(e) => return Err(fail(LoopError::Configure(number, e))),
            }
            let rdev = system::fstat(fd.as_fd()).map(|s| s.rdev).unwrap_or(0);
            let dev = LoopDevice { number, fd, rdev };
            if let Err(e) = dev.verify_backed_by(image) {
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

    /// Checks with LOOP_GET_STATUS64 that the device is backed by the file
    /// `image.fd` refers to (device and inode), read-only and autoclear.
    pub fn verify_backed_by(&self, image: &Image) -> Result<(), LoopError> {
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
    fn device_names_record_whom_they_count_for() {
        for owner in [
            Owner::User(Uid::from_raw(1234)),
            Owner::User(Uid::ROOT),
            Owner::Cache,
        ] {
            let mut field = [0u8; 64];
            let name = device_name(owner);
            field[..name.len()].copy_from_slice(&name);
            assert_eq!(owner_of(&field), Some(Some(owner)));
        }
        let mut old = [0u8; 64];
        old[..MARKER.len()].copy_from_slice(MARKER);
        assert_eq!(owner_of(&old), Some(None));
        assert_eq!(owner_of(b"/home/a/img.sqfs\0"), None);
        assert_eq!(owner_of(b"squashfs-mountX\0"), None);
        // -1 is no user: a device named for it counts for nobody.
        let mut minus_one = MARKER.to_vec();
        minus_one.extend_from_slice(b"\x004294967295\0");
        assert_eq!(owner_of(&minus_one), Some(None));
    }

    #[test]
    fn a_device_the_cache_holds_counts_for_the_cache_else_for_its_name() {
        let user = Some(Owner::User(Uid::from_raw(1234)));
        assert_eq!(counted_for(user, false), user);
        assert_eq!(counted_for(user, true), Some(Owner::Cache));
        assert_eq!(counted_for(None, true), Some(Owner::Cache));
        assert_eq!(counted_for(None, false), None);
        assert_eq!(counted_for(Some(Owner::Cache), false), Some(Owner::Cache));
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
