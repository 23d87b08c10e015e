//! The order of privileged steps, in one function: [`run`].

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::cache::LaunchCache;
use crate::cli::RunRequest;
use crate::config;
use crate::environment;
use crate::error::{self, Failure};
use crate::image::{self, Image};
use crate::instance;
use crate::mount;
use crate::mountpoint::MountPoint;
use crate::overlay;
use crate::paths;
use crate::privilege::{self, Caller, PrivilegeError, Privileges};
use crate::system;

/// What is left to do once privileges are gone: run the command.
#[derive(Debug)]
pub struct Ready {
    pub caller: Caller,
    pub command: Vec<OsString>,
    /// `UENV_MOUNT_LIST` for the command, when anything was mounted.
    pub mount_list: Option<OsString>,
}

/// Mounts what `request` asks for in a private mount namespace and drops
/// every privilege for good. On return the process holds only the caller's
/// credentials (verified) and no_new_privs is set.
///
/// Privileged steps, in order:
///  1. `Privileges::acquire`: non-dumpable; effective ids become the caller's.
///  2. As the caller: open every image, check it is a regular file and read
///     its superblock (the only untrusted bytes ever interpreted).
///     Then as root: settings from the root-owned configuration file and,
///     unless `--no-cache`, the image cache, opened (its namespace created
///     once) in the namespace we started in; bounded eviction (`cache`).
///  3. As root: unshare the mount namespace; make every mount a slave.
///  4. For each mount point, in path order:
///     a. as the caller: resolve it and pin it as an O_PATH fd; refuse `/`,
///        /proc, /sys, /dev and kernel API filesystems;
///     b. as root: for each image a detached instance: a clone of the
///        cached instance of that very file (same device, inode, size,
///        mtime, ctime; loop device verified), or else bind the image fd to
///        a loop device (verified), create its squashfs superblock and
///        fsmount it ro,nosuid,nodev; for a union or `--writable`, stack
///        those with overlayfs (upper layer: a fresh tmpfs); move_mount the
///        result onto the pinned fd.
///  5. Drop root for good: groups, gids, uids; no_new_privs; verify.
///
/// Any failure returns before step 5 and the process exits: the namespace,
/// its mounts and the autoclear loop devices go away with it.
pub fn run(request: &RunRequest) -> Result<Ready, Failure> {
    if request.mounts.is_empty() {
        error::warn("no <image>:<mountpoint> given; running the command without mounting anything");
        let caller = match Privileges::acquire() {
            Ok(privileges) => privileges.drop_for_good()?,
            Err(PrivilegeError::NotSetuidRoot) => {
                // Not installed setuid: nothing to give up, but behave the
                // same (no_new_privs) for the command.
                let caller = Caller {
                    uid: system::real_uid(),
                    gid: system::real_gid(),
                    groups: system::supplementary_groups().unwrap_or_default(),
                };
                system::set_no_new_privs().map_err(|e| Failure::new(format!("prctl(PR_SET_NO_NEW_PRIVS) failed: {e}")))?;
                caller
            }
            Err(e) => return Err(e.into()),
        };
        return Ok(Ready { caller, command: request.command.clone(), mount_list: None });
    }

    // 1.
    let mut privileges = Privileges::acquire()?;
    let total_layers: usize = request.mounts.iter().map(|m| m.images.len()).sum();
    if total_layers > MAX_IMAGES_PER_CALL {
        return Err(Failure::new(format!(
            "{total_layers} images given; at most {MAX_IMAGES_PER_CALL} can be mounted in one call"
        )));
    }
    let writable = match request.writable {
        Some(size) => Some(overlay::WritableLimits::new(size, system::total_memory()).map_err(Failure::new)?),
        None => None,
    };

    // 2. Images, as the caller.
    let cwd = system::current_dir()
        .map_err(|e| Failure::new(format!("cannot determine the current directory: {e}")))?;
    let kernel_config = image::kernel_config();
    let mut images: Vec<Vec<Image>> = Vec::with_capacity(request.mounts.len());
    let mut seen_images = HashSet::new();
    for req in &request.mounts {
        let subject = req.describe();
        let mut layers: Vec<Image> = Vec::with_capacity(req.images.len());
        for given in &req.images {
            let img = Image::open(&privileges, given, &subject)?;
            img.check_kernel_support(kernel_config.as_ref(), &subject)?;
            img.check_loop_fit(&subject)?;
            refuse_separators(&img.path, &subject, "image")?;
            if layers.iter().any(|l| l.id.dev == img.id.dev && l.id.ino == img.id.ino) {
                return Err(Failure::about(
                    &subject,
                    format!("the image {} is named twice in one union; name each image once", img.path.to_string_lossy()),
                ));
            }
            if !seen_images.insert((img.id.dev, img.id.ino)) {
                error::warn(format_args!("{subject}: the image {} is used more than once", img.path.to_string_lossy()));
            }
            layers.push(img);
        }
        images.push(layers);
    }

    // Mount points: duplicates refused; parents before children.
    let keys: Vec<OsString> = request.mounts.iter().map(|r| paths::absolute(&cwd, &r.mount_point)).collect();
    let mut seen_keys = HashSet::new();
    for (req, key) in request.mounts.iter().zip(&keys) {
        if !seen_keys.insert(key.clone()) {
            return Err(Failure::about(
                &req.describe(),
                format!("the mount point {} is given more than once; give each mount point once", key.to_string_lossy()),
            ));
        }
    }
    let order = paths::mount_order(&keys);

    // 2. (cache)
    let settings = privileges.as_root(config::load)?;
    let cache = if request.no_cache || !settings.cache {
        LaunchCache::none()
    } else {
        privileges.as_root(|| LaunchCache::open(&settings))?
    };

    // 3.
    privileges
        .as_root(system::enter_private_mount_namespace)?
        .map_err(|e| Failure::new(format!("cannot create a private mount namespace: {e}")))?;
    let mut writable_tmpfs = match writable {
        Some(limits) => Some(privileges.as_root(|| overlay::WritableTmpfs::create(limits))??),
        None => None,
    };

    // 4.
    let mut mounted: Vec<(OsString, OsString)> = Vec::new();
    // Instances made in this call, by image identity: an image used again
    // gets a clone of its mount, not a second loop device.
    let mut instances: HashMap<(u64, u64), OwnedFd> = HashMap::new();
    let options = settings.loop_options;
    let caller_uid = privileges.caller().uid.as_raw();
    let caller_gids: Vec<u32> = std::iter::once(privileges.caller().gid.as_raw())
        .chain(privileges.caller().groups.iter().map(|g| g.as_raw()))
        .collect();
    for i in order {
        let (req, layers) = (&request.mounts[i], &images[i]);
        let subject = req.describe();
        // The absolute spelling, not the relative one: a mount made earlier
        // in this call may have covered the current directory.
        let target = MountPoint::resolve(&privileges, &keys[i], &subject)?;
        refuse_separators(&target.real, &subject, "mount point")?;
        if mounted.iter().any(|(_, m)| *m == target.real) {
            return Err(Failure::about(
                &subject,
                format!("the mount point resolves to {}, which is already a mount point of this call", target.real.to_string_lossy()),
            ));
        }
        if let Some((_, hidden)) = mounted.iter().find(|(_, m)| paths::is_within(m, &target.real)) {
            return Err(Failure::about(
                &subject,
                format!(
                    "the mount point resolves to {}, which would hide {} mounted before it (symlinks changed the nesting order); give the mount points as paths without symlinks",
                    target.real.to_string_lossy(),
                    hidden.to_string_lossy()
                ),
            ));
        }
        privileges.as_root(|| -> Result<(), Failure> {
            let mut trees = Vec::with_capacity(layers.len());
            for img in layers {
                let key = (img.id.dev, img.id.ino);
                let tree = match instances.get(&key) {
                    Some(existing) => instance::duplicate(existing, &cache, img, &subject)?,
                    None => {
                        let fresh = instance::obtain(img, &cache, options, &subject)?;
                        let copy = instance::duplicate(&fresh, &cache, img, &subject)?;
                        instances.insert(key, fresh);
                        copy
                    }
                };
                trees.push(tree);
            }
            let tree = if trees.len() == 1 && !req.union && writable_tmpfs.is_none() {
                trees.pop().expect("one instance")
            } else {
                let top = system::fstat(trees[0].as_fd())
                    .map_err(|e| Failure::about(&subject, format!("cannot stat the image's root: {e}")))?;
                let root = overlay::RootAttributes::sanitized(
                    top.uid,
                    top.gid,
                    top.mode,
                    caller_uid,
                    &caller_gids,
                );
                overlay::stack(&trees, writable_tmpfs.as_mut(), root, &subject)?
            };
            mount::attach(&tree, &target, &subject)
        })??;
        for img in layers {
            mounted.push((img.path.clone(), target.real.clone()));
        }
    }
    drop(instances);

    // 5.
    cache.finish();
    let caller = privileges.drop_for_good()?;
    privilege::verify_dropped(&caller)?;
    let list = environment::mount_list(mounted.iter().map(|(i, m)| (i.as_os_str(), m.as_os_str())));
    Ok(Ready { caller, command: request.command.clone(), mount_list: Some(list) })
}

/// Most images (counting every union layer) one call may mount: each needs
/// a loop device, and loop devices the kernel creates on demand stay.
pub const MAX_IMAGES_PER_CALL: usize = 500;

/// `UENV_MOUNT_LIST` separates entries with ',' and image from mount point
/// with ':'; a resolved path containing those (or a newline) would make it
/// ambiguous, so it is refused.
fn refuse_separators(path: &OsStr, subject: &str, what: &str) -> Result<(), Failure> {
    if path.as_bytes().iter().any(|b| matches!(b, b':' | b',' | b'\n')) {
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
