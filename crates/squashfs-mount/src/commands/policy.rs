//! `squashfs-mount --policy [IMAGE...]`: the site policy in force, and for
//! each image which way a launch would mount it and why. Read-only: it
//! opens the images as the caller (like a launch) and mounts nothing.

use std::ffi::OsString;

use crate::config::policy::{KernelImages, Policy, TrustedMatch};
use crate::config::{self, Settings, CONFIG_PATH};
use crate::error::{print_stdout, Failure};
use crate::image::Image;
use crate::paths::Places;
use crate::privilege::{Credentials, PrivilegeError, Privileges, RootPhase, Unprivileged};
use crate::system::Uid;

fn ids<T: std::fmt::Display>(list: &[T]) -> String {
    if list.is_empty() {
        "(none)".into()
    } else {
        list.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
    }
}

fn dirs(places: &Places) -> String {
    if places.is_empty() {
        "(none)".into()
    } else {
        places.list()
    }
}

/// The policy as `key = value` lines.
pub fn describe(p: &Policy) -> String {
    let kernel = match p.kernel_images {
        KernelImages::All => "all",
        KernelImages::Trusted => "trusted",
        KernelImages::None => "none",
    };
    let m = match p.trusted_match {
        TrustedMatch::Any => "any",
        TrustedMatch::All => "all",
    };
    format!(
        "kernel-images = {kernel}\ntrusted-owners = {}\ntrusted-groups = {}\ntrusted-dirs = {}\ntrusted-match = {m}\n\
         allowed-users = {}\nallowed-groups = {}\nmount-points = {}\nallow-writable = {}\nallow-union = {}\nallow-mutable-root = {}\nmax-images-per-call = {}\n",
        ids(&std::iter::once(Uid::ROOT)
            .chain(p.trusted_owners.iter().copied().filter(|u| !u.is_root()))
            .collect::<Vec<_>>()),
        ids(&p.trusted_groups),
        dirs(&p.trusted_dirs),
        if p.allowed_users.is_empty() && p.allowed_groups.is_empty() { "(everyone)".to_string() } else { ids(&p.allowed_users) },
        ids(&p.allowed_groups),
        if p.mount_points.is_empty() { "(anywhere but /, /proc, /sys, /dev)".to_string() } else { dirs(&p.mount_points) },
        if p.allow_writable { "yes" } else { "no" },
        if p.allow_union { "yes" } else { "no" },
        if p.allow_mutable_root { "yes" } else { "no" },
        p.max_images_per_call,
    )
}

pub fn run(images: &[OsString]) -> Result<(), Failure> {
    match Privileges::acquire(RootPhase::IDS) {
        Ok(mut privileges) => {
            let settings: Settings = privileges.as_root(|_root| config::load())?;
            let caller = privileges.caller().clone();
            let mut out = format!("# site policy in force ({CONFIG_PATH}, or built-in defaults where it sets nothing)\n{}", describe(&settings.policy));
            if let Err(why) = settings.policy.admits(&caller) {
                out += &format!("# you: {why}\n");
            }
            for given in images {
                let subject = given.to_string_lossy();
                let line = match Image::open(&privileges, given, &subject) {
                    Ok(img) => {
                        let (prov, _) = img.provenance(&privileges, &caller);
                        let route = settings.policy.route(&prov);
                        format!(
                            "{}: {} ({})\n",
                            img.path.to_string_lossy(),
                            if route.kernel { "kernel" } else { "FUSE" },
                            route.reason
                        )
                    }
                    Err(e) => format!("{e}\n"),
                };
                out += &line;
            }
            privileges.drop_for_good()?;
            print_stdout(&out);
            Ok(())
        }
        Err(PrivilegeError::NotSetuidRoot) => {
            let _checked = Unprivileged::check()?;
            let mut out = "# not installed setuid root: every image is served through FUSE in a user namespace (rootless mode)\n".to_string();
            for given in images {
                out += &format!("{}: FUSE (rootless mode)\n", given.to_string_lossy());
            }
            print_stdout(&out);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
