//! Local context (srun, sbatch, salloc on the login node): before the job is
//! queued, the checks that can be made there, through the engine's dry run
//! of the sequence's first stages (`engine::check`), so the refusals and
//! messages are the command's: syntax, limits, policy switches, allowed
//! mount points (lexically; the login node need not have them), that the
//! caller can open every image and that it is a SquashFS image, and that
//! every bind source is a directory the caller can reach.

use std::ffi::OsString;

use squashfs_mount::{Failure, FrontEnd, RunRequest, Unprivileged, WorkingDir};

/// srun, sbatch and salloc are the user's own unprivileged processes (not
/// setuid): every open they make is made with the user's credentials. The
/// engine's dry run of the sequence's first stages (`engine::check`),
/// paths resolved against "/" as on the nodes.
pub fn validate(request: &RunRequest, front: &FrontEnd) -> Result<(), Failure> {
    let me = Unprivileged::check()?;
    squashfs_mount::check(&me, request, &WorkingDir::At(OsString::from("/")), front)
}
