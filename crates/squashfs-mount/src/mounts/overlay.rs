//! Unions and writable layers with overlayfs, built from detached mounts.
//!
//! Layers are passed to overlayfs as file descriptors (fsconfig
//! FSCONFIG_SET_FD "lowerdir+", "upperdir", "workdir"): no path strings, no
//! option string assembled from user input. The upper layer is always a
//! fresh tmpfs made here (nosuid, nodev, size- and inode-limited), never a
//! directory a user chose, because overlayfs copies up with the mounter's
//! (root's) credentials. Overlay features that interpret trusted.overlay.*
//! xattrs found in layers are turned off, so crafted xattrs inside an image
//! cannot redirect lookups or pull data from elsewhere.

use std::ffi::OsStr;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};

use crate::config::LayerSize;
use crate::privilege::{AsRoot, Credentials};
use crate::system::error::Failure;
use crate::system::{self, FsContext, Gid, Uid};
use rustix::mount::MountAttrFlags;

/// The writable layers of one call share one tmpfs, so that the call's
/// total is bounded: at most this share of RAM (a root-fixed ceiling; users
/// cannot raise it). tmpfs pages are charged to the writer's memory cgroup.
pub const WRITABLE_MAX_PERCENT_OF_RAM: u64 = 50;
/// One inode per this many bytes of the size limit (tmpfs' own default
/// ratio is one per page of half of RAM).
pub const WRITABLE_BYTES_PER_INODE: u64 = 4096;
pub const WRITABLE_MIN_INODES: u64 = 1024;

/// What went wrong with a union or a writable layer.
#[derive(Debug)]
pub enum OverlayError {
    /// `--writable=SIZE` beyond the ceiling (MiB).
    TooLarge {
        asked: u64,
        ceiling: u64,
    },
    /// The kernel has no overlayfs.
    NoOverlay(system::Error),
    /// A step that failed (fsopen, fsconfig, fsmount, a directory).
    Step(String, system::Error),
    TmpfsRefused(system::Refused),
    LayersRefused(system::Refused),
    /// The top image's root could not be examined.
    TopRoot(system::Error),
}

impl fmt::Display for OverlayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverlayError::TooLarge { asked, ceiling } => write!(
                f,
                "--writable: {asked} MiB asked for, but the writable layers of one call may use at most {WRITABLE_MAX_PERCENT_OF_RAM}% of RAM ({ceiling} MiB); give a smaller size"
            ),
            OverlayError::NoOverlay(e) => write!(
                f,
                "the kernel offers no overlay filesystem ({e}); unions and --writable need overlayfs"
            ),
            OverlayError::Step(what, e) => write!(f, "{what} failed: {e}"),
            OverlayError::TmpfsRefused(r) => write!(
                f,
                "cannot create the writable layer's tmpfs: {}",
                r.with_log()
            ),
            OverlayError::LayersRefused(r) => {
                write!(f, "overlayfs refused the layers: {}{}", r.errno, r.kernel_said())
            }
            OverlayError::TopRoot(e) => write!(f, "cannot stat the image's root: {e}"),
        }
    }
}

crate::error_kind!(OverlayError);

/// Size and inode limits of a call's writable tmpfs, checked against RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WritableLimits {
    pub bytes: u64,
    pub inodes: u64,
}

impl WritableLimits {
    /// Refuses sizes above the ceiling rather than silently clamping.
    pub(crate) fn new(size: LayerSize, total_memory: u64) -> Result<WritableLimits, OverlayError> {
        let percent = |p: u64| (u128::from(total_memory) * u128::from(p) / 100) as u64;
        let ceiling = percent(WRITABLE_MAX_PERCENT_OF_RAM);
        let bytes = match size {
            LayerSize::Bytes(b) => b,
            LayerSize::PercentOfRam(p) => percent(u64::from(p)),
        };
        if bytes > ceiling {
            return Err(OverlayError::TooLarge {
                asked: bytes >> 20,
                ceiling: ceiling >> 20,
            });
        }
        let inodes = (bytes / WRITABLE_BYTES_PER_INODE).max(WRITABLE_MIN_INODES);
        Ok(WritableLimits { bytes, inodes })
    }
}

/// Who the directories the tool makes (a writable layer's, a `-r`
/// mirror's) belong to.
pub struct Owners {
    pub caller_uid: Uid,
    pub caller_gids: Vec<Gid>,
    /// Who creates them: root, or in rootless mode the caller (the only
    /// user and group its user namespace maps).
    pub creator: (Uid, Gid),
}

impl Owners {
    /// The caller's, for `creds`: root creates the directories; in
    /// rootless mode the caller does, and the user namespace maps only the
    /// caller's uid and primary gid.
    pub(crate) fn of<C: Credentials>(creds: &C) -> Owners {
        let caller = creds.caller();
        if C::MODE.has_root() {
            Owners {
                caller_uid: caller.uid,
                caller_gids: caller.all_gids(),
                creator: (Uid::ROOT, Gid::ROOT),
            }
        } else {
            Owners {
                caller_uid: caller.uid,
                caller_gids: vec![caller.gid],
                creator: (caller.uid, caller.gid),
            }
        }
    }
}

