//! What killed earlier runs left: everything a suite makes in /tmp is
//! named `sqfsmnt-it-<pid>...` (or `sqfsmnt-slurm-<pid>-...` for clusters),
//! so a later run recognises it by a pid that no longer runs.

use std::sync::Once;

use crate::unmount::remove_tree;
use crate::users::pid_alive;

static STALE: Once = Once::new();

/// Once per process, with the machine-wide lock held: removes the test users,
/// temporary directories and Slurm test clusters of test processes that are
/// gone.
pub fn stale_once() {
    STALE.call_once(|| {
        crate::slurm::remove_stale();
        crate::users::remove_stale();
        for e in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // This crate's, and those of the fixtures before it.
            let pid = [
                "sqfsmnt-it-",
                "sqfsmnt-cache-prefix-",
                "sqfsmnt-cache-",
                "sqfs-test-",
            ]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .and_then(|rest| {
                // sqfs-test-<name>-<pid>: the pid comes last there.
                let field = if name.starts_with("sqfs-test-") {
                    rest.rsplit('-').next()
                } else {
                    rest.split('-').next()
                };
                field?.parse::<u32>().ok()
            });
            if let Some(pid) = pid {
                if pid != std::process::id() && !pid_alive(pid) {
                    remove_tree(&e.path());
                }
            }
        }
    });
}
