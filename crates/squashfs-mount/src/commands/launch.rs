//! The setuid command's front end: privileges and resource limits around
//! the one privileged sequence (`engine::mount_all`, which admits the
//! caller first), then the drop of every privilege. Rootless when the
//! binary is not setuid root.

use std::ffi::OsString;
use std::fmt;

use crate::cli::RunRequest;
use crate::engine::{self, Context, FrontEnd, FuseServer, System, WorkingDir};
use crate::join::{self, JoinError};
use crate::layer;
use crate::privilege::{Caller, Credentials, PrivilegeError, Privileges, RootPhase, Rootless};
use crate::system;
use crate::system::error::{self, Failure};

/// What the setuid command's front end could not do.
#[derive(Debug)]
pub enum LaunchError {
    RaiseLimits(system::Error),
    RestoreLimits(system::Error),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::RaiseLimits(e) => write!(f, "cannot set resource limits: {e}"),
            LaunchError::RestoreLimits(e) => write!(f, "cannot restore resource limits: {e}"),
        }
    }
}

crate::error_kind!(LaunchError);

/// What is left to do once privileges are gone: run the command.
#[derive(Debug)]
pub struct Ready {
    pub command: Vec<OsString>,
    /// `UENV_MOUNT_LIST` for the command, when anything was mounted.
    pub mount_list: Option<OsString>,
    /// The caller's signal dispositions, to give back before exec.
    pub signals: system::CallerSignals,
    /// The caller's umask and scheduling (setuid: replaced for the root
    /// phase), to give back before exec.
    pub process: Option<system::CallerProcessState>,
    /// `--writable=DIR`: the helper to execute instead of the command, and
    /// what it stacks (`layer::start`); it becomes the command.
    pub layer: Option<layer::Kept>,
}

impl Ready {
    /// `request`'s command, seeing what `mount_list` names (None: nothing
    /// was mounted), with the caller's signal dispositions as they are and
    /// `process` given back.
    fn new(
        request: &RunRequest,
        mount_list: Option<OsString>,
        process: Option<system::CallerProcessState>,
    ) -> Ready {
        Ready {
            command: request.command.clone(),
            mount_list,
            signals: system::CallerSignals::unchanged(),
            process,
            layer: None,
        }
    }
}

/// Whether `request` mounts nothing at all: the command then runs as the
/// C tool runs it, without a namespace. A kept layer (`--writable=DIR`)
/// without images is not such a request: the sequence's plan refuses it,
/// for every front end.
fn mounts_nothing(request: &RunRequest) -> bool {
    request.mounts.is_empty() && request.binds.is_empty() && request.layer_dir.is_none()
}

/// Mounts what `request` asks for in a private mount namespace and drops
/// every privilege for good. On return the process holds only the caller's
/// credentials (verified), no_new_privs is set, and the caller's resource
/// limits are back.
pub(crate) fn run(request: &RunRequest) -> Result<Ready, Failure> {
    let nothing_to_mount = mounts_nothing(request);
    let phase = match nothing_to_mount {
        true => RootPhase::IDS,
        false => RootPhase::mounts(request.writable.is_some(), request.mutable_root).with_limits(),
    };
    let privileges = match Privileges::acquire(phase) {
        Ok(p) => p,
        Err(PrivilegeError::NotSetuidRoot) => return rootless(request),
        Err(PrivilegeError::InsideSession) if request.join => {
            return Err(JoinError::AlreadyRunning.into())
        }
        Err(e) => return Err(e.into()),
    };
    if request.join && !nothing_to_mount {
        // Whether this task leads: the one thing read from the caller's
        // environment before the drop (acting as the caller). A task that
        // does not lead does nothing as root but ask the site's policy.
        let step = join_step(request)?;
        if !step.leads() {
            return setuid_follower(privileges, request, &step);
        }
    }
    if nothing_to_mount {
        // Nothing to mount: run the command as the C tool does, without a
        // namespace, but without privileges (and with no_new_privs).
        let (_, process) = privileges.drop_for_good()?;
        return Ok(Ready::new(request, None, Some(process)));
    }
    setuid(privileges, request)
}

fn setuid(mut privileges: Privileges, request: &RunRequest) -> Result<Ready, Failure> {
    // A caller's lowered limits must not stop the privileged phase half-way.
    let signals = system::ignore_file_size_signal();
    let limits = privileges
        .as_root(|_root| system::rlimits::raise_for_privileged_phase())?
        .map_err(LaunchError::RaiseLimits)?;
    let ctx = Context {
        front: &FrontEnd::default(),
        cwd: WorkingDir::Current,
        fuse_server: FuseServer::NextToProgram,
        caller_limits: Some(&limits),
    };
    let mut mounted = engine::mount_all(
        &mut privileges,
        &mut System::out_of_session(),
        request,
        &ctx,
    )?;
    privileges
        .as_root(|_root| limits.restore())?
        .map_err(LaunchError::RestoreLimits)?;
    drop(mounted.slot.take());
    // Verified inside (ids, groups, capabilities, root not regainable).
    let (_, process) = privileges.drop_for_good()?;
    let mut ready = mounted_ready(request, mounted, signals);
    ready.process = Some(process);
    if request.join {
        // The leading task (the others never mount: `setuid_follower`).
        let step = join_step(request)?;
        join::lead(&step, ready.mount_list.as_deref().unwrap_or_default(), true)?;
    }
    Ok(ready)
}

