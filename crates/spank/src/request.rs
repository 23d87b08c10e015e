//! The plugin's options, parsed with squashfs-mount's own grammar into the
//! request its engine takes (`engine::mount_all`), which checks them like
//! the command line's:
//!
//! ```text
//! --squashfs=<image>:<mountpoint>[,<image>:<mountpoint>...]    ($SLURM_SQUASHFS)
//! --squashfs-union=<image>,<image>[,...]:<mountpoint>[;...]    ($SLURM_SQUASHFS_UNION)
//! --squashfs-writable[=SIZE]                                   ($SLURM_SQUASHFS_WRITABLE)
//! ```
//!
//! Where a step's images come from, first match wins (checked by srun,
//! sbatch and salloc before the job is queued, and again on the nodes):
//! 1. the options, if any is given (an empty `--squashfs=` mounts nothing:
//!    the way to opt out of what would be inherited);
//! 2. the `SLURM_SQUASHFS*` variables, if any is set (empty: nothing);
//! 3. `UENV_MOUNT_LIST` of the calling environment: inside a
//!    `squashfs-mount` session, the session's images flow into the job
//!    (a union's layers, listed one after another with the same mount
//!    point, stay a union). An explicit option or variable replaces the
//!    inherited set; it is never merged with it.
//!
//! Pure.

use std::ffi::OsString;

use squashfs_mount::cli::{self, LayerSize, RunRequest};

/// The options' names, as in `srun --squashfs=...`.
pub const OPTION: &str = "squashfs";
pub const OPTION_UNION: &str = "squashfs-union";
pub const OPTION_WRITABLE: &str = "squashfs-writable";
/// Read when the option is not given.
pub const ENV_FALLBACK: &str = "SLURM_SQUASHFS";
pub const ENV_UNION: &str = "SLURM_SQUASHFS_UNION";
pub const ENV_WRITABLE: &str = "SLURM_SQUASHFS_WRITABLE";
/// What a squashfs-mount session (or a step with images) sets for its
/// command, read last.
pub const ENV_SESSION: &str = "UENV_MOUNT_LIST";

/// Which of the three sources gave the images (for messages: an error at
/// submission names where the failing value came from).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Source {
    #[default]
    Options,
    Variables,
    Session,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Options => "the --squashfs options",
            Source::Variables => "$SLURM_SQUASHFS*",
            Source::Session => "$UENV_MOUNT_LIST (inherited from the squashfs-mount session this was submitted from; give an empty --squashfs= to run without it)",
        }
    }
}

/// The values given, each as bytes (absent: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given {
    pub pairs: Option<Vec<u8>>,
    pub unions: Option<Vec<u8>>,
    /// `Some(empty)`: `--squashfs-writable` without a size.
    pub writable: Option<Vec<u8>>,
    /// `UENV_MOUNT_LIST` (source 3 only).
    pub session: Option<Vec<u8>>,
    pub source: Source,
}

impl Given {
    /// Nothing to mount.
    pub fn is_empty(&self) -> bool {
        self.pairs.as_ref().is_none_or(|p| p.is_empty())
            && self.unions.as_ref().is_none_or(|u| u.is_empty())
            && self.session.as_ref().is_none_or(|s| s.is_empty())
    }

    /// Whether any option or variable was given (even empty).
    pub fn any(&self) -> bool {
        self.pairs.is_some() || self.unions.is_some() || self.writable.is_some()
    }

    /// The images by precedence: `self` holds the options given; `get`
    /// reads a variable of the calling environment.
    pub fn resolve(
        self,
        get: impl Fn(&str) -> Result<Option<Vec<u8>>, String>,
    ) -> Result<Given, String> {
        if self.any() {
            return Ok(Given {
                source: Source::Options,
                ..self
            });
        }
        let vars = Given {
            pairs: get(ENV_FALLBACK)?,
            unions: get(ENV_UNION)?,
            writable: get(ENV_WRITABLE)?,
            session: None,
            source: Source::Variables,
        };
        if vars.any() {
            return Ok(vars);
        }
        Ok(Given {
            session: get(ENV_SESSION)?.filter(|v| !v.is_empty()),
            source: Source::Session,
            ..Given::default()
        })
    }
}

/// Builds the request (no command: the tasks are the command).
pub fn parse(given: &Given) -> Result<RunRequest, String> {
    let mut mounts = Vec::new();
    if let Some(spec) = given.pairs.as_deref().filter(|s| !s.is_empty()) {
        for pair in spec.split(|&b| b == b',') {
            mounts.push(cli::parse_pair(pair).map_err(|e| format!("--{OPTION}: {}", e.0))?);
        }
    }
    if let Some(spec) = given.unions.as_deref().filter(|s| !s.is_empty()) {
        for union in spec.split(|&b| b == b';') {
            mounts.push(cli::parse_union(union).map_err(|e| format!("--{OPTION_UNION}: {}", e.0))?);
        }
    }
    if let Some(list) = given.session.as_deref().filter(|s| !s.is_empty()) {
        mounts.extend(from_mount_list(list)?);
    }
    let writable = match given.writable.as_deref() {
        None => None,
        Some([]) => Some(LayerSize::DEFAULT),
        Some(size) => {
            Some(LayerSize::parse(size).map_err(|e| format!("--{OPTION_WRITABLE}: {}", e.0))?)
        }
    };
    if mounts.is_empty() && writable.is_some() {
        return Err(format!(
            "--{OPTION_WRITABLE} needs images: give --{OPTION}= or --{OPTION_UNION}="
        ));
    }
    Ok(RunRequest {
        mounts,
        writable,
        command: vec![OsString::from("(tasks)")],
        no_cache: false,
        verbose: false,
        quiet: true,
        // The plugin does not prefetch (the tasks start later, elsewhere).
        prefetch: false,
    })
}

