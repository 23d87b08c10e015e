//! Looking into the image cache's namespace as root (from a forked child:
//! setns into a mount namespace needs a single-threaded process).
#![allow(unsafe_code)]

use std::ffi::CString;

/// What a forked child wrote to a pipe after entering the cache namespace
/// (`child` gets the pipe's write end, and must make only raw system calls
/// on data made before the fork). Empty when the namespace cannot be
/// entered.
fn from_the_cache_namespace(child: impl FnOnce(i32)) -> Vec<u8> {
    let ns = CString::new("/run/squashfs-mount/ns").unwrap();
    let mut fds = [0i32; 2];
    // SAFETY: a pipe into an array of two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: the child makes only raw system calls (open, setns, and
    // `child`'s) on data made before, and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let fd = libc::open(ns.as_ptr(), libc::O_RDONLY);
            if fd < 0 || libc::setns(fd, libc::CLONE_NEWNS) != 0 {
                libc::_exit(2);
            }
        }
        child(fds[1]);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: closes our copy of the write end.
    unsafe { libc::close(fds[1]) };
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // SAFETY: reads into a stack buffer from our pipe end.
        let n = unsafe { libc::read(fds[0], chunk.as_mut_ptr().cast(), chunk.len()) };
        if n <= 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n as usize]);
    }
    // SAFETY: closes our read end; reaps the child.
    unsafe {
        libc::close(fds[0]);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    raw
}

/// The names at the root of the cache namespace (`/run/squashfs-mount/ns`).
pub fn names() -> Vec<String> {
    let raw = from_the_cache_namespace(|out| {
        // SAFETY: raw system calls on a stack buffer (see above).
        unsafe {
            let dir = libc::open(c"/".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            let mut buf = [0u8; 32768];
            loop {
                let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
                if n <= 0 {
                    break;
                }
                libc::write(out, buf.as_ptr().cast(), n as usize);
            }
        }
    });
    // struct linux_dirent64: ino u64, off i64, reclen u16, type u8, name.
    let mut out = Vec::new();
    let mut at = 0;
    while at + 19 <= raw.len() {
        let reclen = u16::from_ne_bytes([raw[at + 16], raw[at + 17]]) as usize;
        if reclen == 0 || at + reclen > raw.len() {
            break;
        }
        let name = &raw[at + 19..at + reclen];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if name != b"." && name != b".." {
            out.push(String::from_utf8_lossy(name).into_owned());
        }
        at += reclen;
    }
    out
}

/// Replaces the first line (the format header) of the record of every entry
/// in the cache namespace with `header`, as a version of the tool with
/// another on-disk format would have written it. Returns how many records
/// were rewritten.
pub fn rewrite_record_headers(header: &[u8]) -> usize {
    assert!(header.len() < 64);
    let ns = CString::new("/run/squashfs-mount/ns").unwrap();
    let attr = CString::new("trusted.squashfs-mount.meta").unwrap();
    let header = header.to_vec();
    // SAFETY: the child makes only raw system calls on stack buffers and on
    // data made before the fork, and ends with _exit (its status is the
    // count).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let fd = libc::open(ns.as_ptr(), libc::O_RDONLY);
            if fd < 0 || libc::setns(fd, libc::CLONE_NEWNS) != 0 {
                libc::_exit(255);
            }
            let dir = libc::open(c"/".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            let mut ents = [0u8; 32768];
            let n = libc::syscall(libc::SYS_getdents64, dir, ents.as_mut_ptr(), ents.len());
            let mut count = 0;
            let mut at = 0usize;
            while n > 0 && at + 19 <= n as usize {
                let reclen = u16::from_ne_bytes([ents[at + 16], ents[at + 17]]) as usize;
                let name = &ents[at + 19..at + reclen];
                let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                if len == 32 {
                    let mut path = [0u8; 40];
                    path[0] = b'/';
                    path[1..33].copy_from_slice(&name[..32]);
                    let mut old = [0u8; 16384];
                    let got = libc::lgetxattr(
                        path.as_ptr().cast(),
                        attr.as_ptr(),
                        old.as_mut_ptr().cast(),
                        old.len(),
                    );
                    if got > 0 {
                        let old = &old[..got as usize];
                        let eol = old.iter().position(|&b| b == b'\n').unwrap_or(old.len());
                        let mut new = [0u8; 16448];
                        new[..header.len()].copy_from_slice(&header);
                        let rest = &old[eol..];
                        new[header.len()..header.len() + rest.len()].copy_from_slice(rest);
                        let total = header.len() + rest.len();
                        if libc::lsetxattr(
                            path.as_ptr().cast(),
                            attr.as_ptr(),
                            new.as_ptr().cast(),
                            total,
                            0,
                        ) == 0
                        {
                            count += 1;
                        }
                    }
                }
                at += reclen;
            }
            libc::_exit(count);
        }
    }
    let mut status = 0;
    // SAFETY: reaps the child; `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 255,
        "could not enter the cache namespace"
    );
    libc::WEXITSTATUS(status) as usize
}

/// The permission bits of every name at the root of the cache namespace,
/// after giving each `chmod` first when it is Some (as root, in a forked
/// child: see [`names`]).
pub fn entry_modes(chmod: Option<u32>) -> Vec<(String, u32)> {
    let names = names();
    let paths: Vec<CString> = names
        .iter()
        .map(|n| CString::new(format!("/{n}")).unwrap())
        .collect();
    let raw = from_the_cache_namespace(|out| {
        for p in &paths {
            // SAFETY: raw system calls on a stack buffer and on paths made
            // before the fork (see above).
            unsafe {
                if let Some(m) = chmod {
                    libc::chmod(p.as_ptr(), m);
                }
                let mut st: libc::stat = std::mem::zeroed();
                let mode = if libc::lstat(p.as_ptr(), &mut st) == 0 {
                    st.st_mode & 0o7777
                } else {
                    u32::MAX
                };
                libc::write(out, (&mode as *const u32).cast(), 4);
            }
        }
    });
    let modes = raw
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    names.into_iter().zip(modes).collect()
}

/// The next launch collects the cache (its periodic collection, at most
/// every 10 s, counts from the mtime of the state directory's
/// `gc-stamp`): the stamp is set back to the epoch.
pub fn collect_at_next_launch() {
    crate::cmd::ok(std::process::Command::new("touch").args([
        "-d",
        "@0",
        "/run/squashfs-mount/gc-stamp",
    ]));
}
