//! The caller's stage of `--writable=DIR`, in order. It runs in
//! `squashfs-mount-layer`, a fresh program the launch executes after every
//! privilege is gone (or the Slurm plugin starts as the job user): its
//! memory holds nothing of the privileged phase, and its fds are the
//! caller's own and DIR's lock (the launch marks every other one
//! close-on-exec).
//!
//! Steps 1 to 3's refusals ([`claim`]) are made first by the launch, as
//! the caller, in `engine::mount_all` (a DIR in use, a layer made on other
//! images, a mount inside an image's mount point are refused there); it
//! hands DIR's lock, held, to the helper, which makes them again:
//!
//! 1. DIR: created 0700 if missing, the caller's own, not group- or
//!    other-writable, on a file system that can hold an upper layer, not
//!    read-only (`dir.rs`);
//! 2. its lock (a second launch on DIR is refused): the launch's;
//! 3. its stamp: each image mount point's sub-layer, made on the same
//!    images (`squashfs_format::stamp`); the sub-layers' directories;
//!    The caller's copies of what overlayfs cannot copy up itself
//!    (`copies.rs`), once per sub-layer;
//! 4. into DIR (so that the working directory moves into the new mount
//!    namespace with it);
//! 5. a user namespace (the caller mapped to itself, setgroups denied) and
//!    a mount namespace, every mount a slave;
//! 6. the lowers opened, then the overlays stacked in path order
//!    (`stack.rs`);
//! 7. every capability dropped (they were the user namespace's), the
//!    working directory entered again by path.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};

use super::dir::{read_stamp, LayerDir};
use super::mount_order;
use super::{copies, stack, LayerError, LayerPlan, STAMP_FILE};
use crate::system::error::Failure;
use crate::system::{self, Error, Uid};
use squashfs_format::stamp::Stamp;

/// The stage done: the command may run.
pub struct Entered {
    /// DIR's lock: held as long as this fd is open (by the command).
    pub lock: OwnedFd,
    /// What `-v` says.
    pub notes: Vec<String>,
    /// What to say even without `-v`: what the caller's copies could not
    /// copy (`copies.rs`), a few lines at most.
    pub warnings: Vec<String>,
}

/// DIR claimed for a launch: opened and judged, locked, its stamp matched.
pub struct Claimed {
    pub dir: LayerDir,
    pub lock: OwnedFd,
    /// What the caller's stage does with each mount of the view.
    pub steps: Vec<mount_order::Step>,
}

/// Steps 1 to 3's refusals, as the caller, in order: a view the layer
/// cannot go on (a mount inside an image's mount point); DIR created if
/// missing, opened and judged; no directory that is no layer (refused
/// before anything, the lock file, is made in it); its lock (a second
/// launch on DIR is refused), the one `handed` over if given; under the
/// lock, its stamp matched with the images (a layer made on other images
/// is refused). Nothing is written to the stamp. The launch runs it
/// before the drop (`engine::kept_layer::claim`) and hands the lock to
/// the helper, which runs it again with that lock.
pub(crate) fn claim(
    plan: &LayerPlan,
    uid: Uid,
    handed: Option<OwnedFd>,
) -> Result<Claimed, Failure> {
    let steps = mount_order::steps(&plan.mounts)?;
    let dir = LayerDir::open(&plan.dir, uid)?;
    read_stamp(&dir)?;
    let lock = dir.lock(uid, handed)?;
    let wanted = mount_order::image_mounts(&plan.mounts);
    read_stamp(&dir)?
        .assign(&wanted, &dir.path)
        .map_err(|e| LayerError::Stamp(e.to_string()))?;
    Ok(Claimed { dir, lock, steps })
}

