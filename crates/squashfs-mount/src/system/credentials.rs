//! Credentials and process state: ids, groups, capabilities, dumpable,
//! no_new_privs. The credential setters are per-thread system calls (see
//! `privilege`, which decides when they may run).
#![allow(unsafe_code)]


use super::{Gid, SysResult, Uid};

pub fn real_uid() -> Uid {
    rustix::process::getuid()
}
pub fn real_gid() -> Gid {
    rustix::process::getgid()
}
pub fn effective_uid() -> Uid {
    rustix::process::geteuid()
}
pub fn supplementary_groups() -> SysResult<Vec<Gid>> {
    rustix::process::getgroups()
}

/// Returns (real, effective, saved) uids.
pub fn res_uid() -> SysResult<(u32, u32, u32)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: getresuid writes three uid_t through valid, exclusive pointers
    // to locals; it has no other effect.
    let rc = unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    if rc != 0 {
        return Err(super::last_errno());
    }
    Ok((r, e, s))
}

/// Returns (real, effective, saved) gids.
pub fn res_gid() -> SysResult<(u32, u32, u32)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: as for getresuid above: three valid out-pointers to locals.
    let rc = unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
    if rc != 0 {
        return Err(super::last_errno());
    }
    Ok((r, e, s))
}

// The process is single-threaded whenever these run (checked in
// `privilege`), so the per-thread credential syscalls of rustix change the
// credentials of the whole process.

/// Sets only the effective uid (real and saved stay).
pub fn set_effective_uid(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(None, uid, None)
}
/// Sets only the effective gid (real and saved stay).
pub fn set_effective_gid(gid: Gid) -> SysResult<()> {
    rustix::thread::set_thread_res_gid(None, gid, None)
}
/// Sets real, effective and saved uid.
pub fn set_all_uids(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(uid, uid, uid)
}
/// Sets real, effective and saved gid.
pub fn set_all_gids(gid: Gid) -> SysResult<()> {
    rustix::thread::set_thread_res_gid(gid, gid, gid)
}
pub fn set_groups(groups: &[Gid]) -> SysResult<()> {
    rustix::thread::set_thread_groups(groups)
}

pub fn set_not_dumpable() -> SysResult<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
}
pub fn set_no_new_privs() -> SysResult<()> {
    rustix::thread::set_no_new_privs(true)
}
/// Whether no_new_privs is set (then the kernel ignored a setuid bit).
pub fn no_new_privs() -> SysResult<bool> {
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
pub fn effective_capabilities_empty() -> SysResult<bool> {
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

/// Sets only the real uid (effective and saved stay). With the effective
/// uid 0, any uid may be set.
pub fn set_real_uid(uid: Uid) -> SysResult<()> {
    rustix::thread::set_thread_res_uid(uid, None, None)
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
struct Reach {
    depth: usize,
    restore: Option<(Uid, super::SignalMask)>,
}

thread_local! {
    static REACH: std::cell::RefCell<Reach> =
        const { std::cell::RefCell::new(Reach { depth: 0, restore: None }) };
}

impl OutOfReach {
    pub fn enter() -> SysResult<OutOfReach> {
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
