//! The setuid-root entry point. The privileged sequence is
//! `engine::mount_all`; `launch::run` puts privileges and limits around it.
//!
//! No Rust runtime start-up (`#![no_main]`): the C library calls [`main`]
//! directly. The runtime's start-up read `/proc/self/maps` (to place a
//! stack-overflow guard handler), installed signal handlers on an
//! alternate stack and checked fds 0-2: about 0.15 ms of every launch
//! (BENCHMARKS.md, "Launch cost"). What of it matters is done here:
//! fds 0-2 are made valid (`system::ensure_standard_fds`) and SIGPIPE is
//! ignored while the tool runs (EPIPE instead of death; the command gets
//! the default back). A stack overflow now ends the process with SIGSEGV
//! instead of a message.
// (Under `cargo test` the harness's own `main` is kept: this file has no
// tests, and the test binary must not run the tool.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code))]
#![deny(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

use squashfs_mount::cli::environment;
use squashfs_mount::cli::{self, Invocation, NO_COMMAND};
use squashfs_mount::commands::{self, launch};
use squashfs_mount::join;
use squashfs_mount::layer::Start;
use squashfs_mount::system::error::{print_stdout, report};
use squashfs_mount::VERSION;

fn fail(msg: impl std::fmt::Display) -> u8 {
    report(msg);
    1
}

/// The C entry point (argc and argv are read through `std::env`, which
/// the C library hands them to before `main`).
// The attribute is all the `unsafe_code` lint objects to: this binary has
// no Rust `main` (`#![no_main]`), so the C runtime's `main` symbol must be
// this function, and no other item defines it.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[no_mangle]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // Fds 0-2, SIGPIPE and the panic hook, as the runtime would.
    squashfs_mount::system::error::start_program();
    let code = run();
    // exit, not a return: std's exit flushes stdout.
    std::process::exit(i32::from(code))
}

/// The request to mount and run a command; or, for everything else the
/// command line may ask (help, version, the maintenance commands, a
/// usage error), the exit status once it is done.
fn run_request(args: &[OsString]) -> Result<cli::RunRequest, u8> {
    match cli::parse(args) {
        Ok(Invocation::Help) => {
            print_stdout(cli::USAGE);
            Err(0)
        }
        Ok(Invocation::Version) => {
            print_stdout(&format!("{VERSION}\n"));
            Err(0)
        }
        Ok(Invocation::Run(r)) => Ok(r),
        Ok(Invocation::Gc {
            all,
            expired,
            image,
        }) => Err(done(commands::gc_command(all, expired, image.as_deref()))),
        Ok(Invocation::CacheStatus { json }) => Err(done(commands::status_command(json))),
        Ok(Invocation::Policy { images, json }) => {
            Err(done(commands::policy_report::run(&images, json)))
        }
        Err(cli::UsageError::NoCommand) => {
            squashfs_mount::system::error::print_stderr(cli::USAGE);
            Err(fail(NO_COMMAND))
        }
        Err(e) => Err(fail(e)),
    }
}

fn run() -> u8 {
    // Before anything else: a set-group-ID installation is refused.
    if let Err(e) = squashfs_mount::privilege::refuse_set_group_id() {
        return fail(e);
    }
    // argv only; the environment is not read until privileges are gone.
    // Since Linux 5.18 an execve with argc == 0 gets a single empty argv[0].
    let mut argv = std::env::args_os();
    if argv.next().is_none_or(|arg0| arg0.is_empty()) {
        return fail("refusing to run with an empty argument list (argc == 0)");
    }
    let args: Vec<OsString> = argv.collect();
    // `--join`'s keeper (internal; it refuses to run with any privilege).
    if args.first().is_some_and(|a| join::is_keeper_word(a)) {
        return join::keeper::run(&args[1..]);
    }
    let request = match run_request(&args) {
        Ok(r) => r,
        Err(code) => return code,
    };

    // `--writable=DIR`: the caller's fds, the only ones that may reach the
    // helper it executes (see below).
    let inherited = match request.layer_dir {
        Some(_) => match squashfs_mount::system::open_fd_numbers() {
            Ok(fds) => Some(fds),
            Err(e) => return fail(format_args!("cannot list the open fds: {e}")),
        },
        None => None,
    };
    let ready = match launch::run(&request) {
        Ok(ready) => ready,
        Err(e) => return fail(e),
    };

    // Unprivileged from here on (verified in launch::run).
    let env = environment::for_command(std::env::vars_os(), ready.mount_list.as_deref());
    ready.signals.restore();
    if let Some(Err((call, e))) = ready.process.map(|p| p.restore()) {
        // The umask is back in any case; a scheduling the caller could not
        // set itself (an RT policy a privileged parent gave it) is not.
        squashfs_mount::system::error::warn(format_args!(
            "the command runs with the default scheduling (SCHED_OTHER, nice 0): {call} failed restoring the caller's: {e}"
        ));
    }
    if let (Some(kept), Some(inherited)) = (&ready.layer, &inherited) {
        return become_layer_helper(kept, &ready.command, inherited, env);
    }
    let program = &ready.command[0];
    let mut command = Command::new(program);
    command.args(&ready.command[1..]).env_clear().envs(env);
    squashfs_mount::system::keep_callers_pipe_signal(&mut command);
    let err = command.exec();
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    let searched = matches!(
        err.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    );
    let hint = if searched {
        environment::not_found_hint(program, ready.mount_list.as_deref())
    } else {
        String::new()
    };
    report(format_args!(
        "cannot run {}: {}{hint}",
        program.to_string_lossy(),
        squashfs_mount::system::error::io_message(&err)
    ));
    code
}

/// `--writable=DIR`: the process becomes `squashfs-mount-layer`, which
/// mounts the layer as the caller and becomes the command; only the
/// caller's own fds (`inherited`) reach it (`layer::Start::Become`).
fn become_layer_helper(
    kept: &squashfs_mount::layer::Kept,
    command: &[OsString],
    inherited: &[std::os::fd::RawFd],
    env: Vec<(OsString, OsString)>,
) -> u8 {
    let how = Start::Become {
        command,
        inherited,
        env,
    };
    match squashfs_mount::layer::start(kept, how) {
        Err(e) => fail(e),
        // Becoming the helper returns only when it failed.
        Ok(_) => 1,
    }
}

fn done(r: Result<(), squashfs_mount::system::error::Failure>) -> u8 {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}
