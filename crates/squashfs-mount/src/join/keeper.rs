//! The keeper of a `--join` step: started by the leading task (an
//! unprivileged exec of this program, `--join-keeper TAG TASKS FD PARENT
//! USERNS MOUNT_LIST`), it holds the namespace until the step's TASKS
//! tasks on the node have joined and exited, or the leading task's parent
//! (slurmstepd: the step) has ended; and how the tasks find it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;

use super::{JoinError, SlurmStep};
use crate::system::{self, Uid};

/// The name the keeper runs under (as `ps` and `pgrep -x` show it).
pub const PROCESS_NAME: &str = "squashfs-mount";
/// The keeper's (internal) command-line word.
pub const KEEPER_WORD: &str = "--join-keeper";

/// A keeper found in /proc.
pub struct Found {
    pub pid: u32,
    /// Its /proc directory (what is read through it is about it only).
    pub dir: OwnedFd,
    pub mount_list: OsString,
}

/// The process's name (`comm`), or None once it has exited.
pub(crate) fn read_comm(dir: BorrowedFd<'_>) -> Option<Vec<u8>> {
    let (comm, _) = system::read_file_at(dir, "comm", 64).ok()?;
    Some(comm)
}

/// A keeper of `step` that is a process of `uid`'s, when there is one.
/// Another user's process is never taken, whatever it is called: its
/// /proc directory is not owned by `uid` (nor is a process's that is
/// privileged or not dumpable, whose namespaces `uid` could not open).
pub(crate) fn find(step: &SlurmStep, uid: Uid) -> Option<Found> {
    let tag = step.tag();
    for pid in system::task_join::process_ids().ok()? {
        let Ok(dir) = system::task_join::open_process(pid) else {
            continue;
        };
        if system::fstat(dir.as_fd()).map(|st| st.uid) != Ok(uid) {
            continue;
        }
        if read_comm(dir.as_fd()).as_deref() != Some(format!("{PROCESS_NAME}\n").as_bytes()) {
            continue;
        }
        let Ok((cmdline, false)) = system::read_file_at(dir.as_fd(), "cmdline", 1 << 20) else {
            continue;
        };
        let words: Vec<&[u8]> = cmdline
            .strip_suffix(b"\0")
            .unwrap_or(&cmdline)
            .split(|&b| b == 0)
            .collect();
        match words.as_slice() {
            [_, word, t, _, _, _, _, list]
                if *word == KEEPER_WORD.as_bytes() && *t == tag.as_bytes() =>
            {
                return Some(Found {
                    pid,
                    dir,
                    mount_list: OsString::from_vec(list.to_vec()),
                });
            }
            _ => continue,
        }
    }
    None
}

/// What the keeper is told on its command line.
struct Orders {
    tasks: u32,
    ready_fd: i32,
    /// A pidfd of the leading task's parent.
    parent_fd: i32,
    /// Make a user and mount namespace of the caller's (the setuid
    /// program's namespace is root's).
    own_user_namespace: bool,
}

fn orders(args: &[OsString]) -> Result<Orders, JoinError> {
    let number = |a: &OsString| {
        a.to_str()
            .and_then(|s| s.parse::<u32>().ok())
            .ok_or(JoinError::KeeperArguments)
    };
    match args {
        [_tag, tasks, fd, parent, userns, _list] => Ok(Orders {
            tasks: number(tasks)?,
            ready_fd: i32::try_from(number(fd)?).map_err(|_| JoinError::KeeperArguments)?,
            parent_fd: i32::try_from(number(parent)?).map_err(|_| JoinError::KeeperArguments)?,
            own_user_namespace: match userns.to_str() {
                Some("userns") => true,
                Some("-") => false,
                _ => return Err(JoinError::KeeperArguments),
            },
        }),
        _ => Err(JoinError::KeeperArguments),
    }
}

