//! `squashfs-mount --gc [--all | IMAGE]` and `--cache-status [--json]`.
//!
//! What a user sees and may evict is decided from the recorded creator
//! only: a user's own instances (root: all). No recorded path of another
//! user is ever opened (its owner could stall the command, or learn who ran
//! it), and no other user's path is shown.

use std::ffi::OsStr;

use super::evict::Mode;
use super::store::{Entry, Store};
use super::usage;
use crate::config;
use crate::error::{print_stdout, Failure};
use crate::image::Image;
use crate::privilege::{Credentials, PrivilegeError, Privileges};
use crate::system;

/// What `--gc` and `--cache-status` say without the setuid bit.
const ROOTLESS: &str = "no image cache: squashfs-mount is not installed setuid root here, and rootless mode keeps no cache (every image is served through FUSE, for the command's lifetime only)\n";

/// The setuid process's privileges; None in rootless mode (the binary is
/// not setuid root), where there is no cache to show or evict.
fn acquire() -> Result<Option<Privileges>, Failure> {
    match Privileges::acquire() {
        Ok(p) => Ok(Some(p)),
        Err(PrivilegeError::NotSetuidRoot) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Opens the existing cache as root; None when there is none.
fn open_existing(privileges: &mut Privileges) -> Result<Option<Store>, Failure> {
    let settings = privileges.as_root(config::load)?;
    privileges
        .as_root(|| {
            Store::open(
                settings.cache_limits(),
                settings.cache_lock_timeout_ms,
                false,
                Privileges::stranded,
            )
        })?
        .map_err(|e| Failure::new(format!("image cache: {e}")))
}

fn shown_path(e: &Entry) -> String {
    match &e.meta {
        Some(m) => String::from_utf8_lossy(&m.path).escape_debug().to_string(),
        None => format!("(incomplete entry {})", e.name),
    }
}

fn visible(uid: u32, e: &Entry) -> bool {
    uid == 0 || e.meta.as_ref().is_some_and(|m| m.uid == uid)
}

/// `squashfs-mount --gc [--all | --expired]`, or `--gc IMAGE` for one
/// image's instance.
pub fn gc_command(all: bool, expired: bool, image: Option<&OsStr>) -> Result<(), Failure> {
    let Some(mut privileges) = acquire()? else {
        print_stdout(ROOTLESS);
        return Ok(());
    };
    let uid = privileges.caller().uid.as_raw();
    if all && uid != 0 {
        return Err(Failure::new(
            "--gc --all evicts instances other users may be about to reuse; only root may use it",
        ));
    }
    // The image is opened with the caller's rights, like for a launch.
    let target = match image {
        Some(given) => Some(Image::open(&privileges, given, &given.to_string_lossy())?),
        None => None,
    };
    let Some(store) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout("no image cache\n");
        return Ok(());
    };
    let result = privileges
        .as_root(|| -> Result<_, super::CacheError> {
            // Loads the namespace's secret, so that the image's entry name is known.
            store.entries()?;
            let name = target
                .as_ref()
                .and_then(|t| store.name_of(t.id.dev, t.id.ino));
            let mode = match (&target, all, uid) {
                (Some(_), _, _) => Mode::Image,
                (None, true, _) => Mode::All,
                (None, false, _) if expired => Mode::Expired,
                (None, false, 0) => Mode::Root,
                (None, false, _) => Mode::User,
            };
            store.collect(mode, uid, name.as_deref(), usage::ON_REQUEST)
        })?
        .map_err(|e| Failure::new(format!("image cache: {e}")))?;
    drop(store);
    privileges.drop_for_good()?;
    let mut out = String::new();
    let (mut evicted, mut kept, mut others) = (0, 0, 0);
    for (e, gone) in &result {
        if !visible(uid, e) {
            others += usize::from(*gone);
            continue;
        }
        if *gone {
            evicted += 1;
            out += &format!("evicted {}\n", shown_path(e));
        } else {
            kept += 1;
        }
    }
    if let (Some(t), 0) = (&target, evicted) {
        out += &format!(
            "{}: no cached instance of yours\n",
            t.given.to_string_lossy()
        );
    }
    out += &format!("{evicted} evicted, {kept} kept");
    if others > 0 {
        out += &format!("; also evicted {others} stale instance(s) of other users");
    }
    out.push('\n');
    print_stdout(&out);
    Ok(())
}

/// `squashfs-mount --cache-status [--json]`: the caller's own cached
/// instances (root: all of them).
pub fn status_command(json: bool) -> Result<(), Failure> {
    let Some(mut privileges) = acquire()? else {
        print_stdout(if json { "[]\n" } else { ROOTLESS });
        return Ok(());
    };
    let uid = privileges.caller().uid.as_raw();
    let Some(store) = open_existing(&mut privileges)? else {
        privileges.drop_for_good()?;
        print_stdout(if json { "[]\n" } else { "no image cache\n" });
        return Ok(());
    };
    let (entries, usage) = privileges
        .as_root(|| -> Result<_, super::CacheError> {
            let entries: Vec<Entry> = store
                .entries()?
                .into_iter()
                .filter(|e| visible(uid, e))
                .collect();
            let usage = store.usage(&entries);
            Ok((entries, usage))
        })?
        .map_err(|e| Failure::new(format!("image cache: {e}")))?;
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
        to_table(&rows, uid == 0)
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

    #[test]
    fn what_a_user_sees() {
        let e = |uid| Entry {
            name: "0".repeat(32),
            meta: Some(super::super::Meta::new(
                &super::super::Identity {
                    dev: 1,
                    ino: 2,
                    size: 3,
                    mtime: (0, 0),
                    ctime: (0, 0),
                },
                131072,
                1,
                0x701,
                uid,
                0,
                b"/x",
            )),
            valid: true,
            last_used: 0,
        };
        assert!(visible(1000, &e(1000)));
        assert!(!visible(1001, &e(1000)));
        assert!(visible(0, &e(1000)));
    }
}
