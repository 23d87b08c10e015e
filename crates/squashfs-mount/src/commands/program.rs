//! The `squashfs-mount` program, which `main.rs` runs: the command line
//! read, the maintenance commands or the launch ([`launch::run`]), then
//! the command executed unprivileged (or the `--writable=DIR` helper it
//! becomes).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::gc::gc_command;
use super::status::status_command;
use super::{launch, policy_report};
use crate::cli::environment;
use crate::cli::{self, Invocation, NO_COMMAND};
use crate::join;
use crate::layer::Start;
use crate::system::error::{print_stdout, report};
use crate::VERSION;

fn fail(msg: impl std::fmt::Display) -> u8 {
    report(msg);
    1
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
        }) => Err(done(gc_command(all, expired, image.as_deref()))),
        Ok(Invocation::CacheStatus { json }) => Err(done(status_command(json))),
        Ok(Invocation::Policy { images, json }) => Err(done(policy_report::run(&images, json))),
        Err(cli::UsageError::NoCommand) => {
            crate::system::error::print_stderr(cli::USAGE);
            Err(fail(NO_COMMAND))
        }
        Err(e) => Err(fail(e)),
    }
}

/// The program: its exit status (`main.rs` exits with it).
pub fn run() -> u8 {
    // Before anything else: a set-group-ID installation is refused.
    if let Err(e) = crate::privilege::refuse_set_group_id() {
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
        Some(_) => match crate::system::open_fd_numbers() {
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
        crate::system::error::warn(format_args!(
            "the command runs with the default scheduling (SCHED_OTHER, nice 0): {call} failed restoring the caller's: {e}"
        ));
    }
    if let (Some(kept), Some(inherited)) = (&ready.layer, &inherited) {
        return become_layer_helper(kept, &ready.command, inherited, env);
    }
    let program = &ready.command[0];
    let mut command = Command::new(program);
    command.args(&ready.command[1..]).env_clear().envs(env);
    crate::system::keep_callers_pipe_signal(&mut command);
    let err = command.exec();
    environment::exec_failed(program, &err, ready.mount_list.as_deref())
}

/// `--writable=DIR`: the process becomes `squashfs-mount-layer`, which
/// mounts the layer as the caller and becomes the command; only the
/// caller's own fds (`inherited`) reach it (`layer::Start::Become`).
fn become_layer_helper(
    kept: &crate::layer::Kept,
    command: &[OsString],
    inherited: &[std::os::fd::RawFd],
    env: Vec<(OsString, OsString)>,
) -> u8 {
    let how = Start::Become {
        command,
        inherited,
        env,
    };
    match crate::layer::start(kept, how) {
        Err(e) => fail(e),
        // Becoming the helper returns only when it failed.
        Ok(_) => 1,
    }
}

fn done(r: Result<(), crate::system::error::Failure>) -> u8 {
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}
