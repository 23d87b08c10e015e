//! The command line of `squashfs-mount-layer`: the caller's stage as the
//! launch (or the Slurm plugin) hands it over. Pure.
//!
//! ```text
//! squashfs-mount-layer [--verbose N] --dir DIR [--dir-made] [--lock-fd L]
//!     --cwd CWD {--images PATH N {ID SIZE IMAGE}*N | --bind PATH | --made PATH}...
//!     (-- COMMAND [ARG...] | --report-fd R --wait-fd W)
//! ```
//!
//! The mounts come in the order root made them. `-- COMMAND`: the
//! launch's way (the helper becomes the command). `--report-fd`: the Slurm
//! plugin's way (the helper reports its namespaces' fd numbers on R, then
//! waits for end of file on W, while the plugin takes copies of them).
//! L: the fd of DIR's lock, taken and held by the launch, inherited.
//! Nothing in it is secret: the images' paths and the command are the
//! caller's own command line.

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;

use super::mount_order::{ImageId, Made, ViewMount};

/// What the caller's stage needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPlan {
    /// The layer directory: absolute (made so against the working directory
    /// the launch started in), lexically tidy.
    pub dir: OsString,
    /// What root mounted, in the order it was mounted (path order).
    pub mounts: Vec<ViewMount>,
    /// The working directory the command starts in (entered again by path
    /// once the overlays are mounted).
    pub cwd: OsString,
    /// What `-v` asks to be told.
    pub verbose: u8,
    /// The fd number at which the helper finds DIR's lock, taken by the
    /// launch (`engine::kept_layer::claim`) and handed over locked, so
    /// that no other launch can take DIR in between; set by `start.rs`.
    pub lock_fd: Option<std::os::fd::RawFd>,
    /// DIR was made by this launch (for `-v`).
    pub dir_made: bool,
}

/// What the helper does once the overlays are mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Then {
    /// Becomes the command.
    Command(Vec<OsString>),
    /// Reports to the Slurm plugin (see the module documentation).
    Report { report_fd: RawFd, wait_fd: RawFd },
}

/// The arguments after the program name.
pub(crate) fn encode(plan: &LayerPlan, then: &Then) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |s: &OsStr| a.push(s.to_owned());
    if plan.verbose > 0 {
        push("--verbose".as_ref());
        push(plan.verbose.to_string().as_ref());
    }
    push("--dir".as_ref());
    push(&plan.dir);
    if plan.dir_made {
        push("--dir-made".as_ref());
    }
    if let Some(fd) = plan.lock_fd {
        push("--lock-fd".as_ref());
        push(fd.to_string().as_ref());
    }
    push("--cwd".as_ref());
    push(&plan.cwd);
    for m in &plan.mounts {
        match &m.made {
            Made::Images(ids) => {
                push("--images".as_ref());
                push(&m.path);
                push(ids.len().to_string().as_ref());
                for id in ids {
                    push(id.identity.as_ref());
                    push(id.size.to_string().as_ref());
                    push(&id.path);
                }
            }
            Made::Bind => {
                push("--bind".as_ref());
                push(&m.path);
            }
            Made::Directory => {
                push("--made".as_ref());
                push(&m.path);
            }
        }
    }
    match then {
        Then::Command(command) => {
            push("--".as_ref());
            for c in command {
                push(c);
            }
        }
        Then::Report { report_fd, wait_fd } => {
            push("--report-fd".as_ref());
            push(report_fd.to_string().as_ref());
            push("--wait-fd".as_ref());
            push(wait_fd.to_string().as_ref());
        }
    }
    a
}

