//! `squashfs-mount --policy [IMAGE...]`: the site policy in force, and for
//! each image which way a launch would mount it and why. Read-only: it
//! opens the images as the caller (like a launch) and mounts nothing.

use std::ffi::OsString;

use crate::cli::paths::Places;
use crate::config::names::{self, FileNames};
use crate::config::policy::{KernelImages, Policy, PolicyError, TrustedMatch};
use crate::config::{self, Settings, CONFIG_PATH};
use crate::mounts::image::Image;
use crate::privilege::{Credentials, PrivilegeError, Privileges, RootPhase, Unprivileged};
use crate::system::error::{print_stdout, Failure};
use crate::system::{Gid, Uid};

fn ids<T: std::fmt::Display>(list: &[T]) -> String {
    if list.is_empty() {
        "(none)".into()
    } else {
        list.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
    }
}

/// Users as configuration values: names where /etc/passwd has them.
fn users(n: &FileNames, list: &[Uid]) -> Vec<String> {
    list.iter().map(|&u| names::user_value(n, u)).collect()
}

/// Groups as configuration values: names where /etc/group has them.
fn groups(n: &FileNames, list: &[Gid]) -> Vec<String> {
    list.iter().map(|&g| names::group_value(n, g)).collect()
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
    let n = &FileNames::default();
    format!(
        "kernel-images = {kernel}\ntrusted-owners = {}\ntrusted-groups = {}\ntrusted-dirs = {}\ntrusted-match = {m}\n\
         allowed-users = {}\nallowed-groups = {}\nmount-points = {}\nallow-writable = {}\nallow-union = {}\nallow-mutable-root = {}\nmax-images-per-call = {}\n",
        ids(&users(n, &std::iter::once(Uid::ROOT)
            .chain(p.trusted_owners.iter().copied().filter(|u| !u.is_root()))
            .collect::<Vec<_>>())),
        ids(&groups(n, &p.trusted_groups)),
        dirs(&p.trusted_dirs),
        if p.allowed_users.is_empty() && p.allowed_groups.is_empty() { "(everyone)".to_string() } else { ids(&users(n, &p.allowed_users)) },
        ids(&groups(n, &p.allowed_groups)),
        if p.mount_points.is_empty() { "(anywhere but /, /proc, /sys, /dev)".to_string() } else { dirs(&p.mount_points) },
        if p.allow_writable { "yes" } else { "no" },
        if p.allow_union { "yes" } else { "no" },
        if p.allow_mutable_root { "yes" } else { "no" },
        p.max_images_per_call,
    )
}

/// What `--policy` reports about one image.
struct Verdict {
    image: String,
    /// Some(true): the kernel; Some(false): FUSE; None: it cannot be read.
    kernel: Option<bool>,
    /// The route's reason, or why the image cannot be read.
    reason: String,
}

/// Why the caller cannot use the FUSE path here: /dev/fuse does not open
/// for them (the error), and what to do.
struct FuseUnusable(crate::system::Error);

impl std::fmt::Display for FuseUnusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let problem = crate::mounts::fuse::device_problem(self.0);
        write!(f, "/dev/fuse cannot be opened ({}): {problem}", self.0)
    }
}

/// Whether the caller can use the FUSE path here (/dev/fuse opens for
/// them). Asked as the caller.
fn fuse_for_caller() -> Result<(), FuseUnusable> {
    crate::system::open_fuse_device()
        .map(drop)
        .map_err(FuseUnusable)
}

/// Whether the site's configuration file exists (asked as the caller:
/// /etc is searchable by everyone).
fn config_exists() -> bool {
    crate::system::stat_following(crate::system::working_dir(), CONFIG_PATH).is_ok()
}

/// The report as text: `key = value` lines, `#` comments, and a line
/// `IMAGE: kernel (reason)` or `IMAGE: FUSE (reason)` per readable image
/// (the form `sqfs bench` reads).
fn text(
    policy: Option<&str>,
    admitted: &Result<(), PolicyError>,
    fuse: &Result<(), FuseUnusable>,
    verdicts: &[Verdict],
    rootless: bool,
) -> String {
    let mut out = if rootless {
        "# not installed setuid root: every image is served through FUSE in a user namespace (rootless mode)\n".to_string()
    } else if config_exists() {
        format!("# site policy in force: {CONFIG_PATH} (built-in defaults where it sets nothing)\n")
    } else {
        format!("# site policy in force: the built-in defaults ({CONFIG_PATH} does not exist)\n")
    };
    out += policy.unwrap_or_default();
    if let Err(why) = admitted {
        out += &format!("# you: {why}\n");
    }
    match fuse {
        Ok(()) => out += "# FUSE path (your own images, and any the policy does not trust for the kernel): usable by you\n",
        Err(why) => out += &format!("# FUSE path (your own images, and any the policy does not trust for the kernel): NOT usable by you: {why}\n"),
    }
    // Images that cannot be read are named on standard error only.
    for v in verdicts {
        let Some(kernel) = v.kernel else { continue };
        let way = if kernel { "kernel" } else { "FUSE" };
        out += &format!("{}: {way} ({})\n", v.image, v.reason);
        if !kernel && fuse.is_err() {
            out += &format!(
                "# {}: a launch is refused here: you cannot use FUSE (above)\n",
                v.image
            );
        }
    }
    out
}