/// `--join` with the setuid program, a task that does not lead: it mounts
/// nothing (what it would mount the leading task has mounted, and its own
/// would be thrown away). Once the site's policy admits the caller, every
/// privilege is dropped and the task joins the leading task's namespaces:
/// the command sees the leader's mounts, and `UENV_MOUNT_LIST` names them.
fn setuid_follower(
    mut privileges: Privileges,
    request: &RunRequest,
    step: &join::SlurmStep,
) -> Result<Ready, Failure> {
    let settings = privileges.as_root(|_root| crate::config::load())?;
    settings.policy.admits(privileges.caller())?;
    let (caller, process) = privileges.drop_for_good()?;
    let joined = join::follow(step, caller.uid)?;
    if request.verbose > 0 || settings.verbose {
        error::report(join_note(&joined));
    }
    Ok(Ready::new(request, Some(joined.mount_list), Some(process)))
}

/// `--join`: the Slurm step of this task, from the caller's environment
/// (read as the caller only).
fn join_step(request: &RunRequest) -> Result<join::SlurmStep, JoinError> {
    if request.layer_dir.is_some() {
        return Err(JoinError::WithLayerDir);
    }
    join::SlurmStep::from_env(|name| std::env::var_os(name))
}

/// Not setuid root: the same command line in a user namespace of its own.
fn rootless(request: &RunRequest) -> Result<Ready, Failure> {
    if mounts_nothing(request) {
        system::set_no_new_privs()
            .map_err(|e| PrivilegeError::Syscall("prctl(PR_SET_NO_NEW_PRIVS)", e))?;
        return Ok(Ready::new(request, None, None));
    }
    // Not privileged at all: the caller's PATH may say where the FUSE
    // server is (the setuid command never reads it).
    let path = std::env::var_os("PATH");
    let step = match request.join {
        true if std::env::var_os("UENV_MOUNT_LIST").is_some_and(|l| !l.is_empty()) => {
            return Err(JoinError::AlreadyRunning.into())
        }
        true => Some(join_step(request)?),
        false => None,
    };
    if let Some(step) = step.as_ref().filter(|s| !s.leads()) {
        return rootless_follower(request, step);
    }
    let mut creds = Rootless::new()?;
    let ctx = Context {
        front: &FrontEnd::default(),
        cwd: WorkingDir::Current,
        fuse_server: FuseServer::Search { path },
        caller_limits: None,
    };
    let mounted = engine::mount_all(&mut creds, &mut System::default(), request, &ctx)?;
    creds.finish()?;
    let ready = mounted_ready(request, mounted, system::CallerSignals::unchanged());
    if let Some(step) = &step {
        join::lead(step, ready.mount_list.as_deref().unwrap_or_default(), false)?;
    }
    Ok(ready)
}

/// Rootless `--join`, a task that does not lead: it mounts nothing, and
/// joins the leading task's namespaces (before making any of its own: a
/// user namespace of its own could not enter them).
fn rootless_follower(request: &RunRequest, step: &join::SlurmStep) -> Result<Ready, Failure> {
    let caller = Caller::of_this_process()?;
    let joined = join::follow(step, caller.uid)?;
    if request.verbose > 0 {
        error::report(join_note(&joined));
    }
    Ok(Ready::new(request, Some(joined.mount_list), None))
}

/// What `-v` says of a task that joined the leading task's mounts.
fn join_note(joined: &join::Joined) -> String {
    format!(
        "--join: this task mounted nothing; it joined the mounts of the step's task with SLURM_LOCALID=0: {}",
        joined.mount_list.to_string_lossy()
    )
}

/// After the mounts, privileges gone: what was done (quietly, unless
/// asked), the prefetcher, and what the command needs.
fn mounted_ready(
    request: &RunRequest,
    mounted: engine::Mounted,
    signals: system::CallerSignals,
) -> Ready {
    report(&mounted);
    if request.prefetch {
        crate::mounts::prefetch::start(&mounted.mount_list);
    }
    let mut ready = Ready::new(request, Some(mounted.mount_list), None);
    ready.signals = signals;
    ready.layer = mounted.layer;
    ready
}

/// Quiet success: only a warning worth the user's attention, or with
/// `--verbose` what was done (as much as the verbosity asks for).
fn report(mounted: &engine::Mounted) {
    for w in &mounted.warnings {
        error::warn(w);
    }
    let verbose = mounted.verbosity;
    for (_, note) in mounted.notes.iter().filter(|(level, _)| *level <= verbose) {
        error::report(note);
    }
}
