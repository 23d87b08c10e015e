//! The plan step of the privileged sequence: everything that can be judged
//! from the request, the current directory and the policy, without a system
//! call. Pure; unit-tested without root. The refusals here are the same for
//! every front end (the setuid command and the Slurm plugin).

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::cli::{LayerSize, RunRequest};
use crate::config::policy::{Policy, MAX_IMAGES_PER_CALL};
use crate::error::Failure;
use crate::overlay::WritableLimits;
use crate::paths;

/// What a front end adds to the site policy.
#[derive(Clone, Debug, Default)]
pub struct FrontEnd {
    /// Images and mount points must be absolute paths (a Slurm job step
    /// may start in another directory than the one srun was called in).
    pub require_absolute: bool,
    /// Mount points allowed by the front end (Slurm's plugstack.conf
    /// `mountpoints=`), in addition to the site policy; empty: no extra
    /// rule. With the message that names where they are configured.
    pub mount_points: Vec<OsString>,
    pub mount_points_source: &'static str,
    /// Why `-r` (`--mutable-root`) is refused here, if it is (the Slurm
    /// plugin's default: root's code runs in the job's view).
    pub refuse_mutable_root: Option<&'static str>,
    /// How this front end spells `-r`, for the message about a missing
    /// mount point (None: the command's `-r`).
    pub mutable_root_option: Option<&'static str>,
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

impl Plan {
    /// Every image of the plan, with the mount it belongs to.
    pub fn images(&self) -> impl Iterator<Item = (usize, &OsString)> {
        self.mounts
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.images.iter().map(move |img| (i, img)))
    }
}

/// Checks `request` against the policy and the front end's rules and
/// orders its mounts. `cwd` is the absolute current directory;
/// `total_memory` sizes `--writable=N%`.
pub fn build(
    request: &RunRequest,
    cwd: &OsStr,
    policy: &Policy,
    front: &FrontEnd,
    total_memory: u64,
) -> Result<Plan, Failure> {
    let layers: usize = request.mounts.iter().map(|m| m.images.len()).sum();
    let max = policy.max_images_per_call.min(MAX_IMAGES_PER_CALL);
    if layers > max {
        let key = if max < MAX_IMAGES_PER_CALL {
            " (max-images-per-call in /etc/squashfs-mount.conf)"
        } else {
            ""
        };
        return Err(Failure::new(format!(
            "{layers} images given; at most {max} can be mounted in one call{key}"
        )));
    }
    if request.writable.is_some() && !policy.allow_writable {
        return Err(Failure::new("--writable is not allowed by the site policy (allow-writable in /etc/squashfs-mount.conf)"));
    }
    let layer_dir = layer_dir(request, cwd, policy, front)?;
    let writable = match request.writable {
        Some(size) => Some(WritableLimits::new(size, total_memory).map_err(Failure::new)?),
        None => None,
    };
    if request.mutable_root {
        if !policy.allow_mutable_root {
            return Err(Failure::new("-r (--mutable-root) is not allowed by the site policy (allow-mutable-root in /etc/squashfs-mount.conf); ask the administrators to create the mount point"));
        }
        if let Some(why) = front.refuse_mutable_root {
            return Err(Failure::new(why));
        }
    }
    if request.binds.len() > MAX_BINDS_PER_CALL {
        return Err(Failure::new(format!(
            "{} bind mounts given; at most {MAX_BINDS_PER_CALL} can be made in one call",
            request.binds.len()
        )));
    }
    let mut mounts = Vec::with_capacity(request.mounts.len() + request.binds.len());
    let mut keys: HashMap<OsString, bool> = HashMap::new();
    for req in &request.mounts {
        let subject = req.describe();
        if req.union && req.images.len() > 1 && !policy.allow_union {
            return Err(Failure::about(&subject, "--union is not allowed by the site policy (allow-union in /etc/squashfs-mount.conf)"));
        }
        if front.require_absolute {
            if let Some(relative) = req.images.iter().find(|i| !i.as_bytes().starts_with(b"/")) {
                return Err(Failure::about(
                    &subject,
                    format!(
                        "the image path must be absolute, because the job may start in another directory; give e.g. $PWD/{}",
                        relative.to_string_lossy()
                    ),
                ));
            }
            if !req.mount_point.as_bytes().starts_with(b"/") {
                return Err(Failure::about(
                    &subject,
                    "the mount point must be an absolute path",
                ));
            }
        }
        let key = planned_key(
            cwd,
            &req.mount_point,
            false,
            &mut keys,
            policy,
            front,
            &subject,
        )?;
        mounts.push(Planned {
            subject,
            images: req.images.clone(),
            mount_point: req.mount_point.clone(),
            key,
            union: req.union && req.images.len() > 1,
            bind: None,
        });
    }
    for req in &request.binds {
        let subject = format!("bind {}", req.describe());
        if front.require_absolute
            && !(req.source.as_bytes().starts_with(b"/")
                && req.destination.as_bytes().starts_with(b"/"))
        {
            return Err(Failure::about(
                &subject,
                "the bind source and destination must be absolute paths, because the job may start in another directory",
            ));
        }
        let key = planned_key(
            cwd,
            &req.destination,
            true,
            &mut keys,
            policy,
            front,
            &subject,
        )?;
        mounts.push(Planned {
            subject,
            images: Vec::new(),
            mount_point: req.destination.clone(),
            key,
            union: false,
            bind: Some(paths::absolute(cwd, &req.source)),
        });
    }
    if let Some(dir) = &layer_dir {
        check_layer_dir_apart(dir, &mounts)?;
    }
    let keys: Vec<OsString> = mounts.iter().map(|m| m.key.clone()).collect();
    let order = paths::mount_order(&keys);
    let mounts = order.into_iter().map(|i| mounts[i].clone()).collect();
    Ok(Plan {
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
    if !policy.allow_writable {
        return Err(Failure::new("--writable is not allowed by the site policy (allow-writable in /etc/squashfs-mount.conf)"));
    }
    if request.mounts.is_empty() {
        return Err(Failure::new(
            "--writable=DIR puts a writable layer on images: give at least one image",
        ));
    }
    if front.require_absolute && !dir.as_bytes().starts_with(b"/") {
        return Err(Failure::new(format!(
            "the writable layer {} must be an absolute path, because the job may start in another directory",
            dir.to_string_lossy()
        )));
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
                format!(
                    "the writable layer {} and the mount point {} are inside one another; give a layer directory outside the mount points",
                    dir.to_string_lossy(),
                    m.key.to_string_lossy()
                ),
            ));
        }
    }
    Ok(())
}

