//! Mounting a squashfs superblock from a loop device with the new mount API
//! (fsopen/fsconfig/fsmount/move_mount): read-only, nosuid, nodev, attached
//! onto a pinned directory fd. No libmount, no option strings built from
//! user input.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::config::SquashfsThreads;
use crate::mounts::image::Image;
use crate::mounts::loop_device::LoopDevice;
use crate::mounts::mount_point::MountPoint;
use crate::privilege::AsRoot;
use crate::system::error::Failure;
use crate::system::{self, AttributeScope, Error, FsContext};

/// What went wrong mounting an instance, copying a bind source or
/// attaching a mount.
#[derive(Debug)]
pub enum MountError {
    NoSquashfs(Error),
    /// A step of the new mount API that failed (fsconfig, fsmount).
    Step(String, Error),
    /// The kernel refused the image, explained from the superblock and the
    /// kernel's log.
    Refused {
        refused: system::Refused,
        compressor: &'static str,
        block_size: u32,
    },
    StatNew(Error),
    NotOnDevice(String),
    /// Another detached mount of an image's instance (its path).
    Clone(OsString, Error),
    BindCopy(Error),
    BindFlags(Error),
    Attach(OsString, Error),
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountError::NoSquashfs(e) => {
                write!(f, "the kernel offers no squashfs filesystem: {e}")
            }
            MountError::Step(what, e) => write!(f, "{what} failed: {e}"),
            MountError::Refused {
                refused,
                compressor,
                block_size,
            } => f.write_str(&explain(refused, compressor, *block_size)),
            MountError::StatNew(e) => write!(f, "cannot stat the new mount: {e}"),
            MountError::NotOnDevice(source) => {
                write!(f, "the new mount is not on {source}; refusing")
            }
            MountError::Clone(image, e) => write!(
                f,
                "cannot clone the mount of {}: {e}",
                image.to_string_lossy()
            ),
            MountError::BindCopy(e) => write!(f, "cannot copy the bind source: {e}"),
            MountError::BindFlags(e) => {
                write!(f, "cannot make the bind mount nosuid, nodev: {e}")
            }
            MountError::Attach(real, e) => write!(
                f,
                "cannot attach the mount on {}: {e}",
                real.to_string_lossy()
            ),
        }
    }
}

crate::error_kind!(MountError);

/// Creates a squashfs superblock on `device` and returns it as a detached
/// mount (read-only, nosuid, nodev).
pub(crate) fn squashfs_on(
    _root: &AsRoot,
    device: &LoopDevice,
    image: &Image,
    threads: SquashfsThreads,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    let fail = |e: MountError| Failure::about(subject, e);
    let step = |what: String| move |e| Failure::about(subject, MountError::Step(what, e));
    let ctx = FsContext::open("squashfs").map_err(|e| fail(MountError::NoSquashfs(e)))?;
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
            Err(e) => return Err(step(format!("fsconfig(threads={value})"))(e)),
        }
    }
    let source = device.path();
    ctx.set_string("source", OsStr::new(&source))
        .map_err(step(format!("fsconfig(source={source})")))?;
    ctx.set_flag("ro").map_err(step("fsconfig(ro)".into()))?;
    ctx.create().map_err(|refused| {
        fail(MountError::Refused {
            refused,
            compressor: image.superblock.compressor.name(),
            block_size: image.superblock.block_size,
        })
    })?;
    let mount = ctx
        .mount(system::safe_mount_attributes())
        .map_err(step("fsmount".into()))?;
    // The superblock must be the one on our loop device (no one swapped the
    // device node between LOOP_CONFIGURE and the lookup of `source`).
    let st = system::fstat(mount.as_fd()).map_err(|e| fail(MountError::StatNew(e)))?;
    if st.dev != device.rdev {
        return Err(fail(MountError::NotOnDevice(source)));
    }
    Ok(mount)
}

/// A detached recursive copy of the directory `source` (a bind source
/// pinned as the caller) and the mounts below it, each made nosuid and
/// nodev (flags are only added) and a slave, so that nothing mounted on the
/// copy propagates back to the host.
pub(crate) fn bind_copy(
    _root: &AsRoot,
    source: BorrowedFd<'_>,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    let copy =
        system::clone_tree(source).map_err(|e| Failure::about(subject, MountError::BindCopy(e)))?;
    system::set_tree_attributes(
        copy.as_fd(),
        system::nosuid_nodev(),
        true,
        AttributeScope::Tree,
    )
    .map_err(|e| Failure::about(subject, MountError::BindFlags(e)))?;
    Ok(copy)
}

/// Attaches a detached mount onto the pinned mount point.
pub(crate) fn attach(
    _root: &AsRoot,
    mount: &OwnedFd,
    target: &MountPoint,
    subject: &str,
) -> Result<(), Failure> {
    system::attach_mount(mount.as_fd(), target.fd.as_fd())
        .map_err(|e| Failure::about(subject, MountError::Attach(target.real.clone(), e)))
}

/// The kernel's EINVAL says little; the superblock and the fs_context log
/// say more.
fn explain(r: &system::Refused, compressor: &str, block_size: u32) -> String {
    let kernel: Vec<&str> = r
        .log
        .iter()
        .map(|l| l.trim_start_matches(['e', 'w', 'i']).trim_start())
        .collect();
    let said = if kernel.is_empty() {
        String::new()
    } else {
        format!(" (kernel: {})", kernel.join("; "))
    };
    let hint = if r
        .log
        .iter()
        .any(|l| l.contains("compression") && l.contains("not supported"))
    {
        format!(
            "the image uses {compressor} compression, which this kernel's squashfs cannot decompress; rebuild it with another compressor (e.g. sqfs pack --comp zstd)"
        )
    } else if r.errno == Error::INVAL {
        format!(
            "the kernel refused the image ({compressor} compression, block size {block_size}): it is corrupt or uses features this kernel lacks; 'sqfs check IMAGE' reads every block and names what is damaged, 'sqfs inspect IMAGE' shows its features"
        )
    } else {
        format!("mounting failed: {}", r.errno)
    };
    format!("{hint}{said}")
}
