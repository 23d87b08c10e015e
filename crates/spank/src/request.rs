//! `--squashfs=<image>:<mountpoint>[,<image>:<mountpoint>...]` (or the
//! environment variable `SLURM_SQUASHFS`): parsed with squashfs-mount's own
//! pair parser, then the checks that need no system call. Pure.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use squashfs_mount::cli::{self, MountRequest};
use squashfs_mount::paths;

use crate::config::{display, Config};

/// The option's name, as in `srun --squashfs=...`.
pub const OPTION: &str = "squashfs";
/// Read when no `--squashfs` option applies.
pub const ENV_FALLBACK: &str = "SLURM_SQUASHFS";

/// Parses the option value. Images and mount points must be absolute: the
/// job step may run in another directory (`--chdir`, batch steps) than the
/// one srun or sbatch was called in. Mount points must be allowed by
/// plugstack.conf (checked here on the tidy path when it has no `..`, and
/// again on the resolved directory in slurmstepd).
pub fn parse(spec: &[u8], config: &Config) -> Result<Vec<MountRequest>, String> {
    if spec.is_empty() {
        return Err(format!("--{OPTION} needs <image>:<mountpoint>[,<image>:<mountpoint>...]"));
    }
    let mut out = Vec::new();
    let mut seen: HashSet<OsString> = HashSet::new();
    for pair in spec.split(|&b| b == b',') {
        let req = cli::parse_pair(pair).map_err(|e| format!("--{OPTION}: {}", e.0))?;
        let subject = req.describe();
        for image in &req.images {
            if !image.as_bytes().starts_with(b"/") {
                return Err(format!(
                    "{subject}: the image path must be absolute, because the job may start in another directory; give e.g. $PWD/{}",
                    display(image)
                ));
            }
        }
        if !req.mount_point.as_bytes().starts_with(b"/") {
            return Err(format!("{subject}: the mount point must be an absolute path such as {}", first_allowed(config)));
        }
        let key = paths::absolute(OsStr::new("/"), &req.mount_point);
        if !seen.insert(key.clone()) {
            return Err(format!(
                "{subject}: the mount point {} is given more than once; give each mount point once",
                display(&key)
            ));
        }
        let has_dotdot = paths::components(key.as_bytes()).iter().any(|c| *c == b"..");
        if !has_dotdot && !config.allows(&key) {
            return Err(not_allowed(&subject, &key, config));
        }
        out.push(req);
    }
    Ok(out)
}

/// The message for a mount point outside the allowed ones.
pub fn not_allowed(subject: &str, path: &OsStr, config: &Config) -> String {
    format!(
        "{subject}: refusing to mount on {}: with Slurm, images may only be mounted on {} (or below); choose one of these",
        display(path),
        config.allowed_list()
    )
}

fn first_allowed(config: &Config) -> String {
    config.mount_points.first().map(|m| display(m)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(spec: &str) -> Vec<String> {
        parse(spec.as_bytes(), &Config::default()).unwrap().iter().map(|r| r.describe()).collect()
    }
    fn err(spec: &str) -> String {
        parse(spec.as_bytes(), &Config::default()).unwrap_err()
    }

    #[test]
    fn pairs() {
        assert_eq!(ok("/s/a.sqfs:/user-environment"), ["/s/a.sqfs:/user-environment"]);
        assert_eq!(
            ok("/s/a.sqfs:/user-environment,/s/b.sqfs:/user-tools"),
            ["/s/a.sqfs:/user-environment", "/s/b.sqfs:/user-tools"]
        );
        // Nested below an allowed mount point.
        assert_eq!(ok("/a:/user-environment,/b:/user-environment/sub").len(), 2);
        // `..` cannot be judged lexically: left to the resolved directory.
        assert_eq!(ok("/a:/user-environment/../etc").len(), 1);
    }

    #[test]
    fn refused() {
        assert!(err("").contains("needs"));
        assert!(err("a.sqfs:/user-environment").contains("absolute"));
        assert!(err("/a.sqfs:user-environment").contains("absolute"));
        assert!(err("/a.sqfs:/etc").contains("refusing to mount on /etc"));
        assert!(err("/a.sqfs:/user-environment2").contains("refusing"));
        assert!(err("/a.sqfs:/").contains("refusing"));
        assert!(err("/a:/user-environment,/b:/user-environment/").contains("more than once"));
        assert!(err("/a:/user-environment,").contains("not of the form"));
        assert!(err("/a:/b:/user-environment").contains("more than one ':'"));
        assert!(err("/a\n:/user-environment").contains("newline"));
    }

    #[test]
    fn configured_mount_points() {
        let c = crate::config::parse(&["mountpoints=/scratch/uenv"]).unwrap();
        assert!(parse(b"/a:/scratch/uenv", &c).is_ok());
        let e = parse(b"/a:/user-environment", &c).unwrap_err();
        assert!(e.contains("/scratch/uenv"), "{e}");
    }
}
