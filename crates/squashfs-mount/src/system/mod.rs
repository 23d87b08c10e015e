//! Every system call the tool makes, in one place, split by concern.
//!
//! Nothing outside this module calls `rustix` or `libc`, and only the files
//! here that say so (`#![allow(unsafe_code)]`) contain `unsafe`, each block
//! with a `// SAFETY:` note (clippy's `undocumented_unsafe_blocks` is an
//! error in the workspace lints). The functions are thin: they name the
//! operation in the domain's words and return errors; they make no
//! decisions, print nothing and never exit. This layer imports nothing from
//! the rest of the crate.
//!
//! | file               | concern                                                          |
//! |--------------------|------------------------------------------------------------------|
//! | `credentials.rs`   | ids, groups, capabilities, dumpable, no_new_privs                |
//! | `ids.rs`           | user and group ids (the domain's types)                          |
//! | `files.rs`         | opening, reading, writing, listing files                         |
//! | `file_facts.rs`    | what a file is (`FileId`): stat, access, ACLs, xattrs, mount ids |
//! | `locks.rs`         | flock                                                            |
//! | `loop_ioctl.rs`    | loop device ioctls                                               |
//! | `mount_api.rs`     | fsopen/fsconfig/fsmount/move_mount/open_tree                     |
//! | `mount_tree.rs`    | recursive clones, mount_setattr, a mirror's entries              |
//! | `namespace.rs`     | private and visited mount namespaces                             |
//! | `cpu.rs`           | CPU affinity                                                     |
//! | `signals.rs`       | signal dispositions                                              |
//! | `rlimits.rs`       | resource limits                                                  |
//! | `process_state.rs` | umask, scheduling, nice, I/O priority                            |
//! | `own_session.rs`   | root's shared work in a process of its own session               |
//! | `spawn.rs`         | starting the FUSE server as the caller                           |
//! | `process.rs`       | facts about the process and machine, time, fds 0-2, pidfds       |
//! | `readahead.rs`     | the prefetcher's detached process and reads                      |
//! | `task_join.rs`     | `--join`: other processes via /proc, queued signals              |
//! | `userns.rs`        | `--writable=DIR`: fds that may cross, namespaces                 |
//! | `copy_files.rs`    | `--writable=DIR`: the caller's copies in a layer                 |
//! | `error.rs`         | the one kind of failure the tool reports (`Failure`)             |

pub mod copy_files;
pub mod cpu;
pub mod credentials;
pub mod error;
pub mod file_facts;
pub mod files;
pub mod ids;
pub mod locks;
pub mod loop_ioctl;
pub mod mount_api;
pub mod mount_tree;
pub mod namespace;
pub mod own_session;
pub mod process;
pub mod process_state;
pub mod readahead;
pub mod rlimits;
pub mod signals;
pub mod spawn;
pub mod task_join;
pub mod userns;

pub use copy_files::*;
pub use cpu::*;
pub use credentials::*;
pub use file_facts::*;
pub use files::*;
pub use locks::*;
pub use loop_ioctl::*;
pub use mount_api::*;
pub use mount_tree::*;
pub use namespace::*;
pub use own_session::{in_own_session, leave_the_callers_reach, OwnSession};
pub use process::*;
pub use process_state::{
    neutralize as neutralize_process_state, set_root_scheduling, CallerProcessState,
};
pub use readahead::*;
pub use signals::*;
pub use spawn::*;
pub use userns::*;

pub use rustix::io::Errno as Error;

/// Runs a system call again for as long as a signal interrupts it (EINTR).
pub(crate) fn retry<T>(mut call: impl FnMut() -> SysResult<T>) -> SysResult<T> {
    loop {
        match call() {
            Err(Error::INTR) => continue,
            other => return other,
        }
    }
}

/// Where [`fill`] reads: at the file's current offset (a pipe, a
/// socket), or from an offset of the file without moving it (pread).
#[derive(Clone, Copy)]
pub(crate) enum Position {
    Current,
    At(u64),
}

/// Reads from `fd` into `buf` until it is full, the end of the file, or
/// `enough` of what was read so far; returns how many bytes were read.
/// The one read loop of the tool: interrupted reads are retried.
pub(crate) fn fill(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
    from: Position,
    enough: impl Fn(&[u8]) -> bool,
) -> SysResult<usize> {
    let mut done = 0;
    while done < buf.len() && !enough(&buf[..done]) {
        let n = retry(|| match from {
            Position::Current => rustix::io::read(fd, &mut buf[done..]),
            Position::At(at) => rustix::io::pread(fd, &mut buf[done..], at + done as u64),
        })?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// The errno of the last failed libc call (EIO if there is none).
pub(crate) fn last_errno() -> rustix::io::Errno {
    rustix::io::Errno::from_raw_os_error(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}
pub use ids::{Gid, Uid};

/// The result of a system call: an errno on failure.
pub type SysResult<T> = Result<T, Error>;
