//! Why a command line cannot be translated.

use super::options::answer;
use crate::error::FileError;

/// Why a command line cannot be translated (a usage error).
#[derive(Debug)]
pub enum CompatError {
    /// A mksquashfs option without its value: the option, what it needs.
    NeedsValue(String, &'static str),
    /// `-e` with nothing after it.
    NoPathsAfterE,
    /// A mksquashfs option sqfs does not take: the option and subcommand.
    Mksquashfs(String, String),
    /// Neither sqfs's nor mksquashfs's: the option and subcommand.
    Unknown(String, String),
    ExcludeFile(FileError),
    /// With -wildcards, an exclusion that is not relative.
    NotRelative(String),
}

impl std::fmt::Display for CompatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use CompatError as E;
        match self {
            E::NeedsValue(option, what) => write!(f, "'{option}' needs {what}"),
            E::NoPathsAfterE => f.write_str("'-e' needs the paths to exclude after it (it takes the rest of the command line, as in mksquashfs)"),
            E::Mksquashfs(option, sub) => f.write_str(&answer(option, sub)),
            E::Unknown(option, sub) => write!(
                f,
                "unknown option '{option}'; sqfs's options start with '--' (see 'sqfs {}--help')",
                if sub.is_empty() {
                    String::new()
                } else {
                    format!("{sub} ")
                }
            ),
            E::ExcludeFile(e) => write!(f, "-ef {e}"),
            E::NotRelative(text) => write!(
                f,
                "-e '{text}': with -wildcards, exclusions are relative to the packed directory (as in mksquashfs)"
            ),
        }
    }
}

impl std::error::Error for CompatError {}
