//! `sqfs pack`: deterministic output, options, refusals.

use sqfsmnt_test_support::cmd::{ok, run_for};
use sqfsmnt_test_support::tree::{
    image_files, make_tree, names_in, os, set_mtime, sqfs_command, temp_with, tree_files, tree_in,
    TempDir,
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
    serde_json::from_slice(&o.0.stdout).unwrap()
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
    assert_eq!(j["mkfs_time"], 1_600_000_100);
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
    assert_eq!(j["mkfs_time"], 315_532_800);
    assert_eq!(j["ids"], serde_json::json!([0]));
    assert_eq!(j["xattrs"]["left_out"], true);
    // SOURCE_DATE_EPOCH sets the time.
    ok(sqfs()
        .env("SOURCE_DATE_EPOCH", "1234567890")
        .args(["pack", "--reproducible"])
        .arg(&a)
        .arg(img("sde.sqfs")));
    assert_eq!(inspect_json(&img("sde.sqfs"))["mkfs_time"], 1_234_567_890);
    // Without --reproducible, mksquashfs's own SOURCE_DATE_EPOCH handling.
    ok(sqfs()
        .env("SOURCE_DATE_EPOCH", "1650000000")
        .arg("pack")
        .arg(&a)
        .arg(img("sde2.sqfs")));
    assert_eq!(inspect_json(&img("sde2.sqfs"))["mkfs_time"], 1_650_000_000);
}

#[test]
fn image_holds_the_tree() {
    let (t, a, info) = temp_with("pack-contents", "a", |p| make_tree(p, true));
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
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    assert_eq!(j["compressor"], "gzip");
    assert_eq!(j["level"], 6);
    assert_eq!(j["block_size"], 65536);
    // File data counts every file once (the hard link's data once), as
    // inspect's file_bytes does; the fields pack and inspect share agree.
    assert_eq!(j["file_bytes"].as_u64().unwrap(), info.bytes);
    let i = inspect_json(&image);
    for (pk, ik) in [
        ("image", &i["image"]),
        ("file_size", &i["file_size"]),
        ("bytes_used", &i["bytes_used"]),
        ("file_bytes", &i["files"]["file_bytes"]),
        ("ratio", &i["ratio"]),
        ("compressor", &i["compressor"]),
        ("block_size", &i["block_size"]),
        ("mkfs_time", &i["mkfs_time"]),
        ("mkfs_time_utc", &i["mkfs_time_utc"]),
    ] {
        assert_eq!(
            &j[pk], ik,
            "pack --json and inspect --json disagree on {pk}"
        );
    }
    assert_eq!(j["level"], i["compressor_options"]["level"]);
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
    let (t, a) = tree_in("pack-refuses", "a");
    let image = t.path().join("x.sqfs");
    pack(&a, &image, &["--comp", "lz4"]);
    let fail = |args: &[&std::ffi::OsStr], want: &str| {
        let o = run_for(sqfs().args(args), std::time::Duration::from_secs(60));
        let err = o.stderr();
        // Usage errors exit 1, as squashfs-mount's do; so do failures.
        assert_eq!(o.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("os error"), "{args:?}: {err}");
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
    // Options refused, before `TREE y.sqfs`: (options, what the
    // message says; "usage:" marks a usage error).
    for (options, want) in [
        (&["--level", "30"][..], "zstd levels are 1..22"),
        (
            &["--comp", "xz", "--level", "3"],
            "xz has no compression levels",
        ),
        (
            &["--comp", "lzma"],
            "usage:lzma is refused: no Linux kernel can mount lzma images",
        ),
        (&["--comp", "brotli"], "usage:unknown compressor 'brotli'"),
        (&["--block-size", "3M"], "usage:power of two"),
    ] {
        let mut args = vec![os("pack").to_owned()];
        args.extend(options.iter().map(|o| os(o).to_owned()));
        args.extend([p(&a), p(&t.path().join("y.sqfs"))]);
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        fail(&args, want);
    }
    // No partial files are left behind.
    let leftovers = names_in(t.path(), |n| n.contains("partial"));
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
        let text = o.stdout();
        assert!(text.contains("Usage:"), "{sub:?}: {text}");
    }
    let o = ok(sqfs().args(["pack", "--help"]));
    let text = o.stdout();
    for needle in [
        "--reproducible",
        "--split",
        "zstd",
        "128K",
        "SOURCE_DATE_EPOCH",
        "-no-exports",
        "--exclude",
        "--exclude-from",
        "--all-root",
    ] {
        assert!(text.contains(needle), "pack --help lacks {needle}");
    }
}

