//! squashfs-mount-fuse as a library: the FUSE protocol subset
//! ([`proto`]), the read-only file system answering it ([`server`]) and
//! which entries its READDIRPLUS gives attributes for ([`plus`]; the
//! listing itself is in readdir.rs), its
//! worker threads ([`workers`]), where its messages go ([`log`]), the
//! server as a process ([`process`]: threads, detaching, ending), its
//! command line ([`args`]), the launch's report of a corrupt image
//! ([`report`]), mounting for `--mount` ([`mount`]) and the
//! few `unsafe` system calls ([`sys`]). The binary (main.rs) puts them
//! together; the fuzz target `fuse_requests` drives
//! [`server::Fs::respond`].
#![deny(unsafe_code)]

pub mod args;
pub mod log;
pub mod mount;
pub mod plus;
pub mod process;
pub mod proto;
mod readdir;
pub mod report;
pub mod server;
pub mod sys;
pub mod workers;
