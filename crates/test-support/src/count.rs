//! What a test may leave behind: attached loop devices and mounts.

use std::path::Path;

/// (device, backing file) of every attached loop device.
pub fn attached_loops() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(f) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            out.push((name, f.trim_end().to_string()));
        }
    }
    out
}

/// Attached loop devices whose backing file is under `prefix` (other
/// programs on the machine may attach their own meanwhile, so tests count
/// only theirs).
pub fn loops_under(prefix: &Path) -> Vec<String> {
    let prefix = prefix.to_string_lossy().into_owned();
    attached_loops()
        .into_iter()
        .filter(|(_, f)| {
            f == &prefix || f.starts_with(&format!("{}/", prefix.trim_end_matches('/')))
        })
        .map(|(d, _)| d)
        .collect()
}

/// Mount points (field 5 of mountinfo) of the mount namespace of process
/// `pid` (`None`: this process) that are `prefix` or below it.
pub fn mounts_under_in(pid: Option<u32>, prefix: &Path) -> Vec<String> {
    let file = match pid {
        Some(p) => format!("/proc/{p}/mountinfo"),
        None => "/proc/self/mountinfo".to_string(),
    };
    let prefix = prefix.to_string_lossy().into_owned();
    let dir = format!("{}/", prefix.trim_end_matches('/'));
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|mp| *mp == prefix || mp.starts_with(&dir))
        .map(str::to_string)
        .collect()
}

/// Mounts on or below `prefix` in this process's (the host's) namespace.
pub fn mounts_under(prefix: &Path) -> Vec<String> {
    mounts_under_in(None, prefix)
}

/// Running FUSE servers of this tool (`squashfs-mount-fuse`, whose name
/// the kernel keeps as `squashfs-mount-`), zombies left out: their pids.
pub fn fuse_servers() -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != "squashfs-mount-" {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, t)| t.chars().next());
        if !matches!(state, Some('Z') | Some('X') | None) {
            out.push(pid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_are_matched_by_whole_path_components() {
        let proc_mounts = mounts_under(Path::new("/proc"));
        assert!(proc_mounts.iter().any(|m| m == "/proc"), "{proc_mounts:?}");
        assert!(proc_mounts
            .iter()
            .all(|m| m == "/proc" || m.starts_with("/proc/")));
        assert!(mounts_under(Path::new("/pro")).is_empty());
    }
}
