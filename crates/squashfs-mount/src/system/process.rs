//! Facts about this process and machine; its standard fds.
#![allow(unsafe_code)]

use rustix::fs::{Mode, OFlags, CWD};
use rustix::io::Errno;

use super::{working_dir, SysResult};

/// Total RAM in bytes (sysinfo, asked once per process: the kernel counts
/// every block device's pages for it).
pub(crate) fn total_memory() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let info = rustix::system::sysinfo();
        (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)))
    })
}

/// Makes fds 0, 1 and 2 valid, opening /dev/null for each closed one (as
/// the Rust runtime's start-up does, which the binary does without): a
/// closed one would otherwise be reused by the next open (an image, a
/// lock) and receive what is written to stdout or stderr. For a setuid
/// start the C library has done it already.
pub(crate) fn ensure_standard_fds() -> SysResult<()> {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll reads and writes the three pollfd structures of the
    // local array, whose length it is given; it has no other effect (the
    // fds are only looked at, with no events requested and no wait).
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    let closed: Vec<i32> = if rc >= 0 {
        fds.iter()
            .filter(|p| p.revents & libc::POLLNVAL != 0)
            .map(|p| p.fd)
            .collect()
    } else {
        // poll refused (EINVAL with RLIMIT_NOFILE below 3, ENOMEM): ask
        // fcntl about each.
        // SAFETY: F_GETFD only reads the fd's flags; a closed fd gives
        // EBADF. No memory is involved.
        (0..3)
            .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
            .collect()
    };
    // In increasing order: each open takes the lowest free fd, the closed
    // one (all lower ones are open by then).
    for fd in closed {
        let null = rustix::fs::openat(CWD, "/dev/null", OFlags::RDWR, Mode::empty())?;
        if std::os::fd::AsRawFd::as_raw_fd(&null) != fd {
            return Err(Errno::BADF);
        }
        // Kept open for ever, as fd `fd`.
        std::mem::forget(null);
    }
    Ok(())
}

/// Whether this process has a single thread: `unshare(CLONE_THREAD)`
/// fails with EINVAL when the thread group has other threads and is a no-op
/// otherwise (unshare(2)). One system call, where listing /proc/self/task
/// took about 20 us at every launch (BENCHMARKS.md, "Launch cost").
pub(crate) fn is_single_threaded() -> SysResult<bool> {
    // SAFETY: with CLONE_THREAD alone, unshare only checks that no other
    // thread shares the thread group (EINVAL otherwise) and changes
    // nothing: no file table, fs_struct, namespace or memory is unshared.
    let rc = unsafe { libc::unshare(libc::CLONE_THREAD) };
    if rc == 0 {
        return Ok(true);
    }
    match super::last_errno() {
        Errno::INVAL => Ok(false),
        e => Err(e),
    }
}

/// Waits until the child `pid` (one this process forked) has ended, and
/// reaps it.
pub(crate) fn reap(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waits for a child of this process; `status` is a valid
    // out-pointer for the call.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if super::last_errno() != Errno::INTR {
            break;
        }
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_time() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Sleeps for `ms` milliseconds.
pub(crate) fn pause_millis(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// `n` random bytes from the kernel (getrandom).
pub(crate) fn random_bytes<const N: usize>() -> SysResult<[u8; N]> {
    let mut out = [0u8; N];
    let mut done = 0;
    while done < N {
        done += super::retry(|| {
            rustix::rand::getrandom(&mut out[done..], rustix::rand::GetRandomFlags::empty())
        })?;
    }
    Ok(out)
}

/// The kernel's name of this process's executable (/proc/self/exe).
pub(crate) fn own_executable() -> SysResult<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let target = rustix::fs::readlinkat(CWD, "/proc/self/exe", Vec::new())?;
    Ok(std::ffi::OsString::from_vec(target.into_bytes()))
}

