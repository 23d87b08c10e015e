//! The plan step of the privileged sequence: everything that can be judged
//! from the request, the current directory and the policy, without a system
//! call. Pure; unit-tested without root. The refusals here are the same for
//! every front end (the setuid command and the Slurm plugin).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::cli::{BindRequest, MountRequest, RunRequest};
use crate::config::paths::{self, Places};
use crate::config::policy::{Policy, PolicyError, MAX_IMAGES_PER_CALL};
use crate::config::Settings;
use crate::mounts::overlay::WritableLimits;
use crate::system;
use crate::system::error::Failure;

/// What a front end adds to the site policy.
#[derive(Clone, Debug, Default)]
pub struct FrontEnd {
    /// Images and mount points must be absolute paths (a Slurm job step
    /// may start in another directory than the one srun was called in).
    pub require_absolute: bool,
    /// Mount points allowed by the front end (Slurm's plugstack.conf
    /// `mountpoints=`), in addition to the site policy; empty: no extra
    /// rule. With the message that names where they are configured.
    pub mount_points: Places,
    pub mount_points_source: &'static str,
    /// Why `-r` (`--mutable-root`) is refused here, if it is (the Slurm
    /// plugin's default: root's code runs in the job's view).
    pub refuse_mutable_root: Option<&'static str>,
    /// How this front end spells `-r`, for the message about a missing
    /// mount point (None: the command's `-r`).
    pub mutable_root_option: Option<&'static str>,
    /// The front end turns the image cache off for its launches (the
    /// plugin's `cache=no`).
    pub cache_off: bool,
}

/// One mount of the plan: one image, or the layers of a union, on a mount
/// point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// `image:mountpoint` as given, for messages.
    pub subject: String,
    /// One image, or the layers of a union, top first, as given.
    pub images: Vec<OsString>,
    /// The mount point as given.
    pub mount_point: OsString,
    /// The mount point made absolute against the current directory and
    /// lexically tidied: the key for duplicates and nesting order.
    pub key: OsString,
    /// Stacked with overlayfs (a union of two or more images).
    pub union: bool,
    /// A bind mount of this directory (`--bind-mount`); `images` is then
    /// empty.
    pub bind: Option<OsString>,
}

/// The validated plan: mounts in the order they are made (parents before
/// children), and the writable layer's limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The absolute directory relative paths were resolved against.
    pub cwd: OsString,
    pub mounts: Vec<Planned>,
    pub writable: Option<WritableLimits>,
    pub no_cache: bool,
    /// `-r`: missing mount points are created in the command's view.
    pub mutable_root: bool,
    /// `--writable=DIR`: the layer directory, absolute and tidy (the
    /// caller's stage mounts it after the drop, `layer`).
    pub layer_dir: Option<OsString>,
}

/// The most bind mounts one call may ask for.
pub const MAX_BINDS_PER_CALL: usize = 64;

use super::plan_error::PlanError;
crate::error_kind!(PlanError);

impl Plan {
    /// Every image of the plan, with the mount it belongs to.
    #[cfg(test)]
    pub(crate) fn images(&self) -> impl Iterator<Item = (usize, &OsString)> {
        self.mounts
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.images.iter().map(move |img| (i, img)))
    }
}

/// Stage 1: the plan of `request` under `settings`, relative paths
/// resolved against `cwd`.
pub(crate) fn stage(
    request: &RunRequest,
    cwd: &OsStr,
    settings: &Settings,
    front: &FrontEnd,
) -> Result<Plan, Failure> {
    // RAM sizes only `--writable=N%`.
    let ram = if request.writable.is_some() {
        system::total_memory()
    } else {
        0
    };
    build(request, cwd, &settings.policy, front, ram)
}

/// Checks `request` against the policy and the front end's rules and
/// orders its mounts. `cwd` is the absolute current directory;
/// `total_memory` sizes `--writable=N%`.
pub(crate) fn build(
    request: &RunRequest,
    cwd: &OsStr,
    policy: &Policy,
    front: &FrontEnd,
    total_memory: u64,
) -> Result<Plan, Failure> {
    let writable = switches(request, policy, front, total_memory)?;
    let layer_dir = layer_dir(request, cwd, policy, front)?;
    let mut rules = Rules {
        cwd,
        policy,
        front,
        keys: HashMap::new(),
    };
    let mut mounts = Vec::with_capacity(request.mounts.len() + request.binds.len());
    for req in &request.mounts {
        mounts.push(rules.image_mount(req)?);
    }
    for req in &request.binds {
        mounts.push(rules.bind_mount(req)?);
    }
    if let Some(dir) = &layer_dir {
        check_layer_dir_apart(dir, &mounts)?;
    }
    let keys: Vec<OsString> = mounts.iter().map(|m| m.key.clone()).collect();
    let order = paths::mount_order(&keys);
    let mounts = order.into_iter().map(|i| mounts[i].clone()).collect();
    Ok(Plan {
        cwd: cwd.to_owned(),
        mounts,
        writable,
        no_cache: request.no_cache,
        mutable_root: request.mutable_root,
        layer_dir,
    })
}

