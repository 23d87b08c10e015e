//! Who holds the tool's shared locks (from /proc/locks), and process groups
//! that a test starts and that end with it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::process::{Child, Command, Stdio};

/// `MAJ:MIN:INO` of a file, as /proc/locks names it.
pub fn lock_id(path: &str) -> Option<String> {
    let m = fs::metadata(path).ok()?;
    let dev = m.dev();
    Some(format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        m.ino()
    ))
}

/// The ids ([`lock_id`]) of those of `paths` that exist.
pub fn lock_ids(paths: &[&str]) -> Vec<String> {
    paths.iter().filter_map(|p| lock_id(p)).collect()
}

/// The state directory of the installed tool.
pub const STATE: &str = "/run/squashfs-mount";

/// The ids of the lock files in the state directory that launches of
/// every user take: the image cache's lock, the claim of each loop device
/// (`devices/`), and the loop-device lock of versions before round 35
/// (where it exists).
pub fn shared_lock_ids() -> Vec<String> {
    let mut paths = vec![format!("{STATE}/lock"), format!("{STATE}/loop-lock")];
    for e in fs::read_dir(format!("{STATE}/devices"))
        .into_iter()
        .flatten()
        .flatten()
    {
        paths.push(e.path().to_string_lossy().into_owned());
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    lock_ids(&paths)
}

/// The ids of the lock files a launch of user `uid` holds while it counts
/// and attaches loop devices: its user's hold (`users/<uid>`), each loop
/// device's claim, and the loop-device lock of versions before round 35.
pub fn attach_lock_ids(uid: u32) -> Vec<String> {
    let mut ids = shared_lock_ids();
    ids.extend(lock_id(&format!("{STATE}/users/{uid}")));
    ids
}

/// The pids holding a lock on one of the files `ids` whose line in
/// /proc/locks contains `kind` (`""`: any, `" WRITE "`: exclusive).
pub fn holders(ids: &[String], kind: &str) -> Vec<u32> {
    fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.contains("->") && l.contains(kind))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && ids.iter().any(|id| id == f[5])).then(|| f[4].parse().ok())?
        })
        .collect()
}

/// A child started in a process group of its own: the whole group is
/// killed when this is dropped.
pub struct Group(pub Child);

impl Group {
    /// `cmd` started in the background in a process group of its own,
    /// with stdin, stdout and stderr on /dev/null (a holder whose output
    /// nobody reads).
    pub fn quiet(cmd: &mut Command) -> Group {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Group(child)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = crate::cmd::try_run(Command::new("kill").args([
            "-KILL",
            "--",
            &format!("-{}", self.0.id()),
        ]));
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An exclusive `flock` on `path` (created root-only if missing), held
/// until the file is dropped: a launch that needs it waits meanwhile.
pub fn hold(path: &str) -> fs::File {
    use std::os::unix::fs::PermissionsExt;
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).expect("chmod");
    rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .unwrap_or_else(|e| panic!("{path} is held by someone else: {e}"));
    f
}

/// Whether `pid` is the setuid program `bin` in its root phase (effective
/// uid 0) and asleep between two attempts at a lock or slot it waits for
/// (in nanosleep): a state it stays in, which a test can act on. Right
/// after exec a set-user-ID program is root too, but not asleep.
pub fn waiting_as_root(pid: u32, bin: &std::path::Path) -> bool {
    let dir = format!("/proc/{pid}");
    let sleeping = || {
        let call = fs::read_to_string(format!("{dir}/syscall")).unwrap_or_default();
        let number = call.split_whitespace().next().unwrap_or("");
        number == libc::SYS_nanosleep.to_string() || number == libc::SYS_clock_nanosleep.to_string()
    };
    if fs::read_link(format!("{dir}/exe")).ok().as_deref() != Some(bin) || !sleeping() {
        return false;
    }
    let euid_root = fs::read_to_string(format!("{dir}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    euid_root && sleeping()
}
