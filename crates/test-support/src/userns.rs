//! Running a command where unprivileged user namespaces are disabled by
//! `user.max_user_namespaces = 0`, without changing the machine: the
//! sysctl is set inside a user namespace made for the command (it limits
//! that namespace and everything below it), whose root maps to root and
//! the test user to itself; the command then runs as the test user.
//! (Setting it host-wide needs CAP_SYS_RESOURCE, which some machines take
//! away even from root, and would disturb everything else running.)
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
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
    let (go, ready) = (cloexec_pipe(), cloexec_pipe());
    // SAFETY: the child makes only async-signal-safe system calls on data
    // prepared before the fork, and ends in execv or _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let plan = ChildPlan {
            go: go[0],
            ready: ready[1],
            sysctl: &sysctl,
            out_path: &out_path,
            err_path: &err_path,
            uid,
            gid,
            argv: &ptrs,
        };
        // SAFETY: this is the forked child, as exec_in_child needs.
        unsafe { exec_in_child(&plan) }
    }
    wait_for_child_namespace(ready[0]);
    map_ids(pid, uid, gid);
    let status = release_and_reap(pid, go, ready);
    let out = Output {
        status: ExitStatus::from_raw(status),
        stdout: std::fs::read(dir.join("out")).unwrap_or_default(),
        stderr: std::fs::read(dir.join("err")).unwrap_or_default(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    Run(out, String::new())
}

/// A pipe (read end, write end), both close-on-exec.
fn cloexec_pipe() -> [i32; 2] {
    let mut fds = [0i32; 2];
    // SAFETY: a pipe into an array of two ints.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
    }
    fds
}

/// What the forked child uses, all prepared before the fork.
struct ChildPlan<'a> {
    /// The read end of the pipe on which the parent says "go".
    go: i32,
    /// The write end of the pipe on which the child says it is ready.
    ready: i32,
    sysctl: &'a CStr,
    out_path: &'a CStr,
    err_path: &'a CStr,
    uid: u32,
    gid: u32,
    /// The command, null-terminated.
    argv: &'a [*const libc::c_char],
}

/// The forked child: makes its user namespace, waits for the parent to map
/// its ids, sets the namespace's `user.max_user_namespaces` to 0, sends
/// stdout and stderr to their files, becomes `uid`:`gid` and executes the
/// command; exits 120 to 123 on the step that fails, 127 if execv does.
///
/// # Safety
///
/// Only in the child of a fork: it makes only async-signal-safe system
/// calls and ends in execv or _exit.
unsafe fn exec_in_child(plan: &ChildPlan) -> ! {
    // SAFETY: as the function's contract says.
    unsafe {
        let mut b = [0u8; 1];
        if libc::unshare(libc::CLONE_NEWUSER) != 0
            || libc::write(plan.ready, b"u".as_ptr().cast(), 1) != 1
            || libc::read(plan.go, b.as_mut_ptr().cast(), 1) != 1
        {
            libc::_exit(120);
        }
        let fd = libc::open(plan.sysctl.as_ptr(), libc::O_WRONLY);
        if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
            libc::_exit(121);
        }
        libc::close(fd);
        let o = libc::open(
            plan.out_path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
            0o600,
        );
        let e = libc::open(
            plan.err_path.as_ptr(),
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
            || libc::setresgid(plan.gid, plan.gid, plan.gid) != 0
            || libc::setresuid(plan.uid, plan.uid, plan.uid) != 0
        {
            libc::_exit(123);
        }
        libc::execv(plan.argv[0], plan.argv.as_ptr());
        libc::_exit(127);
    }
}

/// Waits for the child's byte on `ready_fd`: its user namespace is made.
fn wait_for_child_namespace(ready_fd: i32) {
    let mut b = [0u8; 1];
    // SAFETY: reads one byte from our pipe end into `b`, one byte long.
    let got = unsafe { libc::read(ready_fd, b.as_mut_ptr().cast(), 1) };
    assert_eq!(got, 1, "the child did not make its user namespace");
}

/// Maps root to root and `uid`/`gid` to themselves in the child's user
/// namespace.
fn map_ids(pid: libc::pid_t, uid: u32, gid: u32) {
    let map = |file: &str, id: u32| {
        std::fs::write(
            format!("/proc/{pid}/{file}"),
            format!("0 0 1\n{id} {id} 1\n"),
        )
        .expect("id map")
    };
    map("uid_map", uid);
    map("gid_map", gid);
}

/// Tells the child to go on, waits for it to end and closes both pipes;
/// its wait status.
fn release_and_reap(pid: libc::pid_t, go: [i32; 2], ready: [i32; 2]) -> i32 {
    // SAFETY: writes one byte to our pipe end; then reaps the child.
    unsafe {
        libc::write(go[1], b"g".as_ptr().cast(), 1);
        let mut st = 0;
        libc::waitpid(pid, &mut st, 0);
        for fd in go.iter().chain(ready.iter()) {
            libc::close(*fd);
        }
        st
    }
}
