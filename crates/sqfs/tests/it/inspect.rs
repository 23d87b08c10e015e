//! `sqfs inspect`: agrees with `unsquashfs -s` for images of every
//! compressor, and fails clearly (never crashes or hangs) on bad input.

use sqfsmnt_test_support::cmd::{ok, run_for};
use sqfsmnt_test_support::tree::{make_tree, sqfs_command, temp_with, tree_in, Rng, TempDir};
use sqfsmnt_test_support::{have, loud_skip};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn mksquashfs(dir: &Path, image: &Path, args: &[&str]) {
    ok(Command::new("mksquashfs")
        .arg(dir)
        .arg(image)
        .args(["-noappend", "-quiet", "-no-progress"])
        .args(args));
}

fn inspect_json(image: &Path) -> serde_json::Value {
    let o = ok(sqfs().args(["inspect", "--json"]).arg(image));
    serde_json::from_slice(&o.0.stdout).unwrap()
}

/// `unsquashfs -s`, as key -> value lines ("Compression" -> "zstd", ...),
/// plus the indented compressor option lines under "options".
fn unsquashfs_s(image: &Path) -> BTreeMap<String, String> {
    let o = ok(Command::new("unsquashfs")
        .arg("-s")
        .arg(image)
        .env("TZ", "UTC"));
    let text = o.stdout();
    let mut m = BTreeMap::new();
    let mut options = Vec::new();
    for line in text.lines() {
        if let Some(opt) = line.strip_prefix('\t') {
            options.push(opt.trim().to_string());
            continue;
        }
        for key in [
            "Creation or last append time ",
            "Filesystem size ",
            "Compression ",
            "Block size ",
            "Number of fragments ",
            "Number of inodes ",
            "Number of ids ",
            "Number of xattr ids ",
        ] {
            if let Some(v) = line.strip_prefix(key) {
                m.insert(key.trim().to_string(), v.to_string());
            }
        }
        if line.starts_with("Filesystem is")
            || line.starts_with("Fragments are")
            || line.starts_with("Always-use")
            || line.starts_with("Duplicates are")
            || line.starts_with("Inodes are")
            || line.starts_with("Data is")
            || line.starts_with("Xattrs are")
        {
            m.insert(
                line.split(' ').next().unwrap().to_string(),
                line.to_string(),
            );
        }
    }
    m.insert("options".into(), options.join("; "));
    m
}

