//! Loop device ioctls (<linux/loop.h>).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::{Mode, OFlags, CWD};

use super::SysResult;

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CTL_ADD: libc::c_ulong = 0x4C80;
/// BLKGETDISKSEQ: _IOR(0x12, 128, __u64).
const BLKGETDISKSEQ: libc::c_ulong = 0x8008_1280;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
pub const LO_FLAGS_READ_ONLY: u32 = 1;
pub const LO_FLAGS_AUTOCLEAR: u32 = 4;
pub const LO_FLAGS_DIRECT_IO: u32 = 16;
const LO_NAME_SIZE: usize = 64;

/// `struct loop_info64` from <linux/loop.h>.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LoopInfo64 {
    pub lo_device: u64,
    pub lo_inode: u64,
    pub lo_rdevice: u64,
    pub lo_offset: u64,
    pub lo_sizelimit: u64,
    pub lo_number: u32,
    pub lo_encrypt_type: u32,
    pub lo_encrypt_key_size: u32,
    pub lo_flags: u32,
    pub lo_file_name: [u8; LO_NAME_SIZE],
    pub lo_crypt_name: [u8; LO_NAME_SIZE],
    pub lo_encrypt_key: [u8; 32],
    pub lo_init: [u64; 2],
}

/// `struct loop_config` from <linux/loop.h>.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

impl LoopInfo64 {
    fn zeroed() -> Self {
        LoopInfo64 {
            lo_device: 0,
            lo_inode: 0,
            lo_rdevice: 0,
            lo_offset: 0,
            lo_sizelimit: 0,
            lo_number: 0,
            lo_encrypt_type: 0,
            lo_encrypt_key_size: 0,
            lo_flags: 0,
            lo_file_name: [0; LO_NAME_SIZE],
            lo_crypt_name: [0; LO_NAME_SIZE],
            lo_encrypt_key: [0; 32],
            lo_init: [0; 2],
        }
    }
}

pub(crate) fn open_loop_control() -> SysResult<OwnedFd> {
    rustix::fs::openat(
        CWD,
        "/dev/loop-control",
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// LOOP_CTL_GET_FREE: number of a free loop device (creating one if needed).
pub(crate) fn loop_get_free(control: BorrowedFd<'_>) -> SysResult<u32> {
    // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns the device
    // number; `control` is a valid open fd for the duration of the call.
    let rc = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(rc as u32)
}

/// LOOP_CTL_ADD with -1: a new loop device, with the lowest number no
/// device has now. Nobody has been handed it before this call returns it.
pub(crate) fn loop_add_fresh(control: BorrowedFd<'_>) -> SysResult<u32> {
    // SAFETY: LOOP_CTL_ADD takes the wanted number as its integer
    // argument (-1: any) and returns the new device's number; no memory
    // is passed; `control` is open for the call.
    let rc = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_ADD, -1 as libc::c_long) };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(rc as u32)
}

/// BLKGETDISKSEQ: the device's disk sequence number, which the kernel
/// raises (machine-wide, never reused until reboot) each time a loop
/// device is configured and each time it is cleared: it names one binding.
pub(crate) fn disk_sequence(device: BorrowedFd<'_>) -> SysResult<u64> {
    let mut seq: u64 = 0;
    // SAFETY: BLKGETDISKSEQ writes one u64 through the pointer, which
    // points at `seq`, alive and exclusive for the call; `device` is open.
    let rc = unsafe { libc::ioctl(device.as_raw_fd(), BLKGETDISKSEQ, &mut seq as *mut u64) };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(seq)
}

/// The disk sequence number of `/dev/loop<number>` now, from sysfs: read
/// without opening the device (which would wait for its kernel locks);
/// None when it cannot be read (no such device).
pub(crate) fn loop_disk_sequence(number: u32) -> Option<u64> {
    let path = format!("/sys/block/loop{number}/diskseq");
    let (text, _) = super::read_file_at(super::working_dir(), &path, 32).ok()?;
    std::str::from_utf8(&text).ok()?.trim().parse().ok()
}

/// Whether `/dev/loop<number>` is bound to a file now (its sysfs `loop`
/// directory exists), asked without opening the device.
pub(crate) fn loop_bound(number: u32) -> bool {
    super::stat_at(
        super::working_dir(),
        &format!("/sys/block/loop{number}/loop"),
    )
    .is_ok()
}

/// LOOP_CONFIGURE: binds `backing` (an fd the caller opened) to `device`.
pub(crate) fn loop_configure(
    device: BorrowedFd<'_>,
    backing: BorrowedFd<'_>,
    flags: u32,
    block_size: u32,
    name: &[u8],
) -> SysResult<()> {
    let mut info = LoopInfo64::zeroed();
    info.lo_flags = flags;
    let n = name.len().min(LO_NAME_SIZE - 1);
    info.lo_file_name[..n].copy_from_slice(&name[..n]);
    let config = LoopConfig {
        fd: backing.as_raw_fd() as u32,
        block_size,
        info,
        reserved: [0; 8],
    };
    // SAFETY: LOOP_CONFIGURE reads a `struct loop_config`, which `LoopConfig`
    // mirrors field for field with #[repr(C)]; the pointer is valid and the
    // kernel only reads through it. Both fds are open for the whole call.
    let rc = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            LOOP_CONFIGURE,
            &config as *const LoopConfig,
        )
    };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(())
}

/// LOOP_GET_STATUS64: what the loop device is backed by.
pub(crate) fn loop_status(device: BorrowedFd<'_>) -> SysResult<LoopInfo64> {
    let mut info = LoopInfo64::zeroed();
    // SAFETY: LOOP_GET_STATUS64 writes one `struct loop_info64`, which
    // `LoopInfo64` mirrors with #[repr(C)]; the pointer is valid, exclusive
    // and properly aligned for the duration of the call.
    let rc = unsafe {
        libc::ioctl(
            device.as_raw_fd(),
            LOOP_GET_STATUS64,
            &mut info as *mut LoopInfo64,
        )
    };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(info)
}

/// LOOP_CLR_FD: detaches a loop device we configured but could not use.
pub(crate) fn loop_clear(device: BorrowedFd<'_>) -> SysResult<()> {
    // SAFETY: LOOP_CLR_FD takes no argument; `device` is open for the call.
    let rc = unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CLR_FD, 0) };
    if rc < 0 {
        return Err(super::last_errno());
    }
    Ok(())
}

/// Opens `/dev/loop<number>` relative to a directory fd of /dev (so that
/// it works from inside the cache's namespace, which has no /dev).
pub(crate) fn open_loop_device(dev_dir: BorrowedFd<'_>, number: u32) -> SysResult<OwnedFd> {
    let name = format!("loop{number}");
    rustix::fs::openat(
        dev_dir,
        name.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOFOLLOW,
        Mode::empty(),
    )
}