/// Owner and mode of a directory the tool makes in the image of another:
/// the union's root gets the top image root's, so a writable layer does
/// not change who may create files at the top level; a `-r` mirror gets
/// the mirrored directory's.
#[derive(Clone, Copy, Debug)]
pub struct RootAttributes {
    pub uid: Uid,
    pub gid: Gid,
    pub mode: u32,
    /// Who creates the layer's directories (see [`Owners::creator`]).
    pub creator: (Uid, Gid),
}

impl RootAttributes {
    /// The attributes of `model` (as fstat gave them), made harmless for a
    /// directory the creator makes: no set-id bits, and an owner or group
    /// other than the creator's or the caller's own is replaced by the
    /// creator's (so root never hands a directory to an arbitrary id
    /// chosen by an image's author, and a user namespace is never asked
    /// for an id it does not map).
    pub(crate) fn sanitized(model: &system::FileId, owners: &Owners) -> Self {
        let creator = owners.creator;
        RootAttributes {
            uid: if model.uid == owners.caller_uid {
                model.uid
            } else {
                creator.0
            },
            gid: if owners.caller_gids.contains(&model.gid) {
                model.gid
            } else {
                creator.1
            },
            mode: model.mode & 0o1777,
            creator,
        }
    }
}

/// The overlay options that keep what a layer holds from steering
/// overlayfs, the one list of them: every overlay this tool makes (root's
/// unions and writable layers here, a kept layer's in `layer::stack`) sets
/// each, one fsconfig call per option, through [`set_safe_options`].
pub const SAFE_OPTIONS: [(&str, &str); 5] = [
    // Neither create nor follow trusted.overlay.redirect.
    ("redirect_dir", "nofollow"),
    // Do not follow trusted.overlay.metacopy (data from another layer).
    ("metacopy", "off"),
    // No trusted.overlay.origin/index bookkeeping.
    ("index", "off"),
    ("nfs_export", "off"),
    ("xino", "off"),
];

/// Where overlay options are set: an overlay's filesystem context (and,
/// in the unit tests, a recorder of the calls).
pub trait OverlayOptions {
    fn set_option(&self, key: &str, value: &str) -> Result<(), system::Error>;
    fn set_flag(&self, key: &str) -> Result<(), system::Error>;
}

impl OverlayOptions for FsContext {
    fn set_option(&self, key: &str, value: &str) -> Result<(), system::Error> {
        self.set_string(key, OsStr::new(value))
    }
    fn set_flag(&self, key: &str) -> Result<(), system::Error> {
        FsContext::set_flag(self, key)
    }
}

/// An option that could not be set: what was set (`overlay KEY=VALUE`)
/// and the error.
pub type OptionFailed = (String, system::Error);

/// Sets `key=value` on `ctx`.
pub(crate) fn set_option(
    ctx: &impl OverlayOptions,
    key: &str,
    value: &str,
) -> Result<(), OptionFailed> {
    ctx.set_option(key, value)
        .map_err(|e| (format!("overlay {key}={value}"), e))
}

/// Sets every option of [`SAFE_OPTIONS`] on `ctx`.
pub(crate) fn set_safe_options(ctx: &impl OverlayOptions) -> Result<(), OptionFailed> {
    SAFE_OPTIONS
        .iter()
        .try_for_each(|(key, value)| set_option(ctx, key, value))
}

/// The options of root's unions and writable layers: [`SAFE_OPTIONS`].
pub(crate) fn union_options(ctx: &impl OverlayOptions) -> Result<(), OptionFailed> {
    set_safe_options(ctx)
}

/// The call's writable tmpfs (detached mount); each mount made writable
/// gets its own `upper-N` and `work-N` directories in it.
pub struct WritableTmpfs {
    tmpfs: OwnedFd,
    next: usize,
}

fn sys_err(subject: &str, what: &str, e: system::Error) -> Failure {
    Failure::about(subject, OverlayError::Step(what.to_string(), e))
}

impl WritableTmpfs {
    /// A fresh tmpfs, nosuid, nodev, size- and inode-limited.
    pub(crate) fn create(_root: &AsRoot, limits: WritableLimits) -> Result<WritableTmpfs, Failure> {
        let subject = "--writable";
        let ctx = FsContext::open("tmpfs").map_err(|e| sys_err(subject, "fsopen(tmpfs)", e))?;
        for (key, value) in [
            ("size", limits.bytes.to_string()),
            ("nr_inodes", limits.inodes.to_string()),
            ("mode", "0755".to_string()),
        ] {
            ctx.set_string(key, OsStr::new(&value))
                .map_err(|e| sys_err(subject, &format!("tmpfs {key}={value}"), e))?;
        }
        ctx.create()
            .map_err(|r| Failure::about(subject, OverlayError::TmpfsRefused(r)))?;
        let tmpfs = ctx
            .mount(MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV)
            .map_err(|e| sys_err(subject, "fsmount(tmpfs)", e))?;
        Ok(WritableTmpfs { tmpfs, next: 0 })
    }

