//! squashfs-mount: mount SquashFS images with the kernel's driver in a
//! private mount namespace, drop every privilege, run the caller's command.
//!
//! Where things are:
//! - [`launch::run`]: the order of privileged steps, in one function.
//! - [`system`]: every system call and every `unsafe` block.
//! - [`privilege`]: the explicit privilege state (acting as caller / root /
//!   dropped for good).
//! - [`cli`], [`superblock`], [`paths`]: pure parsing and checks (fuzzed).
#![deny(unsafe_code)]

pub mod cache;
pub mod cli;
pub mod config;
pub mod environment;
pub mod error;
pub mod image;
pub mod instance;
pub mod launch;
pub mod loopdev;
pub mod mount;
pub mod mountpoint;
pub mod overlay;
pub mod paths;
pub mod privilege;
pub mod system;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
