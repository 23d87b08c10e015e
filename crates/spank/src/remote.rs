//! Remote context (slurmstepd, once per job step on each node): mounting,
//! with squashfs-mount's one privileged sequence (`engine::mount_all`).
//!
//! slurmstepd is multi-threaded when SPANK calls the plugin (measured on
//! Slurm 22.05: 3 threads in `init_post_opt`, 4 in `user_init`), so nothing
//! here may change credentials or namespaces of the whole process. Instead:
//!
//! 1. [`prepare`] (from `slurm_spank_init_post_opt`, as root) starts one
//!    worker thread and waits for it. The worker, alone, takes the job
//!    user's credentials (`ThreadCredentials`: per-thread system calls and
//!    its own fs_struct), runs `engine::mount_all` exactly as the setuid
//!    command does (same plan, policy, image cache, FUSE path, unions,
//!    writable layer, refusals and messages), with the plugin's extra rules
//!    (absolute paths; only allow-listed mount points), then opens its
//!    mount namespace as an fd and ends. Its credentials end with it.
//! 2. [`enter_namespace`] (from `slurm_spank_task_init_privileged`, in each
//!    forked task: single-threaded, still root) joins that namespace with
//!    setns and sets no_new_privs; Slurm then makes the task the user and
//!    execs it. All tasks of the step on a node share one namespace.
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

use std::ffi::OsString;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use squashfs_mount::{
    Caller, Context, Credentials, Failure, FrontEnd, FuseServer, PrivilegeError, RootPhase,
    RunRequest, Start, StepLayer, System, SystemError, ThreadCredentials, Uid, WorkingDir,
};

use crate::config::Config;

/// What the plugin could not do in slurmstepd around the engine.
#[derive(Debug)]
pub enum StepError {
    Thread(std::io::Error),
    /// The worker thread stopped (a panic).
    WorkerStopped,
    OpenNamespace(SystemError),
    JoinNamespace(SystemError),
    /// A task could not join the step's writable layer.
    JoinLayer(SystemError),
    /// A task kept capabilities of the step's user namespace.
    LayerCapabilities,
    /// The job epilog's thread could not have a fs_struct of its own.
    EpilogFs(SystemError),
    /// The job epilog's thread could not start, or stopped (a panic).
    EpilogThread(Option<std::io::Error>),
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepError::Thread(e) => write!(f, "cannot start a thread in slurmstepd: {e}"),
            StepError::WorkerStopped => f.write_str(
                "internal error while mounting (the worker thread stopped); please report it",
            ),
            StepError::OpenNamespace(e) => {
                write!(f, "cannot open the step's mount namespace: {e}")
            }
            StepError::JoinNamespace(e) => {
                write!(f, "cannot join the step's mount namespace: {e}")
            }
            StepError::JoinLayer(e) => write!(
                f,
                "cannot join the step's writable layer (user and mount namespaces): {e}"
            ),
            StepError::LayerCapabilities => {
                f.write_str("cannot drop the capabilities of the step's user namespace")
            }
            StepError::EpilogFs(e) => write!(f, "unshare(CLONE_FS): {e}"),
            StepError::EpilogThread(Some(e)) => write!(f, "cannot start a thread: {e}"),
            StepError::EpilogThread(None) => f.write_str("the job epilog's thread stopped"),
        }
    }
}

impl std::error::Error for StepError {}

/// The step's mounts, ready for the tasks.
#[derive(Debug)]
pub struct Prepared {
    /// The step's mount namespace (keeps it and its mounts alive).
    pub namespace: OwnedFd,
    /// `UENV_MOUNT_LIST` for the tasks.
    pub mount_list: OsString,
    /// Pidfds of the FUSE servers started for the step.
    pub servers: Vec<OwnedFd>,
    /// What was done for each image, bind and `-r` directory (the
    /// command's `--verbose` lines), for Slurm's log.
    pub notes: Vec<String>,
    /// `--squashfs-writable=DIR`: the user and mount namespaces the job
    /// user's helper stacked the layer in (each task joins them once it is
    /// the job user) and DIR's lock, held until the step ends.
    pub layer: Option<StepLayer>,
}

impl Prepared {
    /// The step is over: its FUSE servers are killed, whatever the tasks
    /// did to them. A server normally exits by itself once the step's
    /// namespace is gone, but one a task stopped (SIGSTOP) cannot, and it
    /// is no process of the step for Slurm's process tracking where that
    /// follows parents (proctrack/linuxproc: the server's parent exited,
    /// it belongs to PID 1). Dropping the value then closes the namespace
    /// fd: the namespace, its mounts and the autoclear loop devices go
    /// with the last task.
    pub fn end(self) {
        for server in &self.servers {
            let _ = squashfs_mount::kill_by_pidfd(server.as_fd());
        }
    }
}

/// The plugin's rules for the engine.
pub fn front_end(config: &Config) -> FrontEnd {
    FrontEnd {
        require_absolute: true,
        mount_points: config.mount_points.clone().into(),
        mount_points_source: "mountpoints= in plugstack.conf",
        refuse_mutable_root: (!config.mutable_root).then_some(
            "--squashfs-mutable-root is not allowed on this cluster (mutable-root=yes in plugstack.conf allows it); ask the administrators to create the mount point on the nodes",
        ),
        mutable_root_option: Some("--squashfs-mutable-root (where the cluster allows it)"),
        // The plugin's `cache=no` turns the cache off for its steps.
        cache_off: !config.cache,
    }
}

