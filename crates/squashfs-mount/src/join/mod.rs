//! `--join` (uenv's option): the tasks of one Slurm step on one node share
//! one mount namespace, made by one task and joined by the others.
//!
//! Everything here runs as the caller, after every privilege is gone (the
//! setuid program) or without any (rootless mode): the Slurm variables are
//! the caller's environment, read only then, and they pick nothing but
//! which of the caller's own processes to look at.
//!
//! No object is shared, so there is nothing another user could plant, read
//! or block:
//! - the task with `SLURM_LOCALID=0` leads: once its mounts are made it
//!   holds them in a user and mount namespace of the caller's (the setuid
//!   program makes one on top of its private namespace; rootless mode has
//!   one already), and starts a *keeper*: this program again, unprivileged,
//!   named `squashfs-mount`, a child of the task's command, whose command
//!   line names the step (`--join-keeper JOB.STEP.NODE ...`);
//! - the other tasks look through /proc for a keeper of their step that is
//!   *their own user's* process (only those are readable: the kernel lets
//!   no other user open a process's namespaces or fake its owner), join
//!   its namespaces by fds of its /proc directory, return to their working
//!   directory, and tell the keeper by a queued signal (the kernel names
//!   the sender, and only the same user may signal it);
//! - the keeper holds the namespace until every task of the step on the
//!   node has joined and every one of them has exited; Slurm's end-of-step
//!   sweep ends it if a task never came.
//!
//! | file        | concern                                             |
//! |-------------|-----------------------------------------------------|
//! | `step.rs`   | which Slurm step, node and task this is             |
//! | `keeper.rs` | the keeper that holds the namespace, and finding it |
//!
//! Front: none (nothing here is used outside the crate; `lib.rs`).

pub(crate) mod keeper;
mod step;

pub(crate) use keeper::{KEEPER_WORD, PROCESS_NAME};
pub(crate) use step::{JoinError, SlurmStep};

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::system::{self, Uid};

/// How long a task waits for the keeper of its step (in 20 ms steps): the
/// leading task mounts meanwhile.
const WAIT_STEPS: u32 = 3000;

/// The leading task, its mounts made and every privilege gone: starts
/// the keeper, which holds the namespace for the other tasks, and joins
/// it. `own_user_namespace` (the setuid program, whose namespace root made
/// and no task of the caller's could join): the keeper makes a user and
/// mount namespace of the caller's on top of this one (it can write its
/// id maps: a fresh, dumpable process), which this task joins too. In
/// rootless mode the namespace is the caller's already.
pub(crate) fn lead(
    step: &SlurmStep,
    mount_list: &OsStr,
    own_user_namespace: bool,
) -> Result<(), JoinError> {
    if step.followers() == 0 {
        return Ok(());
    }
    let uid = system::real_uid();
    let cwd = system::current_dir().map_err(JoinError::WorkingDir)?;
    let (ready_read, ready_write) = system::task_join::pipe().map_err(JoinError::Keeper)?;
    let inherited =
        system::task_join::inheritable_copy(ready_write.as_fd()).map_err(JoinError::Keeper)?;
    drop(ready_write);
    let fd_number = std::os::fd::AsRawFd::as_raw_fd(&inherited).to_string();
    // The task's parent (slurmstepd): the keeper ends with the step.
    let parent = system::task_join::parent_pidfd().ok_or(JoinError::Keeper(system::Error::SRCH))?;
    let parent = system::task_join::inheritable_copy(parent.as_fd()).map_err(JoinError::Keeper)?;
    let parent_number = std::os::fd::AsRawFd::as_raw_fd(&parent).to_string();
    let spawned = Command::new("/proc/self/exe")
        .arg0(PROCESS_NAME)
        .arg(KEEPER_WORD)
        .arg(step.tag())
        .arg((step.followers() + 1).to_string())
        .arg(&fd_number)
        .arg(&parent_number)
        .arg(if own_user_namespace { "userns" } else { "-" })
        .arg(mount_list)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    drop(inherited);
    drop(parent);
    // Not waited for: the keeper stays a child of the command.
    let pid = spawned
        .map_err(|e| {
            JoinError::Keeper(system::Error::from_io_error(&e).unwrap_or(system::Error::IO))
        })?
        .id();
    let said = system::read_some(ready_read.as_fd(), 4096).map_err(JoinError::Keeper)?;
    match said.as_slice() {
        b"ready\n" => {}
        b"" => {
            return Err(JoinError::KeeperSaid(
                "it exited before it was ready".into(),
            ))
        }
        other => {
            return Err(JoinError::KeeperSaid(
                String::from_utf8_lossy(other).trim_end().into(),
            ))
        }
    }
    let dir = system::task_join::open_process(pid).map_err(|_| JoinError::KeeperGone)?;
    join_keeper(
        &keeper::Found {
            pid,
            dir,
            mount_list: mount_list.to_owned(),
        },
        uid,
        &cwd,
        own_user_namespace,
    )
}

