//! What each SPANK callback does, in Rust terms (exports.rs converts).
//!
//! | callback             | srun (local) / sbatch, salloc (allocator)  | slurmstepd (remote)                          |
//! |----------------------|--------------------------------------------|----------------------------------------------|
//! | init                 | read plugstack args; register --squashfs   | same                                         |
//! | (option callback)    | remember the value                         | remember the value (passed on by Slurm)      |
//! | init_post_opt        | check syntax, allow-list, open the images  | mount on a worker thread (remote.rs); export |
//! |                      | as the user; refuse the job on error       | UENV_MOUNT_LIST; keep an error for the tasks |
//! | task_init_privileged | -                                          | join the namespace, no_new_privs; or report  |
//! |                      |                                            | the step's error and fail the task           |
//! | task_init            | -                                          | with a kept layer (--squashfs-writable=DIR): |
//! |                      |                                            | join its user and mount namespaces, as the   |
//! |                      |                                            | job user                                     |
//! | exit                 | -                                          | kill the step's uncached FUSE servers; close |
//! |                      |                                            | the namespace fd                             |
//! | job_epilog (slurmd)  | -                                          | evict the user's unused cached FUSE          |
//! |                      |                                            | instances on the node (their servers end)    |
//!
//! Why errors wait for the tasks: a failing `init_post_opt` in slurmstepd
//! reaches the user only as "launch failed: Plugin initialization failed",
//! without the plugin's message; in `task_init_privileged` the message
//! reaches the user's terminal (or the batch job's error file) and the task
//! exits with 1 (measured with Slurm 22.05).

use std::convert::Infallible;
use std::ffi::{c_int, OsStr};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, Once, OnceLock};

use crate::abi::SLURM_EXTERN_CONT;
use crate::config::{self, Config};
use crate::local;
use crate::remote::{self, Prepared};
use crate::request::{self, Given};
use crate::spank_api::{self, Context, Spank};
use squashfs_mount::{Caller, Uid};

const PREFIX: &str = "squashfs-mount";

/// plugstack.conf arguments (init).
static CONFIG: OnceLock<Config> = OnceLock::new();
/// The values Slurm handed to the option callbacks.
static GIVEN: Mutex<Given> = Mutex::new(Given {
    pairs: None,
    unions: None,
    writable: None,
    session: None,
    source: request::Source::Options,
    binds: None,
    mutable_root: None,
});
/// The step's outcome in slurmstepd (remote init_post_opt), read by the
/// forked tasks. Only plugin callbacks on slurmstepd's main thread touch it,
/// never concurrently with a fork, so the lock is free in every child.
static STEP: Mutex<Step> = Mutex::new(Step::Nothing);

enum Step {
    /// No --squashfs for this step.
    Nothing,
    Ready(Prepared),
    /// Reported to the user by every task of the step.
    Failed(String),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic was caught while it was held; the
    // data (plain values) is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn report(msg: impl std::fmt::Display) {
    spank_api::error(&format!("{PREFIX}: {msg}"));
}

/// A panic prints nothing by itself (the default hook would read
/// RUST_BACKTRACE from slurmstepd's environment and write to its stderr);
/// it goes to Slurm's log, and the callback returns -1 (spank_api::boundary).
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            spank_api::error(&format!("{PREFIX}: internal error{at}"));
        }))
    });
}

/// `register_options` registers the --squashfs* options with Slurm (the
/// table lives with the exported callbacks).
pub fn init(
    _spank: &Spank,
    args: &[Vec<u8>],
    register_options: impl FnOnce() -> Result<(), std::ffi::c_int>,
) -> Result<(), ()> {
    if cfg!(not(panic = "unwind")) {
        // A panic would abort srun or slurmstepd: refuse to run at all.
        report("this build of spank_squashfs_mount.so aborts on a panic, which would kill slurmstepd; rebuild it with 'make build' (cargo build --profile spank) and reinstall it");
        return Err(());
    }
    install_panic_hook();
    let ctx = spank_api::context();
    let config = config::parse(args).map_err(report)?;
    let _ = CONFIG.set(config);
    if matches!(ctx, Context::Local | Context::Allocator | Context::Remote) {
        register_options().map_err(|rc| {
            report(format!(
                "cannot register the --{}* options (spank error {rc})",
                request::OPTION
            ))
        })?;
    }
    Ok(())
}

