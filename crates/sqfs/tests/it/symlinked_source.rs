//! `sqfs pack` and `pack --split` of a symbolic link to a directory (on
//! clusters `$SCRATCH` and project directories often are): they pack the
//! directory it points to, the same with or without a trailing '/', and
//! count what the images store. `sqfs check` flags an image whose root is
//! a lone symbolic link (what mksquashfs makes of a link, and what sqfs
//! pack made before it followed links). The launch of such a split is in
//! squashfs-mount's suite (tests/it/symlinked_dataset.rs).

use std::path::Path;
use std::process::Command;

use sqfsmnt_test_support::cmd::{ok, run};
use sqfsmnt_test_support::tree::{
    image_files, sqfs_command, temp_with, tree_files, write, Rng, TempDir,
};

fn sqfs() -> Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}

/// A dataset of `subjects` directories of 3 sessions with 2 files each:
/// 1 + 3 * (1 + 2) = 10 entries per subject, plus a top-level file.
fn dataset(root: &Path, subjects: usize) -> u64 {
    let mut rng = Rng(7);
    for s in 0..subjects {
        for ses in 0..3 {
            let d = root.join(format!("sub-{s:02}/ses-{ses}"));
            std::fs::create_dir_all(&d).unwrap();
            write(&d.join("scan.nii"), &rng.bytes(3000), 1_600_000_000);
            write(&d.join("notes.txt"), &rng.text(200), 1_600_000_000);
        }
    }
    write(&root.join("README"), b"a dataset\n", 1_600_000_000);
    subjects as u64 * 10 + 1
}

/// The entries line of a pack summary: "..., N entries, ...".
fn entries_in(summary: &str) -> u64 {
    let words: Vec<&str> = summary.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.starts_with("entr"))
        .unwrap_or_else(|| panic!("no entries in {summary}"));
    words[at - 1].parse().unwrap()
}

#[test]
fn pack_of_a_link_packs_the_directory_it_points_to() {
    let (t, data, entries) = temp_with("symlinked-pack", "dataset", |p| dataset(p, 5));
    std::os::unix::fs::symlink(&data, t.path().join("HCP")).unwrap();
    // Relative, through a second link, and with a trailing '/'.
    std::os::unix::fs::symlink("HCP", t.path().join("HCP2")).unwrap();
    let image = |n: &str| t.path().join(n);
    let mut summaries = Vec::new();
    for (src, img) in [
        ("dataset", "real.sqfs"),
        ("HCP", "link.sqfs"),
        ("HCP/", "slash.sqfs"),
        ("HCP2", "link2.sqfs"),
    ] {
        let o = ok(sqfs()
            .args(["pack", "--no-progress", src, img])
            .current_dir(t.path()));
        assert!(o.0.stderr.is_empty(), "{}", o.stderr());
        summaries.push(o.stdout());
    }
    let real = std::fs::read(image("real.sqfs")).unwrap();
    for other in ["link.sqfs", "slash.sqfs", "link2.sqfs"] {
        assert!(
            real == std::fs::read(image(other)).unwrap(),
            "{other} differs from the image of the directory itself"
        );
    }
    assert_eq!(image_files(&image("link.sqfs")), tree_files(&data));
    // The summary counts the entries stored (the old one said 1).
    for s in &summaries {
        assert_eq!(entries_in(s), entries, "{s}");
    }
    let o = ok(sqfs()
        .args(["pack", "--json", "HCP", "j.sqfs"])
        .current_dir(t.path()));
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    assert_eq!(j["entries"], entries);
}

