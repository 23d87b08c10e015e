//! Stage 6, in the private namespace, for each mount of the plan in path
//! order (parents first): with `-r`, a missing mount point is made in the
//! view (`view.rs`); the mount point is resolved and pinned as the caller
//! and judged (forbidden places, what would hide an earlier mount, the
//! policy's and the front end's allowed places); then as root the bind
//! copy, or the image's instance (a union, or any image under
//! `--writable`, stacked first) is attached onto the pinned fd. Last, the
//! working directory is entered again when it lies in a mounted tree.
//! With `--writable=DIR` it also records what was made where, for the
//! caller's stage (`layer`), which stacks the kept layer after the drop;
//! `kept_layer::claim` then judges DIR against it.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use super::bind::Binds;
use super::context::{Call, SequenceError};
use super::images::Images;
use super::plan::{self, Plan};
use super::root_side::RootSide;
use super::view;
use crate::cli::environment;
use crate::layer::{self, Made, ViewMount};
use crate::mounts::mount_point::MountPoint;
use crate::mounts::overlay::{OverlayError, Owners, RootAttributes};
use crate::privilege::Credentials;
use crate::system;
use crate::system::error::Failure;

/// What the stage did.
pub struct Attached {
    /// `UENV_MOUNT_LIST` for the command.
    pub mount_list: OsString,
    /// Its `--verbose` lines (`-r`, where each mount point resolved, the
    /// binds), each with the verbosity it needs.
    pub notes: Vec<(u8, String)>,
    /// Why the command starts in the directory a mount hides, if it does.
    pub reentered: Option<String>,
    /// `--writable=DIR`: what the caller's stage stacks its layer on
    /// (what was made where, in path order), for `kept_layer::claim`.
    pub view: Option<layer::LayerPlan>,
    /// `--writable=DIR`: DIR claimed (`kept_layer::claim`), with its helper.
    pub layer: Option<layer::Kept>,
}

/// The call's writable tmpfs (`--writable`), made in the private namespace.
pub(crate) fn writable_layer<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    plan: &Plan,
) -> Result<Option<R::Writable>, Failure> {
    match plan.writable {
        Some(limits) => {
            Ok(Some(creds.try_as_root(|root| {
                root_side.writable_tmpfs(root, limits)
            })?))
        }
        None => Ok(None),
    }
}

/// Every mount of the plan, attached.
pub(crate) fn all<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    call: &Call<'_>,
    images: &mut Images,
    binds: Binds,
    writable: Option<R::Writable>,
) -> Result<Attached, Failure> {
    let owners = Owners::of(creds);
    let mut parts = Parts {
        images,
        binds,
        writable,
        owners,
    };
    let mut so_far = SoFar::default();
    for k in 0..call.plan.mounts.len() {
        if call.plan.mutable_root {
            so_far.mirror_missing(creds, root_side, call.plan, k, &parts.owners)?;
        }
        let target = resolve(creds, call, k, &so_far.mounted, &mut so_far.notes)?;
        let tree = tree_of(
            creds,
            root_side,
            &mut parts,
            call.plan,
            k,
            &target,
            &mut so_far,
        )?;
        let subject = &call.plan.mounts[k].subject;
        creds.try_as_root(|root| root_side.attach(root, &tree, &target, subject))?;
        if call.plan.layer_dir.is_some() {
            so_far.record_images(parts.images, call.plan, k, &target)?;
        }
        so_far.mounted.push(target.real);
    }
    Ok(so_far.finish(call))
}

/// What attaching uses throughout the call.
struct Parts<'a, W> {
    images: &'a mut Images,
    /// The bind copies, taken by mount index.
    binds: Binds,
    /// `--writable`'s tmpfs, stacked on every image.
    writable: Option<W>,
    owners: Owners,
}

/// What the mounts attached so far leave for later ones, the command and
/// the layer helper; one list per use.
#[derive(Default)]
struct SoFar {
    /// The mount points, in order: later ones are judged against them.
    mounted: Vec<OsString>,
    /// `-r`: the directories mirrored (the working directory is entered
    /// again when it lies in one, as in a mounted tree).
    mirrored: Vec<OsString>,
    /// `UENV_MOUNT_LIST`: each image with its mount point.
    mount_list: Vec<(OsString, OsString)>,
    /// `--writable=DIR`: what was made where, for the caller's stage.
    view: Vec<ViewMount>,
    /// `--verbose` lines, each with the verbosity it needs.
    notes: Vec<(u8, String)>,
}

impl SoFar {
    /// `-r`: mount `k`'s missing mount point, made in the view.
    fn mirror_missing<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        plan: &Plan,
        k: usize,
        owners: &Owners,
    ) -> Result<(), Failure> {
        if let Some(mirror) = view::make_missing(creds, root_side, plan, k, owners)? {
            self.notes.push((mirror.level(), mirror.note()));
            self.view.push(made(mirror.dir.clone(), Made::Directory));
            self.mirrored.push(mirror.dir);
        }
        Ok(())
    }

    /// `--writable=DIR`: the images attached at mount `k`, for the view.
    fn record_images(
        &mut self,
        images: &Images,
        plan: &Plan,
        k: usize,
        target: &MountPoint,
    ) -> Result<(), Failure> {
        let m = &plan.mounts[k];
        if m.bind.is_some() {
            return Ok(());
        }
        let ids = images.layers[k]
            .iter()
            .map(|&i| layer::identity_of(&images.records[i].image, &m.subject))
            .collect::<Result<_, _>>()?;
        self.view.push(made(target.real.clone(), Made::Images(ids)));
        Ok(())
    }

    fn finish(mut self, call: &Call<'_>) -> Attached {
        let plan = call.plan;
        self.mounted.append(&mut self.mirrored);
        let list = self.mount_list.iter();
        Attached {
            mount_list: environment::mount_list(list.map(|(i, m)| (i.as_os_str(), m.as_os_str()))),
            notes: self.notes,
            reentered: reenter_working_directory(&plan.cwd, &self.mounted),
            view: layer_plan(call, self.view),
            layer: None,
        }
    }
}

