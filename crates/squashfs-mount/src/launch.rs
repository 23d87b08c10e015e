//! The setuid command's front end: privileges, the site's admission rules
//! and resource limits around the one privileged sequence
//! (`engine::mount_all`), then the drop of every privilege. Rootless when
//! the binary is not setuid root.

use std::ffi::OsString;

use crate::cli::RunRequest;
use crate::config::{self, Settings};
use crate::engine::{self, Context, FrontEnd, FuseServer};
use crate::error::{self, Failure};
use crate::layer;
use crate::limits::LaunchSlot;
use crate::privilege::{Caller, Credentials, PrivilegeError, Privileges, Rootless};
use crate::system;

/// What is left to do once privileges are gone: run the command.
#[derive(Debug)]
pub struct Ready {
    pub caller: Caller,
    pub command: Vec<OsString>,
    /// `UENV_MOUNT_LIST` for the command, when anything was mounted.
    pub mount_list: Option<OsString>,
    /// The caller's signal dispositions, to give back before exec.
    pub signals: system::CallerSignals,
    /// `--writable=DIR`: the helper to execute instead of the command, and
    /// what it stacks (`layer`); it becomes the command.
    pub layer: Option<(OsString, layer::Plan)>,
}

/// Mounts what `request` asks for in a private mount namespace and drops
/// every privilege for good. On return the process holds only the caller's
/// credentials (verified), no_new_privs is set, and the caller's resource
/// limits are back.
pub fn run(request: &RunRequest) -> Result<Ready, Failure> {
    let privileges = match Privileges::acquire() {
        Ok(p) => p,
        Err(PrivilegeError::NotSetuidRoot) => return rootless(request),
        Err(e) => return Err(e.into()),
    };
    if request.mounts.is_empty() && request.binds.is_empty() {
        if request.layer_dir.is_some() {
            return Err(Failure::new(
                "--writable=DIR puts a writable layer on images: give at least one image",
            ));
        }
        // Nothing to mount: run the command as the C tool does, without a
        // namespace, but without privileges (and with no_new_privs).
        let caller = privileges.drop_for_good()?;
        return Ok(Ready {
            caller,
            command: request.command.clone(),
            mount_list: None,
            signals: system::CallerSignals::unchanged(),
            layer: None,
        });
    }
    setuid(privileges, request)
}

fn setuid(mut privileges: Privileges, request: &RunRequest) -> Result<Ready, Failure> {
    // A caller's lowered limits must not stop the privileged phase half-way.
    let signals = system::ignore_file_size_signal();
    let caller = privileges.caller().clone();
    let (limits, settings, slot) = privileges.as_root(|| {
        let limits = system::limits::raise_for_privileged_phase()
            .map_err(|e| Failure::new(format!("cannot set resource limits: {e}")))?;
        let settings: Settings = config::load();
        settings
            .policy
            .admits(caller.uid.as_raw(), &caller.all_gids())
            .map_err(Failure::new)?;
        let slot = LaunchSlot::take(
            caller.uid.as_raw(),
            settings.max_launches_per_user,
            settings.max_launches_wait_ms,
        )?;
        Ok::<_, Failure>((limits, settings, slot))
    })??;
    let cwd = system::current_dir()
        .map_err(|e| Failure::new(format!("cannot determine the current directory: {e}")))?;
    let helper = layer_helper(&privileges, request, &cwd)?;
    let ctx = Context {
        settings: &settings,
        front: &FrontEnd::default(),
        cwd,
        fuse_server: FuseServer::NextToProgram,
        rootless: false,
        caller_limits: Some(&limits),
    };
    let mounted = engine::mount_all(&mut privileges, request, &ctx)?;
    privileges
        .as_root(|| limits.restore())?
        .map_err(|e| Failure::new(format!("cannot restore resource limits: {e}")))?;
    drop(slot);
    // Verified inside (ids, groups, capabilities, root not regainable).
    let caller = privileges.drop_for_good()?;
    Ok(mounted_ready(
        caller,
        request,
        mounted,
        settings.verbose,
        signals,
        helper,
    ))
}

