//! squashfs-mount: mount SquashFS images in a private mount namespace, with
//! the kernel's driver when the site policy trusts them and a FUSE server
//! running as the caller otherwise; drop every privilege; run the caller's
//! command.
//!
//! Where things are:
//! - [`engine::mount_all`]: the one privileged sequence, for every front end.
//! - [`launch`]: the setuid command around it (and rootless mode).
//! - [`privilege`]: the explicit, sealed privilege state.
//! - [`system`]: every system call and every `unsafe` block, by concern.
//! - [`cli`], [`paths`], [`engine::plan`], [`config`]: pure parsing and
//!   checks (fuzzed, unit-tested without root).
#![deny(unsafe_code)]

pub mod cache;
pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod join;
pub mod layer;
pub mod mounts;
pub mod privilege;
pub mod system;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
