//! Stage 2, as the caller: every image of the plan opened once per file,
//! its superblock checked, where it comes from judged on the opened fd,
//! and routed by the site policy: the kernel's squashfs (which needs a
//! loop device, so the image must suit one) or a FUSE server of the
//! caller's. Rootless mode has no kernel path.

use std::os::fd::AsFd;

use super::images::{Cache, Images, Mounting, Record};
use super::plan::{self, Plan, Planned};
use crate::config::Settings;
use crate::mounts::image::Image;
use crate::privilege::{ActingAsCaller, Credentials, Mode};
use crate::system;
use crate::system::error::Failure;

/// The call's images, opened and routed: one record per distinct file,
/// and each mount's images by index.
pub(crate) fn open_and_route<C: Credentials>(
    creds: &C,
    plan: &Plan,
    settings: &Settings,
) -> Result<Images, Failure> {
    let mut images = Images::default();
    let layers = open_each(creds, plan, |image, m| {
        let (dev, ino) = (image.id.dev, image.id.ino);
        Ok(match images.find(dev, ino) {
            Some(i) => i,
            None => {
                let record = route(creds, image, plan, settings, &m.subject)?;
                images.records.push(record);
                images.records.len() - 1
            }
        })
    })?;
    for indices in layers {
        images.add_mount(indices);
    }
    Ok(images)
}

/// Stage 2's checks of the images alone (no routing, nothing kept): what
/// [`open_and_route`] would refuse before it routes (`engine::check`).
pub(crate) fn open_only(as_caller: &impl ActingAsCaller, plan: &Plan) -> Result<(), Failure> {
    open_each(as_caller, plan, |_image, _m| Ok(0)).map(drop)
}

/// Every image of the plan, as the caller, in order: opened (its
/// superblock checked), its resolved path one `UENV_MOUNT_LIST` can carry,
/// a union's layers distinct files. `keep` takes each image as it is
/// opened and says the index of its record; each mount's indices, top
/// first, come back.
fn open_each(
    as_caller: &impl ActingAsCaller,
    plan: &Plan,
    mut keep: impl FnMut(Image, &Planned) -> Result<usize, Failure>,
) -> Result<Vec<Vec<usize>>, Failure> {
    let mut layers = Vec::with_capacity(plan.mounts.len());
    for m in &plan.mounts {
        let mut ids = Vec::with_capacity(m.images.len());
        let mut indices = Vec::with_capacity(m.images.len());
        for given in &m.images {
            let image = Image::open(as_caller, given, &m.subject)?;
            plan::refuse_separators(&image.path, &m.subject, "image")?;
            ids.push((image.id.dev, image.id.ino));
            indices.push(keep(image, m)?);
        }
        if m.union {
            plan::check_union_layers(&ids, &m.images, &m.subject)?;
        }
        layers.push(indices);
    }
    Ok(layers)
}

/// The record of an image the call has not opened before: which way it is
/// mounted, and why.
fn route<C: Credentials>(
    creds: &C,
    image: Image,
    plan: &Plan,
    settings: &Settings,
    subject: &str,
) -> Result<Record, Failure> {
    // Decided here, as the caller and before any lock of the cache is
    // taken: fstatfs and the walk of the path may wait on a FUSE server.
    let on_fuse = system::filesystem_type(image.fd.as_fd()).ok() == Some(system::FUSE_MAGIC);
    let (kernel, public, why, home) = if C::MODE.has_root() {
        let (prov, public) = image.provenance(creds, creds.caller());
        let route = settings.policy.route(&prov);
        let home = Home::of(on_fuse, prov.user_filesystem);
        (route.kernel, public, route.reason, home)
    } else {
        let why = "rootless mode: no kernel path".to_string();
        (false, false, why, Home::of(on_fuse, true))
    };
    let mounting = if kernel {
        // Whether the kernel has the image's compressor is checked when a
        // fresh instance is made (`kernel::KernelSource::instances`): a
        // cached one proves it, and reading the kernel's configuration
        // costs every launch about 12 us.
        image.check_loop_fit(subject)?;
        Mounting::Kernel {
            cache: kernel_cache(C::MODE, plan, settings, home, public),
        }
    } else {
        Mounting::Fuse {
            cache: fuse_cache(C::MODE, plan, settings, home),
        }
    };
    let route = format!(
        "{}: {} ({why})",
        image.path.to_string_lossy(),
        if kernel { "kernel" } else { "FUSE" }
    );
    Ok(Record {
        image,
        mounting,
        copies: 0,
        subject: subject.to_string(),
        route,
        instances: Vec::new(),
        outcome: None,
        server: None,
    })
}

