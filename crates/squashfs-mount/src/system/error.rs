//! The one kind of failure the tool reports: a typed error of the module
//! that found it (`ImageError`, `PlanError`, `PolicyError`, ...), with the
//! image or mount point concerned, whose `Display` is a sentence saying
//! what went wrong and what to do. Printed as one line on stderr; the
//! process then exits 1. Also what prints it.

use std::error::Error;
use std::fmt;

/// A typed error and, for most, the subject (`image:mountpoint`, the
/// image, the bind) it is about. The unit tests ask for the kind
/// (`Failure::kind`, in test builds only); the words are for people.
#[derive(Debug)]
pub struct Failure {
    subject: Option<String>,
    error: Box<dyn Error + Send + Sync + 'static>,
}

impl Failure {
    pub fn new<E: Error + Send + Sync + 'static>(error: E) -> Self {
        Failure {
            subject: None,
            error: Box::new(error),
        }
    }

    /// The `image:mountpoint` (or other subject) concerned, said first.
    pub(crate) fn about<E: Error + Send + Sync + 'static>(subject: &str, error: E) -> Self {
        Failure {
            subject: Some(subject.to_string()),
            error: Box::new(error),
        }
    }

    /// The error, if it is of the kind `E`.
    #[cfg(test)]
    pub(crate) fn kind<E: Error + 'static>(&self) -> Option<&E> {
        self.error.downcast_ref()
    }

    /// What it is about, if said.
    #[cfg(test)]
    pub(crate) fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match &self.subject {
            Some(subject) => format!("{subject}: {}", self.error),
            None => self.error.to_string(),
        };
        // One line, whatever the parts contained, and the C library's
        // words for a system error without Rust's " (os error N)" (the
        // plugin prints failures through Slurm, not through `report`).
        write!(f, "{}", without_os_error(&text.replace('\n', " ")))
    }
}

impl Error for Failure {}

/// Implements `Error` for a module's error type whose `Display` is its
/// sentences.
#[macro_export]
macro_rules! error_kind {
    ($t:ty) => {
        impl std::error::Error for $t {}
        impl From<$t> for $crate::system::error::Failure {
            fn from(e: $t) -> Self {
                $crate::system::error::Failure::new(e)
            }
        }
    };
}

/// `text` without the " (os error N)" that error values append: the
/// messages say what the error means in words already.
pub(crate) fn without_os_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        let tail = &rest[at + " (os error ".len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(')') {
            out.push_str(&rest[..at]);
            rest = &tail[digits + 1..];
        } else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// What the Rust runtime's start-up would do, for the programs without it
/// (`#![no_main]`: squashfs-mount, squashfs-mount-layer), before anything
/// else: valid fds 0-2 (a closed one could otherwise be reused for an
/// image or a lock and receive messages), SIGPIPE ignored while the tool
/// runs (the command gets the default back), and a panic hook that prints
/// one fixed line (the default hook would read RUST_BACKTRACE from the
/// environment while privileged; panics abort).
pub fn start_program() {
    if crate::system::ensure_standard_fds().is_err() {
        std::process::abort();
    }
    crate::system::ignore_broken_pipe_signal();
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        report(format_args!("internal error{at}; please report it"));
    }));
}

/// Writes one line to stderr, ignoring errors: a closed or broken stderr
/// must never abort the tool (`eprintln!` panics on EPIPE).
pub(crate) fn report(line: impl fmt::Display) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "squashfs-mount: {}",
        without_os_error(&line.to_string())
    );
}

/// `report` for warnings.
pub(crate) fn warn(line: impl fmt::Display) {
    report(format_args!("warning: {line}"));
}

/// Writes to stdout, ignoring errors (help and version output).
pub(crate) fn print_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Writes to stderr, ignoring errors (the usage after a mistake).
pub(crate) fn print_stderr(text: &str) {
    use std::io::Write;
    let mut out = std::io::stderr().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// An I/O error's message without Rust's " (os error N)" suffix.
pub(crate) fn io_message(e: &std::io::Error) -> String {
    without_os_error(&e.to_string())
}

/// The C library's words for an errno, as glibc's strerror prints them
/// ("Permission denied", "No such file or directory"): scripts and uenv's
/// tests match them.
pub(crate) fn errno_words(e: crate::system::Error) -> String {
    io_message(&std::io::Error::from_raw_os_error(e.raw_os_error()))
}

/// What to do about an errno met on a path the caller gave ("" when the
/// words say it all).
pub(crate) fn errno_hint(e: crate::system::Error) -> &'static str {
    use crate::system::Error as Errno;
    match e {
        Errno::ACCESS | Errno::PERM => "; you cannot reach it with your own rights",
        Errno::MFILE | Errno::NFILE => "; raise the open-file limit (ulimit -n)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_suffixes_go() {
        assert_eq!(
            without_os_error("a: Permission denied (os error 13); b (os error 2)"),
            "a: Permission denied; b"
        );
        assert_eq!(
            without_os_error("(os error x) stays (os error )"),
            "(os error x) stays (os error )"
        );
        assert_eq!(without_os_error("plain"), "plain");
    }

    #[test]
    fn system_errors_in_the_c_librarys_words() {
        use crate::system::Error as Errno;
        assert_eq!(errno_words(Errno::ACCESS), "Permission denied");
        assert_eq!(errno_words(Errno::NOENT), "No such file or directory");
        assert_eq!(errno_words(Errno::NOTDIR), "Not a directory");
        assert_eq!(errno_words(Errno::NAMETOOLONG), "File name too long");
        assert_eq!(
            Failure::about("x", Errno::ACCESS).to_string(),
            "x: Permission denied"
        );
    }
}
