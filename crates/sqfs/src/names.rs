//! User and group names for the ids sqfs prints ("uid 1007 (alice)"
//! rather than "uid 1007": the id first, as squashfs-mount's messages
//! have it, so what scripts matched still holds), from this machine's
//! databases: `getent`
//! (so LDAP and other NSS sources count), else /etc/passwd and
//! /etc/group. An image stores ids only; the names are this machine's.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Which database.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Db {
    Passwd,
    Group,
}

impl Db {
    fn name(self) -> &'static str {
        match self {
            Db::Passwd => "passwd",
            Db::Group => "group",
        }
    }
    fn word(self) -> &'static str {
        match self {
            Db::Passwd => "uid",
            Db::Group => "group",
        }
    }
}

/// Names looked up so far (None: the id has none here).
type Known = HashMap<(Db, u32), Option<String>>;

static NAMES: Mutex<Option<Known>> = Mutex::new(None);

/// Looks up every id of `ids` in `db` at once (one `getent` run), so that
/// later [`user`] and [`group`] calls need none.
pub fn prefetch(db: Db, ids: impl IntoIterator<Item = u32>) {
    let mut guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    let missing: Vec<u32> = ids
        .into_iter()
        .filter(|id| !map.contains_key(&(db, *id)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if missing.is_empty() {
        return;
    }
    let found = lookup(db, &missing);
    for id in missing {
        map.insert((db, id), found.get(&id).cloned());
    }
}

/// The name of `id` in `db`, if this machine has one.
pub fn name(db: Db, id: u32) -> Option<String> {
    prefetch(db, [id]);
    let guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_ref()?.get(&(db, id)).cloned().flatten()
}

/// "uid 1007 (alice)", or "uid 1007" when the id has no name here.
pub fn user(uid: u32) -> String {
    labelled(Db::Passwd, uid)
}

/// "group 50 (staff)", or "group 50".
pub fn group(gid: u32) -> String {
    labelled(Db::Group, gid)
}

/// The ids of an image's id table (each may be a uid, a gid or both)
/// with this machine's names: "0 (root), 100 (group users), 1007 (alice,
/// group staff), 4242".
pub fn ids(ids: &[u32]) -> String {
    prefetch(Db::Passwd, ids.iter().copied());
    prefetch(Db::Group, ids.iter().copied());
    let shown: Vec<String> = ids
        .iter()
        .map(|&id| match (name(Db::Passwd, id), name(Db::Group, id)) {
            (Some(u), Some(g)) if u != g => format!("{id} ({u}, group {g})"),
            (Some(u), _) => format!("{id} ({u})"),
            (None, Some(g)) => format!("{id} (group {g})"),
            (None, None) => id.to_string(),
        })
        .collect();
    shown.join(", ")
}

fn labelled(db: Db, id: u32) -> String {
    match name(db, id) {
        Some(n) => format!("{} {id} ({n})", db.word()),
        None => format!("{} {id}", db.word()),
    }
}

/// Names of `ids` from `getent DB ID...`, else from the file.
fn lookup(db: Db, ids: &[u32]) -> HashMap<u32, String> {
    let out = Command::new("getent")
        .arg(db.name())
        .args(ids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let text = match out {
        // getent exits 2 when some key is not found; what it found is
        // printed all the same.
        Ok(o) if !o.stdout.is_empty() || o.status.code() == Some(2) => {
            String::from_utf8_lossy(&o.stdout).into_owned()
        }
        _ => std::fs::read_to_string(format!("/etc/{}", db.name())).unwrap_or_default(),
    };
    parse(&text, ids)
}

/// `name:x:id:...` lines: the names of `ids` (the first line of each).
fn parse(text: &str, ids: &[u32]) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut f = line.split(':');
        let (Some(name), Some(_), Some(id)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if let Ok(id) = id.parse::<u32>() {
            if ids.contains(&id) && !name.is_empty() {
                out.entry(id).or_insert_with(|| name.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_lines_are_read() {
        let text = "root:x:0:0:root:/root:/bin/bash\nalice:x:1007:1007::/home/alice:/bin/sh\nbad line\nalias:x:1007:1::/:/bin/sh\n";
        let m = parse(text, &[0, 1007, 5]);
        assert_eq!(m.get(&0).map(String::as_str), Some("root"));
        assert_eq!(m.get(&1007).map(String::as_str), Some("alice"));
        assert!(!m.contains_key(&5));
    }

    #[test]
    fn root_has_a_name_and_unknown_ids_say_so() {
        assert_eq!(user(0), "uid 0 (root)");
        assert_eq!(group(0), "group 0 (root)");
        assert_eq!(user(3_999_999_999), "uid 3999999999");
        assert_eq!(ids(&[0, 3_999_999_999]), "0 (root), 3999999999");
    }
}
