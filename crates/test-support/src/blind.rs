//! Mount namespaces whose mountinfo a bounded usage scan cannot read, as
//! any user can make them: the scan of which cached instances are in use
//! then sees nothing (issue 26, finding 2; issue 37, finding 4).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::args::s;
use crate::held::Group;
use crate::users::User;

/// User `a`'s mount namespaces, each with about 1 MiB of mountinfo (bind
/// mounts of a directory with a long path, in a user namespace of its
/// own), made below `root` before the victim's launch, so that a scan of
/// /proc reads them first. Ready when the function returns; they end when
/// the groups are dropped.
pub fn namespaces_with_large_mountinfo(root: &Path, a: &User, count: usize) -> Vec<Group> {
    let base = root.join(format!("blind-{}", a.uid));
    let _ = fs::create_dir_all(&base);
    a.chown(&base);
    let long = "d".repeat(250);
    let deep: PathBuf = (0..14).fold(base.clone(), |p, _| p.join(&long));
    let mk = a.sh(&format!("mkdir -p '{}'", s(&deep)));
    assert!(mk.success(), "mkdir: {}", mk.stderr());
    let mut out = Vec::new();
    for n in 0..count {
        let ready = base.join(format!("ready{n}"));
        let _ = fs::remove_file(&ready);
        let script = format!(
            "unshare -Urm sh -c 'i=0; while [ $i -lt 140 ]; do mount --bind \"{d}\" \"{d}\" || exit 1; i=$((i+1)); done; touch \"{r}\"; exec sleep 120'",
            d = s(&deep),
            r = s(&ready)
        );
        out.push(Group::quiet(a.command("sh").args(["-c", &script])));
        let t = Instant::now();
        while !ready.exists() && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ready.exists(), "user a's namespace {n} was not made");
    }
    out
}