/// Which of the plugin's job options (`--squashfs*`) a callback is for
/// (its `val` in exports.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobOption {
    Pairs,
    Unions,
    Writable,
    Bind,
    MutableRoot,
}

pub fn option_given(which: JobOption, value: Vec<u8>, _remote: bool) -> Result<(), ()> {
    let mut g = lock(&GIVEN);
    match which {
        JobOption::Pairs => g.pairs = Some(value),
        JobOption::Unions => g.unions = Some(value),
        JobOption::Writable => g.writable = Some(value),
        // As for the others, the last value given counts: Slurm passes
        // one value of an option to slurmstepd (and calls the callback
        // there more than once), so a list goes in one option.
        JobOption::Bind => g.binds = Some(value),
        JobOption::MutableRoot => g.mutable_root = Some(value),
    }
    Ok(())
}

fn config() -> Config {
    CONFIG.get().cloned().unwrap_or_default()
}

pub fn init_post_opt(spank: &Spank) -> Result<(), ()> {
    match spank_api::context() {
        Context::Local | Context::Allocator => local_check(),
        Context::Remote => {
            let outcome = remote_prepare(spank);
            *lock(&STEP) = outcome;
            Ok(())
        }
        Context::Other => Ok(()),
    }
}

/// The images by precedence (request.rs): the options given, else the
/// variables, else the session's `UENV_MOUNT_LIST` (read with `get`).
fn given<E>(get: impl Fn(&str) -> Result<Option<Vec<u8>>, E>) -> Result<Given, E> {
    lock(&GIVEN).clone().resolve(get)
}

/// An error, naming where the images came from unless the options did.
fn from_source(source: request::Source, e: impl std::fmt::Display) -> String {
    match source {
        request::Source::Options => e.to_string(),
        s => format!("{e} (from {})", s.describe()),
    }
}

/// srun/sbatch/salloc: the options or their variables, checked before the
/// job is queued. These are the user's own processes: reading their
/// environment is reading the user's input, nothing privileged.
fn local_check() -> Result<(), ()> {
    let g =
        given(|name| Ok::<_, Infallible>(std::env::var_os(name).map(|v| v.as_bytes().to_vec())))
            .map_err(report)?;
    if g.is_empty() && g.writable.is_none() {
        return Ok(());
    }
    let req = request::parse(&g).map_err(|e| report(from_source(g.source, e)))?;
    local::validate(&req, &remote::front_end(&config()))
        .map_err(|e| report(from_source(g.source, e)))
}

/// slurmstepd: mount for this step, or remember why not.
fn remote_prepare(spank: &Spank) -> Step {
    let g = match given(|name| {
        spank
            .getenv(name)
            .map_err(|rc| StepError::Unreadable(name.to_string(), rc))
    }) {
        Ok(g) => g,
        Err(e) => return Step::Failed(e.to_string()),
    };
    if g.is_empty() && g.writable.is_none() {
        return Step::Nothing;
    }
    // The extern step (PrologFlags=contain) runs no tasks.
    if spank.step_id() == Some(SLURM_EXTERN_CONT) {
        return Step::Nothing;
    }
    let req = match request::parse(&g) {
        Ok(r) => r,
        Err(e) => return Step::Failed(from_source(g.source, e)),
    };
    let user = match job_user(spank) {
        Ok(u) => u,
        Err(e) => return Step::Failed(e.to_string()),
    };
    let server = squashfs_mount::server_for_plugin();
    match remote::prepare(user, req, config(), server) {
        Ok(prepared) => {
            if let Err(rc) = spank.setenv("UENV_MOUNT_LIST", prepared.mount_list.as_bytes()) {
                return Step::Failed(StepError::Unsettable("UENV_MOUNT_LIST", rc).to_string());
            }
            spank_api::verbose(&format!(
                "{PREFIX}: mounted {}",
                OsStr::new(&prepared.mount_list).to_string_lossy()
            ));
            for note in &prepared.notes {
                spank_api::verbose(&format!("{PREFIX}: {note}"));
            }
            // What the kept layer's copies could not copy (README).
            for warning in prepared.layer.iter().flat_map(|l| &l.warnings) {
                spank_api::info(&format!("{PREFIX}: warning: {warning}"));
            }
            Step::Ready(prepared)
        }
        Err(e) => {
            // For the admin's log now; for the user from the tasks.
            let e = from_source(g.source, e);
            spank_api::info(&format!("{PREFIX}: {e}"));
            Step::Failed(e)
        }
    }
}

