//! `sqfs`: pack, inspect, check, compare and benchmark SquashFS images.
//! Unprivileged.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use sqfs::output::{self, eprint_line, Unprinted};
use sqfs::units;

mod cli;
mod commands;
mod completions;

use cli::Cli;
use commands::{run, Failure};

/// Usage errors exit with 1, as squashfs-mount's do.
const USAGE_ERROR: u8 = 1;

/// Prints clap's help, or a usage error without clap's tip to pass an
/// unknown option "as a value, use '-- --x'" (which misleads here).
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue};
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                // clap's own printing, in colour.
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            match output::print(e.render().to_string()) {
                Err(Unprinted::Closed) => ExitCode::from(output::CLOSED_STATUS),
                _ => ExitCode::SUCCESS,
            }
        }
        ErrorKind::UnknownArgument => {
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(s)) => s.clone(),
                _ => String::new(),
            };
            let what = if arg.starts_with('-') {
                "unknown option"
            } else {
                "unexpected argument"
            };
            let hint = match e.get(ContextKind::SuggestedArg) {
                Some(ContextValue::String(s)) => format!(" (did you mean '{s}'?)"),
                _ => String::new(),
            };
            eprint_line(format_args!(
                "sqfs: {what} '{arg}'{hint}; see 'sqfs {}--help'",
                subcommand_given()
            ));
            ExitCode::from(USAGE_ERROR)
        }
        _ => {
            eprint_line(format_args!(
                "sqfs: {}; see 'sqfs {}--help'",
                one_line(&e.render().to_string()),
                subcommand_given()
            ));
            ExitCode::from(USAGE_ERROR)
        }
    }
}

/// The subcommand on the command line, with a space (for "see 'sqfs
/// pack --help'"), or nothing.
fn subcommand_given() -> String {
    std::env::args()
        .skip(1)
        .find(|a| {
            [
                "pack",
                "inspect",
                "check",
                "diff",
                "bench",
                "trace",
                "completions",
            ]
            .contains(&a.as_str())
        })
        .map(|s| format!("{s} "))
        .unwrap_or_default()
}

/// clap's error block as one line in sqfs's style: its first paragraph
/// without "error: ", lines joined, and its tip (a suggestion), if any.
fn one_line(block: &str) -> String {
    let mut paragraphs = block.split("\n\n");
    let first = paragraphs.next().unwrap_or_default();
    let mut line = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_string();
    for p in paragraphs {
        if let Some(tip) = p.trim().strip_prefix("tip: ") {
            line += &format!(" ({})", tip.trim());
        }
    }
    line
}

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "sqfs".into());
    let args: Vec<OsString> = args.collect();
    let args = match sqfs::compat::translate(&args) {
        Ok(a) => a,
        Err(e) => {
            eprint_line(format_args!(
                "sqfs: {}",
                units::without_os_error(&e.to_string())
            ));
            return ExitCode::from(USAGE_ERROR);
        }
    };
    if sqfs::compat::wants_version(&args) {
        // The version alone, as squashfs-mount prints it (scripts parse it).
        return match output::print(concat!(env!("CARGO_PKG_VERSION"), "\n")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Unprinted::Closed) => ExitCode::from(output::CLOSED_STATUS),
            Err(Unprinted::Failed(e)) => {
                eprint_line(format_args!("sqfs: {e}"));
                ExitCode::from(1)
            }
        };
    }
    let cli = match Cli::try_parse_from(std::iter::once(argv0).chain(args)) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let Some(command) = cli.command else {
        let mut help = Cli::command();
        eprint_line(format_args!(
            "{}\nsqfs: no command given; see 'sqfs --help'",
            help.render_usage()
        ));
        return ExitCode::from(USAGE_ERROR);
    };
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Closed) => ExitCode::from(output::CLOSED_STATUS),
        Err(Failure::Message(e)) => {
            eprint_line(format_args!("sqfs: {}", units::without_os_error(&e)));
            ExitCode::from(1)
        }
        Err(Failure::Status(status)) => ExitCode::from(status),
        Err(Failure::MessageWithStatus(e, status)) => {
            eprint_line(format_args!("sqfs: {}", units::without_os_error(&e)));
            ExitCode::from(status)
        }
    }
}
