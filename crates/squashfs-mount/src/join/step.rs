//! Which Slurm step, node and task this is, from the caller's environment
//! (read as the caller only), and what `--join` says when it cannot.

use std::ffi::OsString;
use std::fmt;

use crate::system;

/// uenv's words, which its tests look for.
const NEEDS_SLURM: &str =
    "--join requires SLURM_STEP_TASKS_PER_NODE, SLURM_NODEID, SLURM_JOBID and SLURM_STEPID to be set";

/// A task of a Slurm step on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmStep {
    job: String,
    step: String,
    node: u32,
    /// How many tasks of the step run on this node.
    tasks_here: u32,
    /// `SLURM_LOCALID`: the task's index on this node (0 leads).
    local: u32,
}

impl SlurmStep {
    /// The step from the variables `var` gives (the caller's environment).
    pub(crate) fn from_env(var: impl Fn(&str) -> Option<OsString>) -> Result<SlurmStep, JoinError> {
        let text = |name: &str| var(name).map(|v| v.to_string_lossy().into_owned());
        let (Some(per_node), Some(node), Some(job), Some(step)) = (
            text("SLURM_STEP_TASKS_PER_NODE"),
            text("SLURM_NODEID"),
            text("SLURM_JOBID"),
            text("SLURM_STEPID"),
        ) else {
            return Err(JoinError::NotInSlurm);
        };
        let number = |name: &'static str, v: &str| {
            v.parse::<u32>()
                .map_err(|_| JoinError::Invalid(name, v.into()))
        };
        let node = number("SLURM_NODEID", &node)?;
        let local = text("SLURM_LOCALID").ok_or(JoinError::NoLocalId)?;
        let local = number("SLURM_LOCALID", &local)?;
        for (name, v) in [("SLURM_JOBID", &job), ("SLURM_STEPID", &step)] {
            let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
            if v.is_empty() || v.len() > 64 || !v.bytes().all(plain) {
                return Err(JoinError::Invalid(name, v.clone()));
            }
        }
        let tasks_here = tasks_on_node(&per_node, node)
            .ok_or_else(|| JoinError::Invalid("SLURM_STEP_TASKS_PER_NODE", per_node.clone()))?;
        if local >= tasks_here {
            return Err(JoinError::Invalid("SLURM_LOCALID", local.to_string()));
        }
        Ok(SlurmStep {
            job,
            step,
            node,
            tasks_here,
            local,
        })
    }

    /// `JOB.STEP.NODE`: what the keeper's command line names.
    pub(crate) fn tag(&self) -> String {
        format!("{}.{}.{}", self.job, self.step, self.node)
    }

    /// Whether this task mounts (and the others join it).
    pub(crate) fn leads(&self) -> bool {
        self.local == 0
    }

    /// How many other tasks of the step on this node join the leader.
    pub(crate) fn followers(&self) -> u32 {
        self.tasks_here.saturating_sub(1)
    }
}

/// The number of tasks on node `node` from `SLURM_STEP_TASKS_PER_NODE`
/// (`4`, `2(x3),1`: a count per node, `(xN)` repeating it N times).
pub(crate) fn tasks_on_node(per_node: &str, node: u32) -> Option<u32> {
    let mut index: u64 = 0;
    for part in per_node.split(',') {
        let (count, times) = match part.split_once("(x") {
            Some((count, rest)) => (count, rest.strip_suffix(')')?.parse::<u64>().ok()?),
            None => (part, 1),
        };
        let count = count.parse::<u32>().ok().filter(|&c| c > 0)?;
        if u64::from(node) < index + times {
            return Some(count);
        }
        index += times;
    }
    None
}

