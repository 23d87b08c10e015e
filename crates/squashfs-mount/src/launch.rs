//! The order of privileged steps, in one function: [`run`].

use std::collections::HashSet;
use std::ffi::OsString;

use crate::cache::Cache;
use crate::cli::RunRequest;
use crate::config;
use crate::environment;
use crate::error::Failure;
use crate::image::{self, Image};
use crate::instance;
use crate::mount;
use crate::mountpoint::MountPoint;
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
///     b. as root: a clone of the cached instance of that very file (same
///        device, inode, size, mtime, ctime; loop device verified) or else
///        bind the image fd to a loop device (verified), create the
///        squashfs superblock, fsmount it ro,nosuid,nodev; move_mount it
///        onto the pinned fd.
///  5. Drop root for good: groups, gids, uids; no_new_privs; verify.
///
/// Any failure returns before step 5 and the process exits: the namespace,
/// its mounts and the autoclear loop devices go away with it.
pub fn run(request: &RunRequest) -> Result<Ready, Failure> {
    if request.mounts.is_empty() {
        eprintln!("squashfs-mount: warning: no <image>:<mountpoint> given; running the command without mounting anything");
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

    // 2. Images, as the caller.
    let cwd = system::current_dir()
        .map_err(|e| Failure::new(format!("cannot determine the current directory: {e}")))?;
    let kernel_config = image::kernel_config();
    let mut images = Vec::with_capacity(request.mounts.len());
    let mut seen_images = HashSet::new();
    for req in &request.mounts {
        let subject = req.describe();
        let img = Image::open(&privileges, &req.image, &subject)?;
        img.check_kernel_support(kernel_config.as_deref(), &subject)?;
        if !seen_images.insert((img.id.dev, img.id.ino)) {
            eprintln!(
                "squashfs-mount: warning: {subject}: the image {} is mounted more than once",
                img.path.to_string_lossy()
            );
        }
        images.push(img);
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
        None
    } else {
        privileges.as_root(|| Cache::open_for_launch(&settings))?
    };

    // 3.
    privileges
        .as_root(system::enter_private_mount_namespace)?
        .map_err(|e| Failure::new(format!("cannot create a private mount namespace: {e}")))?;

    // 4.
    let mut mounted: Vec<(OsString, OsString)> = Vec::new();
    let options = settings.loop_options;
    for i in order {
        let (req, img) = (&request.mounts[i], &images[i]);
        let subject = req.describe();
        let target = MountPoint::resolve(&privileges, &req.mount_point, &subject)?;
        if mounted.iter().any(|(_, m)| *m == target.real) {
            return Err(Failure::about(
                &subject,
                format!("the mount point resolves to {}, which is already a mount point of this call", target.real.to_string_lossy()),
            ));
        }
        privileges.as_root(|| -> Result<(), Failure> {
            let tree = instance::obtain(img, cache.as_ref(), options, &subject)?;
            mount::attach(&tree, &target, &subject)
        })??;
        mounted.push((img.path.clone(), target.real.clone()));
    }

    // 5.
    drop(cache);
    let caller = privileges.drop_for_good()?;
    privilege::verify_dropped(&caller)?;
    let list = environment::mount_list(mounted.iter().map(|(i, m)| (i.as_os_str(), m.as_os_str())));
    Ok(Ready { caller, command: request.command.clone(), mount_list: Some(list) })
}
