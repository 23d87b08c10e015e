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
//!
//! Front (re-exported by `lib.rs`; other crates use only these):
//! `Failure` (`error::Failure`), `Gid`, `SystemError` (`Error`), `Uid`,
//! `change_dir`, `clear_capabilities`, `current_dir`,
//! `has_no_capabilities`, `join_mount_namespace`,
//! `join_user_and_mount_namespaces`, `kill_by_pidfd`,
//! `open_thread_mount_namespace`, `set_no_new_privs`, `start_program`
//! (`error::start_program`), `unshare_fs_of_thread`.

pub(crate) mod copy_files;
pub(crate) mod cpu;
pub(crate) mod credentials;
pub(crate) mod error;
pub(crate) mod file_facts;
pub(crate) mod files;
pub(crate) mod ids;
pub(crate) mod locks;
pub(crate) mod loop_ioctl;
pub(crate) mod mount_api;
pub(crate) mod mount_tree;
pub(crate) mod namespace;
pub(crate) mod own_session;
pub(crate) mod process;
pub(crate) mod process_state;
pub(crate) mod readahead;
pub(crate) mod rlimits;
pub(crate) mod signals;
pub(crate) mod spawn;
pub(crate) mod task_join;
pub(crate) mod userns;

pub(crate) use copy_files::{
    copy_file_named, copy_symlink_named, is_opaque_dir, make_dir_named, make_special_named,
    names_in, open_listable_dir, set_mode,
};
pub(crate) use cpu::{cpu_affinity, pin_to_cpu, set_cpu_affinity};
pub(crate) use credentials::{
    capability_state, clear_capabilities, effective_capabilities_empty, effective_gid,
    effective_uid, has_no_capabilities, limit_capabilities, no_new_privs, own_program, real_gid,
    real_uid, res_gid, res_uid, set_all_gids, set_all_uids, set_effective_gid, set_effective_uid,
    set_groups, set_no_new_privs, set_not_dumpable, set_real_uid, supplementary_groups,
    Capabilities, OutOfReach,
};
pub(crate) use file_facts::{
    access_acl, attribute, fd_attribute, filesystem_type, fstat, fstat_cached, may_create_in,
    may_list, may_write, mount_id, set_access_acl, set_attribute, set_fd_attribute, stat_at,
    stat_at_cached, stat_following, stat_name_at, FileId,
};
pub(crate) use files::{
    change_dir, create_file_if_missing, current_dir, ensure_mode, is_executable_file, list_dir,
    make_dir, make_directory_path_no_magic, open_dir_nofollow, open_directory_path,
    open_directory_path_no_magic, open_image, open_lock_file, open_null, open_or_create_dir,
    open_path_nofollow, open_read_nofollow, open_root_log, path_of_fd, private_copy, read_at,
    read_file_at, read_head, read_link, remove_dir, remove_file, rename, touch, truncate,
    working_dir, write_new_file,
};
pub(crate) use locks::{lock_holders, try_lock, unlock, LockKind};
pub(crate) use loop_ioctl::{
    disk_sequence, loop_add_fresh, loop_bound, loop_clear, loop_configure, loop_disk_sequence,
    loop_get_free, loop_status, open_loop_control, open_loop_device, LO_FLAGS_AUTOCLEAR,
    LO_FLAGS_DIRECT_IO, LO_FLAGS_READ_ONLY,
};
pub(crate) use mount_api::{
    attach_mount, bind_namespace, bind_onto_itself, clone_mount, clone_mount_at, detach_mount,
    fuse_connection_in, fuse_control_mount, is_mount_root, make_directory_in, make_private,
    mount_flags, safe_mount_attributes, FsContext, Refused, FUSECTL_MAGIC, FUSE_MAGIC, NSFS_MAGIC,
    OUR_FUSE_SUBTYPE, SQUASHFS_MAGIC,
};
pub(crate) use mount_tree::{
    clone_tree, link_target, make_dir_in, make_file_in, make_symlink_in, no_attributes,
    nosuid_nodev, read_only, set_tree_attributes, small_tmpfs, AttributeScope,
};
pub(crate) use namespace::{
    become_tmpfs_rooted, enter_private_mount_namespace, enter_user_and_mount_namespace,
    in_mount_namespace, in_new_mount_namespace, leave_working_dir, pivot_onto,
    return_to_working_dir, unshare_fs_of_thread, AwayFromWorkingDir, Stranded, VisitError,
};
pub(crate) use own_session::{in_own_session, leave_the_callers_reach, OwnSession};
pub(crate) use process::{
    cpu_progress, ensure_standard_fds, is_single_threaded, kill_by_pidfd, kill_process,
    own_executable, pause_millis, process_name_and_start_in, process_of_pidfd,
    process_resident_bytes, process_started, random_bytes, stalled, thread_cpu_time, total_memory,
    unix_time, wait_readable,
};
pub(crate) use process_state::{
    neutralize as neutralize_process_state, set_root_scheduling, CallerProcessState,
};
pub(crate) use readahead::{
    detach_descriptors, exit_now, fork_detached, open_beneath, read_into, set_process_name,
};
pub(crate) use signals::{
    block_job_control, ignore_broken_pipe_signal, ignore_file_size_signal,
    keep_callers_pipe_signal, CallerSignals, SignalMask,
};
pub(crate) use spawn::{
    open_fuse_device, open_program, own_pidfd, pipe, read_some, spawn_detached, Helper,
};
pub(crate) use userns::{
    change_dir_to, close_on_exec_all_but, fd_of_process, is_regular_file,
    join_user_and_mount_namespaces, keep_across_exec, keep_copy_across_exec, namespace_type,
    on_read_only_filesystem, open_fd_numbers, own_namespaces, owning_user_namespace, take_fd,
    user_namespace_owner, write_all, MOUNT_NAMESPACE, USER_NAMESPACE,
};

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
