//! `--report`: tells a launch, when it ends, that its command saw read
//! errors from a cached FUSE instance. The servers of cached instances are
//! detached: their stderr is /dev/null, and their messages go to their
//! user's log (`/run/squashfs-mount-fuse/UID.log`). squashfs-mount starts
//! this reporter, as the caller, for a launch that uses cached instances:
//! it holds the launch's stderr, a pidfd of the launch and the user's log,
//! waits until the launch (which became the command) exits, then reads
//! what the instances' servers (`--servers`) logged since the launch
//! started (`--from`) and writes their first corruption report to stderr,
//! in one line with the log's path. Nothing else is written.
//!
//! It reads only its own user's log and writes only to the stderr it
//! inherited from that user's launch: no server ever holds a launch's
//! terminal, and no user's lines reach another user.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use crate::log::FILE_LIMIT;
use crate::server::CORRUPT_MARK;

/// Waits until the process of `pidfd` exits.
pub fn wait_exit(pidfd: &OwnedFd) -> Result<(), rustix::io::Errno> {
    loop {
        let mut p = [rustix::event::PollFd::new(
            pidfd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut p, None) {
            Ok(_) if !p[0].revents().is_empty() => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The text of the first corruption report in `log` (lines as `log`
/// writes them to a file: time, `squashfs-mount-fuse[PID]: `, text) by
/// one of `servers`.
pub fn first_report<'a>(log: &'a str, servers: &[u32]) -> Option<&'a str> {
    log.lines().find_map(|line| {
        let (_, rest) = line.split_once(" squashfs-mount-fuse[")?;
        let (pid, text) = rest.split_once("]: ")?;
        let pid: u32 = pid.parse().ok()?;
        (servers.contains(&pid) && text.contains(CORRUPT_MARK)).then_some(text)
    })
}

/// The line the launch shows for a server's report `text` (`squashfs-mount:
/// IMAGE: REASON; the image is corrupt: ...`), naming the log.
pub fn line_for(text: &str, log_path: &str) -> String {
    let text = text.strip_prefix("squashfs-mount: ").unwrap_or(text);
    let what = text.split(CORRUPT_MARK).next().unwrap_or(text);
    format!(
        "squashfs-mount: {what}; the image is corrupt, so the command's reads of the affected files failed (Input/output error): 'sqfs check' on the image names the damaged files; copy the image again or rebuild it (its FUSE server's log: {log_path})\n"
    )
}

/// What the log holds from byte `from` on (from its start if it was
/// emptied since), at most [`FILE_LIMIT`] bytes.
fn read_since(log: &File, from: u64) -> String {
    let len = log.metadata().map_or(0, |m| m.len());
    let from = if len < from { 0 } else { from };
    let want = usize::try_from((len - from).min(FILE_LIMIT)).unwrap_or(0);
    let mut buf = vec![0u8; want];
    let mut got = 0;
    while got < want {
        match log.read_at(&mut buf[got..], from + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Runs the reporter: waits for the launch, then reports. Exit status 0,
/// or 1 when the launch cannot be watched.
pub fn run(log: File, log_number: i32, watch: OwnedFd, from: u64, servers: &[u32]) -> u8 {
    if let Err(e) = wait_exit(&watch) {
        eprintln!("squashfs-mount-fuse: --report: cannot watch the launch: {e}");
        return 1;
    }
    let since = read_since(&log, from);
    if let Some(text) = first_report(&since, servers) {
        let path = std::fs::read_link(format!("/proc/self/fd/{log_number}"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "the servers' log".into());
        let _ = std::io::stderr().write_all(line_for(text, &path).as_bytes());
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_report_of_the_launchs_servers() {
        let log = "\
2026-01-01T00:00:00Z squashfs-mount-fuse[7]: /a.sqfs: serving (at most 2 threads)
2026-01-01T00:00:01Z squashfs-mount-fuse[8]: squashfs-mount: /b.sqfs: bad; the image is corrupt: reads of the affected files fail with EIO
2026-01-01T00:00:02Z squashfs-mount-fuse[7]: squashfs-mount: /a.sqfs: corrupt inode table: inode 47; the image is corrupt: reads of the affected files fail with EIO
";
        assert_eq!(first_report(log, &[9]), None);
        let text = first_report(log, &[7]).unwrap();
        assert!(text.starts_with("squashfs-mount: /a.sqfs: corrupt inode"));
        let line = line_for(text, "/run/squashfs-mount-fuse/1000.log");
        assert_eq!(
            line,
            "squashfs-mount: /a.sqfs: corrupt inode table: inode 47; the image is corrupt, so the command's reads of the affected files failed (Input/output error): 'sqfs check' on the image names the damaged files; copy the image again or rebuild it (its FUSE server's log: /run/squashfs-mount-fuse/1000.log)\n"
        );
        assert_eq!(line.matches('\n').count(), 1);
    }
}
