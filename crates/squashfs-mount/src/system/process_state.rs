//! Per-process state that crosses a setuid exec and that the caller sets:
//! the file-creation mask, the scheduling policy, the nice value, the I/O
//! priority and the CPU affinity. The root phase replaces the caller's with fixed values
//! (`neutralize`) before it creates or holds anything other users rely on,
//! and the command gets the caller's back (`CallerProcessState::restore`,
//! after the drop: only what the caller may set itself comes back).
//! doc/threat-model.md lists every such attribute and what the tool does.
#![allow(unsafe_code)]

use rustix::fs::Mode;

use super::SysResult;

/// The umask of the root phase: whatever root creates is root's alone
/// unless its mode is set explicitly (and it always is: `make_*` here and
/// in `files`).
pub const ROOT_UMASK: u32 = 0o077;

/// ioprio_set/ioprio_get's `which` for one thread/process.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;

/// What the caller had, as found at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallerProcessState {
    pub umask: u32,
    /// `sched_getscheduler`'s policy (with SCHED_RESET_ON_FORK) and
    /// `sched_getparam`'s priority.
    pub policy: libc::c_int,
    pub priority: libc::c_int,
    pub nice: i32,
    pub ioprio: libc::c_int,
    /// The CPUs the caller let it run on (`taskset`), when the root phase
    /// runs on others.
    pub affinity: Option<rustix::thread::CpuSet>,
}

impl CallerProcessState {
    /// Whether the caller's scheduling was the default one (the restore of
    /// scheduling is then nothing to do).
    fn default_scheduling(&self) -> bool {
        self.policy == libc::SCHED_OTHER && self.nice == 0 && self.ioprio == 0
    }

    /// Gives the calling thread the caller's state again. Run after the
    /// drop of privileges: the kernel then allows only what the caller
    /// could set itself (RLIMIT_NICE, RLIMIT_RTPRIO), as if the command set
    /// it. The umask always comes back; the first scheduling call that
    /// fails is returned (name, errno).
    pub(crate) fn restore(&self) -> Result<(), (&'static str, rustix::io::Errno)> {
        rustix::process::umask(Mode::from_raw_mode(self.umask));
        if let Some(cpus) = &self.affinity {
            rustix::thread::sched_setaffinity(None, cpus).map_err(|e| ("sched_setaffinity", e))?;
        }
        if self.default_scheduling() {
            return Ok(());
        }
        apply_scheduling(self.policy, self.priority, self.nice, self.ioprio)
    }
}

/// Records the calling thread's umask, scheduling policy, nice value, I/O
/// priority and CPU affinity, and replaces them with the root phase's:
/// umask 077, SCHED_OTHER at nice 0, the default I/O priority, every CPU
/// the process may use. Needs root (raising a priority needs
/// CAP_SYS_NICE); run before the capabilities are reduced.
pub(crate) fn neutralize() -> SysResult<CallerProcessState> {
    let umask = rustix::process::umask(Mode::from_raw_mode(ROOT_UMASK)).bits();
    let mut state = CallerProcessState {
        umask: umask as u32,
        policy: libc::SCHED_OTHER,
        priority: 0,
        nice: 0,
        ioprio: 0,
        affinity: None,
    };
    let cpus = rustix::thread::sched_getaffinity(None)?;
    reset_affinity()?;
    if rustix::thread::sched_getaffinity(None)? != cpus {
        state.affinity = Some(cpus);
    }
    // SAFETY: sched_getscheduler takes a pid (0: the calling thread) and
    // touches no memory.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(super::last_errno());
    }
    state.policy = policy;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_getparam writes one sched_param into `param`, which
    // lives on this stack for the call.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(super::last_errno());
    }
    state.priority = param.sched_priority;
    state.nice = rustix::process::getpriority_process(None)?;
    // SAFETY: ioprio_get takes two integers and returns the priority.
    let ioprio = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
    if ioprio < 0 {
        return Err(super::last_errno());
    }
    state.ioprio = ioprio as libc::c_int;
    if !state.default_scheduling() {
        set_root_scheduling()?;
    }
    Ok(state)
}

/// SCHED_OTHER (without SCHED_RESET_ON_FORK), nice 0, default I/O
/// priority, every CPU the process may use: at the start of the root
/// phase, in the process that does root's work on shared state (its own
/// session, `own_session`), and whenever a lock other users wait on is
/// taken (the caller may have changed them meanwhile, while the launch was
/// within its reach). Raising a priority needs CAP_SYS_NICE.
pub(crate) fn set_root_scheduling() -> SysResult<()> {
    // I/O priority 0 is IOPRIO_CLASS_NONE: the class follows the CPU
    // scheduling (best effort).
    apply_scheduling(libc::SCHED_OTHER, 0, 0, 0).map_err(|(_, e)| e)?;
    reset_affinity()
}

/// Lets the calling thread run on every CPU it may use: a mask of all
/// CPUs, which the kernel narrows to those of the process's cpuset (the
/// site's, or Slurm's for a job): what a `taskset` of the caller's had
/// narrowed is undone, what the site set is kept.
fn reset_affinity() -> SysResult<()> {
    let mut all = rustix::thread::CpuSet::new();
    for cpu in 0..rustix::thread::CpuSet::MAX_CPU {
        all.set(cpu);
    }
    rustix::thread::sched_setaffinity(None, &all)
}

/// The default timer slack (PR_SET_TIMERSLACK 0): a caller's slack, which
/// crosses the setuid exec, would lengthen every pause of the work that
/// other users' launches may wait for.
pub(crate) fn set_default_timer_slack() -> SysResult<()> {
    rustix::thread::set_current_timer_slack(None)
}

/// Sets the calling thread's nice value, scheduling policy and priority,
/// and I/O priority; the first call that fails is returned (name, errno).
fn apply_scheduling(
    policy: libc::c_int,
    priority: libc::c_int,
    nice: i32,
    ioprio: libc::c_int,
) -> Result<(), (&'static str, rustix::io::Errno)> {
    // The nice value first: SCHED_IDLE and SCHED_BATCH keep it.
    rustix::process::setpriority_process(None, nice).map_err(|e| ("setpriority", e))?;
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads the sched_param we pass, which lives
    // on this stack for the call; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(("sched_setscheduler", super::last_errno()));
    }
    // SAFETY: ioprio_set takes three integers; no memory is passed.
    if unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, ioprio) } != 0 {
        return Err(("ioprio_set", super::last_errno()));
    }
    Ok(())
}
