//! Slurm SPANK plugin of squashfs-mount: `srun|sbatch|salloc
//! --squashfs=<image>:<mountpoint>[,...]` mounts SquashFS images for every
//! task of a job step, with squashfs-mount's own code (images opened with
//! the job user's rights, read-only autoclear loop devices, ro,nosuid,nodev
//! mounts in a private mount namespace, no_new_privs for the tasks).
//!
//! - `plugin`: what each SPANK callback does (start here).
//! - [`remote`]: mounting in slurmstepd (worker thread, namespace, tasks).
//! - [`local`]: checks in srun/sbatch/salloc before the job is queued.
//! - [`request`], [`config`]: the option and plugstack.conf arguments (pure).
//! - [`abi`]: Slurm's numbers (checked against the installed headers).
//! - [`guard`]: no panic unwinds into Slurm.
//! - `spank_api`, `exports`: the only `unsafe`: Slurm's functions the
//!   plugin calls, and the symbols and callbacks Slurm looks up.
#![deny(unsafe_code)]

pub mod abi;
pub mod config;
pub mod guard;
pub mod local;
pub mod remote;
pub mod request;

// The FFI refers to symbols only Slurm's programs provide; unit tests (a
// normal executable) are built without it.
#[cfg(not(test))]
mod exports;
#[cfg(not(test))]
mod plugin;
#[cfg(not(test))]
mod spank_api;
