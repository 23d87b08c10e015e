//! The one kind of failure the tool reports: a sentence naming the image or
//! mount point concerned, what went wrong and what to do. Printed as one line
//! on stderr; the process then exits 1.

use std::fmt;

#[derive(Debug)]
pub struct Failure(pub String);

impl Failure {
    pub fn new(msg: impl Into<String>) -> Self {
        Failure(msg.into())
    }
    /// Prefixes the `image:mountpoint` (or other subject) concerned.
    pub fn about(subject: &str, msg: impl fmt::Display) -> Self {
        Failure(format!("{subject}: {msg}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the parts contained.
        write!(f, "{}", self.0.replace('\n', " "))
    }
}

impl From<crate::privilege::PrivilegeError> for Failure {
    fn from(e: crate::privilege::PrivilegeError) -> Self {
        Failure(e.to_string())
    }
}

impl From<crate::cli::UsageError> for Failure {
    fn from(e: crate::cli::UsageError) -> Self {
        Failure(e.to_string())
    }
}

/// Writes one line to stderr, ignoring errors: a closed or broken stderr
/// must never abort the tool (`eprintln!` panics on EPIPE).
pub fn report(line: impl fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "squashfs-mount: {line}");
}

/// `report` for warnings.
pub fn warn(line: impl fmt::Display) {
    report(format_args!("warning: {line}"));
}

/// Writes to stdout, ignoring errors (help and version output).
pub fn print_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Plain-language reading of an errno for messages about a path.
pub fn explain_errno(e: rustix::io::Errno) -> String {
    use rustix::io::Errno;
    match e {
        Errno::ACCESS | Errno::PERM => "permission denied (you cannot read it with your own rights)".into(),
        Errno::NOENT => "no such file or directory".into(),
        Errno::NOTDIR => "a path component is not a directory".into(),
        Errno::LOOP => "too many levels of symbolic links".into(),
        Errno::NAMETOOLONG => "the path is too long".into(),
        Errno::MFILE | Errno::NFILE => "too many open files (raise the open-file limit, ulimit -n)".into(),
        other => format!("{other}"),
    }
}