/// Why the process `pid` cannot make progress now, when that is visible:
/// stopped (SIGSTOP, ^Z), stopped by its tracer, or frozen by a cgroup
/// freezer (v2 `cgroup.freeze`/`cgroup.events`, v1 `freezer.state`).
/// None when it runs, sleeps, waits for I/O, is gone, or cannot be seen.
pub(crate) fn stalled(pid: u32) -> Option<&'static str> {
    let here = working_dir();
    let (stat, _) = super::read_file_at(here, &format!("/proc/{pid}/stat"), 4096).ok()?;
    let stat = String::from_utf8_lossy(&stat);
    // "pid (comm) S ...": the state follows the last ')'.
    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
    match state {
        'T' => return Some("stopped"),
        't' => return Some("stopped by a tracer"),
        _ => {}
    }
    let (groups, _) = super::read_file_at(here, &format!("/proc/{pid}/cgroup"), 16 << 10).ok()?;
    String::from_utf8_lossy(&groups)
        .lines()
        .any(frozen_cgroup)
        .then_some("frozen by a cgroup freezer")
}

/// Whether the cgroup of one line of /proc/PID/cgroup is frozen.
fn frozen_cgroup(line: &str) -> bool {
    let mut parts = line.splitn(3, ':');
    let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let read = |file: String| {
        super::read_file_at(working_dir(), &file, 4096)
            .map(|(t, _)| String::from_utf8_lossy(&t).into_owned())
            .unwrap_or_default()
    };
    if controllers.is_empty() {
        // cgroup v2: mounted on /sys/fs/cgroup, or beside v1 controllers
        // on /sys/fs/cgroup/unified.
        let base = if super::stat_at(working_dir(), "/sys/fs/cgroup/cgroup.controllers").is_ok() {
            "/sys/fs/cgroup"
        } else {
            "/sys/fs/cgroup/unified"
        };
        let dir = format!("{base}{}", path.trim_end_matches('/'));
        read(format!("{dir}/cgroup.freeze")).trim() == "1"
            || read(format!("{dir}/cgroup.events"))
                .lines()
                .any(|l| l.trim() == "frozen 1")
    } else if controllers.split(',').any(|c| c == "freezer") {
        let state = read(format!(
            "/sys/fs/cgroup/freezer{}/freezer.state",
            path.trim_end_matches('/')
        ));
        matches!(state.trim(), "FROZEN" | "FREEZING")
    } else {
        false
    }
}

/// When the process `pid` started (clock ticks after boot: field 22 of
/// /proc/PID/stat), if it exists and is not a zombie: with the pid, it
/// names one process for good.
pub(crate) fn process_started(pid: u32) -> Option<u64> {
    process_started_in(working_dir(), &format!("/proc/{pid}/stat"))
}

/// [`process_started`] from the `stat` file at `path` relative to `dir` (a
/// directory fd of /proc, where the current root has none).
pub(crate) fn process_started_in(dir: std::os::fd::BorrowedFd<'_>, path: &str) -> Option<u64> {
    process_name_and_start_in(dir, path).map(|(_, started)| started)
}

/// The name (comm, field 2) and the start time of the process whose `stat`
/// file is at `path` relative to `dir`, if it is not a zombie.
pub(crate) fn process_name_and_start_in(
    dir: std::os::fd::BorrowedFd<'_>,
    path: &str,
) -> Option<(String, u64)> {
    let (stat, _) = super::read_file_at(dir, path, 4096).ok()?;
    let stat = String::from_utf8_lossy(&stat);
    let (head, tail) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    let mut fields = tail.split_whitespace();
    // Field 3 is the state; field 22 the start time.
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    Some((name, fields.nth(18)?.parse().ok()?))
}

/// The resident memory of the process `pid`, in bytes (/proc/PID/statm).
pub(crate) fn process_resident_bytes(pid: u32) -> Option<u64> {
    let (statm, _) = super::read_file_at(working_dir(), &format!("/proc/{pid}/statm"), 256).ok()?;
    let pages: u64 = String::from_utf8_lossy(&statm)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

/// Waits up to `timeout_ms` for `fd` to be readable; false on timeout.
pub(crate) fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, timeout_ms: i32) -> SysResult<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let t = Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    };
    super::retry(|| poll(&mut fds, Some(&t))).map(|n| n > 0)
}

/// Sends SIGKILL to the process `pidfd` refers to (nothing if it is gone).
pub fn kill_by_pidfd(pidfd: std::os::fd::BorrowedFd<'_>) -> SysResult<()> {
    match rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL) {
        Err(Errno::SRCH) => Ok(()),
        other => other,
    }
}

