//! `squashfs-mount --cache-status [--json]`: the caller's own cached
//! instances (root: all of them), as a table or as JSON.

use super::{acquire, on_the_cache, open_existing, shown_path, visible, ROOTLESS};
use crate::cache::{cost, Entry, Kind, Meta};
use crate::config::names::{FileNames, Names};
use crate::privilege::Credentials;
use crate::system;
use crate::system::error::{print_stdout, Failure};

/// `squashfs-mount --cache-status [--json]`: the caller's own cached
/// instances (root: all of them).
pub(crate) fn status_command(json: bool) -> Result<(), Failure> {
    let Some(mut privileges) = acquire()? else {
        print_stdout(if json { "[]\n" } else { ROOTLESS });
        return Ok(());
    };
    let uid = privileges.caller().uid;
    let Some(store) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout(if json { "[]\n" } else { "no image cache\n" });
        return Ok(());
    };
    let (entries, usage) = privileges.try_as_root(|root| -> Result<_, Failure> {
        let entries: Vec<Entry> = on_the_cache(|| store.entries(root))?
            .into_iter()
            .filter(|e| visible(uid, e))
            .collect();
        let usage = store.usage(root, &entries);
        Ok((entries, usage))
    })?;
    drop(store);
    privileges.drop_for_good()?;
    let now = system::unix_time();
    let rows: Vec<Row> = entries
        .iter()
        .map(|e| {
            let state = match &e.meta {
                Some(m) if e.valid && usage.used.contains(&m.device) => "in-use",
                Some(_) if e.valid && usage.complete => "idle",
                Some(_) if e.valid => "unknown",
                _ => "broken",
            };
            Row {
                state,
                entry: e,
                idle: now.saturating_sub(e.last_used).max(0),
                memory: e.meta.as_ref().map(cost),
            }
        })
        .collect();
    print_stdout(&if json {
        to_json(&rows)
    } else {
        to_table(&rows, uid.is_root())
    });
    Ok(())
}

struct Row<'a> {
    state: &'static str,
    entry: &'a Entry,
    idle: i64,
    /// The memory the instance holds (a FUSE instance: with its server's).
    memory: Option<u64>,
}

/// Which instance it is, and what holds it: the kernel's on a loop
/// device, or a FUSE server (its pid).
fn served_by(m: &Meta) -> (&'static str, String) {
    match m.kind {
        Kind::Kernel { loop_number, .. } => ("kernel", format!("/dev/loop{loop_number}")),
        Kind::Fuse { pid, .. } => ("FUSE", format!("pid {pid}")),
    }
}

fn age(s: i64) -> String {
    if s < 120 {
        format!("{s}s")
    } else if s < 7200 {
        format!("{}m", s / 60)
    } else {
        format!("{}h", s / 3600)
    }
}

fn to_table(rows: &[Row<'_>], root: bool) -> String {
    let mut out = format!(
        "{:<8} {:<6} {:<12} {:>10} {:>10} {:>9}  IMAGE\n",
        "STATE", "KIND", "SERVED BY", "SIZE", "MEMORY", "LAST USE"
    );
    let bytes = squashfs_format::size::format_bytes;
    let user_names = FileNames::default();
    let mut fuse = false;
    for r in rows {
        let Some(m) = &r.entry.meta else {
            out += &format!(
                "{:<8} {:<6} {:<12} {:>10} {:>10} {:>9}  {}\n",
                r.state,
                "-",
                "-",
                "-",
                "-",
                "-",
                shown_path(r.entry)
            );
            continue;
        };
        let owner = if root {
            let name = user_names.user(m.uid).map(|n| format!(", {n}"));
            format!("  (created by uid {}{})", m.uid, name.unwrap_or_default())
        } else {
            String::new()
        };
        let (kind, by) = served_by(m);
        fuse |= kind == "FUSE";
        out += &format!(
            "{:<8} {:<6} {:<12} {:>10} {:>10} {:>9}  {}{owner}\n",
            r.state,
            kind,
            by,
            bytes(m.size),
            r.memory.map(bytes).unwrap_or_else(|| "-".into()),
            format!("{} ago", age(r.idle)),
            shown_path(r.entry),
        );
    }
    if fuse {
        out += &format!(
            "FUSE servers write their messages to {}/<uid>.log\n",
            crate::mounts::fuse_log::LOG_DIR
        );
    }
    out
}

/// A JSON string: UTF-8 kept, other bytes as \u00XX of their Latin-1
/// reading (paths need not be UTF-8).
pub(super) fn json_string(bytes: &[u8]) -> String {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.to_string(),
        Err(_) => bytes.iter().map(|&b| b as char).collect(),
    };
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn to_json(rows: &[Row<'_>]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|r| match &r.entry.meta {
            Some(m) => format!(
                "{{\"state\":\"{}\",\"kind\":\"{}\",{},\"size\":{},\"memory\":{},\"idle_seconds\":{},\"image\":{},\"created_by\":{}}}",
                r.state,
                served_by(m).0,
                match m.kind {
                    Kind::Kernel { loop_number, .. } => format!("\"device\":\"/dev/loop{loop_number}\",\"server_pid\":null"),
                    Kind::Fuse { pid, .. } => format!("\"device\":null,\"server_pid\":{pid}"),
                },
                m.size,
                r.memory.map_or("null".to_string(), |b| b.to_string()),
                r.idle,
                json_string(&m.path),
                m.uid
            ),
            None => format!("{{\"state\":\"{}\",\"kind\":null,\"device\":null,\"server_pid\":null,\"size\":null,\"memory\":null,\"idle_seconds\":null,\"image\":null,\"created_by\":null}}", r.state),
        })
        .collect();
    format!("[{}]\n", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings() {
        assert_eq!(
            json_string(b"/a b/\"c\"\\d\n"),
            "\"/a b/\\\"c\\\"\\\\d\\u000a\""
        );
        assert_eq!(json_string("/é".as_bytes()), "\"/é\"");
        assert_eq!(json_string(b"/x\xff"), "\"/x\u{ff}\"");
    }
}
