//! squashfs-mount: mount SquashFS images in a private mount namespace, with
//! the kernel's driver when the site policy trusts them and a FUSE server
//! running as the caller otherwise; drop every privilege; run the caller's
//! command.
//!
//! # Rooms
//!
//! Every room is crate-private (`pub(crate) mod`); what other crates may
//! use is the front below, and each room's `mod.rs` lists its part of it.
//! From the front ends down:
//!
//! - [`commands`]: the front end of the setuid command
//!   ([`commands::launch`], [`commands::program`]) and the maintenance
//!   commands (`--gc`, `--cache-status`, `--policy`).
//! - [`join`]: `--join`: the tasks of one Slurm step share one mount
//!   namespace.
//! - [`engine`]: the one privileged sequence, [`engine::mount_all`], for
//!   every front end, in stages (the plan: [`engine::plan`]), and its dry
//!   run of the first stages, [`engine::check`].
//! - [`layer`]: `--writable=DIR`, the writable layer kept in a directory
//!   of the caller's, mounted as the caller.
//! - [`cache`]: the image cache, kept instances and their eviction.
//! - [`mounts`]: the mechanisms below the engine (image, loop device,
//!   squashfs and FUSE instances, overlays, mount points).
//! - [`config`]: settings and site policy from the root-owned file, and
//!   path logic without system calls ([`config::paths`]).
//! - [`cli`]: the command line, parsed without system calls (fuzzed).
//! - [`privilege`]: the explicit, sealed privilege state.
//! - [`system`]: every system call and every `unsafe` block, by concern.
//!
//! # Front
//!
//! Used by the two programs of this package (`main.rs`, `layer_main.rs`),
//! the Slurm plugin (`crates/spank`), the fuzz targets and the tests: the
//! `pub use` lines below, grouped by who needs them (at most 40;
//! `tests/structure.rs` checks that other crates use nothing else). A
//! room offers its part with `pub use` in its `mod.rs` or its files; all
//! else in the crate is `pub(crate)` or private.
#![deny(unsafe_code)]
// The rooms are crate-private, so the links above resolve in the docs of
// private items (`cargo doc --document-private-items`, the maintainers'
// docs); in the public docs they are plain names.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod cache;
pub(crate) mod cli;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod join;
pub(crate) mod layer;
pub(crate) mod mounts;
pub(crate) mod privilege;
pub(crate) mod system;

// The programs: squashfs-mount's and squashfs-mount-layer's.
pub use commands::{gc::job_epilog, program::run as run_program};
pub use layer::helper::{main as run_layer_helper, Kept, StepLayer};
pub use layer::start::{start as start_layer, Start};
// The command line (the plugin reads its options with the same grammar).
pub use cli::{parse, parse_bind, parse_layer_dir, parse_pair, parse_union};
pub use cli::{Invocation, MountRequest, RunRequest, UsageError, MAX_VERBOSITY, USAGE};
pub use config::{paths, LayerSize};
// The sequence, for the plugin's worker thread; its dry run, for the
// plugin's srun check (crates/spank/src/local.rs).
pub use engine::{check, mount_all, Context, FrontEnd, FuseServer, System, WorkingDir};
pub use mounts::installed::server_for_plugin;
pub use privilege::{
    Caller, Credentials, PrivilegeError, RootPhase, ThreadCredentials, Unprivileged,
};
// System calls the plugin makes in slurmstepd around the sequence.
pub use system::credentials::{clear_capabilities, has_no_capabilities, set_no_new_privs};
pub use system::error::{start_program, Failure};
pub use system::files::{change_dir, current_dir};
pub use system::namespace::{
    join_mount_namespace, open_thread_mount_namespace, unshare_fs_of_thread,
};
pub use system::{process::kill_by_pidfd, userns::join_user_and_mount_namespaces};
pub use system::{Error as SystemError, Gid, Uid};

pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");
