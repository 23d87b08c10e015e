//! Local context (srun, sbatch, salloc on the login node): before the job is
//! queued, check what can be checked there: the syntax (request.rs) and that
//! the caller can open every image and that it is a SquashFS image, with the
//! same messages as squashfs-mount. Mount points are only judged lexically
//! here; the login node need not have them.

use squashfs_mount::cli::MountRequest;
use squashfs_mount::error::Failure;
use squashfs_mount::image::Image;
use squashfs_mount::privilege::ActingAsCaller;

/// srun, sbatch and salloc are the user's own unprivileged processes (not
/// setuid): every open they make is made with the user's credentials.
struct UnprivilegedClient;
impl ActingAsCaller for UnprivilegedClient {}

pub fn validate(requests: &[MountRequest]) -> Result<(), Failure> {
    for req in requests {
        let subject = req.describe();
        // Opened, checked (regular file, superblock) and closed again.
        for image in &req.images {
            Image::open(&UnprivilegedClient, image, &subject)?;
        }
    }
    Ok(())
}