#[test]
fn split_of_a_link_splits_the_directory_it_points_to() {
    let (t, data, entries) = temp_with("symlinked-split", "dataset", |p| dataset(p, 12));
    std::os::unix::fs::symlink(&data, t.path().join("HCP")).unwrap();
    for (src, prefix) in [("HCP", "hcp"), ("HCP/", "slash")] {
        let o = ok(sqfs()
            .args(["pack", "--no-progress", "--split", "40K", "--comp", "lz4"])
            .args(["--block-size", "16K", src, prefix])
            .current_dir(t.path()));
        let out = o.stdout();
        let m: serde_json::Value = serde_json::from_slice(
            &std::fs::read(t.path().join(format!("{prefix}.manifest.json"))).unwrap(),
        )
        .unwrap();
        let images = m["images"].as_array().unwrap();
        assert!(images.len() >= 2, "{src}: {m}");
        let mut files = Vec::new();
        let mut stored = 0;
        for (img, line) in images.iter().zip(out.lines()) {
            let path = t.path().join(img["image"].as_str().unwrap());
            files.extend(image_files(&path));
            let walked: u64 = img["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["entries"].as_u64().unwrap())
                .sum();
            // What the image stores: its units with what they hold (the
            // directories above the cut depth: none at depth 1).
            assert_eq!(img["stored_entries"], walked, "{src}: {img}");
            assert_eq!(entries_in(line), walked, "{src}: {line}");
            stored += walked;
        }
        files.sort();
        assert_eq!(files, tree_files(&data), "{src}");
        assert_eq!(stored, entries, "{src}");
        assert_eq!(m["source"], src);
    }
}

#[test]
fn links_that_lead_to_no_directory_are_refused() {
    let t = TempDir::new("symlinked-refused");
    std::fs::write(t.path().join("file"), "x").unwrap();
    std::os::unix::fs::symlink("gone", t.path().join("dangling")).unwrap();
    std::os::unix::fs::symlink("file", t.path().join("to-file")).unwrap();
    for (src, says) in [
        (
            "dangling",
            "dangling is a symbolic link to gone, which cannot be followed",
        ),
        ("to-file", "is not a directory"),
    ] {
        for split in [false, true] {
            let mut c = sqfs();
            c.arg("pack").current_dir(t.path());
            if split {
                c.args(["--split", "1M"]);
            }
            let r = run(c.args([src, "out"]));
            let err = r.stderr();
            assert_eq!(r.code(), Some(1), "{err}");
            assert!(err.starts_with("sqfs: ") && err.contains(says), "{err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        }
        assert!(!t.path().join("out").exists());
    }
}

#[test]
fn a_tree_of_one_link_is_packed_with_a_warning() {
    let t = TempDir::new("symlinked-lone");
    let tree = t.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::os::unix::fs::symlink("/etc", tree.join("etc")).unwrap();
    let r = run(sqfs()
        .args(["pack", "--no-progress", "tree", "one.sqfs"])
        .current_dir(t.path()));
    r.ok();
    let err = r.stderr();
    assert!(
        err.starts_with("sqfs: warning: one.sqfs: the image's root holds nothing but a symbolic link, etc -> /etc"),
        "{err}"
    );
}

#[test]
fn check_flags_an_image_that_holds_only_a_link() {
    let (t, data, _) = temp_with("symlinked-check", "dataset", |p| dataset(p, 2));
    std::os::unix::fs::symlink(&data, t.path().join("HCP")).unwrap();
    // What mksquashfs (and sqfs pack before it followed links) makes of it.
    ok(Command::new("mksquashfs")
        .args(["HCP", "old.sqfs", "-noappend", "-quiet", "-no-progress"])
        .current_dir(t.path()));
    let r = run(sqfs().args(["check", "old.sqfs"]).current_dir(t.path()));
    let err = r.stderr();
    assert_eq!(r.code(), Some(1), "{err}");
    assert!(r.stdout().is_empty());
    assert!(
        err.contains("every block reads well, but the image's root holds nothing but a symbolic link, HCP -> ")
            && err.contains("pack it again"),
        "{err}"
    );
    let r = run(sqfs()
        .args(["check", "--json", "old.sqfs"])
        .current_dir(t.path()));
    assert_eq!(r.code(), Some(1));
    let j: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(j["lone_symlink"]["name"], "HCP");
    assert!(j["first_bad"].is_null());
    // The image sqfs packs from the link passes.
    ok(sqfs()
        .args(["pack", "-q", "HCP", "new.sqfs"])
        .current_dir(t.path()));
    let o = ok(sqfs()
        .args(["check", "--json", "new.sqfs"])
        .current_dir(t.path()));
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    assert!(j["lone_symlink"].is_null(), "{j}");
}
