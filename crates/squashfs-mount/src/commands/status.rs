//! `squashfs-mount --cache-status [--json]`: the caller's own cached
//! instances (root: all of them), as a table or as JSON.

use super::{open_existing, shown_path, visible, CommandError};
use crate::cache::{CacheError, Entry};
use crate::error::{print_stdout, Failure};
use crate::privilege::{Credentials, Privileges, RootPhase};
use crate::system;

/// `squashfs-mount --cache-status [--json]`: the caller's own cached
/// instances (root: all of them).
pub fn status_command(json: bool) -> Result<(), Failure> {
    let mut privileges = Privileges::acquire(RootPhase::CACHE)?;
    let uid = privileges.caller().uid;
    let Some(store) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout(if json { "[]\n" } else { "no image cache\n" });
        return Ok(());
    };
    let (entries, usage) = privileges
        .as_root(|root| -> Result<_, CacheError> {
            let entries: Vec<Entry> = store
                .entries(root)?
                .into_iter()
                .filter(|e| visible(uid, e))
                .collect();
            let usage = store.usage(root, &entries);
            Ok((entries, usage))
        })?
        .map_err(|e| Failure::new(CommandError::Cache(e)))?;
    drop(store);
    privileges.drop_for_good()?;
    let now = system::unix_time();
    let rows: Vec<Row> = entries
        .iter()
        .map(|e| {
            let state = match &e.meta {
                Some(m) if e.valid && usage.used.contains(&m.loop_rdev) => "in-use",
                Some(_) if e.valid && usage.complete => "idle",
                Some(_) if e.valid => "unknown",
                _ => "broken",
            };
            Row {
                state,
                entry: e,
                idle: now.saturating_sub(e.last_used).max(0),
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
        "{:<8} {:<12} {:>10} {:>9}  IMAGE\n",
        "STATE", "DEVICE", "SIZE", "LAST USE"
    );
    for r in rows {
        let Some(m) = &r.entry.meta else {
            out += &format!(
                "{:<8} {:<12} {:>10} {:>9}  {}\n",
                r.state,
                "-",
                "-",
                "-",
                shown_path(r.entry)
            );
            continue;
        };
        let owner = if root {
            format!("  (created by uid {})", m.uid)
        } else {
            String::new()
        };
        out += &format!(
            "{:<8} {:<12} {:>10} {:>9}  {}{owner}\n",
            r.state,
            format!("/dev/loop{}", m.loop_number),
            squashfs_format::size::format_bytes(m.size),
            format!("{} ago", age(r.idle)),
            shown_path(r.entry),
        );
    }
    out
}

/// A JSON string: UTF-8 kept, other bytes as \u00XX of their Latin-1
/// reading (paths need not be UTF-8).
fn json_string(bytes: &[u8]) -> String {
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
                "{{\"state\":\"{}\",\"device\":\"/dev/loop{}\",\"size\":{},\"idle_seconds\":{},\"image\":{},\"created_by\":{}}}",
                r.state,
                m.loop_number,
                m.size,
                r.idle,
                json_string(&m.path),
                m.uid
            ),
            None => format!("{{\"state\":\"{}\",\"device\":null,\"size\":null,\"idle_seconds\":null,\"image\":null,\"created_by\":null}}", r.state),
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