fn run(args: &[&std::ffi::OsStr]) -> sqfsmnt_test_support::cmd::Run {
    run_for(sqfs().args(args), std::time::Duration::from_secs(60))
}

#[test]
fn version_and_usage_errors_follow_squashfs_mount() {
    // The bare version, as `squashfs-mount --version` prints it.
    let want = format!("{}\n", env!("CARGO_PKG_VERSION"));
    for args in [
        &["--version"][..],
        &["-V"],
        &["pack", "--version"],
        &["inspect", "-V"],
        &["-version"],
    ] {
        let o = ok(sqfs().args(args));
        assert_eq!(o.stdout(), want, "{args:?}");
        assert!(o.0.stderr.is_empty(), "{args:?}");
    }
    // Usage errors: status 1, no clap "use '-- -x'" tip.
    for (args, want) in [
        (&[][..], "no command given"),
        (&["pack"], "required"),
        (&["pack", "--bogus", "a", "b"], "unknown option '--bogus'"),
        (&["inspect", "-s", "x"], "unknown option '-s'"),
        (&["frobnicate"], "frobnicate"),
    ] {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| os(a)).collect();
        let o = run(&args);
        let err = o.stderr();
        assert_eq!(o.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(
            !err.contains("-- -") && !err.contains("tip:"),
            "{args:?}: {err}"
        );
        assert!(o.0.stdout.is_empty());
    }
    // No "(os error N)" in messages.
    let o = run(&[os("inspect"), os("/nonexistent/x.sqfs")]);
    let err = o.stderr();
    assert_eq!(
        err.trim_end(),
        "sqfs: /nonexistent/x.sqfs: cannot open it: No such file or directory"
    );
}

#[test]
fn mksquashfs_spellings_are_accepted_or_answered() {
    let (t, a) = tree_in("pack-mksquashfs", "a");
    let img = |n: &str| t.path().join(n);
    let p = |s: &Path| s.as_os_str().to_owned();
    // What a mksquashfs user types, in mksquashfs's order.
    let o = run(&[
        os("pack"),
        &p(&a),
        &p(&img("m.sqfs")),
        os("-comp"),
        os("xz"),
        os("-b"),
        os("1M"),
        os("-noappend"),
        os("-all-root"),
        os("-no-xattrs"),
        os("-quiet"),
        os("-e"),
        os("top.txt"),
        os("dir0/sub1"),
    ]);
    o.ok();
    assert!(
        o.0.stdout.is_empty() && o.0.stderr.is_empty(),
        "-quiet: nothing printed"
    );
    let j = inspect_json(&img("m.sqfs"));
    assert_eq!(j["compressor"], "xz");
    assert_eq!(j["block_size"], 1 << 20);
    assert_eq!(j["ids"], serde_json::json!([0]), "-all-root");
    assert_eq!(j["xattrs"]["left_out"], true);
    let files = image_files(&img("m.sqfs"));
    let want: Vec<String> = tree_files(&a)
        .into_iter()
        .filter(|f| f != "top.txt" && !f.starts_with("dir0/sub1/"))
        .collect();
    let mut got = files.clone();
    got.sort();
    assert_eq!(got, want, "-e paths are left out, and nothing else");
    // -wildcards with "... " (any depth) and -ef FILE.
    let ef = t.path().join("excludes");
    std::fs::write(&ef, "# mksquashfs exclude file\ndir1\n").unwrap();
    ok(sqfs()
        .arg("pack")
        .arg(&a)
        .arg(img("w.sqfs"))
        .args(["-comp", "lz4", "-ef"])
        .arg(&ef)
        .args(["-wildcards", "-e", "... *.dat"]));
    let mut got = image_files(&img("w.sqfs"));
    got.sort();
    let want: Vec<String> = tree_files(&a)
        .into_iter()
        .filter(|f| !f.ends_with(".dat") && !f.starts_with("dir1/"))
        .collect();
    assert_eq!(got, want);
    mksquashfs_options_are_answered(&a, &img("x.sqfs"));
    assert!(!img("x.sqfs").exists());
}

