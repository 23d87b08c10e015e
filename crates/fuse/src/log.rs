//! Where the server's few messages go: stderr (the default: the launch
//! that started it shows them), a log descriptor it was given
//! (`--log-fd`), or, for a detached server without one, the system log
//! through the `/dev/log` socket (best effort: nothing is written if there
//! is no such socket).
//!
//! One message is one line, written with one `write` (or one datagram), so
//! that servers sharing a log file opened with O_APPEND never interleave
//! their lines. In a log file each line starts with the time (UTC) and
//! `squashfs-mount-fuse[PID]:`; the system log adds its own time.

use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// How important a message is (syslog severities).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Error = 3,
    Warning = 4,
    Info = 6,
}

pub enum Sink {
    Stderr,
    File(File),
    /// A datagram socket at this path (`/dev/log`).
    Syslog(PathBuf),
}

static SINK: OnceLock<Mutex<Sink>> = OnceLock::new();

/// A log file is emptied before a line would make it larger than this (a
/// user's log in root's `/run` is capped: squashfs-mount's `LOG_LIMIT`).
pub const FILE_LIMIT: u64 = 1 << 20;

/// Chooses where messages go; the first call wins (stderr until then).
pub fn set(sink: Sink) {
    let _ = SINK.set(Mutex::new(sink));
}

/// The system log socket.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// Writes one message (its newlines become spaces). Failures are ignored:
/// a message must never stop or slow down serving.
pub fn message(level: Level, text: &str) {
    let text = text.replace('\n', " ");
    let sink = SINK.get_or_init(|| Mutex::new(Sink::Stderr));
    let sink = sink.lock().unwrap_or_else(|p| p.into_inner());
    match &*sink {
        Sink::Stderr => {
            let _ = std::io::stderr().write_all(format!("{text}\n").as_bytes());
        }
        Sink::File(f) => {
            let line = format!(
                "{} squashfs-mount-fuse[{}]: {text}\n",
                utc_now(),
                std::process::id()
            );
            let full = f
                .metadata()
                .is_ok_and(|m| m.len().saturating_add(line.len() as u64) > FILE_LIMIT);
            if full {
                let _ = f.set_len(0);
            }
            let _ = (&*f).write_all(line.as_bytes());
        }
        Sink::Syslog(path) => {
            // Facility "user" (1), RFC 3164 framing without a time stamp:
            // the receiver (journald, rsyslog) adds it.
            let datagram = format!(
                "<{}>squashfs-mount-fuse[{}]: {text}",
                8 + level as u32,
                std::process::id()
            );
            if let Ok(s) = UnixDatagram::unbound() {
                let _ = s.send_to(datagram.as_bytes(), path);
            }
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for now.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    squashfs_format::time::utc(i64::try_from(secs).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_datagrams() {
        // The sink is process-wide; this test uses a socket of its own
        // through a second sink value instead of `set`.
        let dir = std::env::temp_dir().join(format!("sqfs-fuse-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let rx = UnixDatagram::bind(&path).unwrap();
        let sink = Mutex::new(Sink::Syslog(path));
        let _ = SINK.set(sink);
        message(Level::Error, "one\nline");
        let mut buf = [0u8; 256];
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let n = rx.recv(&mut buf).unwrap();
        let got = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert_eq!(
            got,
            format!("<11>squashfs-mount-fuse[{}]: one line", std::process::id())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
