//! Mounting a squashfs superblock from a loop device with the new mount API
//! (fsopen/fsconfig/fsmount/move_mount): read-only, nosuid, nodev, attached
//! onto a pinned directory fd. No libmount, no option strings built from
//! user input.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};

use crate::error::Failure;
use crate::image::Image;
use crate::loopdev::{LoopDevice, SquashfsThreads};
use crate::mountpoint::MountPoint;
use crate::system::{self, Error, FsContext};

/// Creates a squashfs superblock on `device` and returns it as a detached
/// mount (read-only, nosuid, nodev). Needs root.
pub fn squashfs_on(
    device: &LoopDevice,
    image: &Image,
    threads: SquashfsThreads,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    let ctx = FsContext::open("squashfs").map_err(|e| {
        Failure::about(
            subject,
            format!("the kernel offers no squashfs filesystem: {e}"),
        )
    })?;
    if let Some(value) = threads.value() {
        // Only kernels built with CONFIG_SQUASHFS_CHOICE_DECOMP_BY_MOUNT
        // know the key; the others answer EINVAL and keep their built-in
        // decompressor mode. Either way the context stays usable; its log
        // line about the unknown key is drained so that it cannot be
        // mistaken for an explanation of a later failure.
        match ctx.set_string("threads", OsStr::new(&value)) {
            Ok(()) | Err(Error::INVAL) => {
                let _ = ctx.messages();
            }
            Err(e) => {
                return Err(Failure::about(
                    subject,
                    format!("fsconfig(threads={value}) failed: {e}"),
                ))
            }
        }
    }
    let source = device.path();
    ctx.set_string("source", OsStr::new(&source))
        .map_err(|e| Failure::about(subject, format!("fsconfig(source={source}) failed: {e}")))?;
    ctx.set_flag("ro")
        .map_err(|e| Failure::about(subject, format!("fsconfig(ro) failed: {e}")))?;
    if let Err((e, log)) = ctx.create() {
        return Err(Failure::about(subject, explain_mount_error(e, &log, image)));
    }
    let mount = ctx
        .mount(system::safe_mount_attributes())
        .map_err(|e| Failure::about(subject, format!("fsmount failed: {e}")))?;
    // The superblock must be the one on our loop device (no one swapped the
    // device node between LOOP_CONFIGURE and the lookup of `source`).
    let st = system::fstat(mount.as_fd())
        .map_err(|e| Failure::about(subject, format!("cannot stat the new mount: {e}")))?;
    if st.dev != device.rdev {
        return Err(Failure::about(
            subject,
            format!("the new mount is not on {source}; refusing"),
        ));
    }
    Ok(mount)
}

/// Attaches a detached mount onto the pinned mount point. Needs root.
pub fn attach(mount: &OwnedFd, target: &MountPoint, subject: &str) -> Result<(), Failure> {
    system::attach_mount(mount.as_fd(), target.fd.as_fd()).map_err(|e| {
        Failure::about(
            subject,
            format!(
                "cannot attach the mount on {}: {e}",
                target.real.to_string_lossy()
            ),
        )
    })
}

/// The kernel's EINVAL says little; the superblock and the fs_context log
/// say more.
pub fn explain_mount_error(e: Error, log: &[String], image: &Image) -> String {
    let kernel: Vec<&str> = log
        .iter()
        .map(|l| l.trim_start_matches(['e', 'w', 'i']).trim_start())
        .collect();
    let said = if kernel.is_empty() {
        String::new()
    } else {
        format!(" (kernel: {})", kernel.join("; "))
    };
    let sb = &image.superblock;
    let hint = if log
        .iter()
        .any(|l| l.contains("compression") && l.contains("not supported"))
    {
        format!(
            "the image uses {} compression, which this kernel's squashfs cannot decompress; rebuild it with another compressor (e.g. sqfs pack --comp zstd)",
            sb.compressor.name()
        )
    } else if e == Error::INVAL {
        format!(
            "the kernel refused the image ({} compression, block size {}): it is corrupt or uses features this kernel lacks; check it with 'sqfs inspect' or unsquashfs -s",
            sb.compressor.name(),
            sb.block_size
        )
    } else {
        format!("mounting failed: {e}")
    };
    format!("{hint}{said}")
}
