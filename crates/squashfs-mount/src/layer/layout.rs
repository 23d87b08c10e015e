//! The files of a layer directory, and the one command line that removes
//! one (pure).

/// The files of a layer directory.
pub const LOCK_FILE: &str = "lock";
/// In `DIR/<n>`: the caller's copies (`copies.rs`) are complete.
pub const COPIED_MARK: &str = "copied";

/// The one command line that removes the layer directory `dir` (when no
/// launch uses it): the caller's copies of read-only directories are
/// read-only to the caller too, as in the image, so `rm -rf` alone stops
/// at them. Shell-quoted when `dir` needs it.
pub(crate) fn removal_command(dir: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b);
    let dir = match !dir.is_empty() && dir.bytes().all(plain) {
        true => dir.to_string(),
        false => format!("'{}'", dir.replace('\'', "'\\''")),
    };
    format!("chmod -R u+rwX {dir} && rm -rf {dir}")
}
