//! The names of the cache's entries: keyed hashes of an image file's device
//! and inode (and, for a user's FUSE instance, the user), so that what the
//! cache namespace shows says nothing about which files are cached. Pure.

use crate::system::Uid;

/// The entry name of an image file: 32 hex digits, a keyed hash of its
/// device and inode with the cache namespace's secret (so that what the
/// cache namespace shows, e.g. through a visiting process's mountinfo, says
/// nothing about which files are cached).
pub(crate) fn entry_name(secret: &[u8; 32], dev: u64, ino: u64) -> String {
    keyed_name(secret, &[dev, ino])
}

/// 32 hex digits: two SipHash-2-4 of `words`, keyed with the two halves of
/// `secret`.
fn keyed_name(secret: &[u8; 32], words: &[u64]) -> String {
    #[allow(deprecated)]
    // SipHasher is deprecated only in favour of a crate; SipHash-2-4 is what we want.
    let hash = |k: &[u8]| {
        use std::hash::Hasher;
        let key = |at: usize| u64::from_le_bytes(k[at..at + 8].try_into().unwrap_or([0; 8]));
        let mut h = std::hash::SipHasher::new_with_keys(key(0), key(8));
        for &w in words {
            h.write_u64(w);
        }
        h.finish()
    };
    format!("{:016x}{:016x}", hash(&secret[..16]), hash(&secret[16..]))
}

/// Which cached instance a launch wants: the kernel's of a file (shared by
/// everyone who can open the file), or one user's FUSE instance of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub dev: u64,
    pub ino: u64,
    /// The user whose FUSE instance it is (None: a kernel instance).
    pub fuse_user: Option<Uid>,
}

impl Key {
    /// The entry name: [`entry_name`] of the file for a kernel instance;
    /// for a user's FUSE instance, of the file and the user (a keyed hash
    /// too, so that it tells nobody which user's instance it is).
    pub(crate) fn entry_name(&self, secret: &[u8; 32]) -> String {
        match self.fuse_user {
            None => entry_name(secret, self.dev, self.ino),
            // Three words where a kernel entry hashes two.
            Some(uid) => keyed_name(secret, &[self.dev, self.ino, u64::from(uid.as_raw())]),
        }
    }
}

/// Whether `name` is an entry name made by [`entry_name`].
pub(crate) fn is_entry_name(name: &[u8]) -> bool {
    name.len() == 32
        && name
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_opaque_and_keyed() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let n = entry_name(&a, 0xfe00, 0x1f);
        assert!(is_entry_name(n.as_bytes()), "{n}");
        assert_eq!(n, entry_name(&a, 0xfe00, 0x1f));
        assert_ne!(n, entry_name(&b, 0xfe00, 0x1f));
        assert_ne!(n, entry_name(&a, 0xfe00, 0x20));
        assert!(!n.contains("fe00"));
        let kernel = Key {
            dev: 0xfe00,
            ino: 0x1f,
            fuse_user: None,
        };
        assert_eq!(kernel.entry_name(&a), n);
        let mine = Key {
            fuse_user: Some(Uid::from_raw(1000)),
            ..kernel
        };
        let theirs = Key {
            fuse_user: Some(Uid::from_raw(1001)),
            ..kernel
        };
        assert!(is_entry_name(mine.entry_name(&a).as_bytes()));
        assert_ne!(mine.entry_name(&a), n);
        assert_ne!(mine.entry_name(&a), theirs.entry_name(&a));
        assert_ne!(
            Key {
                fuse_user: Some(Uid::ROOT),
                ..kernel
            }
            .entry_name(&a),
            n
        );
        for bad in [
            &b"fe00-1f"[..],
            b"",
            b"../x",
            &[b'A'; 32],
            &[b'0'; 31],
            &[b'g'; 32],
        ] {
            assert!(!is_entry_name(bad), "{bad:?}");
        }
    }
}
