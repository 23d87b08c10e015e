//! Standard output, which its reader may close early (`sqfs inspect IMG |
//! head -5`). Conventional tools are killed by SIGPIPE then, silently, and
//! a shell reports status 141 (128 + SIGPIPE). Rust ignores SIGPIPE, so the
//! write fails with EPIPE instead: sqfs stops printing, says nothing and
//! ends with that same status 141 (the output is incomplete, so not 0:
//! `set -o pipefail` sees it as it would for `cat`).

use std::io::Write;

/// The exit status after the reader closed standard output.
pub const CLOSED_STATUS: u8 = 141;

/// Why something could not be printed.
#[derive(Debug, PartialEq, Eq)]
pub enum Unprinted {
    /// The reader closed standard output (EPIPE): end quietly.
    Closed,
    /// Another write error, as a message.
    Failed(String),
}

/// Writes `text` to standard output, and flushes it.
pub fn print(text: impl AsRef<[u8]>) -> Result<(), Unprinted> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_ref())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => Unprinted::Closed,
            _ => Unprinted::Failed(format!(
                "cannot write to standard output: {}",
                crate::units::io_error(&e)
            )),
        })
}

/// Writes a line to standard error; a closed standard error is ignored
/// (there is nowhere left to say anything).
pub fn eprint_line(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
