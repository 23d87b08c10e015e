//! Unprivileged test users, made for one test (or one suite) and removed
//! when it ends.
//!
//! Names are `sqfsmnt-<pid>-<n><letter>` (users) and `sqfsmnt-<pid>-<n>g`
//! (the supplementary group): unique to the run, and recognisable by the
//! pid of the process that made them, so that a later run removes those of
//! a process that was killed ([`remove_stale`]).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::cmd::{run, try_run, Run};

const PREFIX: &str = "sqfsmnt-";

/// Test users and groups of the suites before this crate: removed as stale
/// too (they were never removed by their suites).
const LEGACY_USERS: &[&str] = &[
    "sqfsmnt-test",
    "sqfsmnt-cache",
    "sqfsmnt-cache2",
    "sqfsmnt-slurm",
];
const LEGACY_GROUPS: &[&str] = &["sqfsmnt-test2", "sqfsmnt-slurm-grp"];

static SEQ: AtomicU32 = AtomicU32::new(0);

/// One test user.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl User {
    /// `program` run as this user: real and effective uid and gid, and the
    /// user's groups from the group database (`setpriv --init-groups`).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--init-groups")
            .arg("--")
            .arg(program)
            .current_dir("/");
        c
    }

    /// A shell command line run as this user, with a time limit.
    pub fn sh(&self, script: &str) -> Run {
        run(self.command("sh").args(["-c", script]))
    }

    /// `chown user:user path`.
    pub fn chown(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

/// Users (and optionally a group they all have as a supplementary group),
/// removed on drop, also when the test panics.
pub struct Users {
    pub users: Vec<User>,
    /// (name, gid) of the supplementary group.
    pub group: Option<(String, u32)>,
}

impl Users {
    /// Creates `count` users (at most 26) and, with `group`, a group they
    /// are all members of (not their primary group).
    pub fn create(count: usize, group: bool) -> Users {
        assert!(count <= 26);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let base = format!("{PREFIX}{}-{n}", std::process::id());
        let mut made = Users {
            users: Vec::new(),
            group: None,
        };
        if group {
            let name = format!("{base}g");
            let r = run(Command::new("groupadd").args(["--system", &name]));
            assert!(r.success(), "groupadd {name}: {}", r.stderr());
            let gid = group_id(&name).unwrap_or_else(|| panic!("no group {name}"));
            made.group = Some((name.clone(), gid));
        }
        for i in 0..count {
            let name = format!("{base}{}", (b'a' + i as u8) as char);
            let mut c = Command::new("useradd");
            c.args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/bin/sh",
                "--user-group",
            ]);
            if let Some((g, _)) = &made.group {
                c.args(["--groups", g]);
            }
            let r = run(c.arg(&name));
            assert!(r.success(), "useradd {name}: {}", r.stderr());
            let (uid, gid) = ids_of(&name).unwrap_or_else(|| panic!("no user {name}"));
            made.users.push(User { name, uid, gid });
        }
        made
    }

    /// The first user.
    pub fn first(&self) -> &User {
        &self.users[0]
    }

    pub fn gid2(&self) -> u32 {
        self.group
            .as_ref()
            .map(|g| g.1)
            .expect("created without a group")
    }
}

/// The next case's user, being made while the current case runs.
static NEXT: std::sync::Mutex<Option<std::thread::JoinHandle<Users>>> = std::sync::Mutex::new(None);
static NEXT_AT_EXIT: std::sync::Once = std::sync::Once::new();

/// A fresh user with a supplementary group ([`Users::create`]`(1, true)`)
/// for one case: made beside the previous case (the useradd runs take a
/// tenth of a second), and the next case's started now. Each is made for
/// one case and removed after it as before; one made for no case is
/// removed when the process exits.
pub fn for_case() -> Users {
    let made = NEXT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .and_then(|h| h.join().ok());
    let users = made.unwrap_or_else(|| Users::create(1, true));
    NEXT_AT_EXIT.call_once(|| {
        crate::cleanup::at_exit(|| {
            let left = NEXT.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(left.and_then(|h| h.join().ok()));
        })
    });
    *NEXT.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(std::thread::spawn(|| Users::create(1, true)));
    users
}