/// Kills (SIGKILL) the process `pid` if it is still the one that started
/// at `started` (checked through a pidfd, so that a recycled pid is never
/// hit). Ok when it is gone already.
pub(crate) fn kill_process(pid: u32, started: u64) -> SysResult<()> {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return Ok(());
    };
    let fd = match rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::SRCH) => return Ok(()),
        Err(e) => return Err(e),
    };
    if process_started(pid) != Some(started) {
        return Ok(());
    }
    kill_by_pidfd(std::os::fd::AsFd::as_fd(&fd))
}

/// The pid of the process the pidfd `fd` refers to and when it started,
/// read as one fact: the start time is read by pid, then the pidfd must
/// still refer to a process that has not exited, with the same pid. A
/// process alive after the read was alive during it, so its pid could not
/// have been given to another process in between (a server that died and
/// whose pid was reused meanwhile is not named: None).
pub(crate) fn process_of_pidfd(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u32, u64)> {
    process_of_pidfd_with(fd, process_started)
}

/// [`process_of_pidfd`] with the start time read by `started` (the tests
/// end the process in between).
fn process_of_pidfd_with(
    fd: std::os::fd::BorrowedFd<'_>,
    started: impl FnOnce(u32) -> Option<u64>,
) -> Option<(u32, u64)> {
    let pid = pid_of_pidfd(fd).ok()?;
    let start = started(pid)?;
    // A pidfd is readable once its process has exited.
    let exited = wait_readable(fd, 0).unwrap_or(true);
    (!exited && pid_of_pidfd(fd).ok() == Some(pid)).then_some((pid, start))
}

/// The pid a pidfd refers to (its `Pid:` line in /proc/self/fdinfo).
pub(crate) fn pid_of_pidfd(fd: std::os::fd::BorrowedFd<'_>) -> SysResult<u32> {
    use std::os::fd::AsRawFd;
    let (info, _) = super::read_file_at(
        working_dir(),
        &format!("/proc/self/fdinfo/{}", fd.as_raw_fd()),
        4096,
    )?;
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("Pid:")?.trim().parse::<i64>().ok())
        .filter(|&p| p > 0)
        .map(|p| p as u32)
        .ok_or(Errno::SRCH)
}

/// CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID): the
/// budget of scans of other processes' state, which wall time would let a
/// caller who starves the launch of CPU exhaust without any work done.
pub(crate) fn thread_cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The CPU time process `pid` has run for, in nanoseconds: the sum over
/// its threads of /proc/PID/task/TID/schedstat's first field (a plugin's
/// worker thread holds the lock in slurmstepd, whose main thread sleeps).
/// None when it is gone.
pub(crate) fn cpu_progress(pid: u32) -> Option<u64> {
    let here = working_dir();
    let (tids, _) = super::list_dir(here, &format!("/proc/{pid}/task"), 4096).ok()?;
    let ran = tids.iter().filter_map(|tid| {
        let tid = tid.to_str()?;
        let path = format!("/proc/{pid}/task/{tid}/schedstat");
        let (sched, _) = super::read_file_at(here, &path, 256).ok()?;
        String::from_utf8_lossy(&sched)
            .split_whitespace()
            .next()?
            .parse::<u64>()
            .ok()
    });
    Some(ran.sum())
}

#[cfg(test)]
mod pidfd_tests {
    use super::*;
    use std::os::fd::AsFd;

    fn pidfd_of(child: &std::process::Child) -> std::os::fd::OwnedFd {
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd")
    }

    #[test]
    fn a_live_process_is_named_by_pid_and_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let fd = pidfd_of(&child);
        let got = process_of_pidfd(fd.as_fd());
        assert_eq!(
            got,
            Some((child.id(), process_started(child.id()).unwrap()))
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Issue 26, finding 6: the process ends between the pid and the
    /// start time (and its pid may be another process's by then, whose
    /// start time is read): nothing is named.
    #[test]
    fn a_process_that_ends_between_the_reads_is_not_named() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let fd = pidfd_of(&child);
        let got = process_of_pidfd_with(fd.as_fd(), |_pid| {
            child.kill().unwrap();
            child.wait().unwrap();
            // What /proc/PID/stat of the pid's next process would say.
            Some(12345)
        });
        assert_eq!(got, None);
    }
}
