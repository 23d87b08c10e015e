//! POSIX access ACLs (the `system.posix_acl_access` extended attribute):
//! which users and groups, beyond a file's owner, group and others, the
//! ACL lets write it. Pure: the attribute's bytes in, the writers out.
//!
//! Layout (`linux/posix_acl_xattr.h`): a little-endian u32 version (2),
//! then entries of (u16 tag, u16 permissions, u32 id). With an ACL, the
//! mode's group bits are the ACL's mask, which bounds every named entry
//! and the owning group; a mask without write leaves no extra writer.

use crate::system::{Gid, Uid};

/// Users and groups an inode's POSIX access ACL lets write, beyond its
/// owner, its group and others (entries the mask allows).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclWriters {
    pub users: Vec<Uid>,
    pub groups: Vec<Gid>,
    /// There is an ACL that could not be read or understood: anyone may
    /// write, as far as the tool knows.
    pub unknown: bool,
}

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const KNOWN_TAGS: [u16; 6] = [USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER];
const READ: u16 = 0x04;
const WRITE: u16 = 0x02;

/// The named users and groups `xattr` lets write (after the mask);
/// `unknown` when the bytes are not an ACL this parser understands (the
/// caller then assumes anyone may write).
pub(crate) fn writers(xattr: &[u8]) -> AclWriters {
    let unknown = AclWriters {
        unknown: true,
        ..AclWriters::default()
    };
    let Some(entries) = entries(xattr) else {
        return unknown;
    };
    if entries.iter().any(|(tag, _, _)| !KNOWN_TAGS.contains(tag)) {
        return unknown;
    }
    let mask_writes = entries
        .iter()
        .find(|(tag, _, _)| *tag == MASK)
        .is_none_or(|(_, perm, _)| perm & WRITE != 0);
    let named = |want: u16| -> Vec<u32> {
        entries
            .iter()
            .filter(|(tag, perm, _)| *tag == want && perm & WRITE != 0 && mask_writes)
            .map(|(_, _, id)| *id)
            .collect()
    };
    // A named entry of -1 (no id; the kernel never stores one): an ACL
    // this does not understand.
    let users = named(USER).into_iter().map(Uid::checked).collect();
    let groups = named(GROUP).into_iter().map(Gid::checked).collect();
    match (users, groups) {
        (Some(users), Some(groups)) => AclWriters {
            users,
            groups,
            unknown: false,
        },
        _ => unknown,
    }
}

/// (tag, permissions, id) of each entry, or None when the bytes are not a
/// version 2 ACL.
fn entries(xattr: &[u8]) -> Option<Vec<(u16, u16, u32)>> {
    let (head, body) = xattr.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*head) != VERSION || body.len() % 8 != 0 {
        return None;
    }
    Some(
        body.chunks_exact(8)
            .map(|e| {
                (
                    u16::from_le_bytes([e[0], e[1]]),
                    u16::from_le_bytes([e[2], e[3]]),
                    u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
                )
            })
            .collect(),
    )
}

/// The ACL of a file of root's that one other user may read and nobody
/// else may use: `user::rw-,user:UID:r--,group::---,mask::r--,other::---`
/// (mode 0640 once set). A user's FUSE log (`fuse_log::LOG_DIR`).
pub(crate) fn read_only_for(uid: Uid) -> Vec<u8> {
    const OBJ: u32 = u32::MAX;
    encode(&[
        (USER_OBJ, READ | WRITE, OBJ),
        (USER, READ, uid.as_raw()),
        (GROUP_OBJ, 0, OBJ),
        (MASK, READ, OBJ),
        (OTHER, 0, OBJ),
    ])
}

/// The bytes of an ACL with `entries` (tag, permissions, id).
fn encode(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut out = VERSION.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJ: u32 = u32::MAX;

    #[test]
    fn named_writers_within_the_mask() {
        let acl = encode(&[
            (0x01, 7, OBJ),
            (USER, 6, 1000),
            (USER, 4, 1001),
            (0x04, 5, OBJ),
            (GROUP, 7, 300),
            (MASK, 7, OBJ),
            (0x20, 5, OBJ),
        ]);
        let w = writers(&acl);
        assert_eq!(
            (w.users, w.groups, w.unknown),
            (vec![Uid::from_raw(1000)], vec![Gid::from_raw(300)], false)
        );
        // A mask without write: nobody named can write.
        let masked = encode(&[(0x01, 7, OBJ), (USER, 7, 1000), (MASK, 5, OBJ)]);
        assert_eq!(writers(&masked), AclWriters::default());
    }

    #[test]
    fn what_is_not_understood_counts_as_anyone() {
        assert!(writers(b"").unknown);
        assert!(writers(&[1, 0, 0, 0]).unknown);
        assert!(writers(&[2, 0, 0, 0, 1]).unknown);
        assert!(writers(&encode(&[(0x40, 7, 1)])).unknown);
        assert!(!writers(&encode(&[(0x01, 7, OBJ)])).unknown);
        // A named writer of -1 (no id): not understood.
        assert!(writers(&encode(&[(0x01, 7, OBJ), (USER, 6, u32::MAX)])).unknown);
        assert!(writers(&encode(&[(0x01, 7, OBJ), (GROUP, 6, u32::MAX)])).unknown);
    }

    #[test]
    fn a_log_readable_by_its_user_only() {
        let acl = read_only_for(Uid::from_raw(1234));
        assert_eq!(writers(&acl), AclWriters::default());
        assert_eq!(
            entries(&acl).unwrap(),
            [
                (USER_OBJ, 6, OBJ),
                (USER, 4, 1234),
                (GROUP_OBJ, 0, OBJ),
                (MASK, 4, OBJ),
                (OTHER, 0, OBJ)
            ]
        );
    }
}
