//! `sqfs trace` and `sqfs pack --order`: the hot list records what a
//! command read; the listed files are stored first; the image is the same
//! for the same tree and list.

use std::path::Path;

use sqfsmnt_test_support::cmd::{ok, run};
use sqfsmnt_test_support::tree::{sqfs_command, temp_with, write, Rng};
use sqfsmnt_test_support::{have, loud_skip};
use squashfs_reader::{Archive, FileSource, InodeData};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}

/// Large files (full blocks) and small ones (tails in fragments) in three
/// directories.
fn make(root: &Path) {
    let mut rng = Rng(15);
    for d in ["a", "b", "c"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        for i in 1..=3 {
            write(
                &root.join(format!("{d}/big{i}")),
                &rng.bytes(300_000),
                1_600_000_000,
            );
            write(
                &root.join(format!("{d}/small{i}")),
                &rng.text(2_000),
                1_600_000_000,
            );
        }
    }
    write(&root.join("top file"), &rng.text(1_000), 1_600_000_000);
}

/// Where a file's data is: (start of its blocks, fragment index, offset in
/// the fragment).
fn position(image: &Path, path: &str) -> (u64, u32, u32) {
    let a = Archive::open(FileSource::new(std::fs::File::open(image).unwrap()).unwrap()).unwrap();
    let mut inode = a.inode(a.root()).unwrap();
    for name in path.split('/') {
        let e = a
            .lookup(&inode, name.as_bytes())
            .unwrap()
            .unwrap_or_else(|| panic!("{path} not in the image"));
        inode = a.inode(e.inode).unwrap();
    }
    match inode.data {
        InodeData::File {
            blocks_start,
            fragment,
            frag_offset,
            ..
        } => (blocks_start, fragment, frag_offset),
        _ => panic!("{path} is not a regular file"),
    }
}

fn lines(list: &Path) -> Vec<String> {
    std::fs::read_to_string(list)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[test]
fn pack_order_stores_the_listed_files_first_and_is_deterministic() {
    let (t, tree, ()) = temp_with("order-pack", "tree", make);
    let list = t.path().join("hot.list");
    std::fs::write(
        &list,
        "# hot\nc/big2\n/b/small1\n./a/small3\nnot/there\ntop file\n",
    )
    .unwrap();
    let img = |n: &str| t.path().join(n);
    let o = ok(sqfs()
        .args(["pack", "--order"])
        .arg(&list)
        .arg(&tree)
        .arg(img("1.sqfs")));
    let err = o.stderr();
    assert!(
        err.contains("1 of the 5 entries of the hot list") && err.contains("not/there"),
        "{err}"
    );
    assert!(o.stdout().contains("4 listed files first"));
    // (image, its options, what it says if it is not as the first one)
    for (name, extra, differs) in [
        (
            "2.sqfs",
            &["--processors", "1", "--order"][..],
            "same tree and list, different images",
        ),
        (
            "3.sqfs",
            &["--processors", "4", "--order"],
            "the image depends on the processors",
        ),
        ("plain.sqfs", &[], "--order changed nothing"),
    ] {
        let order = !extra.is_empty();
        let mut c = sqfs();
        c.args(["pack", "-q"]).args(extra);
        if order {
            c.arg(&list);
        }
        ok(c.arg(&tree).arg(img(name)));
        let first = std::fs::read(img("1.sqfs")).unwrap();
        assert!(
            (first == std::fs::read(img(name)).unwrap()) == order,
            "{differs}"
        );
    }
    listed_files_lead(&img("1.sqfs"), &img("plain.sqfs"));
    // The image carries the list of the files found, for squashfs-mount's
    // prefetch, with the image's time stamp.
    if have("unsquashfs") {
        the_image_carries_its_hot_list(&img("1.sqfs"));
    }
    // A list leaving the tree is refused.
    std::fs::write(&list, "../etc/passwd\n").unwrap();
    let r = run(sqfs()
        .args(["pack", "--order"])
        .arg(&list)
        .arg(&tree)
        .arg(img("4.sqfs")));
    assert_eq!(r.code(), Some(1));
    assert!(r.stderr().contains("leaves the tree"), "{r:?}");
}

/// In `ordered` (packed with the hot list c/big2, b/small1, a/small3,
/// "top file"), the listed big file's blocks and the listed small files'
/// tails come first; the rest keep the order of `plain` (no list).
fn listed_files_lead(ordered: &Path, plain_img: &Path) {
    let hot_big = position(ordered, "c/big2");
    let bigs: Vec<&str> = vec![
        "a/big1", "a/big2", "a/big3", "b/big1", "b/big2", "b/big3", "c/big1", "c/big3",
    ];
    let starts: Vec<u64> = bigs.iter().map(|b| position(ordered, b).0).collect();
    assert!(
        starts.iter().all(|&s| s > hot_big.0),
        "c/big2 at {} not first: {starts:?}",
        hot_big.0
    );
    // The others keep the order mksquashfs gives them without a list.
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "unlisted files out of order: {starts:?}"
    );
    let plain: Vec<u64> = bigs.iter().map(|b| position(plain_img, b).0).collect();
    assert!(plain.windows(2).all(|w| w[0] < w[1]));
    assert!(
        position(plain_img, "c/big2").0 > plain[0],
        "without a list c/big2 is not first"
    );
    // The listed small files' tails lead the first fragment, in list order.
    let hot: Vec<(u32, u32)> = ["b/small1", "a/small3", "top file"]
        .iter()
        .map(|f| {
            let p = position(ordered, f);
            (p.1, p.2)
        })
        .collect();
    assert_eq!(
        hot[0],
        (0, 0),
        "b/small1 is not at the start of the first fragment"
    );
    assert!(hot.windows(2).all(|w| w[0] < w[1]), "{hot:?}");
    for f in [
        "a/small1", "a/small2", "b/small2", "b/small3", "c/small1", "c/small2", "c/small3",
    ] {
        let p = position(ordered, f);
        assert!(
            (p.1, p.2) > hot[2],
            "{f} at {:?} before the listed files {hot:?}",
            (p.1, p.2)
        );
    }
}

