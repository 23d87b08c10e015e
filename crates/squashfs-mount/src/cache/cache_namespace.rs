//! Creating the cache namespace: a mount namespace rooted in a small private
//! tmpfs, kept alive by a bind mount of its nsfs file on
//! `/run/squashfs-mount/ns`. Done once, by the first launch, in the
//! namespace it started in, with the exclusive lock held.

use std::os::fd::{AsFd, BorrowedFd};

use super::{CacheError, MARKER, NS_FILE, SECRET_ATTRIBUTE, STATE_DIR};
use crate::privilege::AsRoot;
use crate::system::{self, Error, VisitError};

/// Size limit of the cache namespace's tmpfs (only directories and small
/// files live there).
const TMPFS_SIZE: &str = "8m";
/// CPUs tried when the kernel refuses to bind the cache namespace.
const MAX_CPU_ATTEMPTS: usize = 1024;

/// Makes the state directory a private mount, creates the cache namespace
/// and binds it on `<dir>/ns`. Root; exclusive lock held.
pub(crate) fn create(
    _root: &AsRoot,
    dir: BorrowedFd<'_>,
    stranded: fn(&dyn std::fmt::Display) -> !,
) -> Result<(), CacheError> {
    let fail = |what: &str, e: Error| CacheError::System(what.to_string(), e);
    // The bind of a mount-namespace file must not propagate (the kernel
    // refuses to copy one): make the state directory a private mount.
    match system::is_mount_root(dir, ".") {
        Ok(true) => {}
        Ok(false) => system::bind_onto_itself(dir)
            .map_err(|e| fail(&format!("cannot bind {STATE_DIR} onto itself"), e))?,
        Err(e) => {
            return Err(fail(
                &format!("cannot tell whether {STATE_DIR} is a mount"),
                e,
            ))
        }
    }
    system::make_private(STATE_DIR)
        .map_err(|e| fail(&format!("cannot make {STATE_DIR} a private mount"), e))?;
    let dir = system::open_dir_nofollow(system::working_dir(), STATE_DIR)
        .map_err(|e| fail(&format!("cannot open {STATE_DIR}"), e))?;
    super::root_only(dir.as_fd())?;
    system::create_file_if_missing(dir.as_fd(), NS_FILE, 0o400)
        .map_err(|e| fail(&format!("cannot create {STATE_DIR}/{NS_FILE}"), e))?;
    let target = system::open_path_nofollow(dir.as_fd(), NS_FILE)
        .map_err(|e| fail(&format!("cannot open {STATE_DIR}/{NS_FILE}"), e))?;

    // The kernel refuses (ELOOP) to bind a namespace file into a namespace
    // whose id is not lower than the bound one's. Ids grow in time, but
    // since Linux 6.18 they are handed out in per-CPU batches, so a
    // namespace made on another CPU than the current namespace may get a
    // lower id. The initial namespace has the lowest id and never hits
    // this; inside another namespace (a job container) creating the cache
    // namespace on each CPU in turn (not only those of the inherited
    // affinity, which the caller chose) finds one with a higher id. The
    // affinity is restored afterwards.
    let affinity = system::cpu_affinity().ok();
    let mut result = Err(Attempt::Loop);
    for cpu in std::iter::once(None).chain((0..MAX_CPU_ATTEMPTS).map(Some)) {
        if let Some(cpu) = cpu {
            if system::pin_to_cpu(cpu).is_err() {
                continue;
            }
        }
        result = attempt(target.as_fd(), stranded);
        if !matches!(result, Err(Attempt::Loop)) {
            break;
        }
    }
    if let Some(a) = &affinity {
        let _ = system::set_cpu_affinity(a);
    }
    result.map_err(|a| match a {
        Attempt::Loop => CacheError::Loop,
        Attempt::Failed(e) => e,
    })
}

enum Attempt {
    /// ELOOP: try on another CPU.
    Loop,
    Failed(CacheError),
}

fn attempt(
    target: BorrowedFd<'_>,
    stranded: fn(&dyn std::fmt::Display) -> !,
) -> Result<(), Attempt> {
    let made = system::in_new_mount_namespace(|| -> Result<(), Error> {
        system::become_tmpfs_rooted(STATE_DIR, TMPFS_SIZE)?;
        let secret = system::random_bytes::<32>()?;
        system::create_file_if_missing(system::working_dir(), MARKER, 0o600)?;
        system::set_attribute(MARKER, SECRET_ATTRIBUTE, &secret)
    });
    let (ns, setup) = match made {
        Ok(v) => v,
        Err(VisitError::Enter(e)) => {
            return Err(Attempt::Failed(CacheError::System(
                "cannot create the cache namespace".into(),
                e,
            )))
        }
        Err(VisitError::Stranded(s)) => stranded(&s),
    };
    setup.map_err(|e| {
        Attempt::Failed(CacheError::System(
            "cannot set up the cache namespace".into(),
            e,
        ))
    })?;
    match system::bind_namespace(ns.as_fd(), target) {
        Ok(()) => Ok(()),
        Err(Error::LOOP) => Err(Attempt::Loop),
        Err(e) => Err(Attempt::Failed(CacheError::System(
            format!("cannot bind the cache namespace on {STATE_DIR}/{NS_FILE}"),
            e,
        ))),
    }
}