/// Runs the stage for `plan` as the current (unprivileged) process.
pub(crate) fn enter(plan: &LayerPlan) -> Result<Entered, Failure> {
    let (uid, gid) = (system::effective_uid(), system::effective_gid());
    let handed = match plan.lock_fd {
        Some(n) => {
            Some(system::take_fd(n).ok_or_else(|| LayerError::NotHandedLock(shown(&plan.dir)))?)
        }
        None => None,
    };
    // 1., 2., and 3.'s refusals.
    let Claimed {
        mut dir,
        lock,
        steps,
    } = claim(plan, uid, handed)?;
    dir.created |= plan.dir_made;
    // 3.
    let wanted = mount_order::image_mounts(&plan.mounts);
    let (numbers, fresh) = sub_layers(&dir, &wanted)?;
    let mut notes = vec![format!(
        "writable layer {} ({}{}, kept)",
        shown(&dir.path),
        dir.filesystem,
        if dir.created { ", made now" } else { "" }
    )];
    for ((mount_point, _), (n, new)) in wanted.iter().zip(numbers.iter().zip(&fresh)) {
        notes.push(format!(
            "{}: writable layer {}/{n} ({})",
            shown(mount_point),
            shown(&dir.path),
            if *new {
                "new"
            } else {
                "kept from earlier launches"
            }
        ));
    }
    // 3b.
    let mut warnings = Vec::new();
    copy_what_overlayfs_cannot(&dir, &wanted, &numbers, &mut notes, &mut warnings)?;
    // 4.
    let cwd = system::open_directory_path(OsStr::new(".")).ok();
    system::change_dir_to(dir.fd.as_fd()).map_err(|e| LayerError::Enter(shown(&dir.path), e))?;
    // 5.
    system::enter_user_and_mount_namespace(uid, gid).map_err(|e| match e {
        Error::PERM | Error::NOSPC | Error::ACCESS | Error::INVAL => {
            LayerError::NoUserNamespaces(e)
        }
        _ => LayerError::UserNamespace(e),
    })?;
    // 6.
    let lowers = stack::open_lowers(&plan.mounts, &steps)?;
    stack::stack(&plan.mounts, &lowers, &numbers)?;
    drop(lowers);
    // 7.
    finish(&plan.cwd, cwd, &mut notes)?;
    Ok(Entered {
        lock,
        notes,
        warnings,
    })
}

fn shown(p: &OsStr) -> String {
    p.to_string_lossy().into_owned()
}

/// The sub-layer number of each image mount point (and whether it is
/// new), from DIR's stamp (written when it changed), with their
/// directories made.
fn sub_layers(
    dir: &LayerDir,
    wanted: &[(&OsString, &[mount_order::ImageId])],
) -> Result<(Vec<u32>, Vec<bool>), Failure> {
    let mut stamp = read_stamp(dir)?;
    let known: Vec<u32> = stamp.entries.iter().map(|e| e.number).collect();
    let (numbers, changed) = stamp
        .assign(wanted, &dir.path)
        .map_err(|e| LayerError::Stamp(e.to_string()))?;
    if changed {
        write_stamp(dir, &stamp)?;
    }
    let mut fresh = Vec::with_capacity(numbers.len());
    for (n, (mount_point, _)) in numbers.iter().zip(wanted) {
        let new = !known.contains(n);
        make_sub_layer(dir, *n, mount_point)?;
        fresh.push(new);
    }
    Ok((numbers, fresh))
}

