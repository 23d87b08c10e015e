//! Credentials and process state: ids, groups, capabilities, dumpable,
//! no_new_privs. The credential setters are per-thread system calls (see
//! `privilege`, which decides when they may run).
#![allow(unsafe_code)]

use rustix::io::Errno;

use super::{Gid, SysResult, Uid};

pub(crate) fn real_uid() -> Uid {
    Uid::from_sys(rustix::process::getuid())
}
pub(crate) fn real_gid() -> Gid {
    Gid::from_sys(rustix::process::getgid())
}
pub(crate) fn effective_uid() -> Uid {
    Uid::from_sys(rustix::process::geteuid())
}
pub(crate) fn effective_gid() -> Gid {
    Gid::from_sys(rustix::process::getegid())
}

/// The program file this process executed (`/proc/self/exe`, the
/// kernel's link to it, not a name anyone passed), pinned as an O_PATH fd
/// and fstat'ed: its mode says how the program is installed. With the fd,
/// whose path (`path_of_fd`) names it in a message; read only then, as a
/// readlink in /proc costs every launch.
pub(crate) fn own_program() -> SysResult<(super::FileId, std::os::fd::OwnedFd)> {
    use rustix::fs::{Mode, OFlags, CWD};
    let fd = rustix::fs::openat(
        CWD,
        "/proc/self/exe",
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = super::fstat(std::os::fd::AsFd::as_fd(&fd))?;
    Ok((st, fd))
}
pub(crate) fn supplementary_groups() -> SysResult<Vec<Gid>> {
    Ok(rustix::process::getgroups()?
        .into_iter()
        .map(Gid::from_sys)
        .collect())
}

/// Returns (real, effective, saved) uids.
pub(crate) fn res_uid() -> SysResult<(Uid, Uid, Uid)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: getresuid writes three uid_t through valid, exclusive pointers
    // to locals; it has no other effect.
    let rc = unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    if rc != 0 {
        return Err(super::last_errno());
    }
    Ok((
        super::ids::kernel_uid(r)?,
        super::ids::kernel_uid(e)?,
        super::ids::kernel_uid(s)?,
    ))
}

/// Returns (real, effective, saved) gids.
pub(crate) fn res_gid() -> SysResult<(Gid, Gid, Gid)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: as for getresuid above: three valid out-pointers to locals.
    let rc = unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
    if rc != 0 {
        return Err(super::last_errno());
    }
    Ok((
        super::ids::kernel_gid(r)?,
        super::ids::kernel_gid(e)?,
        super::ids::kernel_gid(s)?,
    ))
}

// The process is single-threaded whenever these run (checked in
// `privilege`), so the per-thread credential syscalls of rustix change the
// credentials of the whole process.

/// Sets only the effective uid (real and saved stay).
pub(crate) fn set_effective_uid(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(None, uid.sys(), None)
}
/// Sets only the effective gid (real and saved stay).
pub(crate) fn set_effective_gid(gid: Gid) -> SysResult<()> {
    rustix::thread::set_thread_res_gid(None, gid.sys(), None)
}
/// Sets real, effective and saved uid.
pub(crate) fn set_all_uids(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(uid.sys(), uid.sys(), uid.sys())
}
/// Sets real, effective and saved gid.
pub(crate) fn set_all_gids(gid: Gid) -> SysResult<()> {
    rustix::thread::set_thread_res_gid(gid.sys(), gid.sys(), gid.sys())
}
pub(crate) fn set_groups(groups: &[Gid]) -> SysResult<()> {
    let groups: Vec<rustix::process::Gid> = groups.iter().map(|g| g.sys()).collect();
    rustix::thread::set_thread_groups(&groups)
}

pub(crate) fn set_not_dumpable() -> SysResult<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
}
pub fn set_no_new_privs() -> SysResult<()> {
    rustix::thread::set_no_new_privs(true)
}
/// Whether no_new_privs is set (then the kernel ignored a setuid bit).
pub(crate) fn no_new_privs() -> SysResult<bool> {
    rustix::thread::no_new_privs()
}

/// True when the effective, permitted and ambient capability sets are empty.
pub fn has_no_capabilities() -> SysResult<bool> {
    let sets = rustix::thread::capabilities(None)?;
    if !sets.effective.is_empty() || !sets.permitted.is_empty() {
        return Ok(false);
    }
    // The ambient set cannot hold what is not permitted, so an empty
    // permitted set implies an empty ambient set.
    Ok(true)
}

/// is after the effective uid changed from 0 to another uid).
pub(crate) fn effective_capabilities_empty() -> SysResult<bool> {
    Ok(rustix::thread::capabilities(None)?.effective.is_empty())
}

/// Clears every capability set of the calling thread (effective,
/// permitted, inheritable; the ambient set follows the permitted one).
pub fn clear_capabilities() -> SysResult<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
}

/// A set of capabilities (one bit each, as the kernel numbers them).
pub(crate) use rustix::thread::CapabilitySet as Capabilities;

/// The calling thread's capability sets (the ambient set is empty
/// whenever the inheritable one is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapabilityState {
    pub effective: Capabilities,
    pub permitted: Capabilities,
    pub inheritable: Capabilities,
    pub bounding: Capabilities,
}

