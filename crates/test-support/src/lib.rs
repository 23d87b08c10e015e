//! Fixtures of squashfs-mount's privileged integration tests (not published).
//!
//! Every privileged suite (one that installs the setuid binary, attaches loop
//! devices, touches the image cache, creates users or starts Slurm) calls
//! [`privileged`] first: it checks for root and the tools the suite needs
//! (skipping loudly otherwise), takes the machine-wide lock
//! ([`lock::LOCK_PATH`]) for the rest of the process, and removes what
//! killed earlier runs left (test users, temporary directories, Slurm test
//! clusters).
//!
//! - [`lock`]: the machine-wide lock.
//! - [`skip`]: loud skips, `is_root`, `have`.
//! - [`cmd`]: commands with time limits, their output ([`cmd::Run`]).
//! - [`users`]: unprivileged test users and a supplementary group with names
//!   unique to the run, removed on drop (also after a panic).
//! - [`count`]: attached loop devices and mounts under a prefix.
//! - [`image`]: images built with mksquashfs.
//! - [`install`]: the setuid binary installed into a temporary prefix.
//! - [`fixture`]: the squashfs-mount suites' fixture and [`fixture::case`].
//! - [`held`]: who holds the shared locks; process groups ended on drop.
//! - [`starve`]: a user's sessions starved of CPU by autogroup nice and
//!   CPU affinity; what a process's autogroup and CPUs are.
//! - [`blind`]: mount namespaces whose mountinfo a bounded scan cannot
//!   read.
//! - [`python`]: a venv packed into an image and a local wheel for pip.
//! - [`race`]: a symlink flipped between two targets while a test launches
//!   through it.
//! - [`tree`]: deterministic test trees and temporary directories (sqfs).
//! - [`slurm`]: a multi-node Slurm cluster in network, UTS and mount
//!   namespaces.

pub mod args;
pub mod blind;
pub mod cachens;
pub mod cleanup;
pub mod cmd;
pub mod count;
pub mod ends;
pub mod fixture;
pub mod held;
pub mod image;
pub mod install;
pub mod kernel;
pub mod lock;
pub mod python;
pub mod race;
pub mod refusals;
pub mod site;
pub mod skip;
pub mod slurm;
pub mod stale;
pub mod starve;
pub mod times;
pub mod tree;
pub mod unmount;
pub mod userns;
pub mod users;

pub use args::{pair, s};
pub use cmd::{run_with_timeout, Run};
pub use fixture::{case, Fixture};
pub use skip::{have, is_root, loud_skip};
pub use users::{User, Users};

/// Gets a privileged suite going, once per process: root, the `tools` it
/// needs, the machine-wide lock (held until the process exits) and the
/// removal of what killed earlier runs left. `false` (after a loud
/// `*** SKIPPED ... ***` naming `suite`) when the suite cannot run here.
pub fn privileged(suite: &str, tools: &[&str]) -> bool {
    if !is_root() {
        loud_skip(&format!(
            "{suite}: needs root (test users, a setuid binary, loop devices, mounts, namespaces); run `make test` as root"
        ));
        return false;
    }
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if !missing.is_empty() {
        loud_skip(&format!(
            "{suite}: missing {} (scripts/deps test installs what the tests need)",
            missing.join(" ")
        ));
        return false;
    }
    lock::machine_lock();
    stale::stale_once();
    true
}
