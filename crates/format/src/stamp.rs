//! The stamp: which images each sub-layer of DIR was made on, so that a
//! layer is never used on another stack. A text file, `DIR/stamp`:
//!
//! ```text
//! squashfs-mount writable layer 1
//! mount 0 /user-environment
//! image 3f2a…(64 hex digits) 1048576 /site/stack.sqfs
//! mount 1 /user-tools
//! image …
//! ```
//!
//! Each mount point of a call gets the sub-layer `DIR/<n>/{upper,work}`
//! of its line; the images follow, top first, by identity
//! ([`crate::identity`]) and size (the path is for messages). A mount
//! point the stamp does not know yet gets a new number; one it knows must
//! have the same images, or the call is refused. Pure: squashfs-mount's
//! caller's stage reads and writes the file, `sqfs pack --layer` reads it.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// One image of a mount, as the stamp names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageId {
    /// [`crate::identity::identity`] of the image.
    pub identity: String,
    /// The file's size.
    pub size: u64,
    /// Where the file was (for messages only).
    pub path: OsString,
}

/// The stamp's file name in a layer directory.
pub const STAMP_FILE: &str = "stamp";

/// The first line (with the format's version).
pub const HEADER: &str = "squashfs-mount writable layer 1";

/// One sub-layer: its number, mount point and images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub number: u32,
    pub mount_point: OsString,
    pub images: Vec<ImageId>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub entries: Vec<Entry>,
}

impl Stamp {
    pub fn parse(text: &[u8]) -> Result<Stamp, StampError> {
        let mut lines = text.split(|&b| b == b'\n');
        match lines.next() {
            Some(h) if h == HEADER.as_bytes() => {}
            Some(h) if h.starts_with(b"squashfs-mount writable layer ") => {
                return Err(StampError::OtherVersion)
            }
            _ => return Err(StampError::NotAStamp),
        }
        let mut stamp = Stamp::default();
        for (i, line) in lines.enumerate() {
            let bad = || StampError::NotUnderstood { line: i + 2 };
            if line.is_empty() {
                continue;
            }
            let mut f = line.splitn(3, |&b| b == b' ');
            let (kind, a, rest) = (f.next(), f.next(), f.next());
            match (kind, a, rest) {
                (Some(b"mount"), Some(n), Some(path)) => {
                    let number = ascii(n).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
                    if stamp.entries.iter().any(|e| e.number == number) {
                        return Err(bad());
                    }
                    stamp.entries.push(Entry {
                        number,
                        mount_point: OsString::from_vec(path.to_vec()),
                        images: Vec::new(),
                    });
                }
                (Some(b"image"), Some(id), Some(rest)) => {
                    let (size, path) = split_once(rest, b' ').ok_or_else(bad)?;
                    let entry = stamp.entries.last_mut().ok_or_else(bad)?;
                    entry.images.push(ImageId {
                        identity: ascii(id).ok_or_else(bad)?.to_string(),
                        size: ascii(size).and_then(|s| s.parse().ok()).ok_or_else(bad)?,
                        path: OsString::from_vec(path.to_vec()),
                    });
                }
                _ => return Err(bad()),
            }
        }
        Ok(stamp)
    }

    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(HEADER.as_bytes());
        out.push(b'\n');
        for e in &self.entries {
            out.extend_from_slice(format!("mount {} ", e.number).as_bytes());
            out.extend_from_slice(e.mount_point.as_bytes());
            out.push(b'\n');
            for i in &e.images {
                out.extend_from_slice(format!("image {} {} ", i.identity, i.size).as_bytes());
                out.extend_from_slice(i.path.as_bytes());
                out.push(b'\n');
            }
        }
        out
    }

    /// The sub-layer of each mount point of this call (in the order given),
    /// adding the mount points the stamp does not know; refuses a mount
    /// point whose images differ. `changed`: the stamp must be written.
    pub fn assign(
        &mut self,
        wanted: &[(&OsString, &[ImageId])],
        dir: &OsStr,
    ) -> Result<(Vec<u32>, bool), StampError> {
        let mut numbers = Vec::with_capacity(wanted.len());
        let mut changed = false;
        for (mount_point, images) in wanted {
            if let Some(e) = self.entries.iter().find(|e| &e.mount_point == *mount_point) {
                if !same_images(&e.images, images) {
                    return Err(mismatch(dir, e, images));
                }
                numbers.push(e.number);
                continue;
            }
            let number = self.entries.iter().map(|e| e.number + 1).max().unwrap_or(0);
            self.entries.push(Entry {
                number,
                mount_point: (*mount_point).clone(),
                images: images.to_vec(),
            });
            numbers.push(number);
            changed = true;
        }
        Ok((numbers, changed))
    }
}

