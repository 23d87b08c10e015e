//! CPU affinity (see `cache::cache_namespace`).

use rustix::io::Errno;

use super::SysResult;

/// The CPUs this process may run on (its affinity), to be restored with
/// [`set_cpu_affinity`].
pub struct CpuAffinity(rustix::thread::CpuSet);

pub(crate) fn cpu_affinity() -> SysResult<CpuAffinity> {
    rustix::thread::sched_getaffinity(None).map(CpuAffinity)
}

pub(crate) fn set_cpu_affinity(a: &CpuAffinity) -> SysResult<()> {
    rustix::thread::sched_setaffinity(None, &a.0)
}

/// Restricts this process to run on `cpu` only (fails for a CPU that is
/// offline, beyond the kernel's limit or outside the process's cpuset).
pub(crate) fn pin_to_cpu(cpu: usize) -> SysResult<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(Errno::INVAL);
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
}
