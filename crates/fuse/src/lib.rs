//! squashfs-mount-fuse as a library: the FUSE protocol subset
//! ([`proto`]), the read-only file system answering it ([`server`]), its
//! worker threads ([`workers`]), where its messages go ([`log`]),
//! mounting for `--mount` ([`mount`]) and the few `unsafe` system calls
//! ([`sys`]). The binary (main.rs) is the command line around them; the
//! fuzz target `fuse_requests` drives [`server::Fs::respond`].

pub mod log;
pub mod mount;
pub mod proto;
pub mod server;
pub mod sys;
pub mod workers;