fn same_images(kept: &[ImageId], now: &[ImageId]) -> bool {
    kept.len() == now.len()
        && kept
            .iter()
            .zip(now)
            .all(|(a, b)| a.identity == b.identity && a.size == b.size)
}

fn names(images: &[ImageId]) -> String {
    let v: Vec<String> = images
        .iter()
        .map(|i| i.path.to_string_lossy().into_owned())
        .collect();
    v.join(", ")
}

fn mismatch(dir: &OsStr, kept: &Entry, now: &[ImageId]) -> StampError {
    let difference = if kept.images.len() == now.len()
        && kept.images.iter().zip(now).all(|(a, b)| a.path == b.path)
    {
        // Same files, other bytes.
        let changed: Vec<String> = kept
            .images
            .iter()
            .zip(now)
            .filter(|(a, b)| a.identity != b.identity || a.size != b.size)
            .map(|(a, _)| a.path.to_string_lossy().into_owned())
            .collect();
        Difference::Changed(changed)
    } else {
        Difference::OtherImages {
            kept: names(&kept.images),
            now: names(now),
        }
    };
    StampError::Mismatch {
        layer: dir.to_string_lossy().into_owned(),
        mount_point: kept.mount_point.to_string_lossy().into_owned(),
        difference,
    }
}

/// Why a stamp cannot be read, or its layer not be used for these images.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StampError {
    /// The header names another version of the format.
    OtherVersion,
    /// The first line is not a stamp's header.
    NotAStamp,
    /// A line (1-based) that is neither a mount nor an image line.
    NotUnderstood { line: usize },
    /// The layer was made on other images at `mount_point`.
    Mismatch {
        layer: String,
        mount_point: String,
        difference: Difference,
    },
}

/// How a mount point's images differ from those its layer was made on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// The same files, these of them with other bytes.
    Changed(Vec<String>),
    /// Other files (names, comma-separated).
    OtherImages { kept: String, now: String },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Changed(changed) => write!(
                f,
                "{} changed (rebuilt or replaced) since the layer was made",
                changed.join(", ")
            ),
            Difference::OtherImages { kept, now } => {
                write!(f, "the layer was made on {kept} there, not on {now}")
            }
        }
    }
}

impl fmt::Display for StampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StampError::OtherVersion => {
                write!(f, "it was written by another version of squashfs-mount")
            }
            StampError::NotAStamp => write!(f, "its first line is not a squashfs-mount stamp"),
            StampError::NotUnderstood { line } => write!(f, "line {line} is not understood"),
            StampError::Mismatch {
                layer,
                mount_point,
                difference,
            } => write!(
                f,
                "the writable layer {layer} does not belong to the images on {mount_point}: {difference}; a layer kept on other images would show their files mixed with its own. Use another directory for these images (or delete {layer} to start afresh)"
            ),
        }
    }
}

impl std::error::Error for StampError {}

fn ascii(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok().filter(|s| s.is_ascii())
}