/// ctime(3) format in UTC, as unsquashfs prints with TZ=UTC.
fn ctime(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let iso = sqfs::units::utc(t); // YYYY-MM-DDThh:mm:ssZ
    let (y, mo, d) = (
        &iso[0..4],
        iso[5..7].parse::<usize>().unwrap(),
        iso[8..10].parse::<u32>().unwrap(),
    );
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][mo - 1];
    format!(
        "{wd} {month} {d:2} {:02}:{:02}:{:02} {y}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// `sqfs inspect` of `image` says what `unsquashfs -s` and `-lls` say.
fn compare(image: &Path, label: &str) {
    let j = inspect_json(image);
    let u = unsquashfs_s(image);
    compare_numbers(&j, &u, label);
    compare_flags(&j, &u, label);
    compare_text(&j, image, label);
    let opts = &u["options"];
    if j["compressor_options"]["stored"].as_bool().unwrap() {
        assert_eq!(*opts, stored_options(&j), "{label}: compressor options");
    } else {
        assert_eq!(
            opts, "",
            "{label}: unsquashfs shows options the image does not store"
        );
    }
    compare_counts(&j, image, label);
}

/// The superblock's numbers and time, against `unsquashfs -s`.
fn compare_numbers(j: &serde_json::Value, u: &BTreeMap<String, String>, label: &str) {
    let n = |k: &str| match u.get(k) {
        Some(v) => v.split_whitespace().next().unwrap().parse::<u64>().unwrap(),
        None if k == "Number of xattr ids" => 0, // not printed when -no-xattrs
        None => panic!("{label}: unsquashfs -s printed no '{k}': {u:?}"),
    };
    assert_eq!(
        j["compressor"].as_str().unwrap(),
        u["Compression"],
        "{label}: compressor"
    );
    // (the JSON's number, unsquashfs's line, what it is)
    for (ours, theirs, what) in [
        (j["bytes_used"].as_u64(), "Filesystem size", "size"),
        (j["block_size"].as_u64(), "Block size", "block size"),
        (j["fragments"].as_u64(), "Number of fragments", "fragments"),
        (j["inodes"].as_u64(), "Number of inodes", "inodes"),
        (
            j["ids"].as_array().map(|a| a.len() as u64),
            "Number of ids",
            "ids",
        ),
        (
            j["xattrs"]["sets"].as_u64(),
            "Number of xattr ids",
            "xattr ids",
        ),
    ] {
        assert_eq!(ours.unwrap(), n(theirs), "{label}: {what}");
    }
    assert_eq!(
        ctime(j["mkfs_time"].as_i64().unwrap()),
        u["Creation or last append time"],
        "{label}: time"
    );
}

/// The superblock's flags, against `unsquashfs -s`'s sentences.
fn compare_flags(j: &serde_json::Value, u: &BTreeMap<String, String>, label: &str) {
    let f = &j["flags"];
    let says = |key: &str, yes: &str| u.get(key).is_some_and(|l| l.contains(yes));
    let flag = |k: &str| f[k].as_bool().unwrap();
    // (what the JSON says, what unsquashfs says, what it is)
    for (ours, theirs, what) in [
        (
            flag("exportable"),
            says("Filesystem", "is exportable"),
            "exportable",
        ),
        (
            flag("fragments"),
            !says("Fragments", "not stored"),
            "fragments",
        ),
        (
            flag("compressed_fragments") || !flag("fragments"),
            !says("Fragments", "uncompressed"),
            "compressed fragments",
        ),
        (
            flag("always_use_fragments"),
            says("Always-use-fragments", "is specified"),
            "always-use-fragments",
        ),
        (
            flag("duplicates_removed"),
            says("Duplicates", "are removed"),
            "duplicates",
        ),
        (
            flag("compressed_inodes"),
            says("Inodes", "are compressed"),
            "inodes",
        ),
        (
            flag("compressed_data"),
            says("Data", "is compressed"),
            "data",
        ),
        (
            !j["xattrs"]["left_out"].as_bool().unwrap(),
            !says("Xattrs", "not stored"),
            "xattrs",
        ),
    ] {
        assert_eq!(ours, theirs, "{label}: {what}");
    }
}

/// The text says what the JSON says.
fn compare_text(j: &serde_json::Value, image: &Path, label: &str) {
    let o = ok(sqfs().arg("inspect").arg(image));
    let text = o.stdout();
    let line = text.lines().find(|l| l.starts_with("Xattrs:")).unwrap();
    let x = &j["xattrs"];
    let want = if x["left_out"] == true {
        "none (left out when it was built: -no-xattrs)".to_string()
    } else if x["sets"] == 0 {
        "none".to_string()
    } else {
        format!("{} distinct sets, on {} inodes", x["sets"], x["inodes"])
    };
    assert_eq!(line.trim_start_matches("Xattrs:").trim(), want, "{label}");
    assert_eq!(x["inodes"], j["files"]["with_xattrs"], "{label}");
    let time = text.lines().find(|l| l.starts_with("Image time:")).unwrap();
    assert!(
        time.contains(j["mkfs_time_utc"].as_str().unwrap()),
        "{label}: {time}"
    );
}

/// The compressor options the image stores, as `unsquashfs -s` words
/// them.
fn stored_options(j: &serde_json::Value) -> String {
    let o = &j["compressor_options"];
    let mut expect = match j["compressor"].as_str().unwrap() {
        "zstd" => format!("compression-level {}", o["level"]),
        "gzip" => format!(
            "compression-level {}; window-size {}",
            o["level"], o["window_size"]
        ),
        "xz" => {
            let mut s = format!("Dictionary size {}", o["dictionary_size"]);
            if let Some(f) = o["filters"].as_array() {
                let names: Vec<&str> = f.iter().map(|x| x.as_str().unwrap()).collect();
                s += &format!("; Filters selected: {}", names.join(", "));
            }
            s
        }
        "lz4" => {
            if o["high_compression"] == true {
                "High Compression option specified (-Xhc)".into()
            } else {
                String::new()
            }
        }
        "lzo" => match o["level"].as_u64() {
            Some(l) => format!(
                "algorithm {}; compression level {l}",
                o["algorithm"].as_str().unwrap()
            ),
            None => format!("algorithm {}", o["algorithm"].as_str().unwrap()),
        },
        other => panic!("{other}"),
    };
    if let Some(s) = o["strategies"].as_array() {
        let names: Vec<&str> = s.iter().map(|x| x.as_str().unwrap()).collect();
        expect += &format!("; Strategies selected: {}", names.join(", "));
    }
    expect
}

/// File counts against the listing (every name once).
fn compare_counts(j: &serde_json::Value, image: &Path, label: &str) {
    let l = ok(Command::new("unsquashfs").arg("-lls").arg(image));
    let listing = l.stdout();
    let mut kinds: BTreeMap<char, u64> = BTreeMap::new();
    for line in listing
        .lines()
        .filter(|l| l.len() > 10 && l.contains(" squashfs-root"))
    {
        *kinds.entry(line.chars().next().unwrap()).or_default() += 1;
    }
    let c = &j["files"];
    let get = |k: &str| c[k].as_u64().unwrap();
    let k = |ch: char| kinds.get(&ch).copied().unwrap_or(0);
    assert_eq!(get("directories"), k('d'), "{label}: directories");
    assert_eq!(get("symlinks"), k('l'), "{label}: symlinks");
    assert_eq!(get("fifos"), k('p'), "{label}: fifos");
    assert_eq!(
        get("regular_files") + get("extra_links"),
        k('-'),
        "{label}: file names"
    );
    assert_eq!(
        get("regular_files")
            + get("directories")
            + get("symlinks")
            + get("fifos")
            + get("sockets")
            + get("block_devices")
            + get("char_devices"),
        j["inodes"].as_u64().unwrap(),
        "{label}: inodes by type"
    );
}

/// The images `inspect_matches_unsquashfs_for_every_compressor` builds:
/// (label, mksquashfs options).
const INSPECT_VARIANTS: &[(&str, &[&str])] = &[
    ("gzip", &["-comp", "gzip"]),
    (
        "gzip-options",
        &[
            "-comp",
            "gzip",
            "-Xcompression-level",
            "3",
            "-Xwindow-size",
            "10",
            "-Xstrategy",
            "default,filtered",
        ],
    ),
    ("lzo", &["-comp", "lzo"]),
    ("lzo1x_1", &["-comp", "lzo", "-Xalgorithm", "lzo1x_1"]),
    ("lzo1x_1_15", &["-comp", "lzo", "-Xalgorithm", "lzo1x_1_15"]),
    ("lzo-level", &["-comp", "lzo", "-Xcompression-level", "2"]),
    ("lz4", &["-comp", "lz4"]),
    ("lz4-hc", &["-comp", "lz4", "-Xhc"]),
    ("xz", &["-comp", "xz"]),
    (
        "xz-bcj",
        &["-comp", "xz", "-Xbcj", "x86,arm", "-Xdict-size", "50%"],
    ),
    ("zstd", &["-comp", "zstd"]),
    (
        "zstd-19-1M",
        &["-comp", "zstd", "-Xcompression-level", "19", "-b", "1M"],
    ),
    ("zstd-4K", &["-comp", "zstd", "-b", "4K"]),
    (
        "flags",
        &[
            "-comp",
            "gzip",
            "-no-fragments",
            "-no-duplicates",
            "-noI",
            "-noD",
            "-no-xattrs",
            "-no-exports",
        ],
    ),
    (
        "always-fragments",
        &[
            "-comp",
            "zstd",
            "-always-use-fragments",
            "-noF",
            "-noX",
            "-all-root",
        ],
    ),
];

/// The line `Mountable here: ...` of `sqfs inspect`'s text.
fn mountable_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("Mountable here:"))
        .unwrap()
}

