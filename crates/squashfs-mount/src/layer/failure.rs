//! What the kept writable layer refuses or cannot do: one variant per kind
//! of failure (the plugin and the tests match them), each saying a sentence
//! that names the layer directory (or the image, or the mount point the
//! `Failure` is about), what went wrong and what to do.

use std::ffi::OsString;
use std::fmt;

use super::filesystem;
use crate::config::names::{self, FileNames};
use crate::system::{Error, Uid};

/// Why a directory is not a layer squashfs-mount made.
#[derive(Debug)]
pub enum Foreign {
    /// Its stamp is larger than any stamp.
    StampTooLarge,
    /// Its stamp does not parse (the format's reason).
    BadStamp(String),
    /// It holds this file but no stamp.
    Holds(String),
}

#[derive(Debug)]
pub enum LayerError {
    // The helper and where it is.
    /// Where squashfs-mount is installed is unknown.
    NotInstalled,
    /// The command's helper cannot be opened.
    NoHelper(OsString, Error),
    /// The plugin knows no FUSE server, so no helper next to it.
    NoHelperNextToPlugin,
    /// The plugin's helper cannot be opened.
    PluginHelperUnopenable(OsString, Error),
    /// The command could not mark its fds close-on-exec.
    CloseFds(Error),
    /// The command could not keep DIR's lock open for the helper.
    HandLock(Error),
    /// The command could not execute the helper (the I/O error's words).
    RunHelper(OsString, String),

    // DIR (dir.rs).
    Create(String, Error),
    Open(String, Error),
    Examine(String, Error),
    ExamineParent(String, Error),
    NotADirectory {
        dir: String,
        kind: &'static str,
    },
    NotYours {
        dir: String,
        owner: Uid,
    },
    OpenToOthers {
        dir: String,
        mode: u32,
    },
    FileSystem {
        dir: String,
        magic: u64,
    },
    ReadOnly(String),
    Lock(String, Error),
    NotTheLock {
        dir: String,
        kind: &'static str,
        owner: Uid,
    },
    InUse {
        dir: String,
        by: Option<u32>,
    },
    /// The lock handed to the helper is not DIR's.
    NotHandedLock(String),

    // The stamp and the sub-layers (stage.rs).
    NotALayer {
        dir: String,
        why: Foreign,
    },
    /// What is left of a layer whose removal stopped half-way (its stamp
    /// gone, a sub-layer's directory still there: `name`).
    PartlyRemoved {
        dir: String,
        name: String,
    },
    List(String, Error),
    ReadStamp(String, Error),
    WriteStamp(String, Error),
    /// The stamp refuses the images (the format's sentence).
    Stamp(String),
    MakeSubLayer {
        dir: String,
        n: u32,
        what: &'static str,
        e: Error,
    },
    /// Something is mounted inside an image's mount point.
    Nested {
        what: &'static str,
        path: String,
        holder: String,
    },
    /// The image's identity, for the stamp.
    Identity {
        image: String,
        e: Error,
    },

    // The caller's copies (about the mount point).
    OpenMountPoint(Error),
    ExamineMountPoint(Error),
    OpenUpper {
        dir: String,
        n: u32,
        e: Error,
    },
    Copies {
        dir: String,
        why: CopyError,
    },
    WriteMark {
        dir: String,
        mark: String,
        e: Error,
    },

