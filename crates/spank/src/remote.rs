//! Remote context (slurmstepd, once per job step on each node): mounting.
//!
//! slurmstepd is multi-threaded when SPANK calls the plugin (measured on
//! Slurm 22.05: 3 threads in `init_post_opt`, 4 in `user_init`), so nothing
//! here may change credentials or namespaces of the whole process. Instead:
//!
//! 1. [`prepare`] (from `slurm_spank_init_post_opt`, as root) starts one
//!    worker thread and waits for it. The worker, alone:
//!    a. switches its own effective uid, gid and supplementary groups to the
//!    job user's with per-thread raw syscalls (glibc's setuid family
//!    would change every thread of slurmstepd) and opens every image and
//!    checks its superblock, exactly like squashfs-mount (`Image::open`);
//!    b. as root: `unshare(CLONE_NEWNS)`, which moves only this thread into
//!    a new mount namespace (all mounts slaves of the host's);
//!    c. for each mount point in path order: resolves and pins it as the
//!    user (`MountPoint::resolve`), refuses it unless plugstack.conf
//!    allows the resolved directory, and as root binds the image fd to a
//!    read-only autoclear loop device and mounts it ro,nosuid,nodev
//!    (`instance::fresh` + `mount::attach`);
//!    d. opens its namespace as an fd and ends. The thread's credentials end
//!    with it; slurmstepd's threads never changed ids or namespace.
//! 2. [`enter_namespace`] (from `slurm_spank_task_init_privileged`, in each
//!    forked task: single-threaded, still root) joins that namespace with
//!    setns and sets no_new_privs; Slurm then makes the task the user and
//!    execs it. All tasks of the step on a node share one namespace, one
//!    loop device and one squashfs superblock per image.
//!
//! Assumption: while the worker runs, no other slurmstepd thread calls a
//! glibc set*id function (glibc would replay it on every thread, the
//! worker included). slurmstepd changes ids only on its main thread, which
//! is blocked in this callback until the worker has ended.
//!
//! slurmstepd itself stays in the host's namespace. The forked task runs
//! Slurm's root code in the job's namespace only between joining it and
//! becoming the user (setgroups/initgroups, chdir), which is why only
//! allow-listed mount points (nothing under /etc, /lib, /usr...) are allowed.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::marker::PhantomData;
use std::os::fd::{BorrowedFd, OwnedFd};

use squashfs_mount::cli::MountRequest;
use squashfs_mount::environment;
use squashfs_mount::error::Failure;
use squashfs_mount::image::{self, Image};
use squashfs_mount::instance;
use squashfs_mount::loopdev::LoopOptions;
use squashfs_mount::mount;
use squashfs_mount::mountpoint::MountPoint;
use squashfs_mount::paths;
use squashfs_mount::privilege::ActingAsCaller;
use squashfs_mount::system::{self, Gid, Uid};

use crate::config::{display, Config};
use crate::request;

/// The job's user, as Slurm reports it (S_JOB_UID, S_JOB_GID,
/// S_JOB_SUPPLEMENTARY_GIDS).
#[derive(Clone, Debug)]
pub struct JobUser {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The step's mounts, ready for the tasks.
#[derive(Debug)]
pub struct Prepared {
    /// The step's mount namespace (keeps it and its mounts alive).
    pub namespace: OwnedFd,
    /// `UENV_MOUNT_LIST` for the tasks.
    pub mount_list: OsString,
}

/// Mounts `requests` in a new mount namespace for the step; see the module
/// documentation. Runs the work on a worker thread and waits for it.
pub fn prepare(user: JobUser, requests: Vec<MountRequest>, config: Config) -> Result<Prepared, Failure> {
    let worker = std::thread::Builder::new()
        .name("squashfs-mount".into())
        // Explicit, so std does not consult RUST_MIN_STACK in slurmstepd's
        // environment.
        .stack_size(2 << 20)
        .spawn(move || on_worker_thread(&user, &requests, &config))
        .map_err(|e| Failure::new(format!("cannot start a thread in slurmstepd: {e}")))?;
    match worker.join() {
        Ok(result) => result,
        Err(_) => Err(Failure::new("internal error while mounting (the worker thread panicked); please report it")),
    }
}

/// Proof that the *current thread's* effective uid, gid and groups are the
/// job user's; `as_root` borrows it mutably, so no `&ThreadAsUser` exists
/// while the thread is root. Not `Send`: it describes one thread.
struct ThreadAsUser<'a> {
    user: &'a JobUser,
    root_groups: Vec<Gid>,
    _this_thread_only: PhantomData<*const ()>,
}

impl ActingAsCaller for ThreadAsUser<'_> {}

fn gids(list: &[u32]) -> Vec<Gid> {
    list.iter().map(|&g| Gid::from_raw(g)).collect()
}

impl<'a> ThreadAsUser<'a> {
    /// Switches this thread (and only it) to the user's effective ids.
    fn switch(user: &'a JobUser) -> Result<Self, Failure> {
        let root_groups = system::supplementary_groups()
            .map_err(|e| Failure::new(format!("getgroups failed: {e}")))?;
        let me = ThreadAsUser { user, root_groups, _this_thread_only: PhantomData };
        me.become_user()?;
        Ok(me)
    }

