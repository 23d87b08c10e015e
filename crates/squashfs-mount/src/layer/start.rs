//! The one way a front end starts the layer helper (`squashfs-mount-layer`)
//! once root's mounts are made: [`start`], with the setuid command's way
//! (the process becomes the helper) or the Slurm plugin's (its worker
//! starts the helper as the job user and takes over what it made).

use std::ffi::OsString;
use std::os::fd::{AsFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::helper::{self, Kept, StepLayer};
use super::LayerError;
use crate::privilege::{AsRoot, Caller};
use crate::system;
use crate::system::error::Failure;

/// How the front end hands the layer to the helper.
pub enum Start<'a> {
    /// The setuid command, every privilege gone: this process executes
    /// the helper, which stacks the layer as the caller and becomes
    /// `command` with the environment `env`. Every fd this process opened
    /// is marked close-on-exec first (all should be already): only the
    /// caller's own fds (`inherited`, listed at start) and DIR's lock
    /// (a copy at 64 or above) reach it, never a
    /// mount, loop device, /dev/fuse or namespace fd of the privileged
    /// phase. The exec also leaves none of this process's memory to it.
    Become {
        command: &'a [OsString],
        inherited: &'a [RawFd],
        env: Vec<(OsString, OsString)>,
    },
    /// The Slurm plugin's worker thread, as root in the step's mount
    /// namespace: the helper starts as the job user (`uid`, `gid`,
    /// `groups`), with nothing of slurmstepd's, stacks the layer in a user
    /// namespace of the job user's and hands over fds of both namespaces
    /// and of DIR's lock (`helper::start_for_step`); it gets the lock the
    /// launch took, at fd 5.
    ForStep { root: &'a AsRoot, user: &'a Caller },
}

/// Starts the helper for `kept`, the way `how` says. `Start::Become`
/// returns only when it failed (the process is the helper otherwise).
pub fn start(kept: &Kept, how: Start<'_>) -> Result<StepLayer, Failure> {
    match how {
        Start::Become {
            command,
            inherited,
            env,
        } => Err(become_helper(kept, command, inherited, env)),
        Start::ForStep { root: _, user } => helper::start_for_step(kept, user),
    }
}

/// Executes the helper; what went wrong, if it returns.
fn become_helper(
    kept: &Kept,
    command: &[OsString],
    inherited: &[RawFd],
    env: Vec<(OsString, OsString)>,
) -> Failure {
    use super::handoff::{encode, Then};
    // A copy of the lock's fd (the same open file: the lock stays held),
    // without close-on-exec, out of the way of the caller's numbers.
    let lock =
        match system::keep_copy_across_exec(kept.lock.as_fd(), super::helper::LOCK_FD_AT_LEAST) {
            Ok(n) => n,
            Err(e) => return Failure::new(LayerError::HandLock(e)),
        };
    let keep: Vec<RawFd> = inherited.iter().copied().chain([lock]).collect();
    if let Err(e) = system::close_on_exec_all_but(&keep) {
        return Failure::new(LayerError::CloseFds(e));
    }
    let mut plan = kept.plan.clone();
    plan.lock_fd = Some(lock);
    let mut c = Command::new(&kept.helper);
    c.arg0(super::HELPER_NAME)
        .args(encode(&plan, &Then::Command(command.to_vec())))
        .env_clear()
        .envs(env);
    system::keep_callers_pipe_signal(&mut c);
    let err = c.exec();
    Failure::new(LayerError::RunHelper(
        kept.helper.clone(),
        system::error::io_message(&err),
    ))
}
