//! `sqfs pack --split`: every file in exactly one image, every image within
//! the limit, a manifest that says where each entry went.

use sqfsmnt_test_support::cmd::{ok, run_for, Run};
use sqfsmnt_test_support::tree::{
    image_files, sqfs_command, tree_files, tree_in, write, Rng, TempDir,
};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A dataset-like tree: top-level "subjects" of different sizes with
/// incompressible data (so images come close to what the plan assumes),
/// nested sessions, loose top-level files, and a hard link across subjects.
fn dataset(root: &Path) {
    let mut rng = Rng(42);
    let sizes = [
        310_000usize,
        260_000,
        205_000,
        150_000,
        90_000,
        40_000,
        12_000,
    ];
    for (i, &total) in sizes.iter().enumerate() {
        for s in 0..3 {
            let dir = root.join(format!("sub-{i:02}/ses-{s}"));
            std::fs::create_dir_all(&dir).unwrap();
            let n = total / 3;
            write(&dir.join("scan.nii"), &rng.bytes(n - 1000), 1_600_000_000);
            write(&dir.join("notes.txt"), &rng.text(1000), 1_600_000_000);
        }
    }
    std::fs::create_dir_all(root.join("sub-05/empty")).unwrap();
    std::fs::create_dir_all(root.join("derivatives/empty-dir")).unwrap();
    write(&root.join("README"), &rng.text(3000), 1_600_000_000);
    write(
        &root.join("participants.tsv"),
        &rng.text(800),
        1_600_000_000,
    );
    std::os::unix::fs::symlink("README", root.join("README.md")).unwrap();
    // sub-06's scan is also reachable from sub-01: one inode, two subjects.
    std::fs::hard_link(
        root.join("sub-06/ses-0/scan.nii"),
        root.join("sub-01/shared-scan.nii"),
    )
    .unwrap();
}

fn split(dir: &Path, prefix: &Path, max: &str, extra: &[&str]) -> serde_json::Value {
    ok(sqfs()
        .args(["pack", "--split", max, "--comp", "lz4"])
        .args(extra)
        .arg(dir)
        .arg(prefix));
    let mut m = prefix.as_os_str().to_owned();
    m.push(".manifest.json");
    serde_json::from_slice(&std::fs::read(m).unwrap()).unwrap()
}

