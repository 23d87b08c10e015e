//! The FUSE path: an image the site policy does not trust for the kernel's
//! squashfs driver is served by `squashfs-mount-fuse`, a userspace reader
//! that runs with the caller's credentials (never root unless the caller
//! is), reading the fd the caller opened. The mount is made here
//! (read-only, nosuid, nodev, `default_permissions` so that the kernel
//! checks modes as for the kernel path, `allow_other` so that overlayfs and
//! root's lookups of nested mount points reach it; it lives in the
//! command's private namespace only). The server lives exactly as long as
//! the mount: when the last reference to it goes (the command's namespace
//! ends) its connection ends and it exits; it also exits when the process
//! it watches (the launch, which becomes the command) does.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::error::Failure;
use crate::image::Image;
use crate::privilege::Caller;
use crate::system::{self, FsContext, RunAs};

/// The server's file name, installed in `<prefix>/lib/squashfs-mount/`.
pub const SERVER_NAME: &str = "squashfs-mount-fuse";
/// How long a server may take to check its image and answer.
const READY_TIMEOUT_MS: i32 = 30_000;

/// Where the server is: next to the setuid binary's installation
/// (`<prefix>/bin/squashfs-mount` → `<prefix>/lib/squashfs-mount/`), or
/// next to the plugin. The kernel's name of our own executable, never the
/// environment.
pub fn server_next_to(dir: &OsStr) -> OsString {
    let mut p = dir.as_bytes().to_vec();
    p.extend_from_slice(b"/");
    p.extend_from_slice(SERVER_NAME.as_bytes());
    OsString::from_vec(p)
}

/// The server for the setuid command: `<exe dir>/../lib/squashfs-mount/`.
pub fn server_for_command() -> Option<OsString> {
    let exe = system::own_executable().ok()?;
    let bin = exe.as_bytes().rsplit_once_byte(b'/')?.0;
    let prefix = bin.rsplit_once_byte(b'/')?.0;
    let mut dir = prefix.to_vec();
    dir.extend_from_slice(b"/lib/squashfs-mount");
    Some(server_next_to(OsStr::from_bytes(&dir)))
}

trait SplitByte {
    fn rsplit_once_byte(&self, b: u8) -> Option<(&[u8], &[u8])>;
}
impl SplitByte for [u8] {
    fn rsplit_once_byte(&self, b: u8) -> Option<(&[u8], &[u8])> {
        let at = self.iter().rposition(|&c| c == b)?;
        Some((&self[..at], &self[at + 1..]))
    }
}

/// A server started, not yet confirmed ready.
pub struct Starting {
    ready: OwnedFd,
    subject: String,
}

