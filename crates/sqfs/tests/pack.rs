//! `sqfs pack`: deterministic output, options, refusals.

use sqfsmnt_test_support::cmd::{ok, run_with_timeout};
use sqfsmnt_test_support::tree::{
    image_files, make_tree, os, set_mtime, sqfs_command, tree_files, TempDir,
};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}
use std::path::Path;

fn pack(dir: &Path, image: &Path, extra: &[&str]) {
    ok(sqfs().arg("pack").args(extra).arg(dir).arg(image));
}

fn inspect_json(image: &Path) -> serde_json::Value {
    let o = ok(sqfs().args(["inspect", "--json"]).arg(image));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn two_packs_of_the_same_tree_are_byte_identical() {
    let t = TempDir::new("pack-identical");
    let a = t.path().join("a");
    let b = t.path().join("b");
    make_tree(&a, true);
    make_tree(&b, false); // same tree, entries created in the opposite order
    let img = |n: &str| t.path().join(n);
    pack(&a, &img("1.sqfs"), &[]);
    pack(&a, &img("2.sqfs"), &[]);
    pack(&a, &img("p1.sqfs"), &["--processors", "1"]);
    pack(&a, &img("p4.sqfs"), &["--processors", "4"]);
    pack(&b, &img("b.sqfs"), &[]);
    let first = std::fs::read(img("1.sqfs")).unwrap();
    for other in ["2.sqfs", "p1.sqfs", "p4.sqfs", "b.sqfs"] {
        assert!(
            first == std::fs::read(img(other)).unwrap(),
            "1.sqfs and {other} differ"
        );
    }
    // The creation time is the newest modification time in the tree.
    let j = inspect_json(&img("1.sqfs"));
    assert_eq!(j["created_unix"], 1_600_000_100);
    // Same for other compressors.
    for comp in ["gzip", "lz4", "lzo", "xz"] {
        pack(&a, &img(&format!("{comp}-1.sqfs")), &["--comp", comp]);
        pack(
            &b,
            &img(&format!("{comp}-2.sqfs")),
            &["--comp", comp, "--processors", "1"],
        );
        assert!(
            std::fs::read(img(&format!("{comp}-1.sqfs"))).unwrap()
                == std::fs::read(img(&format!("{comp}-2.sqfs"))).unwrap(),
            "{comp} images differ"
        );
    }
}

#[test]
fn reproducible_ignores_timestamps_and_owners() {
    let t = TempDir::new("pack-reproducible");
    let a = t.path().join("a");
    let b = t.path().join("b");
    make_tree(&a, true);
    make_tree(&b, true);
    // Touch one file and the root of b: the trees now differ only in time.
    set_mtime(&b.join("top.txt"), 1_700_000_000);
    set_mtime(&b, 1_700_000_000);
    let img = |n: &str| t.path().join(n);
    pack(&a, &img("a.sqfs"), &[]);
    pack(&b, &img("b.sqfs"), &[]);
    assert!(
        std::fs::read(img("a.sqfs")).unwrap() != std::fs::read(img("b.sqfs")).unwrap(),
        "without --reproducible, timestamps are part of the image"
    );
    pack(&a, &img("ra.sqfs"), &["--reproducible"]);
    pack(&b, &img("rb.sqfs"), &["--reproducible"]);
    assert!(std::fs::read(img("ra.sqfs")).unwrap() == std::fs::read(img("rb.sqfs")).unwrap());
    let j = inspect_json(&img("ra.sqfs"));
    assert_eq!(j["created_unix"], 315_532_800);
    assert_eq!(j["ids"], serde_json::json!([0]));
    assert_eq!(j["flags"]["xattrs"], false);
    // SOURCE_DATE_EPOCH sets the time.
    ok(sqfs()
        .env("SOURCE_DATE_EPOCH", "1234567890")
        .args(["pack", "--reproducible"])
        .arg(&a)
        .arg(img("sde.sqfs")));
    assert_eq!(
        inspect_json(&img("sde.sqfs"))["created_unix"],
        1_234_567_890
    );
    // Without --reproducible, mksquashfs's own SOURCE_DATE_EPOCH handling.
    ok(sqfs()
        .env("SOURCE_DATE_EPOCH", "1650000000")
        .arg("pack")
        .arg(&a)
        .arg(img("sde2.sqfs")));
    assert_eq!(
        inspect_json(&img("sde2.sqfs"))["created_unix"],
        1_650_000_000
    );
}

#[test]
fn image_holds_the_tree() {
    let t = TempDir::new("pack-contents");
    let a = t.path().join("a");
    let info = make_tree(&a, true);
    let image = t.path().join("x.sqfs");
    let o = ok(sqfs()
        .args([
            "pack",
            "--json",
            "--comp",
            "gzip",
            "--level",
            "6",
            "--block-size",
            "64K",
        ])
        .arg(&a)
        .arg(&image));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["compressor"], "gzip");
    assert_eq!(j["level"], 6);
    assert_eq!(j["block_size"], 65536);
    // Input bytes count every name, so the hard link's data twice.
    let linked = std::fs::metadata(a.join("dir1/hardlink.dat"))
        .unwrap()
        .len();
    assert_eq!(j["input_bytes"].as_u64().unwrap(), info.bytes + linked);
    let mut files = image_files(&image);
    files.sort();
    assert_eq!(files, tree_files(&a));
    let i = inspect_json(&image);
    assert_eq!(i["compressor_options"]["level"], 6);
    assert_eq!(i["block_size"], 65536);
    assert_eq!(
        i["flags"]["exportable"], false,
        "sqfs pack uses -no-exports"
    );
    assert_eq!(i["files"]["regular_files"].as_u64().unwrap(), info.regular);
    assert_eq!(
        i["files"]["extra_links"].as_u64().unwrap(),
        info.extra_links
    );
}

