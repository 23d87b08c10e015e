//! Facts about this process and machine.

use rustix::fs::{Mode, OFlags, CWD};

use super::SysResult;

/// Total RAM in bytes (sysinfo).
pub fn total_memory() -> u64 {
    let info = rustix::system::sysinfo();
    (info.totalram as u64).saturating_mul(u64::from(info.mem_unit.max(1)))
}

/// Number of threads of this process (from /proc/self/stat is not needed:
/// /proc/self/task has one entry per thread).
pub fn thread_count() -> SysResult<usize> {
    let dir = rustix::fs::openat(
        CWD,
        "/proc/self/task",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut n = 0;
    let mut d = rustix::fs::Dir::read_from(&dir)?;
    while let Some(e) = d.read() {
        let e = e?;
        if e.file_name().to_bytes().first() != Some(&b'.') {
            n += 1;
        }
    }
    Ok(n)
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_time() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Sleeps for `ms` milliseconds.
pub fn pause_millis(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// `n` random bytes from the kernel (getrandom).
pub fn random_bytes<const N: usize>() -> SysResult<[u8; N]> {
    let mut out = [0u8; N];
    let mut done = 0;
    while done < N {
        match rustix::rand::getrandom(&mut out[done..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The kernel's name of this process's executable (/proc/self/exe).
pub fn own_executable() -> SysResult<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let target = rustix::fs::readlinkat(CWD, "/proc/self/exe", Vec::new())?;
    Ok(std::ffi::OsString::from_vec(target.into_bytes()))
}