    // The namespaces and the overlays (about the mount point).
    Enter(String, Error),
    NoUserNamespaces(Error),
    UserNamespace(Error),
    OwnNamespaces(Error),
    OpenLower(Error),
    NotTheImage(u64),
    /// Something missing where it must be (a bug).
    Internal(&'static str),
    /// One step of making the overlay (`step` says which).
    Overlay {
        step: String,
        e: Error,
    },
    OverlayRefused {
        e: Error,
        log: Vec<String>,
    },
    ReadOnlyOverlay {
        log: Vec<String>,
    },
    Attach(Error),
    Capabilities,

    // The plugin's start of the helper (helper.rs).
    StepHelper {
        dir: String,
        what: &'static str,
        e: Error,
    },
    Nul,
    /// The helper handed over something else than its namespaces.
    Tampered {
        dir: String,
        why: Tampered,
    },
    /// The helper's own sentence, relayed.
    Helper(String),
    NoAnswer {
        dir: String,
        program: String,
    },
}

/// What is left of a layer: what it is, and the command that removes it.
fn partly_removed(f: &mut fmt::Formatter<'_>, dir: &str, name: &str) -> fmt::Result {
    write!(
        f,
        "{dir} is what is left of a writable layer (it holds {name} but no {}: was it partly removed?); remove the rest with: {} (or give another directory)",
        super::STAMP_FILE,
        super::removal_command(dir)
    )
}

fn kernel_log(log: &[String]) -> String {
    match log.is_empty() {
        true => String::new(),
        false => format!(" (kernel: {})", log.join("; ")),
    }
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stamp = super::STAMP_FILE;
        match self {
            Foreign::StampTooLarge => write!(f, "its {stamp} is too large"),
            Foreign::BadStamp(e) => write!(f, "{stamp}: {e}"),
            Foreign::Holds(name) => write!(f, "it holds {name} but no {stamp}"),
        }
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use LayerError as L;
        match self {
            L::NotInstalled => f.write_str("cannot find where squashfs-mount is installed"),
            L::NoHelper(helper, e) => write!(
                f,
                "--writable=DIR needs {} ({e}); install it (make install)",
                helper.to_string_lossy()
            ),
            L::NoHelperNextToPlugin => write!(
                f,
                "--squashfs-writable=DIR needs {} installed next to the plugin",
                super::HELPER_NAME
            ),
            L::PluginHelperUnopenable(helper, e) => write!(
                f,
                "--squashfs-writable=DIR needs {} (installed next to the plugin), which cannot be opened: {e}",
                helper.to_string_lossy()
            ),
            L::CloseFds(e) => write!(f, "cannot close the tool's fds: {e}"),
            L::HandLock(e) => write!(
                f,
                "cannot hand the writable layer's lock to {}: {e}",
                super::HELPER_NAME
            ),
            L::RunHelper(helper, why) => {
                write!(f, "cannot run {}: {why}", helper.to_string_lossy())
            }
            _ => self.about_dir(f),
        }
    }
}