impl Drop for Users {
    fn drop(&mut self) {
        for u in &self.users {
            remove_user(&u.name);
            // The FUSE servers' log of this uid (root's), which a later
            // test user with the same uid would otherwise inherit.
            let _ = std::fs::remove_file(format!("/run/squashfs-mount-fuse/{}.log", u.uid));
        }
        if let Some((g, _)) = &self.group {
            let _ = try_run(Command::new("groupdel").arg(g));
        }
    }
}

/// userdel, after the user's processes ended: a little grace for those
/// still running (a Slurm step or an autoclear may lag the test), waited
/// for on their pidfds, then SIGKILL to what is left, by pid. A process
/// that ended is not waited for, though PID 1 may reap it a second or two
/// later (its zombie holds nothing).
fn remove_user(name: &str) {
    let Some((uid, _)) = ids_of(name) else {
        return;
    };
    let left = crate::ends::wait_ended(&pids_of_uid(uid), Duration::from_secs(10));
    for pid in left {
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
    let st = try_run(Command::new("userdel").arg(name));
    if !st.is_some_and(|r| r.success()) {
        let _ = try_run(Command::new("userdel").args(["--force", name]));
    }
    // The user's private group goes with it (USERGROUPS_ENAB); if not:
    if group_id(name).is_some() {
        let _ = try_run(Command::new("groupdel").arg(name));
    }
}

/// Processes whose real or effective uid is `uid`, those that ended (a
/// zombie waiting for its parent) left out.
fn pids_of_uid(uid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for (pid, status) in crate::count::statuses() {
        let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k));
        if field("State:").is_some_and(|s| matches!(s.trim().chars().next(), Some('Z' | 'X'))) {
            continue;
        }
        let ids: Vec<u32> = field("Uid:")
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        if ids.first() == Some(&uid) || ids.get(1) == Some(&uid) {
            out.push(pid);
        }
    }
    out
}

/// The fields of `name`'s line in the database `file` (/etc/passwd or
/// /etc/group, which useradd and groupadd write): read directly, no
/// process per lookup.
fn entry(file: &str, name: &str) -> Option<Vec<String>> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .map(|l| l.split(':').map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.first().map(String::as_str) == Some(name))
}

/// The uid and primary gid of user `name`.
pub(crate) fn ids_of(name: &str) -> Option<(u32, u32)> {
    let f = entry("/etc/passwd", name)?;
    Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
}

/// The gid of group `name`.
pub(crate) fn group_id(name: &str) -> Option<u32> {
    entry("/etc/group", name)?.get(2)?.parse().ok()
}

/// The pid in a name made by this module, if any.
fn pid_in(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

pub(crate) fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the users and groups of test processes that are gone, and the
/// fixed-name test users of the suites before this crate. Call only with
/// the machine-wide lock held.
pub fn remove_stale() {
    let names = |file: &str| -> Vec<String> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(':').next().map(str::to_string))
            .filter(|n| n.starts_with(PREFIX))
            .collect()
    };
    let stale = |n: &String| pid_in(n).is_some_and(|p| p != std::process::id() && !pid_alive(p));
    for u in names("/etc/passwd") {
        if stale(&u) || LEGACY_USERS.contains(&u.as_str()) {
            remove_user(&u);
        }
    }
    for g in names("/etc/group") {
        if stale(&g) || LEGACY_GROUPS.contains(&g.as_str()) {
            let _ = try_run(Command::new("groupdel").arg(&g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_pid_of_their_process() {
        assert_eq!(pid_in("sqfsmnt-1234-0a"), Some(1234));
        assert_eq!(pid_in("sqfsmnt-1234-17g"), Some(1234));
        assert_eq!(pid_in("sqfsmnt-test"), None);
        assert_eq!(pid_in("sqfsmnt-bench"), None);
        assert_eq!(pid_in("other-1234-0a"), None);
        assert!(pid_alive(std::process::id()));
    }

    #[test]
    fn ids_are_read_from_the_databases() {
        assert_eq!(ids_of("root"), Some((0, 0)));
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(ids_of("sqfsmnt-no-such-user"), None);
        assert_eq!(group_id("sqfsmnt-no-such-group"), None);
    }
}