/// `--writable=DIR`: allowed by the site like `--writable`, for images
/// only, absolute where the front end requires it; made absolute.
fn layer_dir(
    request: &RunRequest,
    cwd: &OsStr,
    policy: &Policy,
    front: &FrontEnd,
) -> Result<Option<OsString>, Failure> {
    let Some(dir) = &request.layer_dir else {
        return Ok(None);
    };
    // Every front end's refusal of a layer without images (whatever the
    // site allows: there is nothing to put one on).
    if request.mounts.is_empty() {
        return Err(Failure::new(PlanError::LayerWithoutImages));
    }
    if !policy.allow_writable {
        return Err(Failure::new(PlanError::WritableNotAllowed));
    }
    if front.require_absolute && !dir.as_bytes().starts_with(b"/") {
        return Err(Failure::new(PlanError::RelativeLayer(dir.clone())));
    }
    Ok(Some(paths::absolute(cwd, dir)))
}

/// The layer directory must not be inside a mount point of the call (it
/// would be looked up in the image), nor hold one.
fn check_layer_dir_apart(dir: &OsStr, mounts: &[Planned]) -> Result<(), Failure> {
    for m in mounts {
        if paths::is_within(dir, &m.key) || paths::is_within(&m.key, dir) {
            return Err(Failure::about(
                &m.subject,
                PlanError::LayerAndMountPointNested {
                    dir: dir.to_owned(),
                    key: m.key.clone(),
                },
            ));
        }
    }
    Ok(())
}

/// The call as a whole: how many images and binds, and what the policy
/// and the front end allow of `--writable` and `-r`; the writable
/// layer's limits.
fn switches(
    request: &RunRequest,
    policy: &Policy,
    front: &FrontEnd,
    total_memory: u64,
) -> Result<Option<WritableLimits>, Failure> {
    let layers: usize = request.mounts.iter().map(|m| m.images.len()).sum();
    let max = policy.max_images_per_call.min(MAX_IMAGES_PER_CALL);
    if layers > max {
        return Err(Failure::new(PlanError::TooManyImages {
            given: layers,
            max,
            by_site: max < MAX_IMAGES_PER_CALL,
        }));
    }
    if request.writable.is_some() && !policy.allow_writable {
        return Err(Failure::new(PlanError::WritableNotAllowed));
    }
    let writable = match request.writable {
        Some(size) => Some(WritableLimits::new(size, total_memory)?),
        None => None,
    };
    if request.mutable_root {
        if !policy.allow_mutable_root {
            return Err(Failure::new(PlanError::MutableRootNotAllowed));
        }
        if let Some(why) = front.refuse_mutable_root {
            return Err(Failure::new(PlanError::MutableRootRefused(why)));
        }
    }
    if request.binds.len() > MAX_BINDS_PER_CALL {
        return Err(Failure::new(PlanError::TooManyBinds {
            given: request.binds.len(),
            max: MAX_BINDS_PER_CALL,
        }));
    }
    Ok(writable)
}

/// The rules each mount is judged by, and the mount points so far.
struct Rules<'a> {
    cwd: &'a OsStr,
    policy: &'a Policy,
    front: &'a FrontEnd,
    /// The keys so far, and whether each is a bind's.
    keys: HashMap<OsString, bool>,
}