    fn become_user(&self) -> Result<(), Failure> {
        let sys = |what: &str, r: Result<(), system::Error>| {
            r.map_err(|e| Failure::new(format!("cannot take the job user's credentials ({what}): {e}")))
        };
        // Groups and gid first: once the effective uid is not 0 they can no
        // longer be changed.
        sys("setgroups", system::set_groups(&gids(&self.user.groups)))?;
        sys("setresgid", system::set_effective_gid(Gid::from_raw(self.user.gid)))?;
        sys("setresuid", system::set_effective_uid(Uid::from_raw(self.user.uid)))?;
        // Verify rather than trust: the effective ids are the user's and, for
        // a non-root user, no capability is effective.
        let (_, euid, _) = system::res_uid().map_err(|e| Failure::new(format!("getresuid failed: {e}")))?;
        let (_, egid, _) = system::res_gid().map_err(|e| Failure::new(format!("getresgid failed: {e}")))?;
        if euid != self.user.uid || egid != self.user.gid {
            return Err(Failure::new("the job user's credentials did not take effect; refusing to open images"));
        }
        if self.user.uid != 0 {
            let none = system::effective_capabilities_empty()
                .map_err(|e| Failure::new(format!("capget failed: {e}")))?;
            if !none {
                return Err(Failure::new("capabilities remain effective as the job user; refusing to open images"));
            }
        }
        Ok(())
    }

    /// Runs `f` as root on this thread, then returns to the user's ids.
    fn as_root<T>(&mut self, f: impl FnOnce() -> T) -> Result<T, Failure> {
        let sys = |what: &str, r: Result<(), system::Error>| {
            r.map_err(|e| Failure::new(format!("cannot return to root ({what}): {e}")))
        };
        sys("setresuid", system::set_effective_uid(Uid::ROOT))?;
        sys("setresgid", system::set_effective_gid(Gid::ROOT))?;
        sys("setgroups", system::set_groups(&self.root_groups))?;
        let out = f();
        // If this fails the worker returns the error and ends: its
        // credentials end with it.
        self.become_user()?;
        Ok(out)
    }
}

fn on_worker_thread(user: &JobUser, requests: &[MountRequest], config: &Config) -> Result<Prepared, Failure> {
    let mut creds = ThreadAsUser::switch(user)?;

    // a. Images, as the user.
    let kernel_config = image::kernel_config();
    let mut images: Vec<Image> = Vec::with_capacity(requests.len());
    for req in requests {
        let subject = req.describe();
        // `request::parse` builds plain pairs only: exactly one image each.
        let [given] = req.images.as_slice() else {
            return Err(Failure::about(&subject, "unions are not supported by the Slurm plugin"));
        };
        let img = Image::open(&creds, given, &subject)?;
        img.check_kernel_support(kernel_config.as_ref(), &subject)?;
        img.check_loop_fit(&subject)?;
        images.push(img);
    }

    // b. This thread's own mount namespace.
    creds
        .as_root(system::enter_private_mount_namespace_of_thread)?
        .map_err(|e| Failure::new(format!("cannot create a private mount namespace: {e}")))?;

    // c. Mount points in path order (parents first).
    let keys: Vec<OsString> =
        requests.iter().map(|r| paths::absolute(OsStr::new("/"), &r.mount_point)).collect();
    let mut mounted: Vec<(OsString, OsString)> = Vec::new();
    let mut seen = HashSet::new();
    for i in paths::mount_order(&keys) {
        let (Some(req), Some(img)) = (requests.get(i), images.get(i)) else { continue };
        let subject = req.describe();
        let target = MountPoint::resolve(&creds, &req.mount_point, &subject)?;
        if !config.allows(&target.real) {
            return Err(Failure::new(request::not_allowed(&subject, &target.real, config)));
        }
        if !seen.insert(target.real.clone()) {
            return Err(Failure::about(
                &subject,
                format!("the mount point resolves to {}, which is already a mount point of this step", display(&target.real)),
            ));
        }
        creds.as_root(|| -> Result<(), Failure> {
            let tree = instance::fresh(img, LoopOptions::default(), &subject)?;
            mount::attach(&tree, &target, &subject)
        })??;
        mounted.push((img.path.clone(), target.real.clone()));
    }

    // d. The namespace, kept by fd once this thread is gone.
    let namespace = creds
        .as_root(system::open_thread_mount_namespace)?
        .map_err(|e| Failure::new(format!("cannot open the step's mount namespace: {e}")))?;
    let mount_list = environment::mount_list(mounted.iter().map(|(i, m)| (i.as_os_str(), m.as_os_str())));
    Ok(Prepared { namespace, mount_list })
}

/// In a forked task (single-threaded, root): joins the step's namespace and
/// sets no_new_privs, which the task keeps through Slurm's switch to the
/// user and exec.
pub fn enter_namespace(namespace: BorrowedFd<'_>) -> Result<(), Failure> {
    system::join_mount_namespace(namespace)
        .map_err(|e| Failure::new(format!("cannot join the step's mount namespace: {e}")))?;
    system::set_no_new_privs().map_err(|e| Failure::new(format!("prctl(PR_SET_NO_NEW_PRIVS) failed: {e}")))
}

