//! The order of privileged steps, in one function: [`run`].

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::fd::AsFd;

use crate::cli::RunRequest;
use crate::environment;
use crate::error::Failure;
use crate::image::{self, Image};
use crate::instance;
use crate::loopdev::LoopOptions;
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
///  3. As root: unshare the mount namespace; make every mount a slave.
///  4. For each mount point, in path order:
///     a. as the caller: resolve it and pin it as an O_PATH fd; refuse `/`,
///        /proc, /sys, /dev and kernel API filesystems;
///     b. as root: bind each image fd to a loop device (verified), create
///        its squashfs superblock and fsmount it ro,nosuid,nodev; for a
///        union or `--writable`, stack those with overlayfs (upper layer: a
///        fresh tmpfs); move_mount the result onto the pinned fd.
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
    let mut images: Vec<Vec<Image>> = Vec::with_capacity(request.mounts.len());
    let mut seen_images = HashSet::new();
    for req in &request.mounts {
        let subject = req.describe();
        let mut layers = Vec::with_capacity(req.images.len());
        for given in &req.images {
            let img = Image::open(&privileges, given, &subject)?;
            img.check_kernel_support(kernel_config.as_deref(), &subject)?;
            if !seen_images.insert((img.id.dev, img.id.ino)) {
                eprintln!(
                    "squashfs-mount: warning: {subject}: the image {} is used more than once",
                    img.path.to_string_lossy()
                );
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

    // 3.
    privileges
        .as_root(system::enter_private_mount_namespace)?
        .map_err(|e| Failure::new(format!("cannot create a private mount namespace: {e}")))?;

    // 4.
    let mut mounted: Vec<(OsString, OsString)> = Vec::new();
    let options = LoopOptions::default();
    for i in order {
        let (req, layers) = (&request.mounts[i], &images[i]);
        let subject = req.describe();
        let target = MountPoint::resolve(&privileges, &req.mount_point, &subject)?;
        if mounted.iter().any(|(_, m)| *m == target.real) {
            return Err(Failure::about(
                &subject,
                format!("the mount point resolves to {}, which is already a mount point of this call", target.real.to_string_lossy()),
            ));
        }
        privileges.as_root(|| -> Result<(), Failure> {
            let mut instances = Vec::with_capacity(layers.len());
            for img in layers {
                instances.push(instance::fresh(img, options, &subject)?);
            }
            let tree = if instances.len() == 1 && !req.union && request.writable.is_none() {
                instances.pop().expect("one instance")
            } else {
                let top = system::fstat(instances[0].as_fd())
                    .map_err(|e| Failure::about(&subject, format!("cannot stat the image's root: {e}")))?;
                let root = overlay::RootAttributes { uid: top.uid, gid: top.gid, mode: top.mode };
                overlay::stack(&instances, request.writable, root, &subject)?
            };
            mount::attach(&tree, &target, &subject)
        })??;
        for img in layers {
            mounted.push((img.path.clone(), target.real.clone()));
        }
    }

    // 5.
    let caller = privileges.drop_for_good()?;
    privilege::verify_dropped(&caller)?;
    let list = environment::mount_list(mounted.iter().map(|(i, m)| (i.as_os_str(), m.as_os_str())));
    Ok(Ready { caller, command: request.command.clone(), mount_list: Some(list) })
}
