//! The crate's shape stays as doc/architecture.md draws it: no function of
//! the setuid crate over 80 lines, the privileged sequence (`mount_all`)
//! under 40 and made of its stages, no loop between its modules, the
//! crate root holding only entry points and rooms, and every room
//! importing only rooms below it.
//! Read from the sources (as rustfmt lays them out); no root needed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(Path::new(SRC), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(SRC)
                .expect("below src")
                .display()
                .to_string();
            (rel, fs::read_to_string(&p).expect("read"))
        })
        .collect()
}

/// The name of the function a line declares, and its indentation.
fn function(line: &str) -> Option<(&str, usize)> {
    let indent = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    for prefix in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some((&name[..end], indent))
}

/// Every function with a body: (file, name, lines from `fn` to its `}`).
fn functions() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (file, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some((name, indent)) = function(line) else {
                continue;
            };
            // The signature ends with the body's `{`, or `;` (no body).
            let Some(end) = (i..lines.len()).find(|&j| {
                let l = lines[j].trim_end();
                l.ends_with('{') || l.ends_with('}') || l.ends_with(';')
            }) else {
                continue;
            };
            let last = lines[end].trim_end();
            let len = if last.ends_with(';') {
                continue;
            } else if last.ends_with('}') {
                end - i + 1
            } else {
                let close = format!("{}}}", " ".repeat(indent));
                match (end..lines.len()).find(|&j| lines[j] == close) {
                    Some(j) => j - i + 1,
                    None => panic!("{file}: no end of fn {name}"),
                }
            };
            out.push((file.clone(), name.to_string(), len));
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let all = functions();
    assert!(all.len() > 500, "only {} functions found", all.len());
    let long: Vec<_> = all.iter().filter(|(_, _, n)| *n > 80).collect();
    assert!(long.is_empty(), "functions over 80 lines: {long:?}");
}

#[test]
fn mount_all_is_its_stages() {
    let all = functions();
    let (_, _, len) = all
        .iter()
        .find(|(file, name, _)| file == "engine/mod.rs" && name == "mount_all")
        .expect("engine::mount_all");
    assert!(*len < 40, "mount_all has {len} lines");
    let text = fs::read_to_string(format!("{SRC}/engine/mod.rs")).expect("read");
    let body = &text[text.find("pub fn mount_all").expect("mount_all")..];
    // Each stage, a call into its own file, in order.
    let mut at = 0;
    for stage in [
        "admit::admit(",
        "plan::stage(",
        "kept_layer::check(",
        "route::open_and_route(",
        "Binds::pin(",
        "flight::open_cache(",
        "fuse_path::start(",
        "KernelSource::new(",
        "binds.copy(",
        "enter_private_mount_namespace(",
        "kernel.instances(",
        "attach::writable_layer(",
        "attach::all(",
        "report::mounted(",
    ] {
        let found = body[at..]
            .find(stage)
            .unwrap_or_else(|| panic!("{stage} is not (in order) in mount_all"));
        at += found + stage.len();
    }
}

/// The crate's top-level modules (files and folders of src/, but lib.rs
/// and main.rs), and which of them each one names (`crate::module`).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let module = |file: &str| {
        let first = file.split('/').next().unwrap_or(file);
        first.trim_end_matches(".rs").to_string()
    };
    let names: BTreeSet<String> = files
        .iter()
        .map(|(f, _)| module(f))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in &files {
        let from = module(file);
        if !names.contains(&from) {
            continue;
        }
        let edges = graph.entry(from.clone()).or_default();
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let to = &rest[..end];
            if to != from && names.contains(to) {
                edges.insert(to.to_string());
            }
        }
    }
    graph
}

#[test]
fn no_module_imports_itself_through_others() {
    let graph = module_graph();
    assert!(graph.len() >= ROOMS.len(), "{graph:?}");
    // A depth-first search from each module for a way back to it.
    for start in graph.keys() {
        let mut stack: Vec<Vec<&String>> = vec![vec![start]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path[path.len() - 1];
            for next in graph.get(last).into_iter().flatten() {
                assert!(next != start, "a module loop: {path:?} -> {next}");
                if seen.insert(next) {
                    let mut longer = path.clone();
                    longer.push(next);
                    stack.push(longer);
                }
            }
        }
    }
}

/// The rooms of the crate (folders of src/), lowest first: a room may
/// import only rooms before it (doc/architecture.md, "Rooms").
const ROOMS: [&str; 9] = [
    "system",
    "privilege",
    "cli",
    "config",
    "mounts",
    "cache",
    "layer",
    "engine",
    "commands",
];
/// The files the crate root may hold: the entry points.
const ENTRY_POINTS: [&str; 3] = ["lib.rs", "main.rs", "layer_main.rs"];

#[test]
fn the_crate_root_holds_only_entry_points_and_rooms() {
    for entry in fs::read_dir(SRC).expect("src") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            assert!(
                ROOMS.contains(&name.as_str()),
                "src/{name}/ is not a room of ROOMS"
            );
        } else {
            assert!(
                ENTRY_POINTS.contains(&name.as_str()),
                "src/{name}: the crate root holds only entry points; put it in a room"
            );
        }
    }
}

#[test]
fn every_room_imports_only_rooms_below_it() {
    let rank = |room: &str| ROOMS.iter().position(|r| *r == room);
    for (from, to) in module_graph() {
        let Some(from_rank) = rank(&from) else {
            continue; // an entry point
        };
        for room in to {
            let to_rank =
                rank(&room).unwrap_or_else(|| panic!("{from} imports {room}, not a room"));
            assert!(
                to_rank < from_rank,
                "{from} imports {room}, which stands above it (ROOMS is lowest first)"
            );
        }
    }
}

#[test]
fn no_file_name_is_used_twice() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (file, _) in sources() {
        let name = file.rsplit('/').next().unwrap_or(&file).to_string();
        if name == "mod.rs" {
            continue;
        }
        if let Some(first) = seen.insert(name.clone(), file.clone()) {
            panic!("{name} is used twice: {first} and {file}");
        }
    }
}
