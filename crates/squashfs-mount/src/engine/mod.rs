//! The one privileged sequence: [`mount_all`] (and its first stages dry,
//! [`check`], for the plugin on the login node). The setuid command
//! (`commands/launch.rs`) and the Slurm plugin's worker thread both call it with
//! their own [`Credentials`], whose type carries the mode (setuid, plugin
//! thread, rootless); everything they may do, and every refusal, is here.
//! doc/architecture.md draws the stages.
//!
//! | file                  | stage | concern                                              |
//! |-----------------------|-------|------------------------------------------------------|
//! | `admit.rs`            | 0     | the site's settings, admission, a launch slot        |
//! | `plan.rs`             | 1     | checks without system calls, mount order (pure)      |
//! | `kept_layer.rs`       | 1, 7  | `--writable=DIR`: the helper there, DIR not refused; |
//! |                       |       | DIR claimed: locked, its stamp matched               |
//! | `route.rs`            | 2     | images opened as the caller, judged, routed          |
//! | `bind.rs`             | 2, 3  | `--bind-mount`: sources pinned, then copied          |
//! | `flight.rs`           | 3, 5  | the image cache: reuse, single flight, offers        |
//! | `fuse_path.rs`        | 3     | FUSE instances: the caller's cached, or fresh        |
//! | `kernel.rs`           | 5     | kernel instances: cached clones or fresh             |
//! | `attach.rs`           | 5, 6  | the writable layer; mount points, stacking           |
//! | `view.rs`             | 6     | `-r`: missing mount points made in the view          |
//! | `mirror.rs`           | 6     | `-r`, root's side: the read-only copy                |
//! | `images.rs`           |       | one record per distinct image of the call            |
//! | `context.rs`          |       | what a front end tells the sequence                  |
//! | `root_side.rs`        |       | every root-side operation of the sequence (seam)     |
//! | `report.rs`           |       | the outcome, and what `--verbose` says               |
//! | `plan_error.rs`       |       | what the plan refuses (`PlanError`)                  |
//! | `system_root_side.rs` |       | the root-side operations on this machine (`System`)  |
//! | `fake_root_side.rs`   |       | the unit tests' recording stand-in (tests only)      |
//! | `plan_tests.rs`       |       | unit tests of plan.rs                                |
//! | `mount_all_tests.rs`  |       | unit tests of `mount_all`, on the stand-in           |
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `Context`, `FrontEnd`, `FuseServer`, `System`, `WorkingDir`,
//! `check`, `mount_all`.

mod admit;
mod attach;
pub(crate) mod bind;
mod context;
mod flight;
mod fuse_path;
pub(crate) mod images;
pub(crate) mod kept_layer;
pub(crate) mod kernel;
mod mirror;
pub(crate) mod plan;
mod plan_error;
mod report;
pub(crate) mod root_side;
mod route;
mod system_root_side;
pub(crate) mod view;

#[cfg(test)]
mod fake_root_side;
#[cfg(test)]
mod mount_all_tests;

use crate::cli::RunRequest;
use crate::config::Settings;
use crate::privilege::{ActingAsCaller, Credentials};
use crate::system::error::Failure;
use bind::Binds;
use kernel::KernelSource;
use root_side::RootSide;

pub(crate) use context::Call;
pub use context::{Context, FuseServer, WorkingDir};
pub use plan::FrontEnd;
pub(crate) use report::Mounted;
pub(crate) use system_root_side::shared as shared_work;
pub use system_root_side::System;

