//! What `sqfs diff` prints: a line per added, removed and changed entry,
//! then one line of totals.

use std::fmt::Write;

use super::change::{Change, Diff, Side};
use crate::{names, units};

/// The text of `sqfs diff`.
pub fn render(d: &Diff) -> String {
    let ids = d.changes.iter().flat_map(|c| c.a.iter().chain(c.b.iter()));
    names::prefetch(names::Db::Passwd, ids.clone().map(|s| s.uid));
    names::prefetch(names::Db::Group, ids.map(|s| s.gid));
    let mut s = String::new();
    for c in &d.changes {
        let _ = writeln!(s, "{}", line(c));
    }
    let _ = writeln!(s, "{}", totals(d));
    s
}

/// A path as printed: control characters escaped.
fn shown(path: &str) -> String {
    if path.chars().any(char::is_control) {
        path.escape_debug().to_string()
    } else {
        path.to_string()
    }
}

/// "file, 1.20 KiB", "directory", "symlink to X".
fn what_it_is(s: &Side) -> String {
    match (s.kind, &s.target, &s.device) {
        ("file", _, _) => format!("file, {}", units::bytes(s.size)),
        (_, Some(t), _) => format!("symlink to {}", shown(t)),
        (k, _, Some(dev)) => format!("{k} {dev}"),
        (k, _, _) => k.to_string(),
    }
}

/// One entry's line.
fn line(c: &Change) -> String {
    let path = shown(&c.path);
    match (c.change, &c.a, &c.b) {
        ("added", _, Some(b)) => format!("added    {path}  ({})", what_it_is(b)),
        ("removed", Some(a), _) => format!("removed  {path}  ({})", what_it_is(a)),
        (_, Some(a), Some(b)) => {
            let parts: Vec<String> = c.what.iter().map(|w| aspect(c, w, a, b)).collect();
            format!("changed  {path}: {}", parts.join("; "))
        }
        _ => format!("{}  {path}", c.change),
    }
}

/// What differs in one aspect, from A to B.
fn aspect(c: &Change, what: &str, a: &Side, b: &Side) -> String {
    match what {
        "type" => format!("type {} -> {}", what_it_is(a), what_it_is(b)),
        "content" if a.size == b.size => format!("content ({}, same size)", units::bytes(a.size)),
        "content" => format!(
            "content ({} -> {})",
            units::bytes(a.size),
            units::bytes(b.size)
        ),
        "mode" => format!("mode {} -> {}", a.mode, b.mode),
        "owner" => format!("owner {} -> {}", names::user(a.uid), names::user(b.uid)),
        "group" => format!("{} -> {}", names::group(a.gid), names::group(b.gid)),
        "target" => format!(
            "link target {} -> {}",
            shown(a.target.as_deref().unwrap_or_default()),
            shown(b.target.as_deref().unwrap_or_default())
        ),
        "device" => format!(
            "device {} -> {}",
            a.device.as_deref().unwrap_or_default(),
            b.device.as_deref().unwrap_or_default()
        ),
        "mtime" => format!(
            "mtime {} -> {}",
            units::utc(i64::from(a.mtime)),
            units::utc(i64::from(b.mtime))
        ),
        "xattrs" => {
            let mut parts = Vec::new();
            if let Some(x) = &c.xattrs {
                for (names, how) in [
                    (&x.added, "added"),
                    (&x.removed, "removed"),
                    (&x.changed, "changed"),
                ] {
                    if !names.is_empty() {
                        parts.push(format!("{} {how}", names.join(", ")));
                    }
                }
            }
            format!("xattrs {}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// The last line: the totals, or that the trees are the same.
fn totals(d: &Diff) -> String {
    let unless_times = if d.times {
        ""
    } else {
        "; modification times are compared with --times"
    };
    let compared = format!(
        "{} and {} entries compared in {}{unless_times}",
        d.entries_a,
        d.entries_b,
        units::seconds(d.seconds)
    );
    if d.changes.is_empty() {
        return format!("{} and {} hold the same tree ({compared})", d.a, d.b);
    }
    format!(
        "{} -> {}: {} added, {} removed, {} changed ({compared})",
        d.a, d.b, d.added, d.removed, d.changed
    )
}
