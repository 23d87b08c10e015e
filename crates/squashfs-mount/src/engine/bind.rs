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
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};

use crate::config::paths;
use crate::privilege::{ActingAsCaller, Credentials};
use crate::system::error::{errno_hint, errno_words, Failure};
use crate::system::{self, Error as Errno};

use super::plan::Plan;
use super::root_side::RootSide;

/// What is wrong with a bind source (as given).
#[derive(Debug)]
pub enum BindError {
    NotDirectory(String),
    Unreachable(String, Errno),
    Statfs(Errno),
    KernelApi(String, &'static str),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BindError::NotDirectory(shown) => {
                write!(f, "the bind source {shown} is not a directory")
            }
            BindError::Unreachable(shown, e) => write!(
                f,
                "unable to read the bind source {shown} ({}){}",
                errno_words(*e),
                errno_hint(*e)
            ),
            BindError::Statfs(e) => write!(f, "cannot statfs the bind source: {e}"),
            BindError::KernelApi(shown, fs) => write!(
                f,
                "refusing to bind {shown}: it is on {fs}, a kernel API filesystem"
            ),
        }
    }
}

crate::error_kind!(BindError);

/// A bind source pinned as the caller.
pub struct Source {
    fd: OwnedFd,
    /// The kernel's name of the directory.
    pub real: OsString,
}

/// The call's binds, by the index of their mount in the plan: the sources
/// pinned (stage 2), then their copies (stage 3), which the attach stage
/// takes.
#[derive(Default)]
pub struct Binds {
    pub sources: BTreeMap<usize, Source>,
    pub copies: BTreeMap<usize, OwnedFd>,
}

impl Binds {
    /// Stage 2: every bind source of the plan, opened as the caller.
    pub(crate) fn pin(as_caller: &impl ActingAsCaller, plan: &Plan) -> Result<Binds, Failure> {
        Ok(Binds {
            sources: open_sources(as_caller, plan)?,
            copies: BTreeMap::new(),
        })
    }

    /// Stage 3, in the namespace the launch started in (whose mounts the
    /// sources are on): the detached copies.
    pub(crate) fn copy<C: Credentials, R: RootSide>(
        &mut self,
        creds: &mut C,
        root_side: &mut R,
        plan: &Plan,
    ) -> Result<(), Failure> {
        for (&k, source) in &self.sources {
            let subject = &plan.mounts[k].subject;
            let copy =
                creds.try_as_root(|root| root_side.copy_tree(root, source.fd.as_fd(), subject))?;
            self.copies.insert(k, copy);
        }
        Ok(())
    }

    /// The `--verbose` line of the bind of mount `k`, made on
    /// `destination`.
    pub(crate) fn note(&self, k: usize, destination: &std::ffi::OsStr) -> Option<String> {
        let source = self.sources.get(&k)?;
        Some(format!(
            "{}: bound on {} (with the mounts below it; nosuid, nodev; writable where the source is)",
            source.real.to_string_lossy(),
            destination.to_string_lossy()
        ))
    }
}

/// Every bind source of the plan, opened as the caller, by the index of
/// its mount in the plan.
fn open_sources(
    _as_caller: &impl ActingAsCaller,
    plan: &Plan,
) -> Result<BTreeMap<usize, Source>, Failure> {
    let mut out = BTreeMap::new();
    for (k, m) in plan.mounts.iter().enumerate() {
        let Some(source) = &m.bind else { continue };
        let fail = |e: BindError| Failure::about(&m.subject, e);
        let shown = || source.to_string_lossy().into_owned();
        let fd = system::open_directory_path(source).map_err(|e| {
            fail(match e {
                Errno::NOTDIR => BindError::NotDirectory(shown()),
                e => BindError::Unreachable(shown(), e),
            })
        })?;
        let magic = system::filesystem_type(fd.as_fd()).map_err(|e| fail(BindError::Statfs(e)))?;
        if let Some(fs) = paths::forbidden_filesystem(magic) {
            return Err(fail(BindError::KernelApi(shown(), fs)));
        }
        let real = system::path_of_fd(fd.as_fd()).unwrap_or_else(|_| source.clone());
        out.insert(k, Source { fd, real });
    }
    Ok(out)
}