/// Mounts what `request` asks for, in a private mount namespace, under
/// `creds`; every root-side operation goes through `root_side` (the
/// front ends pass [`System`]; the unit tests a recording fake). The
/// stages, in order:
///
///  0. admit: the site's settings; whether the site lets the caller in;
///     a launch slot (the setuid command); rootless mode then enters its
///     own user and mount namespaces;
///  1. plan: duplicates, nesting order, limits, policy switches, front-end
///     rules (pure); with `--writable=DIR`, as the caller, the layer
///     helper installed and DIR not refused already (`kept_layer.rs`);
///  2. open and route, as the caller: every image opened once per file,
///     its superblock checked, judged on the opened fd and routed (kernel
///     or FUSE, by the site policy); the bind sources pinned;
///  3. in the namespace the launch started in: the image cache, opened or
///     created; the FUSE instances (the caller's cached ones cloned, else
///     mounts whose servers start as the caller, waited for, and offered
///     to the cache; single flight); the bind copies;
///  4. a private mount namespace (all mounts slaves of the host's);
///  5. the kernel instances (cached clones, or fresh: loop device bound to
///     the image fd and verified, squashfs ro,nosuid,nodev); the writable
///     layer's tmpfs;
///  6. attach, for each mount point and bind destination in path order:
///     with `-r` a missing one made in the view; resolved and pinned as the
///     caller and judged; stacked (unions, `--writable`) and attached onto
///     the pinned fd;
///  7. with `--writable=DIR`, as the caller, in the private namespace: DIR
///     claimed (`kept_layer.rs`): no mount inside an image's mount point,
///     DIR made if missing and judged, its lock taken (refused when
///     another launch holds it), its stamp matched with the images just
///     attached (refused when made on others); the lock, held, goes to the
///     layer helper.
///
/// Any failure returns before the command runs; the namespace, its mounts,
/// the autoclear loop devices and the FUSE servers go away with the
/// process (or the worker thread).
pub fn mount_all<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    request: &RunRequest,
    ctx: &Context<'_>,
) -> Result<Mounted, Failure> {
    let mut clock = report::Clock::start();
    let admitted = admit::admit(creds, root_side, request, ctx)?;
    let settings = &admitted.settings;
    let plan = plan::stage(request, &ctx.cwd.resolve()?, settings, ctx.front)?;
    let kept = kept_layer::check(creds, &plan, ctx)?;
    let call = Call::new(ctx, settings, &plan, kept);
    clock.lap("plan");
    let mut images = route::open_and_route(creds, &plan, settings)?;
    let mut binds = Binds::pin(creds, &plan)?;
    clock.lap("open and route the images, pin the bind sources");
    let cache = flight::open_cache(creds, root_side, &images, &plan, settings)?;
    let fused = fuse_path::start(creds, root_side, &mut images, &call, &cache)?;
    let mut kernel = KernelSource::new(creds, &images, settings, &cache);
    binds.copy(creds, root_side, &plan)?;
    clock.lap("FUSE servers, the image cache, the bind copies");
    creds.enter_private_mount_namespace()?;
    kernel.instances(creds, root_side, &mut images)?;
    let writable = attach::writable_layer(creds, root_side, &plan)?;
    clock.lap("kernel instances, the writable layer");
    let mut attached = attach::all(creds, root_side, &call, &mut images, binds, writable)?;
    clock.lap("mount points resolved and mounted");
    attached.layer = kept_layer::claim(creds, &call, attached.view.take())?;
    Ok(report::mounted(
        admitted, request, fused, &images, attached, &kernel, &clock,
    ))
}

/// Stages 0 to 2 of [`mount_all`], dry: with the caller's own rights
/// (`as_caller`: a process that holds no privilege), nothing mounted and
/// nothing kept, what can be refused before a launch, in the sequence's
/// own words. The Slurm plugin's check on the login node, before a job is
/// queued. The stages, shared with [`mount_all`]:
///
///  0. the site's settings (the file, when readable here; else the
///     built-in defaults: the nodes read it again);
///  1. the plan: syntax, limits, policy switches, the front end's rules,
///     mount points allowed (lexically: `cwd` need not hold them);
///  2. every image opened as the caller and its superblock checked, its
///     real path one `UENV_MOUNT_LIST` can carry, a union's layers
///     distinct; every bind source a directory the caller can reach.
///
/// Left to the launch: admission and the launch slot (root's), the kept
/// layer's directory (node-local), routing, and the mount points' lookup.
pub fn check(
    as_caller: &impl ActingAsCaller,
    request: &RunRequest,
    cwd: &WorkingDir,
    front: &FrontEnd,
) -> Result<(), Failure> {
    check_under(as_caller, request, cwd, front, &crate::config::load())
}

/// [`check`] under these site settings.
fn check_under(
    as_caller: &impl ActingAsCaller,
    request: &RunRequest,
    cwd: &WorkingDir,
    front: &FrontEnd,
    settings: &Settings,
) -> Result<(), Failure> {
    let plan = plan::stage(request, &cwd.resolve()?, settings, front)?;
    route::open_only(as_caller, &plan)?;
    Binds::pin(as_caller, &plan)?;
    Ok(())
}