/// Parses what [`encode`] wrote.
pub(crate) fn decode(args: &[OsString]) -> Result<(LayerPlan, Then), HandoffError> {
    let mut plan = LayerPlan {
        dir: OsString::new(),
        mounts: Vec::new(),
        cwd: OsString::new(),
        verbose: 0,
        lock_fd: None,
        dir_made: false,
    };
    let (mut report, mut wait) = (None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut next = |what: &'static str| {
            it.next()
                .cloned()
                .ok_or_else(|| HandoffError::Needs(arg.to_string_lossy().into_owned(), what))
        };
        match arg.as_bytes() {
            b"--" => {
                let command: Vec<OsString> = it.cloned().collect();
                if command.is_empty() {
                    return Err(HandoffError::NoCommand);
                }
                return finish(plan, Then::Command(command));
            }
            b"--verbose" => plan.verbose = number(&next("a level")?)?,
            b"--dir" => plan.dir = next("a directory")?,
            b"--dir-made" => plan.dir_made = true,
            b"--lock-fd" => plan.lock_fd = Some(number(&next("an fd")?)?),
            b"--cwd" => plan.cwd = next("a directory")?,
            b"--bind" | b"--made" => {
                let made = if arg == "--bind" {
                    Made::Bind
                } else {
                    Made::Directory
                };
                plan.mounts.push(ViewMount {
                    path: next("a path")?,
                    made,
                });
            }
            b"--images" => {
                let path = next("a path")?;
                let n: usize = number(&next("a count")?)?;
                let mut ids = Vec::with_capacity(n.min(500));
                for _ in 0..n {
                    ids.push(ImageId {
                        identity: next("an identity")?.to_string_lossy().into_owned(),
                        size: number(&next("a size")?)?,
                        path: next("an image path")?,
                    });
                }
                plan.mounts.push(ViewMount {
                    path,
                    made: Made::Images(ids),
                });
            }
            b"--report-fd" => report = Some(number(&next("an fd")?)?),
            b"--wait-fd" => wait = Some(number(&next("an fd")?)?),
            _ => return Err(HandoffError::Unknown(arg.to_string_lossy().into_owned())),
        }
    }
    match (report, wait) {
        (Some(report_fd), Some(wait_fd)) => finish(plan, Then::Report { report_fd, wait_fd }),
        _ => Err(HandoffError::NoThen),
    }
}

fn finish(plan: LayerPlan, then: Then) -> Result<(LayerPlan, Then), HandoffError> {
    if !plan.dir.as_bytes().starts_with(b"/") || !plan.cwd.as_bytes().starts_with(b"/") {
        return Err(HandoffError::NotAbsolute);
    }
    Ok((plan, then))
}

fn number<T: std::str::FromStr>(s: &OsStr) -> Result<T, HandoffError> {
    s.to_str()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| HandoffError::NotANumber(s.to_string_lossy().into_owned()))
}

/// What is wrong with the helper's arguments (they are squashfs-mount's
/// own, never a user's: the helper is not run by hand).
#[derive(Debug)]
pub enum HandoffError {
    /// An option without its value: the option, what it needs.
    Needs(String, &'static str),
    NoCommand,
    Unknown(String),
    NoThen,
    NotAbsolute,
    NotANumber(String),
}

impl std::fmt::Display for HandoffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandoffError::Needs(arg, what) => write!(f, "{arg} needs {what}"),
            HandoffError::NoCommand => f.write_str("no command after '--'"),
            HandoffError::Unknown(arg) => write!(f, "unknown argument '{arg}'"),
            HandoffError::NoThen => f.write_str("give '-- COMMAND' or --report-fd and --wait-fd"),
            HandoffError::NotAbsolute => f.write_str("--dir and --cwd must be absolute"),
            HandoffError::NotANumber(s) => write!(f, "not a number: {s}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> LayerPlan {
        LayerPlan {
            dir: "/scratch/me/layer dir".into(),
            cwd: "/home/me".into(),
            verbose: 2,
            lock_fd: Some(64),
            dir_made: true,
            mounts: vec![
                ViewMount {
                    path: "/".into(),
                    made: Made::Directory,
                },
                ViewMount {
                    path: "/user-environment".into(),
                    made: Made::Images(vec![
                        ImageId {
                            identity: "ab".into(),
                            size: 4096,
                            path: "/s/a.sqfs".into(),
                        },
                        ImageId {
                            identity: "cd".into(),
                            size: 8192,
                            path: "/s/b -- c.sqfs".into(),
                        },
                    ]),
                },
                ViewMount {
                    path: "/user-environment/x".into(),
                    made: Made::Bind,
                },
            ],
        }
    }

    #[test]
    fn round_trip() {
        for then in [
            Then::Command(vec!["sh".into(), "-c".into(), "--".into()]),
            Then::Report {
                report_fd: 3,
                wait_fd: 4,
            },
        ] {
            let args = encode(&plan(), &then);
            assert_eq!(decode(&args).unwrap(), (plan(), then));
        }
    }

    #[test]
    fn refused() {
        let bad: &[&[&str]] = &[
            &["--dir", "/d", "--cwd", "/"],
            &["--dir", "d", "--cwd", "/", "--", "true"],
            &["--dir", "/d", "--cwd", "/", "--"],
            &[
                "--dir", "/d", "--cwd", "/", "--images", "/m", "2", "x", "1", "/i", "--", "true",
            ],
            &[
                "--dir", "/d", "--cwd", "/", "--images", "/m", "1", "x", "big", "/i", "--", "true",
            ],
            &["--what", "--", "true"],
        ];
        for b in bad {
            let args: Vec<OsString> = b.iter().map(OsString::from).collect();
            assert!(decode(&args).is_err(), "{b:?}");
        }
    }
}