fn json_text(text: &str) -> String {
    super::status::json_string(text.as_bytes())
}

/// The report as one JSON object.
fn json(
    policy: Option<&str>,
    admitted: &Result<(), PolicyError>,
    fuse: &Result<(), FuseUnusable>,
    verdicts: &[Verdict],
    rootless: bool,
) -> String {
    let settings: Vec<String> = policy
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| format!("{}:{}", json_text(k), json_text(v)))
        .collect();
    let images: Vec<String> = verdicts
        .iter()
        .map(|v| {
            let path = match v.kernel {
                Some(true) => "\"kernel\"",
                Some(false) => "\"FUSE\"",
                None => "null",
            };
            let usable = match v.kernel {
                Some(true) => "true",
                Some(false) if fuse.is_ok() => "true",
                _ => "false",
            };
            let (reason, error) = match v.kernel {
                Some(_) => (json_text(&v.reason), "null".to_string()),
                None => ("null".to_string(), json_text(&v.reason)),
            };
            format!("{{\"image\":{},\"path\":{path},\"reason\":{reason},\"mountable_here\":{usable},\"error\":{error}}}", json_text(&v.image))
        })
        .collect();
    fn err_or_null<E: std::fmt::Display>(r: &Result<(), E>) -> String {
        match r {
            Ok(()) => "null".to_string(),
            Err(why) => json_text(&why.to_string()),
        }
    }
    format!(
        "{{\"setuid\":{},\"config_file\":{},\"config_file_exists\":{},\"policy\":{{{}}},\"admitted\":{},\"not_admitted_because\":{},\"fuse_usable\":{},\"fuse_unusable_because\":{},\"images\":[{}]}}\n",
        !rootless,
        json_text(CONFIG_PATH),
        config_exists(),
        settings.join(","),
        admitted.is_ok(),
        err_or_null(admitted),
        fuse.is_ok(),
        err_or_null(fuse),
        images.join(",")
    )
}

/// `--policy [--json] [IMAGE...]`: prints the report; fails (exit 1, each
/// reason on standard error) when an image cannot be read by the caller.
pub fn run(images: &[OsString], as_json: bool) -> Result<(), Failure> {
    let mut verdicts = Vec::new();
    let mut unreadable: Vec<Failure> = Vec::new();
    let (policy, admitted, rootless) = match Privileges::acquire(RootPhase::IDS) {
        Ok(mut privileges) => {
            let settings: Settings = privileges.as_root(|_root| config::load())?;
            let caller = privileges.caller().clone();
            let admitted = settings.policy.admits(&caller);
            for given in images {
                let subject = given.to_string_lossy();
                match Image::open(&privileges, given, &subject) {
                    Ok(img) => {
                        let (prov, _) = img.provenance(&privileges, &caller);
                        let route = settings.policy.route(&prov);
                        verdicts.push(Verdict {
                            image: img.path.to_string_lossy().into_owned(),
                            kernel: Some(route.kernel),
                            reason: route.reason,
                        });
                    }
                    Err(e) => {
                        verdicts.push(Verdict {
                            image: subject.into_owned(),
                            kernel: None,
                            reason: e.to_string(),
                        });
                        unreadable.push(e);
                    }
                }
            }
            privileges.drop_for_good()?;
            (Some(describe(&settings.policy)), admitted, false)
        }
        Err(PrivilegeError::NotSetuidRoot) => {
            let _checked = Unprivileged::check()?;
            for given in images {
                let image = given.to_string_lossy().into_owned();
                match std::fs::File::open(given) {
                    Ok(_) => verdicts.push(Verdict {
                        image,
                        kernel: Some(false),
                        reason: "rootless mode".into(),
                    }),
                    Err(e) => {
                        let why = crate::system::error::io_message(&e);
                        verdicts.push(Verdict {
                            image: image.clone(),
                            kernel: None,
                            reason: format!("{image}: cannot open it: {why}"),
                        });
                        unreadable.push(Failure::about(&image, UnreadableImage(why)));
                    }
                }
            }
            (None, Ok(()), true)
        }
        Err(e) => return Err(e.into()),
    };
    // Unprivileged from here on.
    let fuse = fuse_for_caller();
    let report = if as_json { json } else { text };
    print_stdout(&report(
        policy.as_deref(),
        &admitted,
        &fuse,
        &verdicts,
        rootless,
    ));
    let last = unreadable.pop();
    for e in unreadable {
        crate::system::error::report(e);
    }
    last.map_or(Ok(()), Err)
}

/// An image `--policy` cannot open in rootless mode.
#[derive(Debug)]
struct UnreadableImage(String);

impl std::fmt::Display for UnreadableImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot open it: {}", self.0)
    }
}

impl std::error::Error for UnreadableImage {}