#[test]
fn exclude_patterns() {
    let (t, a) = tree_in("pack-exclude", "a");
    let img = |n: &str| t.path().join(n);
    let from = t.path().join("patterns");
    std::fs::write(&from, "# comment\n\n/dir3/\nlink-*\n").unwrap();
    let o = ok(sqfs()
        .args([
            "pack",
            "--json",
            "--exclude",
            "file5.dat",
            "--exclude",
            "/dir2/sub0/*.dat",
            "--exclude-from",
        ])
        .arg(&from)
        .arg(&a)
        .arg(img("e.sqfs")));
    assert!(o.0.stderr.is_empty(), "quiet success: {}", o.stderr());
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    let excluded = |f: &str| {
        f.ends_with("/file5.dat")
            || (f.starts_with("dir2/sub0/") && f.ends_with(".dat"))
            || f.starts_with("dir3/")
            || f.starts_with("link-")
    };
    let want: Vec<String> = tree_files(&a)
        .into_iter()
        .filter(|f| !excluded(f))
        .collect();
    let mut got = image_files(&img("e.sqfs"));
    got.sort();
    assert_eq!(got, want);
    // file5 x4 (dir0..dir3, but dir3 whole), dir2/sub0's 3 .dat, dir3, link-to-top.
    assert_eq!(j["excluded"], 3 + 3 + 1 + 1, "{j}");
    // What is packed is what is counted.
    let i = inspect_json(&img("e.sqfs"));
    assert_eq!(j["file_bytes"], i["files"]["file_bytes"]);
    assert_eq!(
        j["entries"].as_u64().unwrap() + 1,
        i["inodes"].as_u64().unwrap() + i["files"]["extra_links"].as_u64().unwrap()
    );
    // A pattern that matches nothing is likely a typo: a warning.
    let o = ok(sqfs()
        .args(["pack", "--exclude", "*.nothing"])
        .arg(&a)
        .arg(img("n.sqfs")));
    let err = o.stderr();
    assert!(
        err.contains("warning: --exclude '*.nothing' matched nothing"),
        "{err}"
    );
    // Excluding one name of a hard-linked file loses the other: a warning.
    let o = ok(sqfs()
        .args(["pack", "--exclude", "/dir1/hardlink.dat"])
        .arg(&a)
        .arg(img("h.sqfs")));
    let err = o.stderr();
    assert!(
        err.contains("hard link") && err.contains("dir1/sub0/file2.dat"),
        "{err}"
    );
    assert!(!image_files(&img("h.sqfs")).contains(&"dir1/sub0/file2.dat".to_string()));
    // Bad patterns are usage errors.
    let o = run(&[
        os("pack"),
        os("--exclude"),
        os("a[b"),
        a.as_os_str(),
        img("b.sqfs").as_os_str(),
    ]);
    assert_eq!(o.code(), Some(1));
    assert!(o.stderr().contains("'a[b'"));
}

/// Runs sqfs as an unprivileged user: as `nobody` when the tests run as
/// root (who can read anything), else as the caller.
fn unprivileged(cmd: &mut std::process::Command) -> std::process::Command {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root {
        return std::mem::replace(cmd, std::process::Command::new("true"));
    }
    let mut c = std::process::Command::new("setpriv");
    c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_remove("SOURCE_DATE_EPOCH");
    c
}

