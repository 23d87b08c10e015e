//! What a front end tells the sequence besides the request, and what every
//! stage after admission reads.

use std::ffi::{OsStr, OsString};
use std::fmt;

use super::plan::{FrontEnd, Plan};
use crate::config::Settings;
use crate::mounts::fuse::FuseError;
use crate::mounts::installed;
use crate::system::error::Failure;
use crate::system::{self, rlimits::CallerLimits};

/// What the sequence itself could not do.
#[derive(Debug)]
pub enum SequenceError {
    CurrentDir(system::Error),
    LeaveWorkingDir(system::Error),
    Dev(system::Error),
    /// Root's work on shared state could not start out of the caller's
    /// reach.
    OwnSession(system::OwnSession),
    /// Nothing left where something must be (a bug).
    Internal(&'static str),
}

impl fmt::Display for SequenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequenceError::CurrentDir(e) => {
                write!(f, "cannot determine the current directory: {e}")
            }
            SequenceError::LeaveWorkingDir(e) => {
                write!(f, "cannot leave the working directory for /: {e}")
            }
            SequenceError::Dev(e) => write!(f, "cannot open /dev: {e}"),
            SequenceError::OwnSession(e) => write!(f, "{e}"),
            SequenceError::Internal(what) => write!(f, "internal error: {what}"),
        }
    }
}

crate::error_kind!(SequenceError);

/// The directory relative paths are resolved against.
pub enum WorkingDir {
    /// The process's own, read when the plan is made.
    Current,
    /// This absolute path (the Slurm plugin: "/", since a job step may
    /// start elsewhere than srun was called).
    At(OsString),
}

impl WorkingDir {
    pub(crate) fn resolve(&self) -> Result<OsString, Failure> {
        match self {
            WorkingDir::At(dir) => Ok(dir.clone()),
            WorkingDir::Current => {
                system::current_dir().map_err(|e| Failure::new(SequenceError::CurrentDir(e)))
            }
        }
    }
}

/// Where `squashfs-mount-fuse` is. Looked up only when an image needs it:
/// finding the program's own location costs a /proc lookup.
pub enum FuseServer {
    /// Known (None: no FUSE path available).
    At(Option<OsString>),
    /// Next to the running program (`installed::server_for_command`): the
    /// setuid command's only place.
    NextToProgram,
    /// Rootless mode: next to the program, in the packages' places, then
    /// on `path`, the caller's PATH (`mounts/installed.rs`).
    Search { path: Option<OsString> },
}

impl FuseServer {
    /// The server, or why there is none for the image `first` (the first
    /// one the FUSE path serves).
    pub(crate) fn locate(&self, first: &OsStr) -> Result<OsString, Failure> {
        let missing = || Failure::new(FuseError::NotInstalled(first.to_os_string()));
        match self {
            FuseServer::At(path) => path.clone().ok_or_else(missing),
            FuseServer::NextToProgram => installed::server_for_command().ok_or_else(missing),
            FuseServer::Search { path } => {
                installed::find_for_rootless(path.as_deref()).map_err(|looked| {
                    Failure::new(installed::NotFound {
                        image: first.to_string_lossy().into(),
                        looked,
                    })
                })
            }
        }
    }
}

/// What a front end tells the sequence besides the request.
pub struct Context<'a> {
    pub front: &'a FrontEnd,
    pub cwd: WorkingDir,
    pub fuse_server: FuseServer,
    /// The caller's resource limits, when the front end raised them for
    /// the privileged phase: the FUSE servers get them back.
    pub caller_limits: Option<&'a CallerLimits>,
}

/// What every stage after admission reads.
pub struct Call<'a> {
    pub ctx: &'a Context<'a>,
    pub settings: &'a Settings,
    pub plan: &'a Plan,
    /// `--writable=DIR`: the layer helper (`kept_layer.rs`).
    pub layer_helper: Option<OsString>,
}

impl<'a> Call<'a> {
    pub(crate) fn new(
        ctx: &'a Context<'a>,
        settings: &'a Settings,
        plan: &'a Plan,
        layer_helper: Option<OsString>,
    ) -> Call<'a> {
        Call {
            ctx,
            settings,
            plan,
            layer_helper,
        }
    }
}