/// `UENV_MOUNT_LIST` (`image:mountpoint,...`): layers of one union are
/// listed one after another with the union's mount point.
fn from_mount_list(list: &[u8]) -> Result<Vec<cli::MountRequest>, String> {
    let mut out: Vec<cli::MountRequest> = Vec::new();
    for pair in list.split(|&b| b == b',') {
        let req = cli::parse_pair(pair).map_err(|e| format!("${ENV_SESSION}: {}", e.0))?;
        match out.last_mut() {
            Some(last) if last.mount_point == req.mount_point => {
                last.images.extend(req.images);
                last.union = true;
            }
            _ => out.push(req),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(pairs: &str, unions: &str, writable: Option<&str>) -> Given {
        let opt = |s: &str| (!s.is_empty()).then(|| s.as_bytes().to_vec());
        Given {
            pairs: opt(pairs),
            unions: opt(unions),
            writable: writable.map(|w| w.as_bytes().to_vec()),
            ..Given::default()
        }
    }

    #[test]
    fn pairs_unions_writable() {
        let r = parse(&g(
            "/s/a.sqfs:/user-environment,/s/b.sqfs:/user-tools",
            "/x,/y:/user-environment/u;/p,/q:/user-tools/v",
            Some("2G"),
        ))
        .unwrap();
        let got: Vec<_> = r.mounts.iter().map(|m| m.describe()).collect();
        assert_eq!(
            got,
            [
                "/s/a.sqfs:/user-environment",
                "/s/b.sqfs:/user-tools",
                "/x,/y:/user-environment/u",
                "/p,/q:/user-tools/v"
            ]
        );
        assert!(r.mounts[2].union);
        assert_eq!(r.writable, Some(LayerSize::Bytes(2 << 30)));
        assert_eq!(
            parse(&g("/a:/m", "", Some(""))).unwrap().writable,
            Some(LayerSize::DEFAULT)
        );
        assert!(g("", "", None).is_empty());
    }

    #[test]
    fn precedence() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| -> Result<Option<Vec<u8>>, String> {
                Ok(vars
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.as_bytes().to_vec()))
            }
        };
        let session = env(&[(
            "UENV_MOUNT_LIST",
            "/s/a.sqfs:/user-environment,/s/u1.sqfs:/u,/s/u2.sqfs:/u",
        )]);
        // Nothing given: the session's images, its union kept.
        let g = Given::default().resolve(session).unwrap();
        assert_eq!(g.source, Source::Session);
        let r = parse(&g).unwrap();
        let got: Vec<_> = r.mounts.iter().map(|m| (m.describe(), m.union)).collect();
        assert_eq!(
            got,
            [
                ("/s/a.sqfs:/user-environment".to_string(), false),
                ("/s/u1.sqfs,/s/u2.sqfs:/u".to_string(), true)
            ]
        );
        // A variable replaces it; an option replaces both; empty ones opt out.
        let both = env(&[
            ("UENV_MOUNT_LIST", "/s/a.sqfs:/user-environment"),
            ("SLURM_SQUASHFS", "/s/b.sqfs:/user-tools"),
        ]);
        let g = Given::default().resolve(both).unwrap();
        assert_eq!(
            (g.source, parse(&g).unwrap().mounts.len()),
            (Source::Variables, 1)
        );
        assert_eq!(
            parse(&g).unwrap().mounts[0].describe(),
            "/s/b.sqfs:/user-tools"
        );
        let opt = Given {
            pairs: Some(b"/s/c.sqfs:/user-environment".to_vec()),
            ..Given::default()
        }
        .resolve(both)
        .unwrap();
        assert_eq!(
            parse(&opt).unwrap().mounts[0].describe(),
            "/s/c.sqfs:/user-environment"
        );
        let out = Given {
            pairs: Some(Vec::new()),
            ..Given::default()
        }
        .resolve(session)
        .unwrap();
        assert!(out.is_empty() && out.source == Source::Options);
        let out = Given::default()
            .resolve(env(&[
                ("SLURM_SQUASHFS", ""),
                ("UENV_MOUNT_LIST", "/s/a.sqfs:/m"),
            ]))
            .unwrap();
        assert!(out.is_empty());
        assert!(parse(&Given {
            session: Some(b"/a:/m,broken".to_vec()),
            ..Given::default()
        })
        .unwrap_err()
        .contains("$UENV_MOUNT_LIST"));
    }

    #[test]
    fn refused() {
        assert!(parse(&g("/a:/user-environment,", "", None))
            .unwrap_err()
            .contains("not of the form"));
        assert!(parse(&g("/a:/b:/user-environment", "", None))
            .unwrap_err()
            .contains("more than one ':'"));
        assert!(parse(&g("/a\n:/user-environment", "", None))
            .unwrap_err()
            .contains("newline"));
        assert!(parse(&g("", "/a,,/b:/u", None))
            .unwrap_err()
            .contains("--squashfs-union"));
        assert!(parse(&g("/a:/m", "", Some("1Q")))
            .unwrap_err()
            .contains("--squashfs-writable"));
        assert!(parse(&g("", "", Some("1G")))
            .unwrap_err()
            .contains("needs images"));
    }
}