impl LayerError {
    /// DIR, its stamp and its sub-layers.
    fn about_dir(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use LayerError as L;
        match self {
            L::Create(dir, e) => {
                let hint = match *e {
                    Error::ACCESS | Error::PERM | Error::ROFS => {
                        "give a directory you may create, in a directory of yours on a node-local disk"
                    }
                    Error::NOENT => "its parent directory does not exist: create that first",
                    Error::LOOP => "a symbolic link loop, or a path through /proc/self/fd or /dev/fd, which a writable layer may not take: give the directory's own path",
                    _ => "give another directory",
                };
                write!(f, "cannot create the writable layer {dir}: {e}; {hint}")
            }
            L::Open(dir, e) if *e == Error::LOOP => write!(
                f,
                "cannot open the writable layer {dir}: {e} (a symbolic link loop, or a path through /proc/self/fd or /dev/fd, which a writable layer may not take); give the directory's own path"
            ),
            L::Open(dir, e) => write!(f, "cannot open the writable layer {dir}: {e}"),
            L::Examine(dir, e) => write!(f, "cannot examine the writable layer {dir}: {e}"),
            L::ExamineParent(parent, e) => write!(f, "cannot examine {parent}: {e}"),
            L::NotADirectory { dir, kind } => {
                write!(f, "the writable layer {dir} is a {kind}, not a directory")
            }
            L::NotYours { dir, owner } => write!(
                f,
                "the writable layer {dir} belongs to {}, not to you: a writable layer must be a directory of your own; give another directory",
                names::user(&FileNames::default(), *owner)
            ),
            L::OpenToOthers { dir, mode } => write!(
                f,
                "the writable layer {dir} is writable by its group or others (mode {mode:04o}), who could change your layer: chmod go-w it, or give another directory"
            ),
            L::FileSystem { dir, magic } => filesystem::refusal(f, *magic, dir),
            L::ReadOnly(dir) => write!(
                f,
                "the writable layer {dir} is on a read-only file system; give a directory on a writable, node-local disk"
            ),
            L::Lock(dir, e) => write!(f, "cannot lock the writable layer {dir}: {e}"),
            L::NotTheLock { dir, kind, owner } => write!(
                f,
                "the writable layer {dir} holds a {kind} named {} owned by {}, not the layer's lock; this is not a layer made by squashfs-mount: give another directory",
                super::LOCK_FILE,
                names::user(&FileNames::default(), *owner)
            ),
            L::InUse { dir, by } => {
                let by = by.map(|pid| format!(" (process {pid})")).unwrap_or_default();
                write!(
                    f,
                    "the writable layer {dir} is in use by another launch{by}; one launch at a time can use a layer directory (overlayfs cannot share it): wait for that one to end, or give another directory"
                )
            }
            L::NotHandedLock(dir) => write!(
                f,
                "the lock {} was handed is not {dir}/{}; refusing (it is started by squashfs-mount, not by hand)",
                super::HELPER_NAME,
                super::LOCK_FILE
            ),
            L::NotALayer { dir, why } => write!(
                f,
                "{dir} is not a writable layer made by squashfs-mount ({why}); give an empty or new directory"
            ),
            L::PartlyRemoved { dir, name } => partly_removed(f, dir, name),
            L::List(dir, e) => write!(f, "cannot list {dir}: {e}"),
            L::ReadStamp(dir, e) => write!(f, "cannot read {dir}/{}: {e}", super::STAMP_FILE),
            L::WriteStamp(dir, e) => write!(f, "cannot write {dir}/{}: {e}", super::STAMP_FILE),
            L::Stamp(why) => f.write_str(why),
            L::MakeSubLayer { dir, n, what, e } => write!(f, "cannot make {dir}/{n}/{what}: {e}"),
            L::Nested { what, path, holder } => write!(
                f,
                "with --writable=DIR nothing can be mounted inside an image's mount point ({what} {path} is inside {holder}): overlayfs cannot put a layer you mount on an image with mounts inside it; mount them side by side, or use --writable[=SIZE]"
            ),
            L::Identity { image, e } => {
                write!(f, "cannot read {image} for the layer's stamp: {e}")
            }
            _ => self.about_stage(f),
        }
    }