/// Why `--join` cannot be done.
#[derive(Debug)]
pub enum JoinError {
    /// Outside a Slurm step.
    NotInSlurm,
    NoLocalId,
    /// A Slurm variable that is not what Slurm sets (name, value).
    Invalid(&'static str, String),
    /// Inside a squashfs-mount session (a command it runs).
    AlreadyRunning,
    /// No keeper of the step (its tag) appeared in time.
    NoLeader(String),
    /// A process named like a keeper whose namespaces are not the caller's.
    NotOurs(u32),
    KeeperGone,
    Keeper(system::Error),
    KeeperSaid(String),
    Namespace(system::Error),
    WorkingDir(system::Error),
    WorkingDirInside(OsString, system::Error),
    /// `--join` with `--writable=DIR`.
    WithLayerDir,
    /// The keeper's command line, malformed.
    KeeperArguments,
    /// The keeper started with privileges.
    KeeperPrivileged,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::NotInSlurm => write!(f, "{NEEDS_SLURM} (run it as a task of srun)"),
            JoinError::NoLocalId => f.write_str("--join requires SLURM_LOCALID (srun sets it for every task) to tell which task mounts"),
            JoinError::Invalid(name, v) => write!(f, "--join: {name}={v} is not a value Slurm sets; run it as a task of srun"),
            JoinError::AlreadyRunning => f.write_str("--join: a squashfs-mount session is already running here (this is a command it runs): call squashfs-mount --join outside it, directly as the task srun starts"),
            JoinError::NoLeader(tag) => write!(f, "--join: the task with SLURM_LOCALID=0 of step {tag} made no mount to join within 60 s; see its error"),
            JoinError::NotOurs(pid) => write!(f, "--join: process {pid} looks like the step's keeper but its namespaces are not yours; refusing to join it"),
            JoinError::KeeperGone => f.write_str("--join: the task that mounted ended before this task could join it; run the step again"),
            JoinError::Keeper(e) => write!(f, "--join: cannot start the process that keeps the mount for the other tasks: {e}"),
            JoinError::KeeperSaid(why) => write!(f, "--join: the process that keeps the mount for the other tasks failed: {why}"),
            JoinError::Namespace(e) => write!(f, "--join: cannot join the namespaces of the task that mounted: {e}"),
            JoinError::WorkingDir(e) => write!(f, "--join: cannot determine the current directory: {e}"),
            JoinError::WorkingDirInside(dir, e) => write!(f, "--join: cannot return to the working directory {} after joining the mount: {e}", dir.to_string_lossy()),
            JoinError::WithLayerDir => f.write_str("--join cannot be combined with --writable=DIR (the layer is mounted in a user namespace of each task's own); use --writable[=SIZE] or no layer"),
            JoinError::KeeperArguments => f.write_str("--join-keeper is internal to --join"),
            JoinError::KeeperPrivileged => f.write_str("--join-keeper is internal to --join and never runs with privileges"),
        }
    }
}

crate::error_kind!(JoinError);

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |name| owned.iter().find(|(n, _)| n == name).map(|(_, v)| v.into())
    }

    const FULL: &[(&str, &str)] = &[
        ("SLURM_STEP_TASKS_PER_NODE", "2(x2),3"),
        ("SLURM_NODEID", "2"),
        ("SLURM_JOBID", "17"),
        ("SLURM_STEPID", "0"),
        ("SLURM_LOCALID", "1"),
    ];

    #[test]
    fn tasks_per_node_forms() {
        assert_eq!(tasks_on_node("4", 0), Some(4));
        assert_eq!(tasks_on_node("4", 1), None);
        assert_eq!(tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 3), Some(1));
        for bad in ["", "x", "2(x", "2(x3", "0", "-1", "2(xa)"] {
            assert_eq!(tasks_on_node(bad, 0), None, "{bad}");
        }
    }

    #[test]
    fn a_task_of_a_step() {
        let s = SlurmStep::from_env(env(FULL)).unwrap();
        assert_eq!(s.tag(), "17.0.2");
        assert_eq!(s.followers(), 2);
        assert!(!s.leads());
    }

    #[test]
    fn without_any_of_the_four_it_says_uenvs_words() {
        for missing in [
            "SLURM_STEP_TASKS_PER_NODE",
            "SLURM_NODEID",
            "SLURM_JOBID",
            "SLURM_STEPID",
        ] {
            let some: Vec<_> = FULL
                .iter()
                .copied()
                .filter(|(n, _)| *n != missing)
                .collect();
            let e = SlurmStep::from_env(env(&some)).unwrap_err();
            assert!(e.to_string().contains(NEEDS_SLURM), "{e}");
        }
    }

    #[test]
    fn values_slurm_never_sets_are_refused() {
        for (name, v) in [
            ("SLURM_JOBID", "1/2"),
            ("SLURM_STEPID", ""),
            ("SLURM_NODEID", "x"),
            ("SLURM_LOCALID", "5"),
        ] {
            let mut some: Vec<_> = FULL.iter().copied().filter(|(n, _)| *n != name).collect();
            some.push((name, v));
            assert!(SlurmStep::from_env(env(&some)).is_err(), "{name}={v}");
        }
    }
}
