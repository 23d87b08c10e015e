//! What the cache records about an instance (`Meta`, the format of the
//! entry's record) and device numbers. Pure: no system calls. The
//! entries' names are `entry_names.rs`.

use super::entry_names::Key;
use crate::system::{FileId, Uid};

/// Version of the on-disk format of the cache namespace's entries. An entry
/// written by another version is not reused: it is evicted (and its image's
/// next launch makes a new one), so a package upgrade never fails a launch.
pub const FORMAT: &str = "squashfs-mount-cache 3";
/// Largest `meta` file read.
pub const META_LIMIT: usize = 16 * 1024;

/// (major, minor) of a Linux `dev_t` as returned by stat.
pub(crate) fn dev_major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
    (major, minor)
}

/// The `dev_t` for (major, minor), as stat returns it.
pub(crate) fn make_dev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0x0000_0fff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0x0000_00ff)
}

/// What identifies an image file's contents: device, inode, size, mtime
/// and ctime of the fd the caller opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

impl From<&FileId> for Identity {
    fn from(id: &FileId) -> Self {
        Identity {
            dev: id.dev,
            ino: id.ino,
            size: id.size,
            mtime: id.mtime,
            ctime: id.ctime,
        }
    }
}

/// How a cached instance is mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The kernel's squashfs on loop device `loop_number`; `block_size` is
    /// the image's (for the instance's memory cost).
    Kernel { loop_number: u32, block_size: u32 },
    /// A FUSE mount served by the process `pid` (the creator's own, started
    /// `started` clock ticks after boot: /proc/PID/stat's field 22), reused
    /// by its creator only.
    Fuse { pid: u32, started: u64 },
}

