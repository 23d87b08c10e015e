//! The setuid-root entry point. The privileged sequence is
//! `engine::mount_all`; `launch::run` puts privileges and limits around it.
#![deny(unsafe_code)]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use squashfs_mount::cli::{self, Invocation, NO_COMMAND};
use squashfs_mount::error::{print_stdout, report};
use squashfs_mount::{cache, environment, launch, policy_command, VERSION};

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    report(msg);
    ExitCode::from(1)
}

fn main() -> ExitCode {
    // Before anything else: a panic prints one fixed line and aborts
    // (panic = "abort"); the default hook would read RUST_BACKTRACE from the
    // environment while we are privileged.
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        report(format_args!("internal error{at}; please report it"));
    }));

    // argv only; the environment is not read until privileges are gone.
    // Since Linux 5.18 an execve with argc == 0 gets a single empty argv[0].
    let mut argv = std::env::args_os();
    if argv.next().is_none_or(|arg0| arg0.is_empty()) {
        return fail("refusing to run with an empty argument list (argc == 0)");
    }
    let args: Vec<OsString> = argv.collect();
    let request = match cli::parse(&args) {
        Ok(Invocation::Help) => {
            print_stdout(cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Version) => {
            print_stdout(&format!("{VERSION}\n"));
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Run(r)) => r,
        Ok(Invocation::Gc {
            all,
            expired,
            image,
        }) => return done(cache::commands::gc_command(all, expired, image.as_deref())),
        Ok(Invocation::CacheStatus { json }) => return done(cache::commands::status_command(json)),
        Ok(Invocation::Policy { images }) => return done(policy_command::run(&images)),
        Err(e) if e.0 == NO_COMMAND => {
            squashfs_mount::error::print_stderr(cli::USAGE);
            return fail(NO_COMMAND);
        }
        Err(e) => return fail(e),
    };

    let ready = match launch::run(&request) {
        Ok(ready) => ready,
        Err(e) => return fail(e),
    };

    // Unprivileged from here on (verified in launch::run).
    let env = environment::for_command(std::env::vars_os(), ready.mount_list.as_deref());
    ready.signals.restore();
    let program = &ready.command[0];
    let err = Command::new(program)
        .args(&ready.command[1..])
        .env_clear()
        .envs(env)
        .exec();
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    report(format_args!(
        "cannot run {}: {}",
        program.to_string_lossy(),
        squashfs_mount::error::io_message(&err)
    ));
    ExitCode::from(code)
}

fn done(r: Result<(), squashfs_mount::error::Failure>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