/// Why slurmstepd cannot prepare the step (besides the request's and the
/// engine's own refusals).
#[derive(Debug)]
enum StepError {
    /// A variable of the job's environment could not be read.
    Unreadable(String, c_int),
    /// A variable could not be set in the job's environment.
    Unsettable(&'static str, c_int),
    /// Slurm did not say who the job's user is.
    NoJobUser,
    /// Slurm named a uid or gid of -1.
    InvalidJobUser,
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Unreadable(name, rc) => write!(
                f,
                "cannot read ${name} from the job's environment (spank error {rc})"
            ),
            StepError::Unsettable(name, rc) => write!(
                f,
                "cannot set {name} in the job's environment (spank error {rc})"
            ),
            StepError::NoJobUser => write!(
                f,
                "Slurm did not tell the job's uid, gid and groups; refusing to open images"
            ),
            StepError::InvalidJobUser => write!(
                f,
                "invalid uid or gid for the job's user; refusing to open images"
            ),
        }
    }
}

/// The job's user, as Slurm reports it (S_JOB_UID, S_JOB_GID,
/// S_JOB_SUPPLEMENTARY_GIDS).
fn job_user(spank: &Spank) -> Result<Caller, StepError> {
    let (Some(uid), Some(gid), Some(groups)) =
        (spank.uid(), spank.gid(), spank.supplementary_groups())
    else {
        return Err(StepError::NoJobUser);
    };
    // -1 means "leave unchanged" to the set*id calls: never a user.
    Caller::checked(uid, gid, &groups).ok_or(StepError::InvalidJobUser)
}

/// In each forked task (root, single-threaded), before Slurm drops to the
/// user and execs the task.
pub fn task_init_privileged(spank: &Spank) -> Result<(), ()> {
    if spank_api::context() != Context::Remote {
        return Ok(());
    }
    let step = lock(&STEP);
    match &*step {
        Step::Nothing => Ok(()),
        Step::Failed(msg) => {
            // Once per node is enough to read it; every task still fails.
            if spank.task_id().unwrap_or(0) == 0 {
                report(msg);
            }
            Err(())
        }
        Step::Ready(prepared) => {
            remote::enter_namespace(prepared.namespace.as_fd()).map_err(report)
        }
    }
}

/// In each task, once Slurm made it the job user, just before its exec:
/// with `--squashfs-writable=DIR`, joins the step's user and mount
/// namespaces, where the job user's helper stacked the layer.
pub fn task_init(spank: &Spank) -> Result<(), ()> {
    if spank_api::context() != Context::Remote {
        return Ok(());
    }
    let step = lock(&STEP);
    match &*step {
        Step::Ready(Prepared {
            layer: Some(layer), ..
        }) => remote::enter_layer(layer).map_err(|e| {
            if spank.task_id().unwrap_or(0) == 0 {
                report(e);
            }
        }),
        _ => Ok(()),
    }
}

pub fn exit(_spank: &Spank) -> Result<(), ()> {
    if spank_api::context() == Context::Remote {
        // The step's FUSE servers go now; closing the namespace fd lets the
        // namespace, its mounts and the autoclear loop devices go as soon
        // as the last task has exited.
        if let Step::Ready(prepared) = std::mem::replace(&mut *lock(&STEP), Step::Nothing) {
            prepared.end();
        }
    }
    Ok(())
}

/// The job has ended on this node (job epilog, root): the user's cached
/// FUSE instances that no other job uses are evicted, and their servers
/// end with them. Failing here would drain the node: problems are logged.
pub fn job_epilog(spank: &Spank) -> Result<(), ()> {
    // -1 is no user (Uid::checked): nothing of theirs to evict.
    let Some(uid) = spank.uid().and_then(Uid::checked) else {
        return Ok(());
    };
    if let Err(e) = remote::job_end(uid) {
        report(format_args!("after the job: {e}"));
    }
    Ok(())
}
