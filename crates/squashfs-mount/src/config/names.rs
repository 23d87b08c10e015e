//! Users and groups by name in messages (`owned by uid 1007 (alice)`,
//! `trusted-owners = root`): read from /etc/passwd and /etc/group only, as
//! the configuration's names are (no name service module is loaded into
//! the privileged process); an id without a name there is shown as the
//! number. Each file is read at most once per [`FileNames`].

use std::cell::OnceCell;

use crate::system::{self, Gid, Uid};

/// Where names come from: the files, or a table (unit tests).
pub trait Names {
    fn user(&self, uid: Uid) -> Option<String>;
    fn group(&self, gid: Gid) -> Option<String>;
}

/// Names from /etc/passwd and /etc/group, each read when first needed.
#[derive(Default)]
pub struct FileNames {
    passwd: OnceCell<Vec<u8>>,
    group: OnceCell<Vec<u8>>,
}

/// Largest /etc/passwd or /etc/group read (as for the configuration).
const MAX_BYTES: usize = 4 << 20;

fn read(path: &str) -> Vec<u8> {
    system::read_file_at(system::working_dir(), path, MAX_BYTES)
        .map(|(text, _)| text)
        .unwrap_or_default()
}

/// The name (first field) of the line whose third field is `id`.
pub(crate) fn name_in(table: &[u8], id: u32) -> Option<String> {
    table.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        let name = fields.next()?;
        let found: u32 = std::str::from_utf8(fields.nth(1)?).ok()?.parse().ok()?;
        (found == id && !name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
    })
}

impl Names for FileNames {
    fn user(&self, uid: Uid) -> Option<String> {
        if uid.is_root() {
            return Some("root".into());
        }
        name_in(
            self.passwd.get_or_init(|| read("/etc/passwd")),
            uid.as_raw(),
        )
    }

    fn group(&self, gid: Gid) -> Option<String> {
        if gid.as_raw() == 0 {
            return Some("root".into());
        }
        name_in(self.group.get_or_init(|| read("/etc/group")), gid.as_raw())
    }
}

/// A user for a message: `uid 1007 (alice)`, or `uid 1007` without a
/// name (the id first: what the kernel and `ls -n` show).
pub(crate) fn user(names: &dyn Names, uid: Uid) -> String {
    match names.user(uid) {
        Some(n) => format!("uid {uid} ({n})"),
        None => format!("uid {uid}"),
    }
}

/// A group for a message: `group 300 (hpc)`, or `group 300`, with `note`
/// in the parentheses after the name when given.
pub(crate) fn group(names: &dyn Names, gid: Gid, note: Option<&str>) -> String {
    match (names.group(gid), note) {
        (Some(n), Some(note)) => format!("group {gid} ({n}, {note})"),
        (Some(n), None) => format!("group {gid} ({n})"),
        (None, Some(note)) => format!("group {gid} ({note})"),
        (None, None) => format!("group {gid}"),
    }
}

/// A user as a configuration value: the name, or the id without one.
pub(crate) fn user_value(names: &dyn Names, uid: Uid) -> String {
    names.user(uid).unwrap_or_else(|| uid.to_string())
}

/// A group as a configuration value: the name, or the id without one.
pub(crate) fn group_value(names: &dyn Names, gid: Gid) -> String {
    names.group(gid).unwrap_or_else(|| gid.to_string())
}

/// A fixed table of names (tests).
#[cfg(test)]
pub struct Table(pub &'static [(u32, &'static str)]);

#[cfg(test)]
impl Names for Table {
    fn user(&self, uid: Uid) -> Option<String> {
        let found = self.0.iter().find(|(id, _)| *id == uid.as_raw());
        found.map(|(_, n)| n.to_string())
    }
    fn group(&self, gid: Gid) -> Option<String> {
        let found = self.0.iter().find(|(id, _)| *id == gid.as_raw());
        found.map(|(_, n)| n.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_a_passwd_table() {
        let t = b"root:x:0:0:root:/root:/bin/sh\nalice:x:1007:1007::/home/alice:/bin/sh\n:x:5:5::/:/bin/sh\nbad:x:notanumber:1::/:/bin/sh";
        assert_eq!(name_in(t, 1007).as_deref(), Some("alice"));
        assert_eq!(name_in(t, 0).as_deref(), Some("root"));
        assert_eq!(name_in(t, 5), None);
        assert_eq!(name_in(t, 42), None);
    }

    #[test]
    fn shown_with_the_id_first() {
        let t = Table(&[(0, "root"), (1007, "alice")]);
        assert_eq!(user(&t, Uid::from_raw(1007)), "uid 1007 (alice)");
        assert_eq!(user(&t, Uid::from_raw(0)), "uid 0 (root)");
        assert_eq!(user(&t, Uid::from_raw(9)), "uid 9");
        assert_eq!(group(&t, Gid::from_raw(1007), None), "group 1007 (alice)");
        assert_eq!(
            group(&t, Gid::from_raw(1007), Some("mode g+w")),
            "group 1007 (alice, mode g+w)"
        );
        assert_eq!(group(&t, Gid::from_raw(9), Some("x")), "group 9 (x)");
        assert_eq!(user_value(&t, Uid::from_raw(9)), "9");
        assert_eq!(user_value(&t, Uid::from_raw(1007)), "alice");
    }
}