/// The key of a mount point or bind destination (absolute, tidy), refused
/// when an earlier one of the call has the same key, or when the policy or
/// the front end does not allow it (judged lexically now when the path has
/// no `..`; again on the resolved directory later). `keys` remembers
/// whether each key is a bind's.
fn planned_key(
    cwd: &OsStr,
    given: &OsStr,
    bind: bool,
    keys: &mut HashMap<OsString, bool>,
    policy: &Policy,
    front: &FrontEnd,
    subject: &str,
) -> Result<OsString, Failure> {
    let key = paths::absolute(cwd, given);
    if let Some(&earlier_bind) = keys.get(&key) {
        let why = if bind || earlier_bind {
            "is used more than once (by bind mounts or images); give each mount point once"
        } else {
            // uenv's words.
            "is used to mount more than one squashfs; give each mount point once"
        };
        return Err(Failure::about(
            subject,
            format!("the mount point {} {why}", key.to_string_lossy()),
        ));
    }
    keys.insert(key.clone(), bind);
    if !paths::components(key.as_bytes()).contains(&&b".."[..]) {
        check_allowed(&key, policy, front, subject)?;
    }
    Ok(key)
}

/// Whether the site policy and the front end allow a mount on `path` (a
/// tidy absolute path, or the kernel's name of a resolved directory).
pub fn check_allowed(
    path: &OsStr,
    policy: &Policy,
    front: &FrontEnd,
    subject: &str,
) -> Result<(), Failure> {
    policy
        .allows_mount_point(path)
        .map_err(|why| Failure::about(subject, why))?;
    if !front.mount_points.is_empty()
        && !front.mount_points.iter().any(|m| paths::is_within(path, m))
    {
        let list: Vec<String> = front
            .mount_points
            .iter()
            .map(|m| m.to_string_lossy().into_owned())
            .collect();
        return Err(Failure::about(
            subject,
            format!(
                "refusing to mount on {}: images and bind mounts may only be mounted on {} (or below) ({}); choose one of these",
                path.to_string_lossy(),
                list.join(", "),
                front.mount_points_source
            ),
        ));
    }
    Ok(())
}

/// `UENV_MOUNT_LIST` separates entries with ',' and image from mount point
/// with ':'; a resolved path containing those (or a newline) would make it
/// ambiguous, so it is refused.
pub fn refuse_separators(path: &OsStr, subject: &str, what: &str) -> Result<(), Failure> {
    if path
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b':' | b',' | b'\n'))
    {
        return Err(Failure::about(
            subject,
            format!(
                "the {what} resolves to {}, whose path contains ':', ',' or a newline, which UENV_MOUNT_LIST cannot carry; move or rename it",
                path.to_string_lossy()
            ),
        ));
    }
    Ok(())
}

/// A resolved mount point against those already mounted in this call (in
/// order): the same directory twice, or one that would hide an earlier
/// mount (symlinks changed the nesting order), is refused.
pub fn check_resolved(mounted: &[OsString], real: &OsStr, subject: &str) -> Result<(), Failure> {
    refuse_separators(real, subject, "mount point")?;
    if mounted.iter().any(|m| m == real) {
        return Err(Failure::about(
            subject,
            format!(
                "the mount point resolves to {}, which is already a mount point of this call",
                real.to_string_lossy()
            ),
        ));
    }
    if let Some(hidden) = mounted.iter().find(|m| paths::is_within(m, real)) {
        return Err(Failure::about(
            subject,
            format!(
                "the mount point resolves to {}, which would hide {} mounted before it (symlinks changed the nesting order); give the mount points as paths without symlinks",
                real.to_string_lossy(),
                hidden.to_string_lossy()
            ),
        ));
    }
    Ok(())
}

/// The same image file (device, inode) twice in one union is refused:
/// overlayfs cannot stack a layer on itself.
pub fn check_union_layers(
    ids: &[(u64, u64)],
    names: &[OsString],
    subject: &str,
) -> Result<(), Failure> {
    let mut seen = HashSet::new();
    for (id, name) in ids.iter().zip(names) {
        if !seen.insert(*id) {
            return Err(Failure::about(
                subject,
                format!(
                    "the image {} is named twice in one union; name each image once",
                    name.to_string_lossy()
                ),
            ));
        }
    }
    Ok(())
}

/// A hint for a path the shell did not expand (`~` after `:` or `=`).
pub fn tilde_hint(given: &OsStr) -> &'static str {
    if given.as_bytes().starts_with(b"~") {
        "; '~' was not expanded by the shell (it is not, after ':' or '='): write $HOME instead"
    } else {
        ""
    }
}

/// The writable layer's size request, for messages.
pub fn describe_size(size: LayerSize) -> String {
    size.tmpfs_value()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