/// What a task that joined the leading task's namespaces has.
#[derive(Debug)]
pub struct Joined {
    /// The leading task's `UENV_MOUNT_LIST` (what the keeper holds).
    pub mount_list: OsString,
}

/// Any task but the leading one: waits for the keeper of `step` (a process
/// of `uid`'s), joins its user and mount namespaces, returns to the
/// working directory and tells the keeper. The process must be
/// single-threaded.
pub(crate) fn follow(step: &SlurmStep, uid: Uid) -> Result<Joined, JoinError> {
    let cwd = system::current_dir().map_err(JoinError::WorkingDir)?;
    let mut waited = 0;
    let found = loop {
        if let Some(found) = keeper::find(step, uid) {
            break found;
        }
        if waited >= WAIT_STEPS {
            return Err(JoinError::NoLeader(step.tag()));
        }
        waited += 1;
        system::pause_millis(20);
    };
    join_keeper(&found, uid, &cwd, true)?;
    Ok(Joined {
        mount_list: found.mount_list,
    })
}

/// Joins the namespaces of the keeper `found` (when `enter`; the rootless
/// leader is in them already), goes back to `cwd` and tells the keeper.
fn join_keeper(found: &keeper::Found, uid: Uid, cwd: &OsStr, enter: bool) -> Result<(), JoinError> {
    let pidfd = system::task_join::open_pidfd(found.pid).map_err(JoinError::Namespace)?;
    // The /proc directory still reads: the pidfd is the keeper's, not a
    // process that got its pid since.
    keeper::read_comm(found.dir.as_fd()).ok_or(JoinError::KeeperGone)?;
    if enter {
        let user = system::task_join::open_namespace_of(found.dir.as_fd(), "user")
            .map_err(JoinError::Namespace)?;
        let mnt = system::task_join::open_namespace_of(found.dir.as_fd(), "mnt")
            .map_err(JoinError::Namespace)?;
        let types = (
            system::namespace_type(user.as_fd()),
            system::namespace_type(mnt.as_fd()),
        );
        let owner = system::user_namespace_owner(user.as_fd());
        if types != (Ok(system::USER_NAMESPACE), Ok(system::MOUNT_NAMESPACE)) || owner != Ok(uid) {
            return Err(JoinError::NotOurs(found.pid));
        }
        system::join_user_and_mount_namespaces(user.as_fd(), mnt.as_fd())
            .map_err(JoinError::Namespace)?;
        system::change_dir(cwd).map_err(|e| JoinError::WorkingDirInside(cwd.to_owned(), e))?;
    }
    system::task_join::send_join_signal(pidfd.as_fd()).map_err(|_| JoinError::KeeperGone)?;
    system::set_no_new_privs().map_err(JoinError::Namespace)
}

/// Whether `word` is the keeper's command-line word.
pub(crate) fn is_keeper_word(word: &OsStr) -> bool {
    word.as_bytes() == KEEPER_WORD.as_bytes()
}
