//! What a user can do to their own processes' CPU share and what they can
//! see of it, without a cgroup (issue 37): a session whose autogroup has
//! nice 19 (`echo 19 > /proc/self/autogroup`, which any user may do for
//! their own session; it crosses a setuid exec), pinned to one CPU beside
//! busy loops of the same user's, each in a session, and so an autogroup,
//! of its own at nice 0. The starved session then gets about 15 / (1024 x
//! loops + 15) of that CPU (0.3% with 5 loops).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use crate::held::Group;
use crate::skip::loud_skip;
use crate::users::User;

/// The CPU the starved sessions and the busy loops are pinned to.
pub const CPU: usize = 0;

/// Busy loops of one user pinned to [`CPU`], killed when dropped.
pub struct Starver {
    _loops: Vec<Group>,
}

/// `program` as `user`, in a session of its own (and so a process group
/// and an autogroup of its own): a [`Group`] of it kills all of it.
pub fn in_own_session(user: &User, program: impl AsRef<OsStr>) -> Command {
    let mut c = user.command(program);
    // SAFETY: setsid is async-signal-safe and touches no memory; it runs
    // in the forked child before exec.
    unsafe {
        c.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c
}

/// Whether autogroups are in effect (the kernel's knob: cgroups that
/// group tasks themselves bypass them, but this machine's cpu controller
/// is at its root).
pub fn autogroups_enabled() -> bool {
    fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").is_ok_and(|s| s.trim() == "1")
}

impl Starver {
    /// `loops` busy loops of `user`, each in a session of its own, pinned
    /// to [`CPU`]. None (after a loud skip naming `test`) where
    /// autogroups are off.
    pub fn start(test: &str, user: &User, loops: usize) -> Option<Starver> {
        if !autogroups_enabled() {
            loud_skip(&format!(
                "{test}: autogroups are off here (kernel.sched_autogroup_enabled)"
            ));
            return None;
        }
        let loops = (0..loops)
            .map(|_| {
                let child = in_own_session(user, "taskset")
                    .args(["-c", &CPU.to_string(), "sh", "-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("a busy loop");
                Group(child)
            })
            .collect();
        Some(Starver { _loops: loops })
    }
}

/// `script` (sh) as `user` in a session of its own whose autogroup has
/// nice 19, pinned to [`CPU`]: what `echo 19 > /proc/self/autogroup;
/// taskset -c 0 ...` in a fresh login session does.
pub fn starved(user: &User, script: &str) -> Command {
    let mut c = in_own_session(user, "sh");
    c.args([
        "-c",
        &format!("echo 19 > /proc/self/autogroup && exec taskset -c {CPU} sh -c \"$STARVED\""),
    ])
    .env("STARVED", script);
    c
}

/// `/proc/PID/autogroup` of a process: its autogroup's name and nice value.
pub fn autogroup_of(pid: u32) -> Option<(String, i32)> {
    let text = fs::read_to_string(format!("/proc/{pid}/autogroup")).ok()?;
    let mut f = text.split_whitespace();
    let name = f.next()?.to_string();
    (f.next()? == "nice").then_some(())?;
    Some((name, f.next()?.parse().ok()?))
}

/// The CPUs a process may run on (`Cpus_allowed_list` of its status).
pub fn cpus_allowed(pid: Option<u32>) -> Option<String> {
    let file = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".into(),
    };
    fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}
