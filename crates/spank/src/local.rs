//! Local context (srun, sbatch, salloc on the login node): before the job is
//! queued, the checks that can be made there, with the engine's own plan
//! step and image checks, so the refusals and messages are the command's:
//! syntax, limits, policy switches, allowed mount points (lexically; the
//! login node need not have them), that the caller can open every image
//! and that it is a SquashFS image, and that every bind source is a
//! directory the caller can reach.

use std::ffi::OsStr;

use squashfs_mount::cli::RunRequest;
use squashfs_mount::config;
use squashfs_mount::engine::bind;
use squashfs_mount::engine::plan::{self, FrontEnd};
use squashfs_mount::mounts::image::Image;
use squashfs_mount::privilege::Unprivileged;
use squashfs_mount::system;
use squashfs_mount::system::error::Failure;

/// srun, sbatch and salloc are the user's own unprivileged processes (not
/// setuid): every open they make is made with the user's credentials.
pub fn validate(request: &RunRequest, front: &FrontEnd) -> Result<(), Failure> {
    let me = Unprivileged::check()?;
    // The site's policy, when the file is readable here (it is a
    // root-owned file; unreadable means the defaults, as on the nodes it
    // is checked again anyway).
    let settings = config::load();
    let plan = plan::build(
        request,
        OsStr::new("/"),
        &settings.policy,
        front,
        system::total_memory(),
    )?;
    for m in &plan.mounts {
        for image in &m.images {
            Image::open(&me, image, &m.subject)?;
        }
    }
    bind::open_sources(&me, &plan)?;
    Ok(())
}
