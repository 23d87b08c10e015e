//! Whether the caller can mount an image here, the way squashfs-mount
//! would: its site policy picks the kernel's squashfs or its FUSE server
//! (`squashfs-mount --policy --json IMAGE`, asked as the caller), and the
//! FUSE path needs /dev/fuse to open for the caller; and whether this
//! kernel wakes a FUSE server on the CPU of the process that asked
//! (`fuse.wake_here`, doc/admin-guide.md), which decides how fast a first
//! scan through the FUSE path is.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

/// Which way squashfs-mount would mount an image, for the caller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyPath {
    /// "kernel" or "FUSE".
    pub path: String,
    /// The policy's reason.
    pub reason: String,
    /// Whether the caller can use the FUSE path here.
    pub fuse_usable: bool,
    /// Why not, when not.
    pub fuse_unusable_because: Option<String>,
    /// What an administrator could change for this kernel's FUSE servers
    /// (see [`server_wakeup_hint`]).
    pub fuse_wakeup_hint: Option<String>,
}

/// The kernel's setting of where it wakes a FUSE server: on the CPU of
/// the process that sent the request (Y) or wherever the scheduler puts
/// it (N, the default). Only some kernels have it.
pub const WAKE_HERE_PARAMETER: &str = "/sys/module/fuse/parameters/wake_here";

/// A hint when this kernel could wake FUSE servers on the requester's
/// CPU but does not (`setting` is the parameter's content, None when the
/// kernel has no such parameter): a first scan through the FUSE path then
/// takes several times as long on a machine with idle CPUs
/// (BENCHMARKS.md, doc/fuse.md "Where the server runs").
pub fn server_wakeup_hint(setting: Option<&str>) -> Option<String> {
    match setting.map(str::trim) {
        Some("N") => Some(
            "this kernel wakes FUSE servers across CPUs (fuse.wake_here=N): first scans \
             through FUSE run several times faster with Y, an administrator's setting \
             (doc/admin-guide.md)"
                .into(),
        ),
        _ => None,
    }
}

/// Finds squashfs-mount: next to this executable, else on PATH.
pub fn find_squashfs_mount() -> Option<PathBuf> {
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        let p = dir.join("squashfs-mount");
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("squashfs-mount"))
            .find(|p| p.is_file())
    })
}

/// Asks the squashfs-mount found next to sqfs (else on PATH); None when
/// there is none, or it is too old to answer `--policy --json`.
pub fn ask(image: &Path) -> Option<PolicyPath> {
    let bin = find_squashfs_mount()?;
    let out = Command::new(bin)
        .args(["--policy", "--json"])
        .arg(image)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut p = parse(&out.stdout)?;
    p.fuse_wakeup_hint =
        server_wakeup_hint(std::fs::read_to_string(WAKE_HERE_PARAMETER).ok().as_deref());
    Some(p)
}

/// The answer of `--policy --json IMAGE` (one image).
pub fn parse(json: &[u8]) -> Option<PolicyPath> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let image = v.get("images")?.get(0)?;
    Some(PolicyPath {
        path: image.get("path")?.as_str()?.to_string(),
        reason: image.get("reason")?.as_str()?.to_string(),
        fuse_usable: v.get("fuse_usable")?.as_bool()?,
        fuse_unusable_because: v
            .get("fuse_unusable_because")
            .and_then(|w| w.as_str())
            .map(str::to_string),
        fuse_wakeup_hint: None,
    })
}

/// The first clause of a policy reason: up to its first ';' outside
/// parentheses (the whole reason is `--policy IMAGE`'s). Longer than `max`
/// characters, it is cut at a space outside parentheses, with "...":
/// never inside a parenthesis (a reason cut at a fixed length ended in
/// "a trusted owner (root, trusted-...").
pub fn first_clause(reason: &str, max: usize) -> String {
    let mut depth = 0usize;
    let mut end = reason.len();
    for (i, c) in reason.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let clause = reason[..end].trim();
    if clause.chars().count() <= max {
        return clause.to_string();
    }
    let (mut depth, mut cut) = (0usize, None);
    for (n, (i, c)) in clause.char_indices().enumerate() {
        if n + 3 > max {
            break;
        }
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ' ' if depth == 0 => cut = Some(i),
            _ => {}
        }
    }
    match cut {
        Some(i) => format!("{}...", clause[..i].trim_end_matches(',')),
        None => clause.to_string(),
    }
}

