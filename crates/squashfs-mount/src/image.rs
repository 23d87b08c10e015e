//! Images, opened once with the caller's rights and used by fd from then on.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use crate::error::{explain_errno, Failure};
use crate::privilege::ActingAsCaller;
use squashfs_format::kernel::KernelConfig;
use squashfs_format::{parse_superblock, Superblock, SUPERBLOCK_SIZE};
use crate::system::{self, FileId};

/// An image file the caller could open for reading.
#[derive(Debug)]
pub struct Image {
    /// The path as given on the command line (for messages).
    pub given: OsString,
    /// Where the opened file really is (the kernel's name for our fd).
    pub path: OsString,
    pub fd: OwnedFd,
    pub id: FileId,
    pub superblock: Superblock,
}

impl Image {
    /// Opens `given` with the caller's credentials (the `ActingAsCaller` borrow
    /// proves we are not inside an `as_root` section), refuses anything but
    /// a regular file, and checks the superblock read from that same fd.
    pub fn open(_as_caller: &impl ActingAsCaller, given: &OsStr, subject: &str) -> Result<Image, Failure> {
        let fd = system::open_image(given).map_err(|e| {
            Failure::about(
                subject,
                format!("cannot open the image: {}", explain_errno(e)),
            )
        })?;
        let id = system::fstat(fd.as_fd())
            .map_err(|e| Failure::about(subject, format!("cannot stat the image: {e}")))?;
        if !id.is_regular() {
            return Err(Failure::about(
                subject,
                format!(
                    "the image is a {}, not a regular file; give the path of a SquashFS image file",
                    id.kind()
                ),
            ));
        }
        let mut head = [0u8; SUPERBLOCK_SIZE];
        let n = system::read_head(fd.as_fd(), &mut head)
            .map_err(|e| Failure::about(subject, format!("cannot read the image: {e}")))?;
        let superblock = parse_superblock(&head[..n], id.size)
            .map_err(|e| Failure::about(subject, e))?;
        let path = system::path_of_fd(fd.as_fd()).unwrap_or_else(|_| given.to_owned());
        Ok(Image { given: given.to_owned(), path, fd, id, superblock })
    }

    /// Refuses images whose compressor the running kernel cannot decompress,
    /// when the kernel configuration says so (the same verdict as `sqfs
    /// inspect`'s).
    /// Without a readable configuration only lzma, which no Linux kernel
    /// can decompress, is refused here; the kernel's own refusal of any
    /// other compressor it lacks is explained by `mount::explain_mount_error`.
    pub fn check_kernel_support(&self, kernel: Option<&KernelConfig>, subject: &str) -> Result<(), Failure> {
        let comp = self.superblock.compressor;
        let unknown = KernelConfig { source: String::new(), text: "CONFIG_SQUASHFS=y\n".into() };
        let verdict = match kernel {
            Some(kernel) => kernel.squashfs_verdict(comp, &[]),
            None if comp.kernel_option().is_none() => unknown.squashfs_verdict(comp, &[]),
            None => return Ok(()),
        };
        if !verdict.can_mount {
            return Err(Failure::about(subject, verdict.reason));
        }
        Ok(())
    }
}

impl Image {
    /// Refuses an image whose last block a loop device cannot hold
    /// (`mksquashfs -nopad`), saying how to pad it.
    pub fn check_loop_fit(&self, subject: &str) -> Result<(), Failure> {
        match squashfs_format::superblock::loop_padding_needed(self.superblock.bytes_used, self.id.size) {
            None => Ok(()),
            Some(needed) => Err(Failure::about(
                subject,
                format!(
                    "the image is {} bytes long, not padded to whole 1 KiB blocks (built with mksquashfs -nopad?), so the kernel cannot read its end from a loop device; pad it with 'truncate -s %4096 {}' (or rebuild it without -nopad); {needed} bytes would do",
                    self.id.size,
                    self.given.to_string_lossy()
                ),
            )),
        }
    }
}

/// The running kernel's configuration, when it is readable as plain text.
pub fn kernel_config() -> Option<KernelConfig> {
    KernelConfig::running(None)
}