impl Rules<'_> {
    fn image_mount(&mut self, req: &MountRequest) -> Result<Planned, Failure> {
        let subject = req.describe();
        if req.union && req.images.len() > 1 && !self.policy.allow_union {
            return Err(Failure::about(&subject, PlanError::UnionNotAllowed));
        }
        if self.front.require_absolute {
            if let Some(relative) = req.images.iter().find(|i| !i.as_bytes().starts_with(b"/")) {
                return Err(Failure::about(
                    &subject,
                    PlanError::RelativeImage(relative.clone()),
                ));
            }
            if !req.mount_point.as_bytes().starts_with(b"/") {
                return Err(Failure::about(&subject, PlanError::RelativeMountPoint));
            }
        }
        Ok(Planned {
            key: self.key(&req.mount_point, false, &subject)?,
            subject,
            images: req.images.clone(),
            mount_point: req.mount_point.clone(),
            union: req.union && req.images.len() > 1,
            bind: None,
        })
    }

    fn bind_mount(&mut self, req: &BindRequest) -> Result<Planned, Failure> {
        let subject = format!("bind {}", req.describe());
        let absolute = |p: &OsStr| p.as_bytes().starts_with(b"/");
        if self.front.require_absolute && !(absolute(&req.source) && absolute(&req.destination)) {
            return Err(Failure::about(&subject, PlanError::RelativeBind));
        }
        Ok(Planned {
            key: self.key(&req.destination, true, &subject)?,
            subject,
            images: Vec::new(),
            mount_point: req.destination.clone(),
            union: false,
            bind: Some(paths::absolute(self.cwd, &req.source)),
        })
    }

    /// The key of a mount point or bind destination (absolute, tidy),
    /// refused when an earlier one of the call has the same key, or when
    /// the policy or the front end does not allow it (judged lexically now
    /// when the path has no `..`; again on the resolved directory later).
    fn key(&mut self, given: &OsStr, bind: bool, subject: &str) -> Result<OsString, Failure> {
        let key = paths::absolute(self.cwd, given);
        if let Some(&earlier_bind) = self.keys.get(&key) {
            return Err(Failure::about(
                subject,
                PlanError::DuplicateMountPoint {
                    key,
                    binds: bind || earlier_bind,
                },
            ));
        }
        self.keys.insert(key.clone(), bind);
        if !paths::components(key.as_bytes()).contains(&&b".."[..]) {
            check_allowed(&key, self.policy, self.front, subject)?;
        }
        Ok(key)
    }
}

/// Whether the site policy and the front end allow a mount on `path` (a
/// tidy absolute path, or the kernel's name of a resolved directory).
pub(crate) fn check_allowed(
    path: &OsStr,
    policy: &Policy,
    front: &FrontEnd,
    subject: &str,
) -> Result<(), Failure> {
    if !policy.mount_points.allow(path) {
        return Err(Failure::about(
            subject,
            PolicyError::MountPointNotAllowed {
                path: path.to_owned(),
                places: policy.mount_points.list(),
            },
        ));
    }
    if !front.mount_points.allow(path) {
        return Err(Failure::about(
            subject,
            PlanError::NotAmongFrontEnds {
                path: path.to_owned(),
                places: front.mount_points.list(),
                source: front.mount_points_source,
            },
        ));
    }
    Ok(())
}

/// `UENV_MOUNT_LIST` separates entries with ',' and image from mount point
/// with ':'; a resolved path containing those (or a newline) would make it
/// ambiguous, so it is refused.
pub(crate) fn refuse_separators(
    path: &OsStr,
    subject: &str,
    what: &'static str,
) -> Result<(), Failure> {
    if path
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b':' | b',' | b'\n'))
    {
        return Err(Failure::about(
            subject,
            PlanError::Separators {
                what,
                path: path.to_owned(),
            },
        ));
    }
    Ok(())
}

/// A resolved mount point against those already mounted in this call (in
/// order): the same directory twice, or one that would hide an earlier
/// mount (symlinks changed the nesting order), is refused.
pub(crate) fn check_resolved(
    mounted: &[OsString],
    real: &OsStr,
    subject: &str,
) -> Result<(), Failure> {
    refuse_separators(real, subject, "mount point")?;
    if mounted.iter().any(|m| m == real) {
        return Err(Failure::about(
            subject,
            PlanError::AlreadyMounted(real.to_owned()),
        ));
    }
    if let Some(hidden) = mounted.iter().find(|m| paths::is_within(m, real)) {
        return Err(Failure::about(
            subject,
            PlanError::HidesEarlier {
                real: real.to_owned(),
                hidden: hidden.clone(),
            },
        ));
    }
    Ok(())
}

/// The same image file (device, inode) twice in one union is refused:
/// overlayfs cannot stack a layer on itself.
pub(crate) fn check_union_layers(
    ids: &[(u64, u64)],
    names: &[OsString],
    subject: &str,
) -> Result<(), Failure> {
    let mut seen = HashSet::new();
    for (id, name) in ids.iter().zip(names) {
        if !seen.insert(*id) {
            return Err(Failure::about(subject, PlanError::UnionTwice(name.clone())));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
