//! Doors: every room of the setuid crate is crate-private, and what other
//! crates may use is one front of `pub use` lines in lib.rs, each name
//! listed in its room's `mod.rs` ("Front ..."). Other crates (the Slurm
//! plugin, the two programs of the package, the fuzz targets, the tests
//! and benchmarks) name nothing else: `squashfs_mount::X` only with X in
//! the front.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::{sources, sources_in, SRC, WORKSPACE};

/// The front may grow to this many `pub use` lines, no further.
const FRONT_LINES_MAX: usize = 40;

/// `text` without its comments (`//` to the end of the line; no string in
/// the sources read here holds `//` before a `squashfs_mount::` path).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split_once("//").map_or(l, |(c, _)| c))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `use` statements of `text` whose visibility starts with `pub`
/// (`pub use`, `pub(crate) use`, ...), each joined on one line.
fn public_uses(text: &str) -> Vec<String> {
    let text = code(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("pub") {
        let after = &rest[at..];
        let before_ok = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        let vis_end = match after[3..].strip_prefix('(') {
            Some(inner) => inner.find(')').map(|e| 3 + 1 + e + 1),
            None => Some(3),
        };
        let is_use = vis_end.is_some_and(|e| after[e..].trim_start().starts_with("use "));
        if before_ok && is_use {
            let end = after.find(';').expect("a use ends with ;");
            out.push(
                after[..=end]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            rest = &after[end..];
        } else {
            rest = &after[3..];
        }
    }
    out
}

/// The items of a use tree (`a::{b, c::{d as e}}`) at its top level.
fn top_level_items(group: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect()
}

/// The names a use tree brings in: the last segment of each path, or its
/// `as` name.
fn names_of_tree(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some((name, _)) = tree.rsplit_once(" as ").map(|(p, n)| (n.trim(), p)) {
        if !name.contains('}') {
            return vec![name.to_string()];
        }
    }
    match tree.find('{') {
        Some(open) => {
            let inner = &tree[open + 1..tree.rfind('}').expect("a group closes")];
            top_level_items(inner)
                .iter()
                .flat_map(|i| names_of_tree(i))
                .collect()
        }
        None => vec![tree.rsplit("::").next().unwrap_or(tree).to_string()],
    }
}

/// lib.rs's front: each exported name, with the room it comes from.
fn front(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for statement in public_uses(lib) {
        if !statement.starts_with("pub use ") {
            continue; // crate-private
        }
        let tree = statement
            .split_once("use ")
            .expect("use")
            .1
            .trim_end_matches(';');
        let tree = tree.strip_prefix("crate::").unwrap_or(tree);
        let room = tree.split("::").next().unwrap_or(tree).to_string();
        for name in names_of_tree(tree) {
            out.insert(name, room.clone());
        }
    }
    out
}

/// The names other code reaches through `squashfs_mount::` in `text`:
/// the first segment of each path (`self` when it aliases the crate).
fn names_used(text: &str) -> Vec<String> {
    let text = code(text);
    let mut out = Vec::new();
    let marker = "squashfs_mount";
    let mut rest = text.as_str();
    while let Some(at) = rest.find(marker) {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + marker.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // part of another name (libspank_squashfs_mount)
        }
        if after.trim_start().starts_with("as ") {
            out.push("self".to_string()); // `use squashfs_mount as x;`
            continue;
        }
        let Some(path) = after.strip_prefix("::") else {
            continue;
        };
        let path = path.trim_start();
        if let Some(group) = path.strip_prefix('{') {
            let end = group
                .find("};")
                .or_else(|| group.find('}'))
                .unwrap_or(group.len());
            for item in top_level_items(&group[..end]) {
                out.push(item.split("::").next().unwrap_or(&item).trim().to_string());
            }
        } else {
            let name: String = path
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out.into_iter()
        .map(|n| n.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// The Rust files of other crates that may use the setuid crate: every
/// crate's src/, tests/ and benches/ (the setuid crate's library aside,
/// its programs included), the fuzz targets and bench/.
fn users() -> Vec<(String, String)> {
    let ws = Path::new(WORKSPACE);
    let mut dirs = vec![ws.join("fuzz"), ws.join("bench")];
    for entry in fs::read_dir(ws.join("crates")).expect("crates") {
        let krate = entry.expect("entry").path();
        for sub in ["src", "tests", "benches", "examples"] {
            dirs.push(krate.join(sub));
        }
    }
    let mut out = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        for (file, text) in sources_in(ws, dir) {
            let in_library = file.starts_with("crates/squashfs-mount/src/")
                && !file.ends_with("/main.rs")
                && !file.ends_with("/layer_main.rs");
            // (The structure test itself quotes uses, to test its readers.)
            let this_test = file.starts_with("crates/squashfs-mount/tests/structure");
            if !in_library && !this_test && !file.contains("/target/") {
                out.push((file, text));
            }
        }
    }
    out
}

fn lib() -> String {
    fs::read_to_string(format!("{SRC}/lib.rs")).expect("lib.rs")
}

#[test]
fn lib_opens_no_room_and_its_front_is_short() {
    let lib = code(&lib());
    for line in lib.lines() {
        assert!(
            !line.trim_start().starts_with("pub mod "),
            "lib.rs: `{}`: a room is `pub(crate) mod`; other crates use the front (`pub use`)",
            line.trim()
        );
    }
    let lines = lib
        .lines()
        .filter(|l| l.trim_start().starts_with("pub use "))
        .count();
    assert!(
        lines <= FRONT_LINES_MAX,
        "lib.rs has {lines} `pub use` lines; the front has at most {FRONT_LINES_MAX}"
    );
}

#[test]
fn no_glob_re_exports() {
    for (file, text) in sources() {
        for statement in public_uses(&text) {
            assert!(
                !statement.contains('*'),
                "src/{file}: `{statement}`: name what is re-exported (no glob)"
            );
        }
    }
}

#[test]
fn modules_are_crate_private_but_the_fronts() {
    let front = front(&lib());
    for (file, text) in sources() {
        for line in code(&text).lines() {
            let Some(name) = line.trim_start().strip_prefix("pub mod ") else {
                continue;
            };
            let name = name.trim_end_matches(';').trim();
            assert!(
                front.contains_key(name),
                "src/{file}: `pub mod {name}` is not in lib.rs's front: make it `pub(crate) mod`"
            );
        }
    }
}

#[test]
fn other_crates_use_only_the_front() {
    let front = front(&lib());
    assert!(front.len() > 10, "no front read from lib.rs: {front:?}");
    let mut outside = Vec::new();
    for (file, text) in users() {
        for name in names_used(&text) {
            if !front.contains_key(&name) {
                outside.push(format!("{file}: squashfs_mount::{name}"));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "{} use(s) of squashfs_mount outside lib.rs's front (add the name to the front and \
         its room's mod.rs, or use one that is there):\n{}",
        outside.len(),
        outside.join("\n")
    );
}

/// The names a room's `mod.rs` lists in its "Front" paragraph (what is in
/// parentheses, the item's own path, aside).
fn listed_front(mod_rs: &str) -> Option<BTreeSet<String>> {
    let doc: Vec<&str> = mod_rs
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").trim())
        .collect();
    let start = doc
        .iter()
        .position(|l| l.starts_with("Front (") || l.starts_with("Front:"))?;
    let paragraph = doc[start..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let mut text = String::new();
    let mut depth = 0;
    for c in paragraph.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => text.push(c),
            _ => {}
        }
    }
    let names = text.split('`').skip(1).step_by(2);
    Some(
        names
            .filter(|n| *n != "lib.rs")
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn every_room_lists_its_part_of_the_front() {
    let front = front(&lib());
    for entry in fs::read_dir(SRC).expect("src") {
        let dir = entry.expect("entry").path();
        if !dir.is_dir() {
            continue;
        }
        let room = dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let text = fs::read_to_string(dir.join("mod.rs")).expect("mod.rs");
        let listed = listed_front(&text).unwrap_or_else(|| {
            panic!("src/{room}/mod.rs: no \"Front\" paragraph (what other crates may use)")
        });
        let offered: BTreeSet<String> = front
            .iter()
            .filter(|(_, r)| **r == room)
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(
            listed, offered,
            "src/{room}/mod.rs lists a front other than the one lib.rs re-exports from it"
        );
    }
}

/// The readers above see what they look for (so the checks can fail).
#[test]
fn the_door_checks_see_what_they_look_for() {
    let lib = "\
//! pub use in a comment
pub(crate) mod cli;
pub use cli::{parse, paths, Invocation as Call};
pub use engine::{mount_all, plan::build as build_plan};
pub use crate::system::error::Failure;
pub(crate) use system::*;
";
    let front = front(lib);
    let names: Vec<&str> = front.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "Call",
            "Failure",
            "build_plan",
            "mount_all",
            "parse",
            "paths"
        ]
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
    assert_eq!(front["Failure"], "system");
    assert!(public_uses(lib).iter().any(|s| s.contains('*')));
    let user = "\
use squashfs_mount::cli::RunRequest;
use squashfs_mount::{self as s, parse, engine::plan};
use squashfs_mount as other;
let so = \"libspank_squashfs_mount.so\";
// squashfs_mount::in_a_comment
    squashfs_mount::mount_all(&mut c);
";
    assert_eq!(
        names_used(user),
        ["cli", "self", "parse", "engine", "self", "mount_all"]
    );
    let room = "//! A room.\n//!\n//! Front (re-exported by `lib.rs`): `a` (`x::a`),\n//! `b`.\n\nmod x;\n";
    let listed: Vec<String> = listed_front(room).expect("listed").into_iter().collect();
    assert_eq!(listed, ["a", "b"]);
}