/// Step 3b: in each sub-layer not yet complete, the caller's copies of
/// what overlayfs could not copy up itself (`copies.rs`), then its mark.
/// What cannot be copied is said, one line each (at most a few).
fn copy_what_overlayfs_cannot(
    dir: &LayerDir,
    wanted: &[(&OsString, &[mount_order::ImageId])],
    numbers: &[u32],
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<(), Failure> {
    let caller = copies::CallerRights::current();
    for ((mount_point, _), n) in wanted.iter().zip(numbers) {
        let mark = format!("{n}/{}", super::COPIED_MARK);
        if system::stat_at(dir.fd.as_fd(), &mark).is_ok() {
            continue;
        }
        let fail = |what: LayerError| Failure::about(&shown(mount_point), what);
        let lower = system::open_listable_dir(system::working_dir(), mount_point)
            .map_err(|e| fail(LayerError::OpenMountPoint(e)))?;
        stack::shows_the_image(lower.as_fd(), mount_point)?;
        let st =
            system::fstat(lower.as_fd()).map_err(|e| fail(LayerError::ExamineMountPoint(e)))?;
        let upper = system::open_listable_dir(dir.fd.as_fd(), OsStr::new(&format!("{n}/upper")))
            .map_err(|e| {
                let (dir, n) = (shown(&dir.path), *n);
                fail(LayerError::OpenUpper { dir, n, e })
            })?;
        let mut account = copies::Account::default();
        copies::copy_tree(
            &caller,
            lower.as_fd(),
            &st,
            upper.as_fd(),
            mount_point,
            &mut account,
        )
        .map_err(|why| {
            let dir = shown(&dir.path);
            fail(LayerError::Copies { dir, why })
        })?;
        const SHOWN: usize = 5;
        warnings.extend(account.problems.iter().take(SHOWN).cloned());
        if account.problems.len() > SHOWN {
            warnings.push(format!(
                "and {} more such files under {}",
                account.problems.len() - SHOWN,
                shown(mount_point)
            ));
        }
        notes.push(format!(
            "{}: your copies made in {}/{n}/upper: {} directories, {} files ({} bytes)",
            shown(mount_point),
            shown(&dir.path),
            account.dirs,
            account.files,
            account.bytes
        ));
        system::create_file_if_missing(dir.fd.as_fd(), &mark, 0o600).map_err(|e| {
            let (dir, mark) = (shown(&dir.path), mark.clone());
            fail(LayerError::WriteMark { dir, mark, e })
        })?;
    }
    Ok(())
}

/// Writes the stamp beside the old one, then renames it over.
fn write_stamp(dir: &LayerDir, stamp: &Stamp) -> Result<(), Failure> {
    let fail = |e: Error| LayerError::WriteStamp(shown(&dir.path), e);
    let tmp = ".stamp.new";
    match system::remove_file(dir.fd.as_fd(), tmp) {
        Ok(()) | Err(Error::NOENT) => {}
        Err(e) => return Err(fail(e).into()),
    }
    system::write_new_file(dir.fd.as_fd(), tmp, &stamp.render(), 0o600).map_err(fail)?;
    Ok(system::rename(dir.fd.as_fd(), tmp, STAMP_FILE).map_err(fail)?)
}

/// `DIR/<n>`, `upper` (a new one with the mode of the image's root,
/// without set-id bits: the merged root takes the upper's) and `work`.
fn make_sub_layer(dir: &LayerDir, n: u32, mount_point: &OsStr) -> Result<(), Failure> {
    let fail = |what: &'static str, e: Error| LayerError::MakeSubLayer {
        dir: shown(&dir.path),
        n,
        what,
        e,
    };
    let make = |path: &str, mode: u32| match system::make_dir(dir.fd.as_fd(), path, mode) {
        Ok(()) | Err(Error::EXIST) => Ok(()),
        Err(e) => Err(e),
    };
    make(&n.to_string(), 0o700).map_err(|e| fail("", e))?;
    let root_mode = system::open_directory_path(mount_point)
        .and_then(|fd| system::fstat(fd.as_fd()))
        .map(|st| st.mode & 0o1777)
        .unwrap_or(0o755);
    make(&format!("{n}/upper"), root_mode).map_err(|e| fail("upper", e))?;
    Ok(make(&format!("{n}/work"), 0o700).map_err(|e| fail("work", e))?)
}

/// Step 7: no capability left (verified), and the working directory
/// entered again by its path, so that the command starts in the layer's
/// view of it; where that fails, where it was.
fn finish(cwd: &OsStr, before: Option<OwnedFd>, notes: &mut Vec<String>) -> Result<(), Failure> {
    let drop_caps = system::clear_capabilities().and_then(|()| system::has_no_capabilities());
    if !matches!(drop_caps, Ok(true)) {
        return Err(Failure::new(LayerError::Capabilities));
    }
    if let Err(e) = system::change_dir(cwd) {
        notes.push(format!(
            "the working directory {} is not in the layer's view ({e}); the command starts where it was",
            shown(cwd)
        ));
        if let Some(fd) = before {
            let _ = system::change_dir_to(fd.as_fd());
        }
    }
    Ok(())
}