#[test]
fn pack_refuses_clearly() {
    let t = TempDir::new("pack-refuses");
    let a = t.path().join("a");
    make_tree(&a, true);
    let image = t.path().join("x.sqfs");
    pack(&a, &image, &["--comp", "lz4"]);
    let fail = |args: &[&std::ffi::OsStr], want: &str| {
        let o = run_with_timeout(sqfs().args(args), std::time::Duration::from_secs(60));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(if want.starts_with("usage:") { 2 } else { 1 }),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(want.trim_start_matches("usage:")),
            "{args:?}: {err}"
        );
    };
    let p = |s: &Path| s.as_os_str().to_owned();
    // Existing image: untouched without --force.
    let before = std::fs::read(&image).unwrap();
    fail(&[os("pack"), &p(&a), &p(&image)], "exists; pass --force");
    assert_eq!(before, std::fs::read(&image).unwrap());
    ok(sqfs().args(["pack", "--force"]).arg(&a).arg(&image));
    assert_ne!(
        before,
        std::fs::read(&image).unwrap(),
        "--force replaced the lz4 image by a zstd one"
    );
    // Output inside the tree.
    fail(
        &[os("pack"), &p(&a), &p(&a.join("dir0/x.sqfs"))],
        "inside the tree",
    );
    // Missing source.
    fail(
        &[
            os("pack"),
            &p(&t.path().join("nope")),
            &p(&t.path().join("y.sqfs")),
        ],
        "nope",
    );
    // Levels that do not exist.
    fail(
        &[
            os("pack"),
            os("--level"),
            os("30"),
            &p(&a),
            &p(&t.path().join("y.sqfs")),
        ],
        "zstd levels are 1..22",
    );
    fail(
        &[
            os("pack"),
            os("--comp"),
            os("xz"),
            os("--level"),
            os("3"),
            &p(&a),
            &p(&t.path().join("y.sqfs")),
        ],
        "xz has no compression levels",
    );
    fail(
        &[
            os("pack"),
            os("--comp"),
            os("lzma"),
            &p(&a),
            &p(&t.path().join("y.sqfs")),
        ],
        "usage:unknown compressor",
    );
    fail(
        &[
            os("pack"),
            os("--block-size"),
            os("3M"),
            &p(&a),
            &p(&t.path().join("y.sqfs")),
        ],
        "usage:power of two",
    );
    // No partial files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        &["--help"][..],
        &["pack", "--help"],
        &["inspect", "--help"],
        &["bench", "--help"],
        &["help", "pack"],
    ] {
        let o = ok(sqfs().args(sub));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Usage:"), "{sub:?}: {text}");
    }
    let o = ok(sqfs().args(["pack", "--help"]));
    let text = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "--reproducible",
        "--split",
        "zstd",
        "128K",
        "SOURCE_DATE_EPOCH",
        "-no-exports",
    ] {
        assert!(text.contains(needle), "pack --help lacks {needle}");
    }
}