/// Makes a FUSE mount for `image` (detached, read-only, nosuid, nodev) and
/// starts its server as `caller` (`run_as`: None when the process already
/// is the caller, in rootless mode). Needs CAP_SYS_ADMIN over the current
/// mount namespace (root, or the rootless user namespace).
pub fn instance(
    image: &Image,
    caller: &Caller,
    run_as: bool,
    server: &OsStr,
    threads: u32,
    subject: &str,
) -> Result<(OwnedFd, Starting), Failure> {
    let fail =
        |what: &str, e: system::Error| Failure::about(subject, format!("FUSE path: {what}: {e}"));
    let device = system::open_fuse_device().map_err(|e| {
        let what = match e {
            system::Error::ACCESS | system::Error::PERM => {
                "you may not open it (it is usually mode 0666); ask your administrator"
            }
            system::Error::NOENT | system::Error::NODEV | system::Error::NXIO => {
                "the fuse module is not loaded; ask your administrator"
            }
            _ => "ask your administrator",
        };
        Failure::about(
            subject,
            format!("the FUSE path needs /dev/fuse, which cannot be opened ({e}): {what}"),
        )
    })?;
    let ctx = FsContext::open("fuse").map_err(|e| fail("fsopen(fuse)", e))?;
    let fd_number = std::os::fd::AsRawFd::as_raw_fd(&device).to_string();
    for (key, value) in [
        ("fd", fd_number),
        ("rootmode", "40000".to_string()),
        ("user_id", caller.uid.as_raw().to_string()),
        ("group_id", caller.gid.as_raw().to_string()),
        ("max_read", (1u32 << 20).to_string()),
    ] {
        ctx.set_string(key, OsStr::new(&value))
            .map_err(|e| fail(&format!("fuse {key}"), e))?;
    }
    for flag in ["default_permissions", "allow_other"] {
        ctx.set_flag(flag)
            .map_err(|e| fail(&format!("fuse {flag}"), e))?;
    }
    let source = CString::new(image.path.as_bytes()).unwrap_or_default();
    let _ = ctx.set_string("source", OsStr::from_bytes(source.as_bytes()));
    if let Err((e, log)) = ctx.create() {
        return Err(Failure::about(
            subject,
            format!(
                "FUSE path: the kernel refused the FUSE mount: {e} {}",
                log.join("; ")
            ),
        ));
    }
    let mount = ctx
        .mount(system::safe_mount_attributes())
        .map_err(|e| fail("fsmount(fuse)", e))?;
    let (ready_read, ready_write) = system::pipe().map_err(|e| fail("pipe", e))?;
    let watch = system::own_pidfd().map_err(|e| fail("pidfd_open", e))?;
    let program = CString::new(server.as_bytes())
        .map_err(|_| Failure::about(subject, "FUSE path: bad server path"))?;
    let name = CString::new(image.path.as_bytes())
        .unwrap_or_else(|_| CString::new("image").unwrap_or_default());
    let arg = |s: &str| CString::new(s).unwrap_or_default();
    let argv = vec![
        program.clone(),
        arg("--fuse-fd"),
        arg("3"),
        arg("--image-fd"),
        arg("4"),
        arg("--ready-fd"),
        arg("5"),
        arg("--watch-pidfd"),
        arg("6"),
        arg("--threads"),
        arg(&threads.to_string()),
    ];
    let mut argv = argv;
    if !run_as {
        // Rootless: the user namespace maps the caller's ids only; the
        // image's others would show as nobody and could not be copied up
        // into a writable layer. The caller can read every byte of the
        // image anyway.
        argv.push(arg("--owner"));
        argv.push(arg(&format!(
            "{}:{}",
            caller.uid.as_raw(),
            caller.gid.as_raw()
        )));
    }
    argv.extend([arg("--name"), name]);
    let env = [arg("PATH=/usr/bin:/bin"), arg("LC_ALL=C")];
    let keep = [
        (device.as_fd(), 3),
        (image.fd.as_fd(), 4),
        (ready_write.as_fd(), 5),
        (watch.as_fd(), 6),
    ];
    let as_caller = RunAs {
        uid: caller.uid,
        gid: caller.gid,
        groups: &caller.groups,
    };
    system::spawn_detached(&program, &argv, &env, &keep, run_as.then_some(as_caller))
        .map_err(|e| fail("starting the FUSE server", e))?;
    drop(ready_write);
    Ok((
        mount,
        Starting {
            ready: ready_read,
            subject: subject.to_string(),
        },
    ))
}

/// Waits for each server's answer: `ready`, or the reason it refused the
/// image (corrupt, truncated...), or that it could not start.
pub fn wait_ready(starting: Vec<Starting>, server: &OsStr) -> Result<(), Failure> {
    for s in starting {
        let answered = system::wait_readable(s.ready.as_fd(), READY_TIMEOUT_MS).map_err(|e| {
            Failure::about(
                &s.subject,
                format!("FUSE path: waiting for the server: {e}"),
            )
        })?;
        if !answered {
            return Err(Failure::about(&s.subject, format!("FUSE path: the server did not answer within {} s; is the image on a file system that hangs?", READY_TIMEOUT_MS / 1000)));
        }
        let line = system::read_some(s.ready.as_fd(), 4096).unwrap_or_default();
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end();
        if line == "ready" {
            continue;
        }
        if let Some(why) = line.strip_prefix("error ") {
            return Err(Failure::about(&s.subject, why));
        }
        return Err(Failure::about(
            &s.subject,
            format!(
                "FUSE path: the server {} did not start; the image is served in userspace because the site policy does not let the kernel mount it (see squashfs-mount --policy); install {SERVER_NAME} there (make install)",
                server.to_string_lossy()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_location() {
        assert_eq!(
            server_next_to(OsStr::new("/usr/lib/squashfs-mount")),
            "/usr/lib/squashfs-mount/squashfs-mount-fuse"
        );
        assert_eq!(
            b"/usr/local/bin/squashfs-mount"
                .rsplit_once_byte(b'/')
                .unwrap()
                .0,
            b"/usr/local/bin"
        );
    }
}