/// The tree to attach at mount `k`: its bind copy, or its image's
/// instance (a union, or under `--writable`, stacked first).
fn tree_of<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    parts: &mut Parts<'_, R::Writable>,
    plan: &Plan,
    k: usize,
    target: &MountPoint,
    so_far: &mut SoFar,
) -> Result<OwnedFd, Failure> {
    let m = &plan.mounts[k];
    if m.bind.is_some() {
        let copy =
            parts.binds.copies.remove(&k).ok_or_else(|| {
                Failure::about(&m.subject, SequenceError::Internal("no bind copy"))
            })?;
        so_far
            .notes
            .extend(parts.binds.note(k, &target.real).map(|n| (1, n)));
        so_far.view.push(made(target.real.clone(), Made::Bind));
        return Ok(copy);
    }
    let layers = parts
        .images
        .take_layers(k)
        .ok_or_else(|| Failure::about(&m.subject, SequenceError::Internal("no instance left")))?;
    for &i in &parts.images.layers[k] {
        let image = parts.images.records[i].image.path.clone();
        so_far.mount_list.push((image, target.real.clone()));
    }
    let writable = parts.writable.as_mut();
    stack(
        creds,
        root_side,
        layers,
        writable,
        &parts.owners,
        &m.subject,
    )
}

fn made(path: OsString, made: Made) -> ViewMount {
    ViewMount { path, made }
}

/// The mount point of mount `k` of the plan, resolved and pinned as the
/// caller, and judged.
fn resolve<C: Credentials>(
    creds: &C,
    call: &Call<'_>,
    k: usize,
    mounted: &[OsString],
    notes: &mut Vec<(u8, String)>,
) -> Result<MountPoint, Failure> {
    let m = &call.plan.mounts[k];
    let what = if m.bind.is_some() {
        "bind destination"
    } else {
        "mount path"
    };
    let create_hint = match call.ctx.front.mutable_root_option {
        Some(option) => format!("create it, or give {option} to create it in the job's view only"),
        None => {
            "create it, or give -r (--mutable-root) to create it in the command's view only".into()
        }
    };
    let target = MountPoint::resolve(
        creds,
        &m.key,
        &m.mount_point,
        &m.subject,
        what,
        &create_hint,
    )?;
    plan::check_resolved(mounted, &target.real, &m.subject)?;
    plan::check_allowed(
        &target.real,
        &call.settings.policy,
        call.ctx.front,
        &m.subject,
    )?;
    notes.push((
        2,
        format!(
            "{}: {} resolved to {}",
            m.subject,
            what,
            target.real.to_string_lossy()
        ),
    ));
    Ok(target)
}

/// One image's instance as it is, or the layers stacked with overlayfs
/// (a union, or under `--writable`): the tree to attach.
fn stack<C: Credentials, R: RootSide>(
    creds: &mut C,
    root_side: &mut R,
    layers: Vec<OwnedFd>,
    writable: Option<&mut R::Writable>,
    owners: &Owners,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    if layers.len() == 1 && writable.is_none() {
        return layers
            .into_iter()
            .next()
            .ok_or_else(|| Failure::about(subject, SequenceError::Internal("no instance")));
    }
    let top = system::fstat(layers[0].as_fd())
        .map_err(|e| Failure::about(subject, OverlayError::TopRoot(e)))?;
    let attributes = RootAttributes::sanitized(&top, owners);
    creds.as_root(|root| root_side.stack(root, &layers, writable, attributes, subject))?
}

/// A working directory at or below a mount point would show the tree the
/// mount hides: enter it again by its path, as the caller, so that the
/// command starts in the mounted tree (as container runtimes do). Where
/// that path does not exist in the mounted tree the command starts where
/// it was, and the note says why.
fn reenter_working_directory(cwd: &OsStr, mounted: &[OsString]) -> Option<String> {
    if !mounted
        .iter()
        .any(|m| crate::config::paths::is_within(cwd, m))
    {
        return None;
    }
    system::change_dir(cwd).err().map(|e| {
        format!(
            "the working directory {} is not in the mounted tree ({e}); the command starts in the directory it hides",
            cwd.to_string_lossy()
        )
    })
}

/// `--writable=DIR`: what the caller's stage stacks its layer on (`view`).
fn layer_plan(call: &Call<'_>, view: Vec<ViewMount>) -> Option<layer::LayerPlan> {
    let plan = call.plan;
    Some(layer::LayerPlan {
        dir: plan.layer_dir.clone()?,
        mounts: view,
        cwd: plan.cwd.clone(),
        verbose: 0,
        lock_fd: None,
        dir_made: false,
    })
}
