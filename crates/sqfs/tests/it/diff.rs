//! `sqfs diff A B`: exactly the entries that differ, each with what
//! differs (a table of change kinds), as JSON and as text; the same tree
//! whatever the compressor or block size; nothing decompressed when the
//! images store the same data alike; --times, --exit-code; a damaged
//! image named with the way to find its bad block (userspace only).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use sqfsmnt_test_support::cmd::{ok, run};
use sqfsmnt_test_support::loud_skip;
use sqfsmnt_test_support::tree::{set_mtime, sqfs_command, temp_with, write, Rng, TempDir};

fn sqfs() -> Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}

/// The same tree for every call: small files (in fragments), a file of
/// several blocks, a tool, a link, directories to remove and to change
/// type, and a file with an extended attribute (false when the file
/// system refuses user xattrs).
fn tree(root: &Path) -> bool {
    let mut rng = Rng(39);
    std::fs::create_dir_all(root.join("small")).unwrap();
    for i in 0..300 {
        let n = 100 + (rng.next() % 2900) as usize;
        write(
            &root.join(format!("small/{i:03}.txt")),
            &rng.text(n),
            1_600_000_000,
        );
    }
    write(&root.join("big.dat"), &rng.bytes(600_000), 1_600_000_000);
    for (rel, text) in [
        ("conf/app.conf", "threads = 4\n"),
        ("bin/tool", "#!/bin/sh\necho tool\n"),
        ("olddir/a", "a\n"),
        ("olddir/b", "b\n"),
        ("gone.txt", "gone\n"),
        ("file-then-dir", "a file first\n"),
        ("dir-then-file/x", "x\n"),
        ("xattr.txt", "<p>hello</p>\n"),
    ] {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write(&p, text.as_bytes(), 1_600_000_000);
    }
    chmod(&root.join("bin/tool"), 0o755);
    std::os::unix::fs::symlink("small/001.txt", root.join("link")).unwrap();
    rustix::fs::setxattr(
        root.join("xattr.txt").as_path(),
        "user.mime",
        b"text/plain",
        rustix::fs::XattrFlags::empty(),
    )
    .is_ok()
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The tree's second release: one change of each kind.
fn second_release(root: &Path, xattrs: bool) {
    // Same size, one byte changed, in a fragment block.
    let p = root.join("small/010.txt");
    let mut b = std::fs::read(&p).unwrap();
    b[50] ^= 1;
    write(&p, &b, 1_600_000_000);
    // 37 bytes longer (every later fragment moves).
    let p = root.join("small/050.txt");
    let mut b = std::fs::read(&p).unwrap();
    b.extend_from_slice(b" and some more words at its very end\n");
    write(&p, &b, 1_600_000_000);
    // One byte in the third block of a file of five.
    let p = root.join("big.dat");
    let mut b = std::fs::read(&p).unwrap();
    b[300_000] ^= 0x80;
    write(&p, &b, 1_600_000_000);
    chmod(&root.join("conf/app.conf"), 0o600);
    std::fs::remove_file(root.join("link")).unwrap();
    std::os::unix::fs::symlink("small/002.txt", root.join("link")).unwrap();
    std::fs::remove_dir_all(root.join("olddir")).unwrap();
    std::fs::remove_file(root.join("gone.txt")).unwrap();
    write(&root.join("new.txt"), b"new\n", 1_600_000_000);
    std::fs::create_dir(root.join("newdir")).unwrap();
    write(&root.join("newdir/x"), b"x\n", 1_600_000_000);
    write(&root.join("newdir/y"), b"y\n", 1_600_000_000);
    std::fs::remove_file(root.join("file-then-dir")).unwrap();
    std::fs::create_dir(root.join("file-then-dir")).unwrap();
    write(&root.join("file-then-dir/inner"), b"in\n", 1_600_000_000);
    std::fs::remove_dir_all(root.join("dir-then-file")).unwrap();
    write(&root.join("dir-then-file"), b"now a file\n", 1_600_000_000);
    if xattrs {
        for (name, value) in [("user.mime", &b"text/html"[..]), ("user.new", b"1")] {
            rustix::fs::setxattr(
                root.join("xattr.txt").as_path(),
                name,
                value,
                rustix::fs::XattrFlags::empty(),
            )
            .unwrap();
        }
    }
}

/// mksquashfs of `tree` into `image`, with pseudo definitions (devices,
/// owners: no root needed).
fn mksquashfs(tree: &Path, image: &Path, pseudo: &[&str], extra: &[&str]) {
    let mut c = Command::new("mksquashfs");
    c.arg(tree)
        .arg(image)
        .args(["-noappend", "-quiet", "-no-progress"])
        .args(if extra.contains(&"-comp") {
            &[][..]
        } else {
            &["-comp", "zstd"][..]
        })
        .args(extra);
    for p in pseudo {
        c.args(["-p", p]);
    }
    ok(&mut c);
}

fn diff_json(a: &Path, b: &Path, extra: &[&str]) -> serde_json::Value {
    let o = ok(sqfs().args(["diff", "--json"]).args(extra).arg(a).arg(b));
    serde_json::from_slice(&o.0.stdout).unwrap()
}

/// path -> "added" / "removed" / "changed: what,what".
fn changes(d: &serde_json::Value) -> BTreeMap<String, String> {
    d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let kind = c["change"].as_str().unwrap().to_string();
            let what: Vec<&str> = c["what"]
                .as_array()
                .map(|w| w.iter().map(|x| x.as_str().unwrap()).collect())
                .unwrap_or_default();
            let v = if what.is_empty() {
                kind
            } else {
                format!("{kind}: {}", what.join(","))
            };
            (c["path"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

/// What `second_release` (and the pseudo definitions) changed.
fn expected(xattrs: bool) -> BTreeMap<String, String> {
    let mut t: BTreeMap<String, String> = [
        ("/small/010.txt", "changed: content"),
        ("/small/050.txt", "changed: content"),
        ("/big.dat", "changed: content"),
        ("/conf/app.conf", "changed: mode"),
        ("/bin/tool", "changed: owner,group"),
        ("/link", "changed: target"),
        ("/dev", "changed: device"),
        ("/olddir", "removed"),
        ("/olddir/a", "removed"),
        ("/olddir/b", "removed"),
        ("/gone.txt", "removed"),
        ("/new.txt", "added"),
        ("/newdir", "added"),
        ("/newdir/x", "added"),
        ("/newdir/y", "added"),
        ("/file-then-dir", "changed: type"),
        ("/file-then-dir/inner", "added"),
        ("/dir-then-file", "changed: type"),
        ("/dir-then-file/x", "removed"),
    ]
    .into_iter()
    .map(|(p, c)| (p.to_string(), c.to_string()))
    .collect();
    if xattrs {
        t.insert("/xattr.txt".into(), "changed: xattrs".into());
    }
    t
}

const DEV_A: &str = "dev c 644 0 0 1 3";
const DEV_B: &str = "dev c 644 0 0 1 5";
const TOOL_B: &str = "bin/tool m 755 1234 4321";

/// Releases 1 and 2 of the tree, packed (release 2 with `extra`).
fn releases(t: &TempDir, extra_b: &[&str]) -> (std::path::PathBuf, std::path::PathBuf, bool) {
    let (ta, tb) = (t.path().join("tree-1"), t.path().join("tree-2"));
    let xattrs = tree(&ta) && tree(&tb);
    if !xattrs {
        loud_skip("sqfs diff: this file system refuses user xattrs; the xattrs row is left out");
    }
    second_release(&tb, xattrs);
    let (a, b) = (t.path().join("1.sqfs"), t.path().join("2.sqfs"));
    mksquashfs(&ta, &a, &[DEV_A], &[]);
    mksquashfs(&tb, &b, &[DEV_B, TOOL_B], extra_b);
    (a, b, xattrs)
}

#[test]
fn diff_names_exactly_the_entries_that_changed_and_how() {
    let t = TempDir::new("diff-kinds");
    let (a, b, xattrs) = releases(&t, &[]);
    let d = diff_json(&a, &b, &[]);
    assert_eq!(changes(&d), expected(xattrs));
    assert_eq!(d["added"], 5);
    assert_eq!(d["removed"], 5);
    assert_eq!(d["changed"], if xattrs { 10 } else { 9 });
    // Both sides of a change, as each image has them.
    let change = |path: &str| {
        d["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == path)
            .unwrap()
            .clone()
    };
    let tool = change("/bin/tool");
    assert_eq!(
        (&tool["b"]["uid"], &tool["b"]["gid"]),
        (&1234.into(), &4321.into())
    );
    assert_eq!(tool["a"]["mode"], "0755");
    let link = change("/link");
    assert_eq!(
        (&link["a"]["target"], &link["b"]["target"]),
        (&"small/001.txt".into(), &"small/002.txt".into())
    );
    if xattrs {
        let x = change("/xattr.txt");
        assert_eq!(x["xattrs"]["added"][0], "user.new");
        assert_eq!(x["xattrs"]["changed"][0], "user.mime");
    }
    // The other way round: added and removed swap.
    let back = changes(&diff_json(&b, &a, &[]));
    for (path, change) in expected(xattrs) {
        let want = match change.as_str() {
            "added" => "removed".to_string(),
            "removed" => "added".to_string(),
            other => other.to_string(),
        };
        assert_eq!(back.get(&path), Some(&want), "{path}");
    }
    assert_eq!(back.len(), expected(xattrs).len());

    diff_text_says_the_same(&a, &b, xattrs);
}

/// As text: a line per change, then the totals.
fn diff_text_says_the_same(a: &Path, b: &Path, xattrs: bool) {
    let o = ok(sqfs().arg("diff").arg(a).arg(b));
    assert!(o.0.stderr.is_empty());
    let text = String::from_utf8(o.0.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), expected(xattrs).len() + 1, "{text}");
    for (line, (path, change)) in lines.iter().zip(expected(xattrs)) {
        let word = change.split(':').next().unwrap();
        assert!(
            line.starts_with(word) && line.contains(path.as_str()),
            "{line} for {path} {change}"
        );
    }
    for needle in [
        "changed  /conf/app.conf: mode 0644 -> 0600",
        "changed  /small/050.txt: content (",
        "changed  /small/010.txt: content (",
        "same size)",
        "-> uid 1234; group ",
        "-> group 4321",
        "changed  /link: link target small/001.txt -> small/002.txt",
        "changed  /dev: device 1:3 -> 1:5",
        "changed  /file-then-dir: type file, ",
        "-> directory",
        "added    /newdir/x  (file, 2 B)",
        "removed  /olddir  (directory)",
    ] {
        assert!(text.contains(needle), "no {needle:?} in\n{text}");
    }
    assert!(
        lines.last().unwrap().contains(&format!(
            "1.sqfs -> {}: 5 added, 5 removed, {} changed (",
            b.display(),
            if xattrs { 10 } else { 9 }
        )),
        "{text}"
    );
}

#[test]
fn compressor_and_block_size_do_not_count_and_alike_images_decompress_nothing() {
    let t = TempDir::new("diff-comp");
    // Release 2 with lz4 in 16 KiB blocks: every block differs as stored,
    // so every comparison decompresses, and finds the same changes.
    let (a, b, xattrs) = releases(&t, &["-comp", "lz4", "-b", "16K"]);
    assert_eq!(changes(&diff_json(&a, &b, &[])), expected(xattrs));
    // Release 1 packed again with sqfs (lz4): the same tree.
    let c = t.path().join("1-lz4.sqfs");
    ok(sqfs()
        .args(["pack", "-q", "--comp", "lz4"])
        .arg(t.path().join("tree-1"))
        .arg(&c));
    let d = diff_json(&a, &c, &[]);
    // Only the device (pseudo) differs: mksquashfs added it to release 1.
    assert_eq!(changes(&d).into_keys().collect::<Vec<_>>(), ["/dev"]);
    // Two packs of one tree: compared as stored, nothing decompressed.
    let c2 = t.path().join("1-lz4-again.sqfs");
    ok(sqfs()
        .args(["pack", "-q", "--comp", "lz4", "--block-size", "16K"])
        .arg(t.path().join("tree-1"))
        .arg(&c2));
    let d = diff_json(&c, &c2, &[]);
    assert!(d["changes"].as_array().unwrap().is_empty(), "{d}");
    let c3 = t.path().join("1-lz4-copy.sqfs");
    std::fs::copy(&c, &c3).unwrap();
    let d = diff_json(&c, &c3, &[]);
    assert!(d["changes"].as_array().unwrap().is_empty(), "{d}");
    assert_eq!(d["bytes_decompressed"], 0, "{d}");
    assert!(
        d["stored_bytes_compared"].as_u64().unwrap() > 600_000,
        "{d}"
    );
    let o = ok(sqfs().arg("diff").arg(&c).arg(&c3));
    let text = String::from_utf8(o.0.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "{} and {} hold the same tree (",
            c.display(),
            c3.display()
        )),
        "{text}"
    );
}

#[test]
fn times_are_compared_on_request_and_exit_code_says_whether_they_differ() {
    let (t, tree_dir, _) = temp_with("diff-times", "tree", tree);
    let (a, b) = (t.path().join("a.sqfs"), t.path().join("b.sqfs"));
    ok(sqfs().args(["pack", "-q"]).arg(&tree_dir).arg(&a));
    // A file's time changes, nothing else (its directory keeps its own).
    set_mtime(&tree_dir.join("small/100.txt"), 1_500_000_000);
    ok(sqfs().args(["pack", "-q"]).arg(&tree_dir).arg(&b));
    assert!(changes(&diff_json(&a, &b, &[])).is_empty());
    assert_eq!(
        changes(&diff_json(&a, &b, &["--times"])),
        BTreeMap::from([("/small/100.txt".to_string(), "changed: mtime".to_string())])
    );
    let r = run(sqfs().args(["diff", "--exit-code"]).arg(&a).arg(&b));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let r = run(sqfs()
        .args(["diff", "--exit-code", "--times"])
        .arg(&a)
        .arg(&b));
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(r.stderr().is_empty(), "{r:?}");
    assert!(
        r.stdout().contains("changed  /small/100.txt: mtime "),
        "{r:?}"
    );

    // A damaged image (its inode table overwritten; read in userspace
    // only): one line naming the image and how to find the bad block.
    let bytes = std::fs::read(&b).unwrap();
    let it = u64::from_le_bytes(bytes[64..72].try_into().unwrap()) as usize;
    let dt = u64::from_le_bytes(bytes[72..80].try_into().unwrap()) as usize;
    let mut bad = bytes.clone();
    bad[it..dt].fill(0xff);
    let badp = t.path().join("bad.sqfs");
    std::fs::write(&badp, &bad).unwrap();
    for (flags, status) in [(&[][..], 1), (&["--exit-code"][..], 2)] {
        let r = run(sqfs().arg("diff").args(flags).arg(&a).arg(&badp));
        let err = r.stderr();
        assert_eq!(r.code(), Some(status), "{err}");
        assert!(
            err.starts_with(&format!("sqfs: {}", badp.display())) && err.lines().count() == 1,
            "{err}"
        );
    }
    let r = run(sqfs()
        .arg("diff")
        .arg(&a)
        .arg(t.path().join("missing.sqfs")));
    assert_eq!(r.code(), Some(1));
    assert!(
        r.stderr()
            .contains("missing.sqfs: No such file or directory"),
        "{r:?}"
    );
}