fn check_partition(dir: &Path, manifest: &serde_json::Value, max: u64, depth: usize) -> usize {
    let images = manifest["images"].as_array().unwrap();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for img in images {
        let path = img["image"].as_str().unwrap();
        let size = std::fs::metadata(path).unwrap().len();
        assert!(size <= max, "{path} is {size} bytes, over the limit {max}");
        assert_eq!(img["file_size"].as_u64().unwrap(), size);
        for f in image_files(Path::new(path)) {
            if let Some(other) = seen.insert(f.clone(), path.to_string()) {
                panic!("{f} is in both {other} and {path}");
            }
        }
        // Each manifest entry is in this image, and nothing else at that depth.
        let entries: BTreeSet<String> = img["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_string())
            .collect();
        for f in image_files(Path::new(path)) {
            let unit: String = f.split('/').take(depth).collect::<Vec<_>>().join("/");
            assert!(
                entries.contains(&unit),
                "{f} in {path}, but its entry {unit} is not listed there"
            );
        }
    }
    let all: Vec<String> = seen.keys().cloned().collect();
    assert_eq!(
        all,
        tree_files(dir),
        "the images together hold exactly the tree's files"
    );
    // The union argument names every image in order.
    let union: Vec<&str> = images
        .iter()
        .map(|i| i["image"].as_str().unwrap())
        .collect();
    assert_eq!(manifest["union"].as_str().unwrap(), union.join(","));
    images.len()
}

/// A temporary directory `name` with the dataset in its `data` and an
/// empty `out`.
fn dataset_in(name: &str) -> (TempDir, PathBuf, PathBuf) {
    let t = TempDir::new(name);
    let dir = t.path().join("data");
    dataset(&dir);
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    (t, dir, out)
}

/// The manifest of `sqfs pack --json --split LIMIT --comp zstd --level 3
/// dir to`, which must succeed.
fn split_zstd3(dir: &Path, to: &Path, limit: &str) -> serde_json::Value {
    let o = ok(sqfs()
        .args(["pack", "--json", "--split", limit])
        .args(["--comp", "zstd", "--level", "3"])
        .arg(dir)
        .arg(to));
    serde_json::from_slice(&o.0.stdout).unwrap()
}

/// The size of each image a split's manifest `m` lists.
fn image_sizes(m: &serde_json::Value) -> Vec<u64> {
    m["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["file_size"].as_u64().unwrap())
        .collect()
}

/// `sqfs pack --split LIMIT dir to` (60 s limit).
fn split_run(dir: &Path, to: &Path, limit: &str) -> Run {
    run_for(
        sqfs().args(["pack", "--split", limit]).arg(dir).arg(to),
        std::time::Duration::from_secs(60),
    )
}

#[test]
fn split_puts_every_file_in_exactly_one_image_within_the_limit() {
    let (_t, dir, out) = dataset_in("split");
    let max = 600_000u64;
    let m = split(&dir, &out.join("ds"), "600000", &[]);
    let n = check_partition(&dir, &m, max, 1);
    // ~1.1 MB of incompressible data cannot fit in fewer than 2 images.
    assert!(n >= 2, "{n} images");
    // The hard-linked subjects went to the same image.
    let where_is = |name: &str| {
        m["images"].as_array().unwrap().iter().position(|i| {
            i["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["path"] == name)
        })
    };
    assert_eq!(where_is("sub-01"), where_is("sub-06"));
    // Empty directories are kept (in one image).
    let lists: Vec<String> = m["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let o = ok(std::process::Command::new("unsquashfs")
                .arg("-lls")
                .arg(i["image"].as_str().unwrap()));
            o.stdout()
        })
        .collect();
    assert_eq!(
        lists
            .iter()
            .filter(|l| l.contains("squashfs-root/derivatives/empty-dir\n"))
            .count(),
        1
    );
    assert!(lists
        .iter()
        .any(|l| l.contains("squashfs-root/sub-05/empty\n")));
    // Images are filled in turn: all but the last close to the limit
    // (entries here are up to half the limit, so at least 80% of it).
    let sizes = image_sizes(&m);
    for s in &sizes[..sizes.len() - 1] {
        assert!(
            *s as f64 >= 0.8 * max as f64,
            "an image far below the limit: {sizes:?}"
        );
    }
    // Existing outputs are not replaced without --force.
    let o = split_run(&dir, &out.join("ds"), "600000");
    assert_eq!(o.code(), Some(1));
    assert!(o.stderr().contains("--force"));
}

#[test]
fn split_at_depth_two_and_too_large_entries() {
    let (_t, dir, out) = dataset_in("split-depth");
    // sub-00 alone is 310 kB: at depth 1 it cannot fit in 250 kB images.
    let o = split_run(&dir, &out.join("a"), "250000");
    let err = o.stderr();
    assert_eq!(o.code(), Some(1), "{err}");
    assert!(err.contains("sub-00") && err.contains("--depth 2"), "{err}");
    // At depth 2 the sessions are the units and it works.
    let m = split(&dir, &out.join("b"), "250000", &["--depth", "2"]);
    assert_eq!(m["depth"], 2);
    let n = check_partition(&dir, &m, 250_000, 2);
    assert!(n >= 5, "{n} images");
}

#[test]
fn split_of_compressible_data_and_json_output() {
    let (t, dir) = tree_in("split-text", "data");
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let m = split_zstd3(&dir, &out.join("t"), "1M");
    assert_eq!(m["format"], "sqfs-split-manifest/2");
    assert_eq!(m["level"], 3);
    check_partition(&dir, &m, 1 << 20, 1);
}

/// Compressible data: the limit bounds the compressed images, which come
/// out close to it (the old estimate, uncompressed data, made them a
/// fraction of it).
#[test]
fn split_bounds_compressed_images_close_to_the_limit() {
    let t = TempDir::new("split-compressible");
    let dir = t.path().join("data");
    let mut rng = Rng(1234);
    let mut total = 0;
    for i in 0..30 {
        let d = dir.join(format!("pkg-{i:02}"));
        std::fs::create_dir_all(&d).unwrap();
        // Text (compresses to ~20-30%) and a little random data per unit.
        let n = 20_000 + (rng.next() % 120_000) as usize;
        write(&d.join("mod.py"), &rng.text(n), 1_600_000_000);
        let r = 1_000 + (rng.next() % 8_000) as usize;
        write(&d.join("blob.bin"), &rng.bytes(r), 1_600_000_000);
        total += n + r;
    }
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let max = 200_000u64;
    let m = split_zstd3(&dir, &out.join("c"), "200000");
    let n = check_partition(&dir, &m, max, 1);
    let sizes = image_sizes(&m);
    // Far more data than the limit, and far less once compressed.
    assert!(total as u64 > 8 * max, "{total}");
    assert!(
        n >= 2 && (n as u64) < total as u64 / max,
        "{n} images: {sizes:?}"
    );
    for s in &sizes[..n - 1] {
        assert!(*s <= max && *s as f64 >= 0.8 * max as f64, "{sizes:?}");
    }
    assert!(m["builds"].as_u64().unwrap() >= n as u64);
    for img in m["images"].as_array().unwrap() {
        let (est, real) = (
            img["estimated_bytes"].as_f64().unwrap(),
            img["file_size"].as_f64().unwrap(),
        );
        assert!((est - real).abs() / real < 0.25, "estimate {est} vs {real}");
    }
}

#[test]
fn split_leaves_out_excluded_entries() {
    let (_t, dir, out) = dataset_in("split-exclude");
    let m = split(
        &dir,
        &out.join("e"),
        "600000",
        &["--exclude", "notes.txt", "--exclude", "/sub-00"],
    );
    let mut all = Vec::new();
    for img in m["images"].as_array().unwrap() {
        let path = img["image"].as_str().unwrap();
        assert!(std::fs::metadata(path).unwrap().len() <= 600_000);
        all.extend(image_files(Path::new(path)));
        assert!(img["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["path"] != "sub-00"));
    }
    all.sort();
    let want: Vec<String> = tree_files(&dir)
        .into_iter()
        .filter(|f| !f.ends_with("/notes.txt") && !f.starts_with("sub-00/"))
        .collect();
    assert_eq!(all, want);
}