#[test]
fn unreadable_files_are_named_with_what_to_do() {
    let (t, a) = tree_in("pack-unreadable", "a");
    let secret = a.join("dir0/sub1/file1.dat");
    let closed = a.join("dir3");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if is_root {
        // nobody must be able to reach the tree and write the image; and
        // dir3 must not be nobody's.
        for d in [t.path(), a.as_path()] {
            std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                .unwrap();
        }
    }
    let out = t.path().join("x.sqfs");
    let o = run_for(
        &mut unprivileged(sqfs().arg("pack").arg(&a).arg(&out)),
        std::time::Duration::from_secs(60),
    );
    let err = o.stderr();
    assert_eq!(o.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("cannot read 2 entries"), "{err}");
    assert!(
        err.contains("dir0/sub1/file1.dat (Permission denied)"),
        "{err}"
    );
    assert!(err.contains("dir3 (Permission denied)"), "{err}");
    assert!(
        err.contains("chmod") && err.contains("--exclude '/dir0/sub1/file1.dat'"),
        "{err}"
    );
    assert!(!out.exists());
    // Left out as the message says, the pack succeeds.
    let o = run_for(
        &mut unprivileged(
            sqfs()
                .args([
                    "pack",
                    "--exclude",
                    "/dir0/sub1/file1.dat",
                    "--exclude",
                    "/dir3",
                ])
                .arg(&a)
                .arg(&out),
        ),
        std::time::Duration::from_secs(60),
    );
    o.ok();
    assert!(o.0.stderr.is_empty(), "{}", o.stderr());
    // mksquashfs's own message, should it still fail, is turned into advice.
    let advice =
        sqfs::pack::unreadable_advice(&a, &format!("Failed to read file {}\n", secret.display()))
            .unwrap();
    assert!(
        advice.contains("--exclude '/dir0/sub1/file1.dat'") && advice.contains("chmod"),
        "{advice}"
    );
    assert!(sqfs::pack::unreadable_advice(&a, "FATAL ERROR: out of space").is_none());
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn tiny_trees_get_a_sensible_summary() {
    let t = TempDir::new("pack-tiny");
    let a = t.path().join("a");
    std::fs::create_dir(&a).unwrap();
    std::fs::write(a.join("hello"), "hi\n").unwrap();
    let o = ok(sqfs().arg("pack").arg(&a).arg(t.path().join("t.sqfs")));
    let line = o.stdout();
    assert!(
        line.contains("(3 B of file data; metadata outweighs it), 1 entry,"),
        "{line}"
    );
    assert!(!line.contains('%'), "{line}");
    // A compressible tree gets a percentage below 100.
    let b = t.path().join("b");
    make_tree(&b, true);
    let o = ok(sqfs().arg("pack").arg(&b).arg(t.path().join("b.sqfs")));
    let line = o.stdout();
    let pct: f64 = line
        .split('(')
        .nth(1)
        .unwrap()
        .split('%')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(pct > 1.0 && pct < 100.0, "{line}");
}

/// Options sqfs does not take are answered, not met with clap's tip.
fn mksquashfs_options_are_answered(a: &Path, image: &Path) {
    for (opt, want) in [
        (&["-nopad"][..], "loop device"),
        (&["-mkfs-time", "0"], "SOURCE_DATE_EPOCH"),
        (&["-force-uid", "0"], "--all-root"),
        (&["-regex", "-e", "x"], "glob"),
        (&["-no-fragments"], "does not offer"),
        (&["-comp"], "needs a compressor"),
        (&["-Xbogus"], "mksquashfs option"),
    ] {
        let mut args = vec![os("pack"), a.as_os_str(), image.as_os_str()];
        args.extend(opt.iter().map(|o| os(o)));
        let o = run(&args);
        let err = o.stderr();
        assert_eq!(o.code(), Some(1), "{opt:?}: {err}");
        assert!(
            err.starts_with("sqfs: ") && err.contains(want),
            "{opt:?}: {err}"
        );
        assert!(!err.contains("-- -"), "{opt:?}: {err}");
    }
}