/// Mounts what `request` asks for in a new mount namespace for the step;
/// see the module documentation. Runs the work on a worker thread and waits
/// for it.
pub fn prepare(
    user: Caller,
    request: RunRequest,
    config: Config,
    fuse_server: Option<OsString>,
) -> Result<Prepared, Failure> {
    let worker = std::thread::Builder::new()
        .name("squashfs-mount".into())
        // Explicit, so std does not consult RUST_MIN_STACK in slurmstepd's
        // environment.
        .stack_size(2 << 20)
        .spawn(move || on_worker_thread(user, &request, &config, fuse_server))
        .map_err(|e| Failure::new(StepError::Thread(e)))?;
    match worker.join() {
        Ok(result) => result,
        Err(_) => Err(Failure::new(StepError::WorkerStopped)),
    }
}

fn on_worker_thread(
    user: Caller,
    request: &RunRequest,
    config: &Config,
    fuse_server: Option<OsString>,
) -> Result<Prepared, Failure> {
    let phase = RootPhase::mounts(request.writable.is_some(), request.mutable_root);
    let mut creds = ThreadCredentials::switch(user.clone(), phase)?;
    // The site's configuration and admission apply to jobs as to the
    // command (the engine's first stage).
    let front = front_end(config);
    let ctx = Context {
        front: &front,
        cwd: WorkingDir::At(OsString::from("/")),
        fuse_server: FuseServer::At(fuse_server),
        // slurmstepd's limits are the node's, not raised by the plugin.
        caller_limits: None,
    };
    let mounted = squashfs_mount::mount_all(&mut creds, &mut System::default(), request, &ctx)?;
    // The namespace, kept by fd once this thread is gone.
    let namespace = creds
        .as_root(|_root| squashfs_mount::open_thread_mount_namespace())?
        .map_err(|e| Failure::new(StepError::OpenNamespace(e)))?;
    let layer = match &mounted.layer {
        Some(kept) => Some(start_layer(&mut creds, kept, &user)?),
        None => None,
    };
    Ok(Prepared {
        namespace,
        layer,
        mount_list: mounted.mount_list,
        servers: mounted.servers,
        notes: mounted
            .notes
            .into_iter()
            .filter(|(level, _)| *level == 1)
            .map(|(_, note)| note)
            .collect(),
    })
}

/// `--squashfs-writable=DIR`: the caller's stage (`squashfs_mount::layer`)
/// runs in `squashfs-mount-layer`, started from this thread (in the step's
/// mount namespace) as the job user, with nothing of slurmstepd's: it
/// makes a user namespace of the job user's with a mount namespace,
/// stacks the layer there and hands over fds of both and of DIR's lock.
fn start_layer(
    creds: &mut ThreadCredentials,
    kept: &squashfs_mount::Kept,
    user: &Caller,
) -> Result<StepLayer, Failure> {
    creds.as_root(|root| squashfs_mount::start_layer(kept, Start::ForStep { root, user }))?
}

/// In a task, once Slurm made it the job user (`slurm_spank_task_init`):
/// joins the step's user namespace (the job user owns it: no privilege is
/// needed, none is gained outside it) and the mount namespace with the
/// layer, goes back to its working directory by path, and drops the
/// capabilities joining gave it inside the user namespace (no_new_privs is
/// set since `enter_namespace`; the exec would drop them anyway).
pub fn enter_layer(layer: &StepLayer) -> Result<(), Failure> {
    let cwd = squashfs_mount::current_dir().ok();
    squashfs_mount::join_user_and_mount_namespaces(layer.user.as_fd(), layer.mnt.as_fd())
        .map_err(|e| Failure::new(StepError::JoinLayer(e)))?;
    if let Some(cwd) = cwd {
        if squashfs_mount::change_dir(&cwd).is_err() {
            let _ = squashfs_mount::change_dir(std::ffi::OsStr::new("/"));
        }
    }
    squashfs_mount::clear_capabilities()
        .and_then(|()| squashfs_mount::has_no_capabilities())
        .ok()
        .filter(|&none| none)
        .map(drop)
        .ok_or_else(|| Failure::new(StepError::LayerCapabilities))
}

/// In a forked task (single-threaded, root): joins the step's namespace and
/// sets no_new_privs, which the task keeps through Slurm's switch to the
/// user and exec.
pub fn enter_namespace(namespace: BorrowedFd<'_>) -> Result<(), Failure> {
    squashfs_mount::join_mount_namespace(namespace)
        .map_err(|e| Failure::new(StepError::JoinNamespace(e)))?;
    squashfs_mount::set_no_new_privs()
        .map_err(|e| Failure::new(PrivilegeError::Syscall("prctl(PR_SET_NO_NEW_PRIVS)", e)))
}

/// After a job of `uid` on this node: its unused cached FUSE instances go
/// (`commands::job_epilog`), on a thread of its own (the cache's namespace
/// is visited with a fs_struct of the thread's own, and the thread keeps
/// only the capabilities that takes).
pub fn job_end(uid: Uid) -> Result<usize, Failure> {
    let worker = std::thread::Builder::new()
        .name("squashfs-mount".into())
        .stack_size(2 << 20)
        .spawn(move || {
            squashfs_mount::unshare_fs_of_thread()
                .map_err(|e| Failure::new(StepError::EpilogFs(e)))?;
            squashfs_mount::job_epilog(uid)
        })
        .map_err(|e| Failure::new(StepError::EpilogThread(Some(e))))?;
    worker
        .join()
        .unwrap_or_else(|_| Err(Failure::new(StepError::EpilogThread(None))))
}
