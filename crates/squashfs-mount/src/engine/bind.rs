//! `--bind-mount=<source>:<destination>`: a directory of the caller's shown
//! at another place of the command's view.
//!
//! The source is looked up and pinned as the caller (O_PATH, symlinks
//! followed as the caller's own lookup would) before anything is mounted,
//! so it names what the caller can reach on the host and nothing else.
//! Root then makes a detached recursive copy of that directory and the
//! mounts below it (what `mount --rbind` makes) in the namespace the launch
//! started in, adds nosuid and nodev to every mount of the copy (flags are
//! only added: a read-only mount stays read-only, a writable one writable,
//! so the command can write nothing the caller could not) and makes them
//! slaves, so nothing mounted on the copy later in this call propagates
//! back to the host. The destination is resolved and judged like a mount
//! point (`MountPoint::resolve`, the policy's and the front end's allowed
//! places), in path order with the images.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};

use crate::error::{errno_hint, errno_words, Failure};
use crate::paths;
use crate::privilege::{ActingAsCaller, Credentials};
use crate::system::{self, Error as Errno, Reach};

use super::plan::Plan;

/// A bind source pinned as the caller.
pub struct Source {
    fd: OwnedFd,
    /// The kernel's name of the directory.
    pub real: OsString,
}

/// Step 2: every bind source of the plan, opened as the caller, by the
/// index of its mount in the plan.
pub fn open_sources(
    _as_caller: &impl ActingAsCaller,
    plan: &Plan,
) -> Result<BTreeMap<usize, Source>, Failure> {
    let mut out = BTreeMap::new();
    for (k, m) in plan.mounts.iter().enumerate() {
        let Some(source) = &m.bind else { continue };
        let shown = source.to_string_lossy();
        let fd = system::open_directory_path(source).map_err(|e| {
            Failure::about(
                &m.subject,
                match e {
                    Errno::NOTDIR => format!("the bind source {shown} is not a directory"),
                    e => format!(
                        "unable to read the bind source {shown} ({}){}",
                        errno_words(e),
                        errno_hint(e)
                    ),
                },
            )
        })?;
        let magic = system::filesystem_type(fd.as_fd()).map_err(|e| {
            Failure::about(&m.subject, format!("cannot statfs the bind source: {e}"))
        })?;
        if let Some(fs) = paths::forbidden_filesystem(magic) {
            return Err(Failure::about(
                &m.subject,
                format!("refusing to bind {shown}: it is on {fs}, a kernel API filesystem"),
            ));
        }
        let real = system::path_of_fd(fd.as_fd()).unwrap_or_else(|_| source.clone());
        out.insert(k, Source { fd, real });
    }
    Ok(out)
}

/// Step 3 (in the namespace the launch started in, whose mounts the
/// sources are on): the detached copies, by plan index.
pub fn copies<C: Credentials>(
    creds: &mut C,
    plan: &Plan,
    sources: &BTreeMap<usize, Source>,
) -> Result<BTreeMap<usize, OwnedFd>, Failure> {
    let mut out = BTreeMap::new();
    for (&k, source) in sources {
        let subject = &plan.mounts[k].subject;
        let copy = creds.as_root(|| -> Result<OwnedFd, Failure> {
            let copy = system::clone_tree(source.fd.as_fd()).map_err(|e| {
                Failure::about(subject, format!("cannot copy the bind source: {e}"))
            })?;
            system::set_tree_attributes(copy.as_fd(), system::nosuid_nodev(), true, Reach::Tree)
                .map_err(|e| {
                    Failure::about(
                        subject,
                        format!("cannot make the bind mount nosuid, nodev: {e}"),
                    )
                })?;
            Ok(copy)
        })??;
        out.insert(k, copy);
    }
    Ok(out)
}

/// The `--verbose` line of a bind made on `destination`.
pub fn note(source: &Source, destination: &std::ffi::OsStr) -> String {
    format!(
        "{}: bound on {} (with the mounts below it; nosuid, nodev; writable where the source is)",
        source.real.to_string_lossy(),
        destination.to_string_lossy()
    )
}