/// `--writable=DIR`, before anything is mounted (as the caller): the
/// helper that will mount the layer (`squashfs-mount-layer`, next to the
/// FUSE server) must be there, and DIR must not be refused already.
fn layer_helper(
    as_caller: &impl crate::privilege::ActingAsCaller,
    request: &RunRequest,
    cwd: &std::ffi::OsStr,
) -> Result<Option<OsString>, Failure> {
    let Some(dir) = &request.layer_dir else {
        return Ok(None);
    };
    let helper = layer::helper_for_command()
        .ok_or_else(|| Failure::new("cannot find where squashfs-mount is installed"))?;
    system::open_program(&helper).map_err(|e| {
        Failure::new(format!(
            "--writable=DIR needs {} ({e}); install it (make install)",
            helper.to_string_lossy()
        ))
    })?;
    let dir = crate::paths::absolute(cwd, dir);
    layer::dir::precheck(as_caller, &dir, system::real_uid().as_raw())?;
    Ok(Some(helper))
}

/// Not setuid root: the same command line in a user namespace of its own.
fn rootless(request: &RunRequest) -> Result<Ready, Failure> {
    if request.mounts.is_empty() && request.binds.is_empty() {
        if request.layer_dir.is_some() {
            return Err(Failure::new(
                "--writable=DIR puts a writable layer on images: give at least one image",
            ));
        }
        system::set_no_new_privs()
            .map_err(|e| Failure::new(format!("prctl(PR_SET_NO_NEW_PRIVS) failed: {e}")))?;
        let caller = Caller {
            uid: system::real_uid(),
            gid: system::real_gid(),
            groups: system::supplementary_groups().unwrap_or_default(),
        };
        return Ok(Ready {
            caller,
            command: request.command.clone(),
            mount_list: None,
            signals: system::CallerSignals::unchanged(),
            layer: None,
        });
    }
    // The configuration file tunes, but cannot grant anything here: there
    // is nothing to grant.
    let settings = config::load();
    let cwd = system::current_dir()
        .map_err(|e| Failure::new(format!("cannot determine the current directory: {e}")))?;
    // Not privileged at all: the caller's PATH may say where the FUSE
    // server is (the setuid command never reads it).
    let path = std::env::var_os("PATH");
    let mut creds = Rootless::enter()?;
    let helper = layer_helper(&creds, request, &cwd)?;
    if !request.quiet {
        error::report("running unprivileged (the binary is not installed setuid root): images are served through FUSE in a user namespace, which is slower than the kernel's squashfs; --quiet hides this note");
    }
    let ctx = Context {
        settings: &settings,
        front: &FrontEnd::default(),
        cwd,
        fuse_server: FuseServer::Search { path },
        rootless: true,
        caller_limits: None,
    };
    let mounted = engine::mount_all(&mut creds, request, &ctx)?;
    let caller = creds.finish()?;
    Ok(mounted_ready(
        caller,
        request,
        mounted,
        settings.verbose,
        system::CallerSignals::unchanged(),
        helper,
    ))
}

/// After the mounts, privileges gone: what was done (quietly, unless
/// asked), the prefetcher, and what the command needs.
fn mounted_ready(
    caller: Caller,
    request: &RunRequest,
    mounted: engine::Mounted,
    site_verbose: bool,
    signals: system::CallerSignals,
    layer_helper: Option<OsString>,
) -> Ready {
    let verbose = request.verbose.max(u8::from(site_verbose));
    report(&mounted, verbose);
    if request.prefetch {
        crate::prefetch::start(&mounted.mount_list);
    }
    let layer = match (layer_helper, mounted.layer) {
        (Some(helper), Some(plan)) => Some((helper, layer::Plan { verbose, ..plan })),
        _ => None,
    };
    Ready {
        caller,
        command: request.command.clone(),
        mount_list: Some(mounted.mount_list),
        signals,
        layer,
    }
}

/// Quiet success: only a warning worth the user's attention, or with
/// `--verbose` what was done (as much as the verbosity asks for).
fn report(mounted: &engine::Mounted, verbose: u8) {
    for w in &mounted.warnings {
        error::warn(w);
    }
    if verbose > 0 {
        for (_, note) in mounted.notes.iter().filter(|(level, _)| *level <= verbose) {
            error::report(note);
        }
    }
}