/// The list of the files found is in the image, made with the image's
/// time stamp (not the time of the build).
fn the_image_carries_its_hot_list(image: &Path) {
    let o = ok(std::process::Command::new("unsquashfs")
        .arg("-cat")
        .arg(image)
        .arg(".squashfs-mount/hot.list"));
    assert_eq!(o.stdout(), "c/big2\nb/small1\na/small3\ntop file\n");
    let o = ok(std::process::Command::new("unsquashfs")
        .arg("-lls")
        .arg(image));
    let listing = o.stdout();
    let date = |suffix: &str| {
        let l = listing.lines().find(|l| l.ends_with(suffix)).unwrap();
        l.split_whitespace().nth(3).unwrap().to_string() + l.split_whitespace().nth(4).unwrap()
    };
    assert_eq!(date("/.squashfs-mount/hot.list"), date("/.squashfs-mount"));
}

#[test]
fn trace_lists_the_files_a_command_read() {
    if !have("fincore") {
        loud_skip("trace_lists_the_files_a_command_read: fincore (util-linux) is not installed");
        return;
    }
    let (t, tree, ()) = temp_with("order-trace", "tree", make);
    // Everything cached first: trace must evict it to see what is read.
    ok(std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("cat {}/*/* > /dev/null", tree.display())));
    let list = t.path().join("hot.list");
    let reads = format!("cat {0}/c/big2 {0}/a/small3 > /dev/null", tree.display());
    let o = ok(sqfs()
        .args(["trace", "--json", "--output"])
        .arg(&list)
        .arg(&tree)
        .args(["--", "sh", "-c", &reads]));
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    if j["stayed_cached"].as_u64() != Some(0) {
        loud_skip(&format!("trace_lists_the_files_a_command_read: the file system of {} keeps files cached (tmpfs?): {j}", tree.display()));
        return;
    }
    assert_eq!(lines(&list), ["a/small3", "c/big2"], "{j}");
    assert_eq!(
        (j["files"].as_u64(), j["hot"].as_u64()),
        (Some(19), Some(2))
    );
    assert!(j["hot_bytes"].as_u64() == Some(302_000), "{j}");
    let text = std::fs::read_to_string(&list).unwrap();
    assert!(text.starts_with("# sqfs trace: "), "{text}");

    // The list drives pack --order: the traced files come first.
    let img = t.path().join("ordered.sqfs");
    ok(sqfs()
        .args(["pack", "-q", "--order"])
        .arg(&list)
        .arg(&tree)
        .arg(&img));
    let big = position(&img, "c/big2").0;
    for b in ["a/big1", "b/big3", "c/big1"] {
        assert!(position(&img, b).0 > big);
    }
    assert_eq!(position(&img, "a/small3").1, 0);

    // A failing command: exit status 1, the list written anyway.
    std::fs::remove_file(&list).unwrap();
    let reads = format!("cat {}/b/small2 > /dev/null; exit 3", tree.display());
    let r = run(sqfs()
        .args(["trace", "--output"])
        .arg(&list)
        .arg(&tree)
        .args(["--", "sh", "-c", &reads]));
    assert_eq!(r.code(), Some(1));
    assert!(
        r.stderr().contains("exited with status 3") && r.stderr().contains("written anyway"),
        "{r:?}"
    );
    assert_eq!(lines(&list), ["b/small2"]);
    // No command, or one that does not exist.
    let r = run(sqfs().args(["trace", "--output"]).arg(&list).arg(&tree));
    assert_eq!(r.code(), Some(1));
    let r = run(sqfs()
        .args(["trace", "--output"])
        .arg(&list)
        .arg(&tree)
        .args(["--", "/nonexistent/cmd"]));
    assert_eq!(r.code(), Some(1));
    assert!(r.stderr().contains("cannot run /nonexistent/cmd"), "{r:?}");
}
