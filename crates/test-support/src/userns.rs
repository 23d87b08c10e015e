//! Running a command where unprivileged user namespaces are disabled by
//! `user.max_user_namespaces = 0`, without changing the machine: the
//! sysctl is set inside a user namespace made for the command (it limits
//! that namespace and everything below it), whose root maps to root and
//! the test user to itself; the command then runs as the test user.
//! (Setting it host-wide needs CAP_SYS_RESOURCE, which some machines take
//! away even from root, and would disturb everything else running.)
#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Output};

use crate::cmd::Run;

/// Runs `argv` as `uid`:`gid` (no supplementary groups) in a user
/// namespace whose `user.max_user_namespaces` is 0.
pub fn run_without_user_namespaces(uid: u32, gid: u32, argv: &[&str]) -> Run {
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(*a).expect("argument"))
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let sysctl = CString::new("/proc/sys/user/max_user_namespaces").unwrap();
    let dir = std::env::temp_dir().join(format!("sqfsmnt-userns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out_path = CString::new(dir.join("out").to_string_lossy().as_bytes()).unwrap();
    let err_path = CString::new(dir.join("err").to_string_lossy().as_bytes()).unwrap();
    let (mut go, mut ready) = ([0i32; 2], [0i32; 2]);
    // SAFETY: two pipes into arrays of two ints.
    unsafe {
        assert_eq!(libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC), 0);
        assert_eq!(libc::pipe2(ready.as_mut_ptr(), libc::O_CLOEXEC), 0);
    }
    // SAFETY: the child makes only async-signal-safe system calls on data
    // prepared before the fork, and ends in execv or _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let mut b = [0u8; 1];
            if libc::unshare(libc::CLONE_NEWUSER) != 0
                || libc::write(ready[1], b"u".as_ptr().cast(), 1) != 1
                || libc::read(go[0], b.as_mut_ptr().cast(), 1) != 1
            {
                libc::_exit(120);
            }
            let fd = libc::open(sysctl.as_ptr(), libc::O_WRONLY);
            if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                libc::_exit(121);
            }
            libc::close(fd);
            let o = libc::open(
                out_path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o600,
            );
            let e = libc::open(
                err_path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o600,
            );
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if o < 0
                || e < 0
                || null < 0
                || libc::dup2(null, 0) < 0
                || libc::dup2(o, 1) < 0
                || libc::dup2(e, 2) < 0
            {
                libc::_exit(122);
            }
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(gid, gid, gid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                libc::_exit(123);
            }
            libc::execv(ptrs[0], ptrs.as_ptr());
            libc::_exit(127);
        }
    }
    let mut b = [0u8; 1];
    // SAFETY: reads one byte from our pipe end into `b`, one byte long.
    let got = unsafe { libc::read(ready[0], b.as_mut_ptr().cast(), 1) };
    assert_eq!(got, 1, "the child did not make its user namespace");
    let map = |file: &str, id: u32| {
        std::fs::write(
            format!("/proc/{pid}/{file}"),
            format!("0 0 1\n{id} {id} 1\n"),
        )
        .expect("id map")
    };
    map("uid_map", uid);
    map("gid_map", gid);
    // SAFETY: writes one byte to our pipe end; then reaps the child.
    let status = unsafe {
        libc::write(go[1], b"g".as_ptr().cast(), 1);
        let mut st = 0;
        libc::waitpid(pid, &mut st, 0);
        for fd in go.iter().chain(ready.iter()) {
            libc::close(*fd);
        }
        st
    };
    let out = Output {
        status: ExitStatus::from_raw(status),
        stdout: std::fs::read(dir.join("out")).unwrap_or_default(),
        stderr: std::fs::read(dir.join("err")).unwrap_or_default(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    Run(out)
}
