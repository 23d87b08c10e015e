//! Resource limits the caller set: raised for the privileged phase (so that
//! a limit cannot stop it half-way, at a point the caller chooses) and
//! restored before the command runs.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use super::SysResult;

/// The limits a caller can lower to disturb the privileged phase.
/// (RLIMIT_CPU and RLIMIT_STACK would let the caller have the kernel kill
/// the launch at a CPU instant of its choosing, also out of its reach.)
const RESOURCES: [Resource; 7] = [
    Resource::Fsize,
    Resource::Nofile,
    Resource::As,
    Resource::Nproc,
    Resource::Core,
    Resource::Cpu,
    Resource::Stack,
];

/// The caller's limits that were changed, as found at start.
pub struct CallerLimits(Vec<(Resource, Rlimit)>);

/// Records the caller's limits and raises them for the privileged phase:
/// no file size, address space, process, CPU time or stack limit, as many open files as
/// root may have, no core dumps. Raising a hard limit needs
/// CAP_SYS_RESOURCE, which some machines take away even from root (a
/// container's bounding set): then the soft limit is raised to the hard
/// one, and what a lowered hard limit still stops fails as an error the
/// tool handles (SIGXFSZ is ignored), never as a signal half-way.
pub(crate) fn raise_for_privileged_phase() -> SysResult<CallerLimits> {
    let mut changed = Vec::with_capacity(RESOURCES.len());
    for r in RESOURCES {
        let old = getrlimit(r);
        let want = match r {
            // The hard limit stays: a lowered hard limit could not be
            // raised back for the command.
            Resource::Core => Rlimit {
                current: Some(0),
                maximum: old.maximum,
            },
            Resource::Nofile => Rlimit {
                current: Some(1 << 16),
                maximum: Some(1 << 16),
            },
            _ => Rlimit {
                current: None,
                maximum: None,
            },
        };
        // Limits that are already what the phase needs (an unlimited file
        // size, no core dumps, ...) are left alone, and not restored.
        if old == want {
            continue;
        }
        let fallback = Rlimit {
            current: old.maximum,
            maximum: old.maximum,
        };
        if setrlimit(r, want).is_err() {
            if old == fallback {
                continue;
            }
            setrlimit(r, fallback)?;
        }
        changed.push((r, old));
    }
    Ok(CallerLimits(changed))
}

impl CallerLimits {
    /// The caller's limits as (resource, limit) for prlimit64 in a forked
    /// child, where nothing may be allocated.
    pub(crate) fn raw(&self) -> Vec<(libc::c_int, libc::rlimit64)> {
        let value = |v: Option<u64>| v.unwrap_or(libc::RLIM64_INFINITY);
        self.0
            .iter()
            .map(|(r, lim)| {
                let raw = libc::rlimit64 {
                    rlim_cur: value(lim.current),
                    rlim_max: value(lim.maximum),
                };
                (*r as libc::c_int, raw)
            })
            .collect()
    }

    /// Sets the caller's limits again (after the drop of privileges,
    /// before exec: lowering a limit needs no privilege).
    pub(crate) fn restore(&self) -> SysResult<()> {
        for (r, lim) in &self.0 {
            setrlimit(*r, *lim)?;
        }
        Ok(())
    }
}
