//! `sqfs check`: every block read in userspace; a damaged image is named
//! with its first bad block and the files it belongs to, exit status 1.
//! (Damaged images reach only this userspace reader, never the kernel.)

use sqfsmnt_test_support::cmd::{ok, run_for};
use sqfsmnt_test_support::tree::{sqfs_command, tree_in};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}

#[test]
fn check_reads_every_block_and_names_the_first_bad_one() {
    let (t, a) = tree_in("check", "a");
    // A large compressible file first in the image: its first data block
    // starts right after the superblock.
    std::fs::write(
        a.join("aaa-big.txt"),
        "the same words again and again\n".repeat(40_000),
    )
    .unwrap();
    let image = t.path().join("good.sqfs");
    ok(sqfs()
        .args(["pack", "-q", "--order"])
        .arg({
            let list = t.path().join("first.list");
            std::fs::write(&list, "aaa-big.txt\n").unwrap();
            list
        })
        .arg(&a)
        .arg(&image));
    let o = ok(sqfs().arg("check").arg(&image));
    let line = o.stdout();
    assert!(line.contains("every block reads well"), "{line}");
    assert!(o.0.stderr.is_empty());
    let o = ok(sqfs().args(["check", "--json"]).arg(&image));
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    assert!(j["first_bad"].is_null(), "{j}");
    assert!(j["files"].as_u64().unwrap() > 10, "{j}");

    // Damage the first data block (userspace only).
    let bad = t.path().join("bad.sqfs");
    let mut bytes = std::fs::read(&image).unwrap();
    for b in &mut bytes[200..4200] {
        *b = 0xaa;
    }
    std::fs::write(&bad, &bytes).unwrap();
    let o = run_for(
        sqfs().arg("check").arg(&bad),
        std::time::Duration::from_secs(60),
    );
    let err = o.stderr();
    assert_eq!(o.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("bad block: corrupt data block: the block at byte ")
            && err.contains("it belongs to /aaa-big.txt"),
        "{err}"
    );
    assert!(o.0.stdout.is_empty());
    let o = run_for(
        sqfs().args(["check", "--json"]).arg(&bad),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(o.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    assert_eq!(j["first_bad"]["paths"][0], "/aaa-big.txt", "{j}");
    // Not an image at all: one line, status 1.
    let o = run_for(
        sqfs().arg("check").arg(a.join("aaa-big.txt")),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(o.code(), Some(1));
}