/// Where an image file lives, as far as keeping its instances goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Home {
    /// Not on a FUSE file system (a disk, tmpfs, a network file system the
    /// kernel serves).
    Kernel,
    /// On a FUSE mount that root made (`user_id=0` in the mount table of
    /// the caller's namespace) and that is not one of this tool's: a
    /// cluster file system's client (GlusterFS, ceph-fuse, CVMFS) mounted
    /// for everyone. Root chose its server, as root chose a disk's.
    RootFuse,
    /// On a FUSE mount a user made, or one of this tool's (which serves a
    /// user's image even when root launched it), or one whose maker could
    /// not be told (`image::fuse_home`): its server decides every
    /// byte.
    UserFuse,
}

impl Home {
    fn of(on_fuse: bool, user_filesystem: bool) -> Home {
        match (on_fuse, user_filesystem) {
            (false, _) => Home::Kernel,
            (true, false) => Home::RootFuse,
            (true, true) => Home::UserFuse,
        }
    }
}

/// Why no instance of this launch may be kept in the image cache, when
/// that holds for all of them.
fn launch_cache(mode: Mode, plan: &Plan, settings: &Settings) -> Option<Cache> {
    if !mode.has_root() {
        Some(Cache::Private("rootless mode has no image cache"))
    } else if plan.no_cache {
        Some(Cache::Private("--no-cache"))
    } else if !settings.cache {
        Some(Cache::Private(
            "the image cache is off for this launch (cache = no)",
        ))
    } else {
        None
    }
}

/// Whether the caller's FUSE instance of an image may be kept in the image
/// cache: whenever the launch may, except
/// - for a file on a user's FUSE file system (or one of this tool's): a
///   cached server would hold that file open for as long as it is cached,
///   keeping the other file system's server busy and its mount alive after
///   its own user is done with it. When that is one of this tool's cached
///   instances (root launching an image packed inside a user's image),
///   each would keep the other alive and neither server could end (the
///   launcher's namespace, which the new server is started in, holds the
///   outer mount). A FUSE mount root made for everyone (a cluster file
///   system) is kept busy like a disk is: root unmounts it after `--gc`.
fn fuse_cache(mode: Mode, plan: &Plan, settings: &Settings, home: Home) -> Cache {
    match launch_cache(mode, plan, settings) {
        Some(no) => no,
        None if home == Home::UserFuse => Cache::Private(
            "the file is on a FUSE file system that a user, or this tool, serves, which a cached server would keep busy",
        ),
        None => Cache::Kept,
    }
}

/// Whether a kernel instance of the image may be kept in the image cache
/// (a user's FUSE instance: whenever the launch may), and if not why: for
/// the whole launch, or for this image. An image on a user's FUSE file
/// system reaches the kernel only under `kernel-images = all`, and is not
/// shared even then: its server could change its bytes under the other
/// users of a cached instance. One on a FUSE mount root made is shared as
/// one on root's disk is.
fn kernel_cache(mode: Mode, plan: &Plan, settings: &Settings, home: Home, public: bool) -> Cache {
    if let Some(no) = launch_cache(mode, plan, settings) {
        no
    } else if home == Home::UserFuse {
        Cache::Private(
            "the file is on a FUSE file system that a user, or this tool, serves, whose server could change it",
        )
    } else if !public {
        Cache::Private("its path is not open to everyone (a directory on it is not searchable by all), and only such images are shared")
    } else {
        Cache::Kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            cwd: "/".into(),
            mounts: Vec::new(),
            writable: None,
            no_cache: false,
            mutable_root: false,
            layer_dir: None,
        }
    }

    #[test]
    fn where_an_image_lives() {
        assert_eq!(Home::of(false, false), Home::Kernel);
        assert_eq!(Home::of(false, true), Home::Kernel);
        assert_eq!(Home::of(true, false), Home::RootFuse);
        assert_eq!(Home::of(true, true), Home::UserFuse);
    }

    /// Root's FUSE mounts are cached as a disk is, on both paths; a
    /// user's (or this tool's) never are.
    #[test]
    fn fuse_homes_and_the_cache() {
        let (p, s) = (plan(), Settings::default());
        for home in [Home::Kernel, Home::RootFuse] {
            assert_eq!(kernel_cache(Mode::Setuid, &p, &s, home, true), Cache::Kept);
            assert_eq!(fuse_cache(Mode::Setuid, &p, &s, home), Cache::Kept);
        }
        let user = Home::UserFuse;
        for c in [
            kernel_cache(Mode::Setuid, &p, &s, user, true),
            fuse_cache(Mode::Setuid, &p, &s, user),
        ] {
            assert!(
                matches!(c, Cache::Private(why) if why.contains("a user, or this tool, serves")),
                "{c:?}"
            );
        }
        // What holds for the whole launch still comes first.
        let rootless = fuse_cache(Mode::Rootless, &p, &s, Home::RootFuse);
        assert_eq!(rootless, Cache::Private("rootless mode has no image cache"));
    }
}