/// Every capability this kernel knows, one at a time, with whether it is
/// in the bounding set (one PR_CAPBSET_READ each; the first number the
/// kernel does not know ends it with EINVAL).
fn bounding_set_members() -> impl Iterator<Item = SysResult<(Capabilities, bool)>> {
    (0..64)
        .map(|bit| Capabilities::from_bits_retain(1 << bit))
        .map(|c| rustix::thread::capability_is_in_bounding_set(c).map(|has| (c, has)))
        .take_while(|r| *r != Err(Errno::INVAL))
}

/// The calling thread's capability sets (capget, and PR_CAPBSET_READ for
/// each capability the kernel knows).
pub(crate) fn capability_state() -> SysResult<CapabilityState> {
    let sets = rustix::thread::capabilities(None)?;
    let mut bounding = Capabilities::empty();
    for member in bounding_set_members() {
        if let (c, true) = member? {
            bounding |= c;
        }
    }
    Ok(CapabilityState {
        effective: sets.effective,
        permitted: sets.permitted,
        inheritable: sets.inheritable,
        bounding,
    })
}

/// Leaves the calling thread (and what it execs) only the capabilities
/// `keep` among those it has: every other one leaves the bounding set
/// (PR_CAPBSET_DROP, which needs CAP_SETPCAP, itself dropped with the
/// rest), then the permitted and effective sets are what is left of
/// `keep`, the inheritable set (and so the ambient set) empty. On failure,
/// the system call that failed.
pub(crate) fn limit_capabilities(keep: Capabilities) -> Result<(), (&'static str, Errno)> {
    let before = rustix::thread::capabilities(None).map_err(|e| ("capget", e))?;
    // One PR_CAPBSET_DROP per capability not kept (dropping one already
    // gone succeeds), until the first number the kernel does not know.
    for bit in 0..64 {
        let c = Capabilities::from_bits_retain(1 << bit);
        if keep.contains(c) {
            continue;
        }
        match rustix::thread::remove_capability_from_bounding_set(c) {
            Ok(()) => {}
            Err(Errno::INVAL) => break,
            // Without CAP_SETPCAP, only a capability already gone is fine.
            Err(Errno::PERM) => match rustix::thread::capability_is_in_bounding_set(c) {
                Ok(false) => {}
                Err(Errno::INVAL) => break,
                Ok(true) => return Err(("prctl(PR_CAPBSET_DROP)", Errno::PERM)),
                Err(e) => return Err(("prctl(PR_CAPBSET_READ)", e)),
            },
            Err(e) => return Err(("prctl(PR_CAPBSET_DROP)", e)),
        }
    }
    let kept = before.permitted & keep;
    rustix::thread::set_capabilities(
        None,
        rustix::thread::CapabilitySets {
            effective: before.effective & kept,
            permitted: kept,
            inheritable: Capabilities::empty(),
        },
    )
    .map_err(|e| ("capset", e))
}

/// Sets only the real uid (effective and saved stay). With the effective
/// uid 0, any uid may be set.
pub(crate) fn set_real_uid(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(uid.sys(), None, None)
}

/// Held while the process holds something other users' launches wait on
/// (see `shared_lock`): its real uid is 0, so that its caller can neither
/// signal nor trace it (kill(2) and ptrace check the sender's ids against
/// the target's real and saved uid, both 0 now; the process is also not
/// dumpable), and the terminal's stop signals are blocked. Needs an
/// effective uid of 0. Guards may overlap and be dropped in any order: the
/// real uid and mask come back when the last one goes (a stop that arrived
/// meanwhile then takes effect).
pub struct OutOfReach {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// What the first guard of this thread changed: the real uid and mask to
/// give back, and how many guards are alive.
struct GuardState {
    depth: usize,
    restore: Option<(Uid, super::SignalMask)>,
}

thread_local! {
    static REACH: std::cell::RefCell<GuardState> =
        const { std::cell::RefCell::new(GuardState { depth: 0, restore: None }) };
}

impl OutOfReach {
    pub(crate) fn enter() -> SysResult<OutOfReach> {
        REACH.with_borrow_mut(|r| {
            if r.depth == 0 {
                let mask = super::block_job_control()?;
                let real = real_uid();
                if let Err(e) = set_real_uid(Uid::ROOT) {
                    mask.restore();
                    return Err(e);
                }
                r.restore = Some((real, mask));
            }
            r.depth += 1;
            Ok(OutOfReach {
                _not_send: std::marker::PhantomData,
            })
        })
    }
}

impl Drop for OutOfReach {
    fn drop(&mut self) {
        REACH.with_borrow_mut(|r| {
            r.depth -= 1;
            if r.depth > 0 {
                return;
            }
            if let Some((real, mask)) = r.restore.take() {
                // Cannot fail with an effective uid of 0. Were it to, the
                // real uid would stay 0: the process would only stay out of
                // its caller's reach, and the drop of privileges sets every
                // id anyway.
                let _ = set_real_uid(real);
                mask.restore();
            }
        });
    }
}
