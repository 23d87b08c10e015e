//! `squashfs-mount --policy [IMAGE...]`: the site policy in force, and for
//! each image which way a launch would mount it and why. Read-only: it
//! opens the images as the caller (like a launch) and mounts nothing.

use std::ffi::OsString;

use crate::config::names::{FileNames, Names};
use crate::config::policy::PolicyError;
use crate::config::show::{self, Shown};
use crate::config::{self, FileState, CONFIG_PATH};
use crate::mounts::image::Image;
use crate::privilege::{Credentials, PrivilegeError, Privileges, RootPhase, Unprivileged};
use crate::system::error::{print_stdout, Failure};
use crate::system::{Gid, Uid};

/// The settings in force and where they come from, as `#` lines and
/// `key = value` lines (a note after a `#` where the value does not say
/// what it means).
fn describe(file: &FileState, shown: &[Shown]) -> String {
    let mut out = match file {
        FileState::Absent => format!(
            "# site policy in force: the built-in defaults ({CONFIG_PATH} does not exist)\n"
        ),
        FileState::Ignored(why) => format!(
            "# site policy in force: the built-in defaults ({CONFIG_PATH} is ignored: {why})\n"
        ),
        FileState::Read { set, problems } => {
            let mut s = format!(
                "# site policy in force: {CONFIG_PATH} (built-in defaults where it sets nothing)\n"
            );
            s += &match set.is_empty() {
                true => "# it sets nothing\n".to_string(),
                false => format!("# it sets: {}\n", set.join(", ")),
            };
            for p in problems {
                s += &format!("# skipped: {p}\n");
            }
            s
        }
    };
    for l in shown {
        out += &match l.value.is_empty() {
            true => format!("{} =", l.key),
            false => format!("{} = {}", l.key, l.value),
        };
        if let Some(note) = &l.note {
            out += &format!("  # {note}");
        }
        out.push('\n');
    }
    out
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

/// What `--policy` found.
struct Report {
    /// What became of the configuration file and the settings in force
    /// (None in rootless mode, where the policy grants nothing).
    site: Option<(FileState, Vec<Shown>)>,
    admitted: Result<(), PolicyError>,
    fuse: Result<(), FuseUnusable>,
    verdicts: Vec<Verdict>,
}

/// The report as text: `key = value` lines, `#` comments, and a line
/// `IMAGE: kernel (reason)` or `IMAGE: FUSE (reason)` per readable image
/// (the form `sqfs bench` reads).
fn text(r: &Report) -> String {
    let mut out = match &r.site {
        None => "# not installed setuid root: every image is served through FUSE in a user namespace (rootless mode)\n".to_string(),
        Some((file, shown)) => describe(file, shown),
    };
    if let Err(why) = &r.admitted {
        out += &format!("# you: {why}\n");
    }
    match &r.fuse {
        Ok(()) => out += "# FUSE path (your own images, and any the policy does not trust for the kernel): usable by you\n",
        Err(why) => out += &format!("# FUSE path (your own images, and any the policy does not trust for the kernel): NOT usable by you: {why}\n"),
    }
    // Images that cannot be read are named on standard error only.
    for v in &r.verdicts {
        let Some(kernel) = v.kernel else { continue };
        let way = if kernel { "kernel" } else { "FUSE" };
        out += &format!("{}: {way} ({})\n", v.image, v.reason);
        if !kernel && r.fuse.is_err() {
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

fn json_list<T: AsRef<str>>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(|i| json_text(i.as_ref())).collect();
    format!("[{}]", items.join(","))
}

fn err_or_null<E: std::fmt::Display>(r: &Result<(), E>) -> String {
    match r {
        Ok(()) => "null".to_string(),
        Err(why) => json_text(&why.to_string()),
    }
}

/// What the JSON report says of the configuration file: its state
/// (`read`, `absent`, `ignored`; null in rootless mode), why it is
/// ignored, the keys it sets and the lines skipped.
fn json_file(site: &Option<(FileState, Vec<Shown>)>) -> String {
    let none: [&str; 0] = [];
    let (state, why, set, problems) = match site.as_ref().map(|(f, _)| f) {
        None => (
            "null",
            "null".to_string(),
            json_list(&none),
            json_list(&none),
        ),
        Some(FileState::Absent) => (
            "\"absent\"",
            "null".into(),
            json_list(&none),
            json_list(&none),
        ),
        Some(FileState::Ignored(why)) => (
            "\"ignored\"",
            json_text(why),
            json_list(&none),
            json_list(&none),
        ),
        Some(FileState::Read { set, problems }) => (
            "\"read\"",
            "null".into(),
            json_list(set),
            json_list(problems),
        ),
    };
    format!(
        "\"config_file\":{},\"config_file_exists\":{},\"config_file_state\":{state},\"config_file_ignored_because\":{why},\"config_file_sets\":{set},\"config_file_skipped\":{problems}",
        json_text(CONFIG_PATH),
        config_exists(),
    )
}

/// The report as one JSON object.
fn json(r: &Report) -> String {
    let settings: Vec<String> = r
        .site
        .iter()
        .flat_map(|(_, shown)| shown)
        .map(|l| format!("{}:{}", json_text(l.key), json_text(&l.value)))
        .collect();
    let images: Vec<String> = r
        .verdicts
        .iter()
        .map(|v| {
            let path = match v.kernel {
                Some(true) => "\"kernel\"",
                Some(false) => "\"FUSE\"",
                None => "null",
            };
            let usable = match v.kernel {
                Some(true) => "true",
                Some(false) if r.fuse.is_ok() => "true",
                _ => "false",
            };
            let (reason, error) = match v.kernel {
                Some(_) => (json_text(&v.reason), "null".to_string()),
                None => ("null".to_string(), json_text(&v.reason)),
            };
            format!("{{\"image\":{},\"path\":{path},\"reason\":{reason},\"mountable_here\":{usable},\"error\":{error}}}", json_text(&v.image))
        })
        .collect();
    format!(
        "{{\"setuid\":{},{},\"policy\":{{{}}},\"admitted\":{},\"not_admitted_because\":{},\"fuse_usable\":{},\"fuse_unusable_because\":{},\"images\":[{}]}}\n",
        r.site.is_some(),
        json_file(&r.site),
        settings.join(","),
        r.admitted.is_ok(),
        err_or_null(&r.admitted),
        r.fuse.is_ok(),
        err_or_null(&r.fuse),
        images.join(",")
    )
}

/// Opens each image as the caller and judges it with `policy` (what a
/// launch would do); the failures of those that cannot be read.
fn judge(
    privileges: &Privileges,
    policy: &crate::config::policy::Policy,
    images: &[OsString],
    verdicts: &mut Vec<Verdict>,
) -> Vec<Failure> {
    let mut unreadable = Vec::new();
    let caller = privileges.caller().clone();
    for given in images {
        let subject = given.to_string_lossy();
        match Image::open(privileges, given, &subject) {
            Ok(img) => {
                let (prov, _) = img.provenance(privileges, &caller);
                let route = policy.route(&prov);
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
    unreadable
}

/// Rootless mode: each image opened as the caller (all go to FUSE).
fn judge_rootless(images: &[OsString], verdicts: &mut Vec<Verdict>) -> Vec<Failure> {
    let mut unreadable = Vec::new();
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
    unreadable
}

/// `--policy [--json] [IMAGE...]`: prints the report; fails (exit 1, each
/// reason on standard error) when an image cannot be read by the caller.
pub(crate) fn run(images: &[OsString], as_json: bool) -> Result<(), Failure> {
    let mut verdicts = Vec::new();
    let (site, admitted, mut unreadable) = match Privileges::acquire(RootPhase::IDS) {
        Ok(mut privileges) => {
            let loaded = privileges.as_root(|_root| config::load_reporting())?;
            let admitted = loaded.settings.policy.admits(privileges.caller());
            let unreadable = judge(&privileges, &loaded.settings.policy, images, &mut verdicts);
            privileges.drop_for_good()?;
            // Unprivileged from here on: names read as the caller.
            let total = crate::system::total_memory();
            let files = FileNames::default();
            let name = |id: u32, user: bool| match user {
                true => files.user(Uid::from_raw(id)),
                false => files.group(Gid::from_raw(id)),
            };
            let shown = show::settings(&loaded.settings, &name, total);
            (Some((loaded.file, shown)), admitted, unreadable)
        }
        Err(PrivilegeError::NotSetuidRoot) => {
            let _checked = Unprivileged::check()?;
            (None, Ok(()), judge_rootless(images, &mut verdicts))
        }
        Err(e) => return Err(e.into()),
    };
    let report = Report {
        site,
        admitted,
        fuse: fuse_for_caller(),
        verdicts,
    };
    print_stdout(&if as_json {
        json(&report)
    } else {
        text(&report)
    });
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
