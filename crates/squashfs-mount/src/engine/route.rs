//! Stage 2, as the caller: every image of the plan opened once per file,
//! its superblock checked, where it comes from judged on the opened fd,
//! and routed by the site policy: the kernel's squashfs (which needs a
//! loop device, so the image must suit one) or a FUSE server of the
//! caller's. Rootless mode has no kernel path.

use std::os::fd::AsFd;

use super::images::{Cache, Images, Mounting, Record};
use super::plan::{self, Plan};
use crate::config::Settings;
use crate::error::Failure;
use crate::image::Image;
use crate::privilege::{Credentials, Mode};
use crate::system;

/// The call's images, opened and routed: one record per distinct file,
/// and each mount's images by index.
pub fn open_and_route<C: Credentials>(
    creds: &C,
    plan: &Plan,
    settings: &Settings,
) -> Result<Images, Failure> {
    let mut images = Images::default();
    for m in &plan.mounts {
        let mut ids = Vec::with_capacity(m.images.len());
        let mut indices = Vec::with_capacity(m.images.len());
        for given in &m.images {
            let image = Image::open(creds, given, &m.subject)?;
            plan::refuse_separators(&image.path, &m.subject, "image")?;
            let (dev, ino) = (image.id.dev, image.id.ino);
            ids.push((dev, ino));
            let i = match images.find(dev, ino) {
                Some(i) => i,
                None => {
                    images
                        .records
                        .push(route(creds, image, plan, settings, &m.subject)?);
                    images.records.len() - 1
                }
            };
            indices.push(i);
        }
        if m.union {
            plan::check_union_layers(&ids, &m.images, &m.subject)?;
        }
        images.add_mount(indices);
    }
    Ok(images)
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
    let on_fuse = system::filesystem_type(image.fd.as_fd()).ok() == Some(system::FUSE_MAGIC);
    let (kernel, public, why) = if C::MODE.has_root() {
        let (prov, public) = image.provenance(creds, creds.caller());
        let route = settings.policy.route(&prov);
        (route.kernel, public, route.reason)
    } else {
        (false, false, "rootless mode: no kernel path".to_string())
    };
    let mounting = if kernel {
        // Whether the kernel has the image's compressor is checked when a
        // fresh instance is made (`kernel::KernelSource::instances`): a
        // cached one proves it, and reading the kernel's configuration
        // costs every launch about 12 us.
        image.check_loop_fit(subject)?;
        Mounting::Kernel {
            cache: kernel_cache(C::MODE, plan, settings, on_fuse, public),
        }
    } else {
        Mounting::Fuse {
            cache: fuse_cache(C::MODE, plan, settings, on_fuse),
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
    })
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
/// - for a file on a FUSE file system: a cached server would hold that
///   file open for as long as it is cached, keeping the other file
///   system's server busy and its mount alive after its own user is done
///   with it. When that is one of this tool's cached instances (root
///   launching an image packed inside a user's image), each would keep the
///   other alive and neither server could end (the launcher's namespace,
///   which the new server is started in, holds the outer mount).
fn fuse_cache(mode: Mode, plan: &Plan, settings: &Settings, on_fuse: bool) -> Cache {
    match launch_cache(mode, plan, settings) {
        Some(no) => no,
        None if on_fuse => Cache::Private(
            "the file is on a FUSE file system, which a cached server would keep busy",
        ),
        None => Cache::Kept,
    }
}

/// Whether a kernel instance of the image may be kept in the image cache
/// (a user's FUSE instance: whenever the launch may), and if not why: for
/// the whole launch, or for this image.
fn kernel_cache(
    mode: Mode,
    plan: &Plan,
    settings: &Settings,
    on_fuse: bool,
    public: bool,
) -> Cache {
    if let Some(no) = launch_cache(mode, plan, settings) {
        no
    } else if on_fuse {
        Cache::Private("the file is on a FUSE file system, whose server could change it")
    } else if !public {
        Cache::Private("its path is not open to everyone (a directory on it is not searchable by all), and only such images are shared")
    } else {
        Cache::Kept
    }
}
