//! The grammar of one argument: `<image>:<mountpoint>` pairs, unions,
//! `<source>:<destination>` bind mounts, writable sizes, forwarded
//! variable names. Pure; fuzzed.

use std::ffi::{OsStr, OsString};

use super::usage_error::UsageError;
use crate::config::LayerSize;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// One `<image>:<mountpoint>` or `--union=<image>,...:<mountpoint>`
/// request, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountRequest {
    /// One image, or the layers of a union, top first.
    pub images: Vec<OsString>,
    pub mount_point: OsString,
    pub union: bool,
}

impl MountRequest {
    /// `image:mountpoint` (or `a,b:mountpoint`) for messages (lossy for
    /// non-UTF-8 bytes).
    pub fn describe(&self) -> String {
        let images: Vec<_> = self.images.iter().map(|i| i.to_string_lossy()).collect();
        format!(
            "{}:{}",
            images.join(","),
            self.mount_point.to_string_lossy()
        )
    }
}

/// One `--bind-mount=<source>:<destination>` request, as given: the
/// directory `source` shown at `destination` in the command's view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindRequest {
    pub source: OsString,
    pub destination: OsString,
}

impl BindRequest {
    /// `source:destination` for messages (lossy for non-UTF-8 bytes).
    pub fn describe(&self) -> String {
        format!(
            "{}:{}",
            self.source.to_string_lossy(),
            self.destination.to_string_lossy()
        )
    }
}

/// Parses one `<source>:<destination>` of `--bind-mount`.
pub fn parse_bind(arg: &[u8]) -> Result<BindRequest, UsageError> {
    let (source, destination) = split(arg, &BIND)?;
    Ok(BindRequest {
        source,
        destination,
    })
}

/// How the two halves of a `a:b` argument are named in messages.
struct Form {
    whole: &'static str,
    first: &'static str,
    second: &'static str,
}

const PAIR: Form = Form {
    whole: "<image>:<mountpoint>",
    first: "the image path",
    second: "the mount point",
};
const BIND: Form = Form {
    whole: "<source>:<destination>",
    first: "the bind source",
    second: "the bind destination",
};

/// The command line's spelling of a writable layer's size (the value is
/// the configuration's: `config::LayerSize`).
impl LayerSize {
    /// `N%` of RAM, or a size in the grammar both tools share
    /// (`squashfs_format::size`: `64k`, `512M`, `1.5G`, `2GB`, `2GiB`, ...).
    pub fn parse(text: &[u8]) -> Result<LayerSize, UsageError> {
        let bad = |why: String| UsageError::WritableSize(lossy(text), why);
        let text_str = std::str::from_utf8(text).map_err(|_| bad("not UTF-8".into()))?;
        if let Some(percent) = text_str.strip_suffix('%') {
            return match percent.parse::<u8>() {
                Ok(n @ 1..=100) if percent.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(LayerSize::PercentOfRam(n))
                }
                _ => Err(bad(
                    "a percentage must be a whole number from 1 to 100".into()
                )),
            };
        }
        let bytes = squashfs_format::size::parse_size(text_str).map_err(|e| bad(e.to_string()))?;
        if bytes < 1 << 20 {
            return Err(UsageError::WritableTooSmall(lossy(text)));
        }
        Ok(LayerSize::Bytes(bytes))
    }
}

/// The directory of `--writable=DIR` (a value with a `/`), as given: not
/// empty, no NUL byte, no newline, and not a `~` the shell left alone.
pub fn parse_layer_dir(value: &[u8]) -> Result<OsString, UsageError> {
    if value.contains(&0) {
        return Err(UsageError::Nul);
    }
    if value.contains(&b'\n') {
        return Err(UsageError::LayerDirNewline);
    }
    if value.starts_with(b"~") {
        return Err(UsageError::LayerDirTilde(lossy(value)));
    }
    Ok(OsString::from_vec(value.to_vec()))
}

/// Parses one `<image>:<mountpoint>` pair.
pub fn parse_pair(arg: &[u8]) -> Result<MountRequest, UsageError> {
    let (images, mount_point) = split_pair(arg)?;
    Ok(MountRequest {
        images: vec![images],
        mount_point,
        union: false,
    })
}

/// Most layers one union may have (overlayfs allows 500 lower layers).
pub const MAX_UNION_LAYERS: usize = 500;

/// Parses `<image>,<image>[,...]:<mountpoint>` of `--union=`.
pub fn parse_union(arg: &[u8]) -> Result<MountRequest, UsageError> {
    let (list, mount_point) = split_pair(arg)?;
    let images: Vec<OsString> = list
        .as_bytes()
        .split(|&b| b == b',')
        .map(|i| OsString::from_vec(i.to_vec()))
        .collect();
    if images.iter().any(|i| i.is_empty()) {
        return Err(UsageError::UnionEmptyImage(lossy(arg)));
    }
    if images.len() > MAX_UNION_LAYERS {
        return Err(UsageError::UnionTooMany {
            given: images.len(),
            max: MAX_UNION_LAYERS,
        });
    }
    Ok(MountRequest {
        images,
        mount_point,
        union: true,
    })
}

fn split_pair(arg: &[u8]) -> Result<(OsString, OsString), UsageError> {
    split(arg, &PAIR)
}

fn split(arg: &[u8], form: &Form) -> Result<(OsString, OsString), UsageError> {
    let colons = arg.iter().filter(|&&b| b == b':').count();
    if colons == 0 {
        return Err(UsageError::NoColon(lossy(arg), form.whole));
    }
    if colons > 1 {
        return Err(UsageError::ManyColons(lossy(arg)));
    }
    let at = arg.iter().position(|&b| b == b':').unwrap_or(0);
    let (first, second) = (&arg[..at], &arg[at + 1..]);
    for (part, name) in [(first, form.first), (second, form.second)] {
        if part.is_empty() {
            return Err(UsageError::EmptyPart(lossy(arg), name));
        }
    }
    for part in [first, second] {
        if part.contains(&b'\n') {
            return Err(UsageError::Newline(lossy(arg)));
        }
        if part.contains(&0) {
            return Err(UsageError::Nul);
        }
    }
    Ok((
        OsString::from_vec(first.to_vec()),
        OsString::from_vec(second.to_vec()),
    ))
}

/// `SQFSMNT_FWD_<NAME>=<value>` becomes `<NAME>=<value>`: returns NAME.
pub(crate) fn forwarded_name(name: &OsStr) -> Option<&OsStr> {
    let rest = name.as_bytes().strip_prefix(b"SQFSMNT_FWD_")?;
    if rest.is_empty() || rest.contains(&b'=') {
        return None;
    }
    Some(OsStr::from_bytes(rest))
}

pub(super) fn lossy(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}