fn split_once(b: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let at = b.iter().position(|&c| c == sep)?;
    Some((&b[..at], &b[at + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(identity: &str, path: &str) -> ImageId {
        ImageId {
            identity: identity.into(),
            size: 4096,
            path: path.into(),
        }
    }

    #[test]
    fn assign_keeps_extends_and_refuses() {
        let mut s = Stamp::default();
        let (ue, ut): (OsString, OsString) = ("/user-environment".into(), "/user tools".into());
        let a = [id("aa", "/s/a.sqfs"), id("bb", "/s/b.sqfs")];
        let (n, changed) = s.assign(&[(&ue, &a[..])], "/l".as_ref()).unwrap();
        assert_eq!((n, changed), (vec![0], true));
        // Written and read back.
        let mut s = Stamp::parse(&s.render()).unwrap();
        // The same images (moved elsewhere: the path does not count).
        let moved = [id("aa", "/t/a.sqfs"), id("bb", "/t/b.sqfs")];
        let c = [id("cc", "/s/c.sqfs")];
        let (n, changed) = s
            .assign(&[(&ut, &c[..]), (&ue, &moved[..])], "/l".as_ref())
            .unwrap();
        assert_eq!((n, changed), (vec![1, 0], true));
        let mut s = Stamp::parse(&s.render()).unwrap();
        assert_eq!(s.entries[1].mount_point, ut);
        assert_eq!(
            s.assign(&[(&ut, &c[..])], "/l".as_ref()).unwrap(),
            (vec![1], false)
        );
        // A rebuilt image, a reordered union, another image.
        let rebuilt = [id("aa", "/s/a.sqfs"), id("b2", "/s/b.sqfs")];
        let e = s
            .assign(&[(&ue, &rebuilt[..])], "/l".as_ref())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/s/b.sqfs changed") && !e.contains("/s/a.sqfs,"),
            "{e}"
        );
        let swapped = [id("bb", "/s/b.sqfs"), id("aa", "/s/a.sqfs")];
        let e = s
            .assign(&[(&ue, &swapped[..])], "/l".as_ref())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("made on /s/a.sqfs, /s/b.sqfs there, not on /s/b.sqfs, /s/a.sqfs"),
            "{e}"
        );
        assert_eq!(e, "the writable layer /l does not belong to the images on /user-environment: the layer was made on /s/a.sqfs, /s/b.sqfs there, not on /s/b.sqfs, /s/a.sqfs; a layer kept on other images would show their files mixed with its own. Use another directory for these images (or delete /l to start afresh)");
    }

    #[test]
    fn parse_refuses_what_it_does_not_know() {
        for bad in [
            &b""[..],
            b"something else\n",
            b"squashfs-mount writable layer 2\n",
            b"squashfs-mount writable layer 1\nimage aa 1 /x\n",
            b"squashfs-mount writable layer 1\nmount x /m\n",
            b"squashfs-mount writable layer 1\nmount 0 /m\nmount 0 /n\n",
            b"squashfs-mount writable layer 1\nmount 0 /m\nimage aa big /x\n",
            b"squashfs-mount writable layer 1\nwhat\n",
        ] {
            assert!(
                Stamp::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // The sentences the callers print after the stamp's path.
        for (text, said) in [
            (
                &b"squashfs-mount writable layer 2\n"[..],
                "it was written by another version of squashfs-mount",
            ),
            (b"stamp\n", "its first line is not a squashfs-mount stamp"),
            (
                b"squashfs-mount writable layer 1\n\nwhat\n",
                "line 3 is not understood",
            ),
        ] {
            assert_eq!(Stamp::parse(text).unwrap_err().to_string(), said);
        }
        let s = Stamp::parse(b"squashfs-mount writable layer 1\nmount 3 /a b\nimage ff 7 /p q\n")
            .unwrap();
        assert_eq!(s.entries[0].number, 3);
        assert_eq!(s.entries[0].mount_point, "/a b");
        assert_eq!(s.entries[0].images[0].path, "/p q");
    }
}