#[test]
fn inspect_matches_unsquashfs_for_every_compressor() {
    let (t, dir, info) = temp_with("inspect-match", "tree", |p| make_tree(p, true));
    if have("setfattr") {
        for (f, v) in [
            ("top.txt", "a"),
            ("dir0/sub0/file0.dat", "b"),
            ("dir1", "c"),
        ] {
            ok(Command::new("setfattr")
                .args(["-n", "user.test", "-v", v])
                .arg(dir.join(f)));
        }
    } else {
        loud_skip("setfattr (Debian package attr) is missing, so images without xattrs only");
    }
    for (label, args) in INSPECT_VARIANTS {
        let image = t.path().join(format!("{label}.sqfs"));
        mksquashfs(&dir, &image, args);
        compare(&image, label);
        let j = inspect_json(&image);
        for (key, want) in [
            ("regular_files", info.regular),
            ("fifos", info.fifos),
            ("symlinks", info.symlinks),
            ("directories", info.dirs),
            ("extra_links", info.extra_links),
            ("file_bytes", info.bytes),
        ] {
            assert_eq!(j["files"][key].as_u64().unwrap(), want, "{label}: {key}");
        }
        assert_eq!(j["kernel"]["can_mount"], true, "{label}: {}", j["kernel"]);
    }
    // The human-readable form names the essentials.
    let o = ok(sqfs().arg("inspect").arg(t.path().join("xz-bcj.sqfs")));
    let text = o.stdout();
    for needle in [
        "Compressor:       xz",
        "filters x86,arm",
        "Block size:       128 KiB",
        "Fragments:        on",
        "Mountable here:   yes",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    // lzma: readable, and reported as not mountable by Linux.
    let image = t.path().join("lzma.sqfs");
    mksquashfs(&dir, &image, &["-comp", "lzma"]);
    let j = inspect_json(&image);
    assert_eq!(j["compressor"], "lzma");
    assert_eq!(j["files"]["regular_files"].as_u64().unwrap(), info.regular);
    assert_eq!(j["kernel"]["can_mount"], false);
    let o = ok(sqfs().arg("inspect").arg(&image));
    let text = o.stdout();
    assert!(
        text.contains("Mountable here:   NO, not mountable here: the image uses lzma"),
        "{text}"
    );
}

#[test]
fn inspect_refuses_what_the_kernel_path_refuses() {
    let (t, dir) = tree_in("inspect-verdict", "tree");
    // -nopad: squashfs-mount refuses the image (a loop device cannot hold
    // its last block), so inspect says it is not mountable here, with the
    // same verdict code (squashfs_format::kernel::image_verdict).
    let image = t.path().join("nopad.sqfs");
    mksquashfs(&dir, &image, &["-nopad"]);
    let size = std::fs::metadata(&image).unwrap().len();
    let j = inspect_json(&image);
    let refused =
        squashfs_format::superblock::loop_padding_needed(j["bytes_used"].as_u64().unwrap(), size);
    assert!(
        refused.is_some(),
        "this -nopad image happens to fit; change the tree"
    );
    assert_eq!(j["kernel"]["can_mount"], false, "{}", j["kernel"]);
    let o = ok(sqfs().arg("inspect").arg(&image));
    let text = o.stdout();
    assert!(
        text.contains("NO, not mountable here") && text.contains("truncate -s %4096"),
        "{text}"
    );
    // Padded as the message says, it is mountable (on a kernel with zstd).
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .unwrap();
    f.set_len(size.div_ceil(4096) * 4096).unwrap();
    let j = inspect_json(&image);
    assert_ne!(j["kernel"]["can_mount"], false, "{}", j["kernel"]);
    // Labelled time: a mksquashfs image is stamped when it was built, a
    // sqfs pack image with the newest file time.
    let o = ok(sqfs().arg("inspect").arg(&image));
    let text = o.stdout();
    assert!(text.contains("set when the image was built"), "{text}");
    assert_eq!(j["newest_file_time"], 1_600_000_100);
    let packed = t.path().join("packed.sqfs");
    ok(sqfs().arg("pack").arg(&dir).arg(&packed));
    let o = ok(sqfs().arg("inspect").arg(&packed));
    let text = o.stdout();
    assert!(
        text.contains("Image time:       2020-09-13T12:28:20Z (1600000100): the newest file time in the image"),
        "{text}"
    );
}

fn expect_error(path: &Path, want: &str) {
    let o = run_for(sqfs().arg("inspect").arg(path), Duration::from_secs(20));
    let err = o.stderr();
    assert_eq!(o.code(), Some(1), "{}: {err}", path.display());
    assert!(
        err.starts_with(&format!("sqfs: {}: ", path.display())),
        "{err}"
    );
    assert!(
        err.contains(want),
        "{}: expected '{want}' in: {err}",
        path.display()
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(o.0.stdout.is_empty());
}

#[test]
fn inspect_fails_clearly_on_bad_files() {
    let (t, dir) = tree_in("inspect-bad", "tree");
    let good = t.path().join("good.sqfs");
    mksquashfs(&dir, &good, &["-comp", "zstd"]);
    let bytes = std::fs::read(&good).unwrap();
    let p = |n: &str| t.path().join(n);

    std::fs::write(p("empty"), b"").unwrap();
    expect_error(&p("empty"), "empty (0 bytes)");
    for (name, len) in [("t2", 2usize), ("t50", 50), ("t95", 95)] {
        std::fs::write(p(name), &bytes[..len]).unwrap();
        expect_error(&p(name), "truncated or not an image");
    }
    for (name, len) in [
        ("t96", 96usize),
        ("thalf", bytes.len() / 2),
        ("tminus1", bytes.len() - 4097),
    ] {
        std::fs::write(p(name), &bytes[..len]).unwrap();
        expect_error(&p(name), "the image is truncated");
    }
    let mut rng = Rng(7);
    for i in 0..5 {
        let name = format!("random{i}");
        std::fs::write(p(&name), rng.bytes(100 + i * 20_000)).unwrap();
        expect_error(&p(&name), "not a SquashFS image");
    }
    // Random bytes behind a valid-looking magic number.
    let mut fake = b"hsqs".to_vec();
    fake.extend(rng.bytes(10_000));
    std::fs::write(p("fake"), &fake).unwrap();
    let o = run_for(
        sqfs().arg("inspect").arg(p("fake")),
        Duration::from_secs(20),
    );
    assert_eq!(o.code(), Some(1));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    std::fs::write(p("image.gz"), gz.finish().unwrap()).unwrap();
    expect_error(&p("image.gz"), "looks like a gzip file");
    expect_error(&dir, "is a directory");
    expect_error(&dir.join("dir2/fifo"), "is a FIFO"); // and does not hang
    expect_error(Path::new("/dev/null"), "a character device");
    expect_error(&p("missing"), "No such file");
    // Wrong version.
    let mut v3 = bytes.clone();
    v3[28] = 3;
    std::fs::write(p("v3"), &v3).unwrap();
    expect_error(&p("v3"), "version 3.0 is not supported");
}

/// Damages valid images of every compressor byte by byte (in the
/// superblock and all metadata) and checks that the parser returns an error
/// or a report, never panics, hangs or allocates wildly.
#[test]
fn inspect_survives_corrupted_metadata() {
    let (t, dir) = tree_in("inspect-corrupt", "tree");
    let mut rng = Rng(99);
    for comp in ["gzip", "lzo", "lz4", "xz", "zstd"] {
        let image = t.path().join(format!("{comp}.sqfs"));
        mksquashfs(&dir, &image, &["-comp", comp]);
        let bytes = std::fs::read(&image).unwrap();
        let (sb, _) = sqfs::inspect::examine(&bytes[..], "x", |_| {}).unwrap();
        let meta_start = sb.inode_table_start as usize;
        let end = sb.bytes_used as usize;
        let started = std::time::Instant::now();
        let mut errors = 0;
        for i in 0..1500 {
            let mut b = bytes.clone();
            let at = if i % 3 == 0 {
                (rng.next() % 96) as usize
            } else {
                meta_start + (rng.next() as usize % (end - meta_start))
            };
            match i % 4 {
                0 => b[at] ^= 1 << (rng.next() % 8),
                1 => b[at] = 0xff,
                2 => b[at] = 0,
                _ => b[at] = rng.next() as u8,
            }
            if sqfs::inspect::examine(&b[..], "x", |_| {}).is_err() {
                errors += 1;
            }
            // Truncations at random points.
            let cut = (rng.next() as usize) % end;
            assert!(sqfs::inspect::examine(&b[..cut], "x", |_| {}).is_err());
        }
        assert!(errors > 100, "{comp}: only {errors} corruptions detected");
        // (Not a measure of speed: only a reader that loops on a corrupt
        // image reaches the hang limit.)
        assert!(
            started.elapsed() < sqfsmnt_test_support::ends::HANG,
            "{comp}: hangs on corrupt images"
        );
    }
}

/// "Mountable here" follows the path squashfs-mount's policy takes for the
/// caller: an image it serves through FUSE is not mountable for a caller
/// who cannot use FUSE, whatever the kernel could do (a squashfs-mount
/// stand-in next to sqfs answers `--policy --json`).
#[test]
fn mountable_here_follows_the_policy_path() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempDir::new("inspect-policy-path");
    let bin = t.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_sqfs"), bin.join("sqfs")).unwrap();
    let fake = |path: &str, usable: bool| {
        let script = format!(
            "#!/bin/sh\n[ \"$1 $2\" = '--policy --json' ] || exit 1\necho '{{\"fuse_usable\":{usable},\"fuse_unusable_because\":{},\"images\":[{{\"image\":\"'\"$3\"'\",\"path\":\"{path}\",\"reason\":\"not trusted: the file is owned by uid 1000; more\",\"mountable_here\":false,\"error\":null}}]}}'\n",
            if usable { "null".to_string() } else { "\"/dev/fuse cannot be opened (Permission denied): ask your administrator\"".to_string() }
        );
        std::fs::write(bin.join("squashfs-mount"), script).unwrap();
        std::fs::set_permissions(
            bin.join("squashfs-mount"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    };
    let tree = t.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("a"), "a\n").unwrap();
    let image = t.path().join("a.sqfs");
    ok(std::process::Command::new(bin.join("sqfs"))
        .args(["pack", "-q"])
        .arg(&tree)
        .arg(&image));
    let mountable = |json: bool| {
        let mut c = std::process::Command::new(bin.join("sqfs"));
        c.arg("inspect");
        if json {
            c.arg("--json");
        }
        let o = ok(c.arg(&image));
        o.stdout()
    };
    fake("FUSE", false);
    let text = mountable(false);
    let line = mountable_line(&text);
    assert!(
        line.starts_with("Mountable here:   NO")
            && line.contains("FUSE")
            && line.contains("Permission denied"),
        "{line}"
    );
    assert!(text.contains("Kernel squashfs:"), "{text}");
    let j: serde_json::Value = serde_json::from_str(&mountable(true)).unwrap();
    assert_eq!(j["mount_path"]["path"], "FUSE");
    assert_eq!(j["mount_path"]["fuse_usable"], false);
    fake("FUSE", true);
    let text = mountable(false);
    let line = mountable_line(&text);
    assert!(
        line.starts_with("Mountable here:   yes") && line.contains("FUSE server, as you"),
        "{line}"
    );
    // The kernel's fuse.wake_here, as this machine has it: a hint for the
    // administrator's setting exactly when the kernel has it and it is N.
    let wake_here = std::fs::read_to_string(sqfs::mountable::WAKE_HERE_PARAMETER).ok();
    assert_eq!(
        line.contains("fuse.wake_here=N"),
        wake_here.as_deref().map(str::trim) == Some("N"),
        "{line} (wake_here: {wake_here:?})"
    );
    let j: serde_json::Value = serde_json::from_str(&mountable(true)).unwrap();
    assert_eq!(
        j["mount_path"]["fuse_wakeup_hint"].is_string(),
        line.contains("fuse.wake_here=N"),
        "--json carries the same hint"
    );
}