/// What the cache records about an instance. Written and read only by root
/// in the cache namespace; parsed strictly and bounds-checked anyway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub kind: Kind,
    /// The device of the instance's superblock (`st_dev` of its root: the
    /// loop device, or FUSE's anonymous device), as mountinfo names it.
    pub device: u64,
    /// Who created the instance: only they (and root) see it in
    /// `--cache-status` and may evict it with `--gc`; for a FUSE instance,
    /// the only user who may reuse it.
    pub uid: Uid,
    pub created: i64,
    /// The kernel's name of the image file when the instance was created
    /// (shown to its creator and root only).
    pub path: Vec<u8>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 2 * 4096 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Meta {
    pub(crate) fn encode(&self) -> String {
        let kind = match self.kind {
            Kind::Kernel {
                loop_number,
                block_size,
            } => format!("kernel {loop_number} {block_size}"),
            Kind::Fuse { pid, started } => format!("fuse {pid} {started}"),
        };
        format!(
            "{FORMAT}\ndev {}\nino {}\nsize {}\nmtime {} {}\nctime {} {}\nkind {kind}\ndevice {}\nuid {}\ncreated {}\npath {}\n",
            self.dev,
            self.ino,
            self.size,
            self.mtime.0,
            self.mtime.1,
            self.ctime.0,
            self.ctime.1,
            self.device,
            self.uid,
            self.created,
            hex(&self.path)
        )
    }

    /// Parses what [`Meta::encode`] wrote; anything else (another format
    /// version included) is None.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Meta> {
        if bytes.len() > META_LIMIT {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.strip_suffix('\n')?.split('\n');
        if lines.next()? != FORMAT {
            return None;
        }
        let mut field = |name: &str| -> Option<Vec<&str>> {
            let mut words = lines.next()?.split(' ');
            (words.next()? == name).then(|| words.collect())
        };
        fn one<T: std::str::FromStr>(w: Option<Vec<&str>>) -> Option<T> {
            match w?.as_slice() {
                [v] => v.parse().ok(),
                _ => None,
            }
        }
        fn two(w: Option<Vec<&str>>) -> Option<(i64, i64)> {
            match w?.as_slice() {
                [a, b] => Some((a.parse().ok()?, b.parse().ok()?)),
                _ => None,
            }
        }
        fn kind(w: Option<Vec<&str>>) -> Option<Kind> {
            match w?.as_slice() {
                ["kernel", n, b] => Some(Kind::Kernel {
                    loop_number: n.parse().ok()?,
                    block_size: b.parse().ok()?,
                }),
                ["fuse", p, t] => Some(Kind::Fuse {
                    pid: p.parse().ok()?,
                    started: t.parse().ok()?,
                }),
                _ => None,
            }
        }
        let meta = Meta {
            dev: one(field("dev"))?,
            ino: one(field("ino"))?,
            size: one(field("size"))?,
            mtime: two(field("mtime"))?,
            ctime: two(field("ctime"))?,
            kind: kind(field("kind"))?,
            device: one(field("device"))?,
            uid: Uid::checked(one(field("uid"))?)?,
            created: one(field("created"))?,
            path: unhex(one::<String>(field("path"))?.as_str())?,
        };
        if lines.next().is_some() {
            return None;
        }
        Some(meta)
    }

    /// The identity of the file the instance was made of.
    pub(crate) fn identity(&self) -> Identity {
        Identity {
            dev: self.dev,
            ino: self.ino,
            size: self.size,
            mtime: self.mtime,
            ctime: self.ctime,
        }
    }

    /// Same file, unchanged: device, inode, size, mtime and ctime.
    pub(crate) fn same_file(&self, id: &Identity) -> bool {
        self.identity() == *id
    }

    /// The key of the entry this record belongs in.
    pub(crate) fn key(&self) -> Key {
        Key {
            dev: self.dev,
            ino: self.ino,
            fuse_user: matches!(self.kind, Kind::Fuse { .. }).then_some(self.uid),
        }
    }

    /// A record for the instance (`kind`, superblock on `device`) of the
    /// file `id`, created now by `uid`.
    pub(crate) fn new(
        id: &Identity,
        kind: Kind,
        device: u64,
        uid: Uid,
        created: i64,
        path: &[u8],
    ) -> Meta {
        Meta {
            dev: id.dev,
            ino: id.ino,
            size: id.size,
            mtime: id.mtime,
            ctime: id.ctime,
            kind,
            device,
            uid,
            created,
            path: path.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            dev: 0xfe00,
            ino: 12345,
            size: 4096,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
            kind: Kind::Kernel {
                loop_number: 3,
                block_size: 131072,
            },
            device: make_dev(7, 3),
            uid: Uid::from_raw(1000),
            created: 1_700_000_002,
            path: b"/home/u/a b\n\xff.sqfs".to_vec(),
        }
    }

    #[test]
    fn meta_round_trip_and_strictness() {
        let m = meta();
        assert_eq!(Meta::decode(m.encode().as_bytes()), Some(m.clone()));
        let fuse = Meta {
            kind: Kind::Fuse {
                pid: 4242,
                started: 987_654,
            },
            device: make_dev(0, 77),
            ..m.clone()
        };
        assert_eq!(Meta::decode(fuse.encode().as_bytes()), Some(fuse.clone()));
        assert_eq!(fuse.key().fuse_user, Some(Uid::from_raw(1000)));
        assert_eq!(m.key().fuse_user, None);
        let good = m.encode();
        for bad in [
            // An entry of an earlier format version is not read.
            good.replace("squashfs-mount-cache 3", "squashfs-mount-cache 2"),
            good.replace("squashfs-mount-cache 3", "squashfs-mount-cache 4"),
            good.replace("ino 12345", "ino -1"),
            good.replace("ino 12345", "ino 1 2"),
            // -1 is no user.
            good.replace("uid 1000", "uid 4294967295"),
            good.replace("kind kernel 3 ", "kind kernel 99999999999 "),
            good.replace("kind kernel 3 131072", "kind fuse 1"),
            good.replace("kind kernel", "kind other"),
            good.replace("\npath ", "\npath z"),
            good.clone() + "extra\n",
            good.trim_end().to_string(),
            String::new(),
        ] {
            assert_eq!(Meta::decode(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(Meta::decode(&vec![b'a'; META_LIMIT + 1]), None);
    }

    #[test]
    fn same_file_needs_every_field() {
        let m = meta();
        let id = FileId {
            dev: m.dev,
            ino: m.ino,
            mode: 0o100644,
            size: m.size,
            nlink: 1,
            uid: Uid::ROOT,
            gid: crate::system::Gid::ROOT,
            mtime: m.mtime,
            ctime: m.ctime,
            rdev: 0,
        };
        let same = |id: FileId| m.same_file(&Identity::from(&id));
        assert!(same(id));
        assert_eq!(
            Meta::new(
                &Identity::from(&id),
                m.kind,
                m.device,
                Uid::from_raw(1000),
                m.created,
                &m.path
            ),
            m
        );
        assert!(!same(FileId { ino: 1, ..id }));
        assert!(!same(FileId { dev: 1, ..id }));
        assert!(!same(FileId { size: 1, ..id }));
        assert!(!same(FileId {
            mtime: (m.mtime.0, 6),
            ..id
        }));
        assert!(!same(FileId {
            ctime: (m.ctime.0 + 1, m.ctime.1),
            ..id
        }));
    }

    #[test]
    fn device_numbers() {
        for (maj, min) in [
            (7, 0),
            (7, 255),
            (7, 256),
            (7, 1_048_575),
            (259, 3),
            (4095, 1),
        ] {
            assert_eq!(dev_major_minor(make_dev(maj, min)), (maj, min));
        }
        assert_eq!(make_dev(7, 1), 0x701);
        assert_eq!(make_dev(254, 0), 0xfe00);
    }
}
