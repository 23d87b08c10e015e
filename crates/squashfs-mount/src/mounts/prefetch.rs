//! Prefetch at launch: while the command starts, a background process
//! reads the files an image lists in `/.squashfs-mount/hot.list` (what
//! `sqfs pack --order` stores: the files a command read when it started,
//! recorded by `sqfs trace`), so that the kernel decompresses them on the
//! other CPU while the command runs on one.
//!
//! The prefetcher is started after every privilege is gone: it is a fork
//! of the launch, with the caller's ids and groups, no capability,
//! no_new_privs, inside the command's mount namespace. It is detached
//! (double fork: the command never gets it as a child, so no SIGCHLD and
//! nothing to reap), holds none of the command's descriptors (stdin,
//! stdout and stderr are /dev/null; a pipe reader never waits for it),
//! and ends when its list is read or when the command exits (a pidfd of
//! the launch, which becomes the command, is checked between reads of at
//! most 256 KiB). Starting it costs the launch one stat per mount point,
//! and a fork when an image has a list; a failure to start it is silent:
//! prefetching is an optimisation, never a reason to fail.
//! Measured in BENCHMARKS.md ("Cold starts").

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use crate::system;

/// Where an image carries its hot list, relative to its root.
pub const HOT_LIST: &str = ".squashfs-mount/hot.list";
/// The largest list read (bytes).
const MAX_LIST: usize = 16 << 20;
/// Bytes read between checks that the command still runs.
const CHUNK: usize = 256 << 10;

/// Starts the prefetcher for the mount points in `mount_list`
/// (`UENV_MOUNT_LIST`: `<image>:<mountpoint>,...`, resolved paths without
/// `:` or `,`). Returns at once in the launch.
pub(crate) fn start(mount_list: &OsStr) {
    let mount_points: Vec<&[u8]> = mount_list
        .as_bytes()
        .split(|&b| b == b',')
        .filter_map(|pair| {
            pair.iter()
                .rposition(|&b| b == b':')
                .map(|at| &pair[at + 1..])
        })
        .collect();
    // Only mount points whose image carries a hot list (one stat each, as
    // the caller, in the command's namespace): a launch of images without
    // one forks nothing. The prefetcher opens the lists again, beneath the
    // mount points.
    let mount_points: Vec<&[u8]> = mount_points
        .into_iter()
        .filter(|mp| {
            let mut p = mp.to_vec();
            p.push(b'/');
            p.extend_from_slice(HOT_LIST.as_bytes());
            match std::str::from_utf8(&p) {
                Ok(p) => system::stat_at(system::working_dir(), p).is_ok_and(|st| st.is_regular()),
                Err(_) => true,
            }
        })
        .collect();
    if mount_points.is_empty() {
        return;
    }
    let Ok(launch) = system::own_pidfd() else {
        return;
    };
    if let Ok(true) = system::fork_detached() {
        run(launch, &mount_points);
        system::exit_now(0)
    }
}

/// The prefetcher's work, in the detached process.
fn run(launch: std::os::fd::OwnedFd, mount_points: &[&[u8]]) {
    let Ok(launch) = system::detach_descriptors(launch) else {
        return;
    };
    let _ = system::set_process_name(c"sqfs-prefetch");
    let ended = || system::wait_readable(launch.as_fd(), 0).unwrap_or(true);
    let mut buf = vec![0u8; CHUNK];
    // The same mount point twice (a union's layers) is read once.
    let mut seen: Vec<&[u8]> = Vec::new();
    for mp in mount_points {
        if seen.contains(mp) {
            continue;
        }
        seen.push(mp);
        let Ok(dir) = system::open_directory_path(OsStr::from_bytes(mp)) else {
            continue;
        };
        let Ok(list) = system::open_beneath(dir.as_fd(), OsStr::new(HOT_LIST)) else {
            continue;
        };
        let mut text = Vec::new();
        loop {
            match system::read_into(&list, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
            if text.len() > MAX_LIST {
                break;
            }
            if ended() {
                return;
            }
        }
        for line in text.split(|&b| b == b'\n') {
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            if ended() {
                return;
            }
            let Ok(f) = system::open_beneath(dir.as_fd(), OsStr::from_bytes(line)) else {
                continue;
            };
            if !system::fstat(f.as_fd()).is_ok_and(|s| s.is_regular()) {
                continue;
            }
            while let Ok(n) = system::read_into(&f, &mut buf) {
                if n == 0 || ended() {
                    break;
                }
            }
        }
    }
}
