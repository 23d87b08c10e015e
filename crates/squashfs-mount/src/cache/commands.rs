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
use super::{kinds, Kind};
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
            let file = target.as_ref().map(|t| (t.id.dev, t.id.ino));
            let mode = match (&target, all, uid) {
                (Some(_), _, _) => Mode::Image,
                (None, true, _) => Mode::All,
                (None, false, _) if expired => Mode::Expired,
                (None, false, 0) => Mode::Root,
                (None, false, _) => Mode::User,
            };
            store.collect(mode, uid, file, usage::ON_REQUEST)
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

/// A Slurm job of user `uid` ended on this node (the plugin's job epilog,
/// root): evicts the user's unused FUSE instances, whose servers end with
/// them (also one a task stopped). Instances another job of the user still
/// uses stay. Returns how many were evicted. Needs root, on a thread with
/// its own fs_struct (the cache's namespace is visited).
pub fn end_of_job(uid: u32) -> Result<usize, Failure> {
    let settings = config::load();
    let store = Store::open(
        settings.cache_limits(),
        settings.cache_lock_timeout_ms,
        false,
        |why| panic!("squashfs-mount job epilog stopped: {why}"),
    )
    .map_err(|e| Failure::new(format!("image cache: {e}")))?;
    let Some(store) = store else { return Ok(0) };
    let result = store
        .collect(Mode::JobEnd, uid, None, usage::ON_REQUEST)
        .map_err(|e| Failure::new(format!("image cache: {e}")))?;
    Ok(result.iter().filter(|(_, gone)| *gone).count())
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
                Some(m) if e.valid && usage.used.contains(&m.device) => "in-use",
                Some(_) if e.valid && usage.complete => "idle",
                Some(_) if e.valid => "unknown",
                _ => "broken",
            };
            Row {
                state,
                entry: e,
                idle: now.saturating_sub(e.last_used).max(0),
                memory: e.meta.as_ref().map(kinds::cost),
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
    /// The memory the instance holds (a FUSE instance: with its server's).
    memory: Option<u64>,
}

/// Which instance it is, and what holds it: the kernel's on a loop
/// device, or a FUSE server (its pid).
fn served_by(m: &super::Meta) -> (&'static str, String) {
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
            format!("  (created by uid {})", m.uid)
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
            crate::fuse::LOG_DIR
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
                super::super::Kind::Kernel {
                    loop_number: 1,
                    block_size: 131072,
                },
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