    /// The caller's copies, the namespaces, the overlays, the plugin's
    /// start of the helper.
    fn about_stage(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use LayerError as L;
        match self {
            L::OpenMountPoint(e) => write!(f, "cannot open the mount point: {e}"),
            L::ExamineMountPoint(e) => write!(f, "cannot examine the mount point: {e}"),
            L::OpenUpper { dir, n, e } => write!(f, "cannot open {dir}/{n}/upper: {e}"),
            L::Copies { dir, why } => write!(f, "writable layer {dir}: {why}"),
            L::WriteMark { dir, mark, e } => write!(f, "cannot write {dir}/{mark}: {e}"),
            L::Enter(dir, e) => write!(f, "cannot enter {dir}: {e}"),
            L::NoUserNamespaces(e) => write!(
                f,
                "--writable=DIR mounts the layer as you, in a user namespace, and user namespaces are not available here ({e}: disabled by sysctl user.max_user_namespaces=0 or kernel.unprivileged_userns_clone=0, or by a security module); use --writable[=SIZE] (a layer in memory), or ask your administrator to allow user namespaces"
            ),
            L::UserNamespace(e) => {
                write!(f, "cannot create a user namespace for the writable layer: {e}")
            }
            L::OwnNamespaces(e) => write!(f, "cannot open the layer's namespaces: {e}"),
            L::OpenLower(e) => write!(
                f,
                "cannot open the mount point in the layer's namespace: {e}"
            ),
            L::NotTheImage(magic) => write!(
                f,
                "the mount point no longer shows the image (statfs type {magic:#x}): was a directory on its path renamed? Launch again"
            ),
            L::Internal(what) => write!(f, "internal error: {what}"),
            L::Overlay { step, e } => write!(f, "{step}: {e}"),
            L::OverlayRefused { e, log } => {
                write!(f, "overlayfs refused the layer: {e}{}", kernel_log(log))
            }
            L::ReadOnlyOverlay { log } => write!(
                f,
                "overlayfs would mount the layer read-only{}; its directory must be on a local file system that supports extended attributes and whiteouts",
                kernel_log(log)
            ),
            L::Attach(e) => write!(f, "cannot attach the layer: {e}"),
            L::Capabilities => f.write_str(
                "cannot drop the user namespace's capabilities; refusing to run the command",
            ),
            L::StepHelper { dir, what, e } => write!(f, "writable layer {dir}: {what}: {e}"),
            L::Nul => f.write_str("a path of the writable layer contains a NUL byte"),
            L::Tampered { dir, why } => write!(
                f,
                "writable layer {dir}: the helper handed over {why}; refused (the helper runs as you: was it tampered with?)"
            ),
            L::Helper(why) => f.write_str(why),
            L::NoAnswer { dir, program } => write!(
                f,
                "writable layer {dir}: {program} did not answer (killed, or not installed next to the plugin?)"
            ),
            _ => unreachable!("said by Display or about_dir"),
        }
    }
}

crate::error_kind!(LayerError);

/// Why the caller's copies could not be made (the walk stops there).
#[derive(Debug)]
pub enum CopyError {
    /// The image's mount (as shown) or its sub-layer's upper directory
    /// could not be opened.
    Open(String, Error),
    /// The mode of the sub-layer's top directory could not be set.
    TopMode(String, Error),
    /// What was being done at `path` of the image.
    At {
        what: &'static str,
        path: String,
        e: Error,
    },
    /// The entry at this path could not be copied into the layer.
    Copy(String, Error),
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopyError::Open(shown, e) => write!(f, "cannot open {shown}: {e}"),
            CopyError::TopMode(shown, e) => write!(
                f,
                "cannot set the mode of the layer's top directory for {shown}: {e}"
            ),
            CopyError::At { what, path, e } => write!(f, "{what} {path}: {e}"),
            CopyError::Copy(path, e) => {
                write!(f, "cannot copy {path} into the writable layer: {e}")
            }
        }
    }
}

/// What the helper handed over that is not what it should be (it runs as
/// the job user, who could make it hand over anything they hold).
#[derive(Debug)]
pub enum Tampered {
    NotUserNamespace,
    /// A user namespace of another user.
    OwnedBy(Uid),
    OwnerUnreadable(Error),
    NotMountNamespace,
    /// A mount namespace its user namespace does not own.
    NotOwned,
    LockNotFile,
}

impl fmt::Display for Tampered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tampered::NotUserNamespace => {
                f.write_str("as its user namespace something that is not a user namespace")
            }
            Tampered::OwnedBy(owner) => {
                write!(f, "a user namespace owned by uid {owner}, not by you")
            }
            Tampered::OwnerUnreadable(e) => {
                write!(f, "a user namespace whose owner cannot be read ({e})")
            }
            Tampered::NotMountNamespace => {
                f.write_str("as its mount namespace something that is not a mount namespace")
            }
            Tampered::NotOwned => {
                f.write_str("a mount namespace that its user namespace does not own")
            }
            Tampered::LockNotFile => {
                f.write_str("as the layer's lock something that is not a regular file")
            }
        }
    }
}

#[cfg(test)]
#[path = "failure_tests.rs"]
mod tests;