    /// New `upper-N` (with the union root's attributes) and `work-N`.
    fn layer(
        &mut self,
        root: RootAttributes,
        subject: &str,
    ) -> Result<(OwnedFd, OwnedFd), Failure> {
        let n = self.next;
        self.next += 1;
        let upper = system::make_directory_in(
            self.tmpfs.as_fd(),
            &format!("upper-{n}"),
            root.mode,
            root.uid,
            root.gid,
        )
        .map_err(|e| sys_err(subject, "creating the upper directory", e))?;
        let work = system::make_directory_in(
            self.tmpfs.as_fd(),
            &format!("work-{n}"),
            0o700,
            root.creator.0,
            root.creator.1,
        )
        .map_err(|e| sys_err(subject, "creating the work directory", e))?;
        Ok((upper, work))
    }
}

/// Stacks `layers` (detached read-only mounts, top first) with overlayfs,
/// with a writable tmpfs layer on top when `writable` is given. Returns the
/// detached overlay mount (nosuid, nodev; read-only without a writable
/// layer).
pub(crate) fn stack(
    _root: &AsRoot,
    layers: &[OwnedFd],
    writable: Option<&mut WritableTmpfs>,
    root: RootAttributes,
    subject: &str,
) -> Result<OwnedFd, Failure> {
    let ctx = FsContext::open("overlay")
        .map_err(|e| Failure::about(subject, OverlayError::NoOverlay(e)))?;
    union_options(&ctx).map_err(|(what, e)| sys_err(subject, &what, e))?;
    for layer in layers {
        ctx.set_fd("lowerdir+", layer.as_fd()).map_err(|e| {
            sys_err(
                subject,
                "overlay lowerdir+ (this needs Linux 6.8 or later)",
                e,
            )
        })?;
    }
    let upper = match writable {
        Some(tmpfs) => {
            let (upper, work) = tmpfs.layer(root, subject)?;
            ctx.set_fd("upperdir", upper.as_fd())
                .map_err(|e| sys_err(subject, "overlay upperdir", e))?;
            ctx.set_fd("workdir", work.as_fd())
                .map_err(|e| sys_err(subject, "overlay workdir", e))?;
            Some((upper, work))
        }
        None => None,
    };
    ctx.create()
        .map_err(|r| Failure::about(subject, OverlayError::LayersRefused(r)))?;
    let attrs = if upper.is_some() {
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV
    } else {
        system::safe_mount_attributes()
    };
    let mount = ctx
        .mount(attrs)
        .map_err(|e| sys_err(subject, "fsmount(overlay)", e))?;
    // The layer fds may close now: the overlay superblock holds its own
    // references to its layers (and so to the tmpfs).
    drop(upper);
    Ok(mount)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_limits() {
        let ram = 8u64 << 30;
        assert_eq!(
            WritableLimits::new(LayerSize::PercentOfRam(50), ram)
                .unwrap()
                .bytes,
            4 << 30
        );
        assert!(WritableLimits::new(LayerSize::PercentOfRam(51), ram).is_err());
        assert!(WritableLimits::new(LayerSize::Bytes(5 << 30), ram).is_err());
        let small = WritableLimits::new(LayerSize::Bytes(16 << 20), ram).unwrap();
        assert_eq!(small.inodes, 4096);
        assert_eq!(
            WritableLimits::new(LayerSize::Bytes(1 << 20), ram)
                .unwrap()
                .inodes,
            WRITABLE_MIN_INODES
        );
    }

    #[test]
    fn root_attributes_are_sanitized() {
        let id = |uid: u32, gid: u32, mode: u32| system::FileId {
            dev: 0,
            ino: 0,
            mode,
            size: 0,
            nlink: 1,
            uid: Uid::from_raw(uid),
            gid: Gid::from_raw(gid),
            mtime: (0, 0),
            ctime: (0, 0),
            rdev: 0,
        };
        let owners = |gids: &[u32], creator: (u32, u32)| Owners {
            caller_uid: Uid::from_raw(1000),
            caller_gids: gids.iter().map(|&g| Gid::from_raw(g)).collect(),
            creator: (Uid::from_raw(creator.0), Gid::from_raw(creator.1)),
        };
        let raw = |r: RootAttributes| (r.uid.as_raw(), r.gid.as_raw(), r.mode);
        let root = owners(&[1000], (0, 0));
        assert_eq!(
            raw(RootAttributes::sanitized(&id(1000, 6, 0o2777), &root)),
            (1000, 0, 0o777)
        );
        let two = owners(&[1000, 5], (0, 0));
        assert_eq!(
            raw(RootAttributes::sanitized(&id(4242, 1000, 0o4755), &two)),
            (0, 1000, 0o755)
        );
        assert_eq!(
            RootAttributes::sanitized(&id(0, 0, 0o1777), &root).mode,
            0o1777
        );
        // Rootless: the caller creates the directories; ids the user
        // namespace does not map become the caller's.
        let rootless = owners(&[1000], (1000, 1000));
        let r = RootAttributes::sanitized(&id(0, 0, 0o755), &rootless);
        assert_eq!((raw(r).0, raw(r).1), (1000, 1000));
        assert_eq!(r.creator, rootless.creator);
    }
}