/// The keeper (`args`: what follows `--join-keeper`). Returns the exit
/// status. Refuses to run with any privilege: it is this program's
/// internal mode, reachable by anyone who runs it, and does nothing a user
/// could not do with a program of their own.
pub(crate) fn run(args: &[OsString]) -> u8 {
    let unprivileged = system::effective_uid() == system::real_uid()
        && system::effective_gid() == system::real_gid()
        && system::no_new_privs().unwrap_or(false);
    if !unprivileged {
        crate::system::error::report(JoinError::KeeperPrivileged);
        return 1;
    }
    let Ok(orders) = orders(args) else {
        crate::system::error::report(JoinError::KeeperArguments);
        return 1;
    };
    let (Some(ready), Some(parent)) = (
        system::take_fd(orders.ready_fd),
        system::take_fd(orders.parent_fd),
    ) else {
        crate::system::error::report(JoinError::KeeperArguments);
        return 1;
    };
    let Ok(mut kept) = system::task_join::keep_only(vec![ready, parent]) else {
        return 1;
    };
    let (Some(parent), Some(ready)) = (kept.pop(), kept.pop()) else {
        return 1;
    };
    match prepare(&orders, parent) {
        Ok(watch) => {
            let _ = system::write_all(ready.as_fd(), b"ready\n");
            drop(ready);
            watch.until_all_left();
            0
        }
        Err(e) => {
            let _ = system::write_all(ready.as_fd(), e.to_string().as_bytes());
            1
        }
    }
}

/// What the keeper watches.
struct Watch {
    signals: OwnedFd,
    /// The leading task's parent (slurmstepd): when it ends, so does the
    /// step, and no task is left to join.
    step: OwnedFd,
    /// The tasks that joined and still run (pidfds).
    inside: Vec<OwnedFd>,
    /// The tasks that said they joined (pids), and how many will.
    joined: BTreeSet<u32>,
    expected: u32,
    uid: Uid,
    namespace: u64,
}

fn prepare(orders: &Orders, step: OwnedFd) -> Result<Watch, JoinError> {
    let signals = system::task_join::join_signal_fd().map_err(JoinError::Keeper)?;
    let uid = system::real_uid();
    if orders.own_user_namespace {
        system::enter_user_and_mount_namespace(system::real_uid(), system::real_gid())
            .map_err(JoinError::Namespace)?;
    }
    let (_, mnt) = system::own_namespaces().map_err(JoinError::Namespace)?;
    let namespace = system::task_join::namespace_id(mnt.as_fd()).map_err(JoinError::Namespace)?;
    // Findable from here on (the signal is blocked: it cannot end it).
    system::task_join::set_process_name(c"squashfs-mount").map_err(JoinError::Keeper)?;
    Ok(Watch {
        signals,
        step,
        inside: Vec::new(),
        joined: BTreeSet::new(),
        expected: orders.tasks,
        uid,
        namespace,
    })
}

impl Watch {
    fn done(&self) -> bool {
        self.joined.len() as u64 >= u64::from(self.expected) && self.inside.is_empty()
    }

    fn until_all_left(mut self) {
        while !self.done() {
            let mut fds: Vec<BorrowedFd<'_>> = vec![self.signals.as_fd(), self.step.as_fd()];
            fds.extend(self.inside.iter().map(|f| f.as_fd()));
            let Ok(ready) = system::task_join::wait_any_readable(&fds) else {
                return;
            };
            if ready[1] {
                // The step ended: no task is left to join.
                return;
            }
            let mut left = ready[2..].iter();
            self.inside
                .retain(|_| !left.next().copied().unwrap_or(false));
            if ready[0] {
                self.joined_by();
            }
        }
    }

    /// A task said it joined: counted if it is the caller's, once; watched
    /// while it runs. One found in another namespace is not counted; one
    /// whose namespace cannot be read is watched all the same: a task of
    /// the setuid program is not dumpable until it executes its command
    /// (the privileged phase's memory), so its /proc entry is root's. (A
    /// process of the caller's that lies about joining only keeps this
    /// keeper until it exits, or the step ends.)
    fn joined_by(&mut self) {
        let Ok((pid, uid)) = system::task_join::read_join_signal(self.signals.as_fd()) else {
            return;
        };
        if uid != self.uid || !self.joined.insert(pid) {
            return;
        }
        let Ok(pidfd) = system::task_join::open_pidfd(pid) else {
            return;
        };
        let inside = system::task_join::open_process(pid)
            .and_then(|dir| system::task_join::open_namespace_of(dir.as_fd(), "mnt"))
            .and_then(|ns| system::task_join::namespace_id(ns.as_fd()));
        match inside {
            Ok(ns) if ns != self.namespace => {
                self.joined.remove(&pid);
            }
            _ => self.inside.push(pidfd),
        }
    }
}