/// The "Mountable here" verdict and sentence for the path the policy
/// takes; `kernel` is the kernel's own verdict (can_mount, reason).
pub fn verdict(p: &PolicyPath, kernel: (Option<bool>, &str)) -> (Option<bool>, String) {
    if p.path == "kernel" {
        return (
            kernel.0,
            format!(
                "{} (squashfs-mount would use the kernel's squashfs: {})",
                kernel.1,
                first_clause(&p.reason, usize::MAX)
            ),
        );
    }
    if p.fuse_usable {
        (
            Some(true),
            format!(
                "squashfs-mount would serve it through its FUSE server, as you ({}); squashfs-mount --policy IMAGE says why{}",
                first_clause(&p.reason, usize::MAX),
                p.fuse_wakeup_hint
                    .as_deref()
                    .map_or(String::new(), |h| format!("; {h}"))
            ),
        )
    } else {
        (
            Some(false),
            format!(
                "squashfs-mount would serve it through FUSE ({}), which you cannot use here: {}",
                first_clause(&p.reason, usize::MAX),
                p.fuse_unusable_because
                    .as_deref()
                    .unwrap_or("/dev/fuse does not open for you")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_that_wakes_fuse_servers_across_cpus_gets_a_hint() {
        for (setting, hint) in [
            (None, false),
            (Some("Y\n"), false),
            (Some("N\n"), true),
            (Some("N"), true),
            (Some(""), false),
        ] {
            assert_eq!(server_wakeup_hint(setting).is_some(), hint, "{setting:?}");
        }
        let p = PolicyPath {
            path: "FUSE".into(),
            reason: "not trusted".into(),
            fuse_usable: true,
            fuse_unusable_because: None,
            fuse_wakeup_hint: server_wakeup_hint(Some("N")),
        };
        assert!(verdict(&p, (Some(true), "k"))
            .1
            .contains("fuse.wake_here=N"));
        let kernel = PolicyPath {
            path: "kernel".into(),
            ..p
        };
        assert!(!verdict(&kernel, (Some(true), "k")).1.contains("wake_here"));
    }

    #[test]
    fn the_policy_answer_is_read() {
        let json = br#"{"setuid":true,"fuse_usable":false,"fuse_unusable_because":"/dev/fuse cannot be opened (Permission denied): ask","images":[{"image":"/x","path":"FUSE","reason":"not trusted: the file is owned by uid 1000; more","mountable_here":false,"error":null}]}"#;
        let p = parse(json).unwrap();
        assert_eq!((p.path.as_str(), p.fuse_usable), ("FUSE", false));
        let (yes, why) = verdict(&p, (Some(true), "the kernel can"));
        assert_eq!(yes, Some(false));
        assert!(
            why.contains("cannot use here") && why.contains("Permission denied"),
            "{why}"
        );
        assert!(!why.contains("more"), "{why}");
        let usable = PolicyPath {
            fuse_usable: true,
            ..p.clone()
        };
        assert_eq!(verdict(&usable, (Some(false), "lzma")).0, Some(true));
        let kernel = PolicyPath {
            path: "kernel".into(),
            ..p
        };
        assert_eq!(verdict(&kernel, (Some(false), "lzma")), (Some(false), "lzma (squashfs-mount would use the kernel's squashfs: not trusted: the file is owned by uid 1000)".to_string()));
        assert!(parse(b"[]").is_none());
    }

    #[test]
    fn a_reason_is_never_cut_inside_a_parenthesis() {
        let long = "not trusted: the file is owned by uid 1000 (alice), not a trusted owner (root, trusted-owners; see --policy), who can change it; /home/u can be written by everyone";
        assert_eq!(
            first_clause(long, usize::MAX),
            "not trusted: the file is owned by uid 1000 (alice), not a trusted owner (root, trusted-owners; see --policy), who can change it"
        );
        assert_eq!(first_clause("rootless mode", 5), "rootless mode");
        assert_eq!(first_clause("a (b; c) d; e", 99), "a (b; c) d");
        // Cut short: at a space outside the parentheses.
        assert_eq!(
            first_clause(long, 60),
            "not trusted: the file is owned by uid 1000 (alice), not a..."
        );
        assert_eq!(
            first_clause(long, 95),
            "not trusted: the file is owned by uid 1000 (alice), not a trusted owner..."
        );
    }
}
