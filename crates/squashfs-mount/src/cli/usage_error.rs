//! What the command line gets wrong, and the words for it (each followed
//! by "(see squashfs-mount --help)").

use std::fmt;

/// The message for a call without any argument (the wording of the C tool
/// and of uenv, which scripts match); `main` prints the usage first.
pub const NO_COMMAND: &str = "no command given";

/// A mistake on the command line. Arguments are kept as given (lossy for
/// bytes that are not UTF-8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageError {
    /// No argument at all.
    NoCommand,
    /// `--` with nothing after it.
    NoCommandAfterDashes,
    /// The arguments ended without `--`.
    NoCommandAtEnd,
    /// An option given as `--opt=` with nothing after `=`: the option,
    /// and what it needs.
    EmptyValue(&'static str, &'static str),
    /// An option whose value (the next word) is missing: the option as
    /// given, and what it needs.
    NeedsValue(String, &'static str),
    /// An option this tool does not have, and the one it may have meant.
    UnknownOption(String, Option<&'static str>),
    /// A word after the pairs that is no pair: the command, without `--`?
    NotAPair(String),
    /// `--verbose=` beyond 0 to `max`.
    Verbosity {
        text: String,
        max: u8,
    },
    OnlyOneCommand,
    AllOrExpiredWithoutGc,
    JsonWithoutStatus,
    AllWithStatus,
    /// A word that cannot go with a maintenance command (the word, and
    /// the command with what it takes).
    NotWith(String, &'static str),
    /// `--writable=SIZE` that is no size: the text, and why.
    WritableSize(String, String),
    WritableTooSmall(String),
    /// `--writable=WORD`, no size and without a '/': a directory meant?
    WritableNeitherSizeNorDir(String),
    /// `--writable[=SIZE]` and `--writable=DIR` together.
    BothWritables,
    LayerDirNewline,
    /// `--writable=~/...`: the shell left the `~` alone.
    LayerDirTilde(String),
    UnionEmptyImage(String),
    UnionTooMany {
        given: usize,
        max: usize,
    },
    /// No ':' (the argument, and the form it should have).
    NoColon(String, &'static str),
    ManyColons(String),
    /// An empty half (the argument, and which half).
    EmptyPart(String, &'static str),
    Newline(String),
    Nul,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.words(f)?;
        f.write_str(" (see squashfs-mount --help)")
    }
}

impl UsageError {
    /// The words without the pointer to `--help` (the Slurm plugin has
    /// options of its own).
    pub fn message(&self) -> String {
        struct Words<'a>(&'a UsageError);
        impl fmt::Display for Words<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.words(f)
            }
        }
        Words(self).to_string()
    }

    fn words(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use UsageError as U;
        match self {
            U::NoCommand => f.write_str(NO_COMMAND),
            U::NoCommandAfterDashes => write!(f, "{NO_COMMAND} after '--'"),
            U::NoCommandAtEnd => write!(f, "{NO_COMMAND}: put the command to run after '--', e.g. squashfs-mount image.sqfs:/mnt -- bash"),
            U::EmptyValue(option, what) => write!(f, "{option}= needs {what}"),
            U::NeedsValue(option, what) => write!(f, "{option} needs {what} before '--'"),
            U::UnknownOption(arg, None) => write!(f, "unknown option '{arg}'"),
            U::UnknownOption(arg, Some(like)) => {
                write!(f, "unknown option '{arg}' (did you mean '{like}'?)")
            }
            U::NotAPair(arg) => write!(f, "'{arg}' is not of the form <image>:<mountpoint>; did you forget '--' before the command?"),
            U::Verbosity { text, max } => write!(
                f,
                "--verbose={text}: give a level from 0 to {max} (or -v, -vv, -vvv)"
            ),
            U::OnlyOneCommand => f.write_str("give only one of --gc, --cache-status and --policy"),
            U::AllOrExpiredWithoutGc => f.write_str("--all and --expired go with --gc"),
            U::JsonWithoutStatus => f.write_str("--json goes with --cache-status or --policy"),
            U::AllWithStatus => f.write_str("--all goes with --gc"),
            U::NotWith(arg, command) => write!(f, "'{arg}' cannot be combined with {command}"),
            U::WritableSize(text, why) => write!(f, "invalid --writable size '{text}': {why}; use a size such as 512M, 2G or 2GiB, or a percentage of RAM such as 25%"),
            U::WritableTooSmall(text) => {
                write!(f, "--writable size '{text}' is too small: give at least 1M")
            }
            U::WritableNeitherSizeNorDir(word) => write!(f, "--writable={word} is not a size; to keep the layer in the directory {word}, write --writable=./{word} (a layer directory is a path with a '/'); a size is e.g. --writable=2G or --writable=25%"),
            U::BothWritables => f.write_str("give either --writable[=SIZE] (a fresh layer in memory) or --writable=DIR (a kept layer in DIR), not both"),
            U::LayerDirNewline => f.write_str("--writable=DIR: paths containing a newline are not supported"),
            U::LayerDirTilde(value) => write!(f, "--writable={value}: '~' was not expanded by the shell (it is not, after '='): write $HOME instead"),
            U::UnionEmptyImage(arg) => write!(f, "--union='{arg}': an image path is empty"),
            U::UnionTooMany { given, max } => write!(
                f,
                "--union: {given} images given, at most {max} can be stacked"
            ),
            U::NoColon(arg, form) => write!(f, "'{arg}' is not of the form {form}"),
            U::ManyColons(arg) => write!(f, "'{arg}' has more than one ':'; paths containing ':' are not supported, use a symlink without ':' to the file or directory"),
            U::EmptyPart(arg, name) => write!(f, "'{arg}': {name} is empty"),
            U::Newline(arg) => write!(
                f,
                "'{}': paths containing a newline are not supported",
                arg.escape_debug()
            ),
            U::Nul => f.write_str("paths cannot contain a NUL byte"),
        }
    }
}

/// Every long option, for [`suggestion`].
const LONG_OPTIONS: &[&str] = &[
    "--sqfs",
    "--bind-mount",
    "--mutable-root",
    "--union",
    "--writable",
    "--no-cache",
    "--prefetch",
    "--no-prefetch",
    "--verbose",
    "--quiet",
    "--gc",
    "--all",
    "--expired",
    "--cache-status",
    "--json",
    "--policy",
    "--help",
    "--version",
];

/// The long option a misspelt one (`--bindmount`, `--writeable=1G`) was
/// most likely meant to be: at most two edits away (one for short words),
/// comparing the part before any '='.
pub(crate) fn suggestion(given: &str) -> Option<&'static str> {
    let name = given.split('=').next().unwrap_or(given);
    if !name.starts_with("--") || name.len() < 4 {
        return None;
    }
    let most = if name.len() < 7 { 1 } else { 2 };
    LONG_OPTIONS
        .iter()
        .map(|o| (edits(name, o), *o))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, o)| o)
}

/// Levenshtein distance (insertions, deletions, substitutions) of bytes.
fn edits(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

crate::error_kind!(UsageError);
