//! squashfs-mount-fuse against real images built by mksquashfs.
//!
//! - `ready_line_*`: the descriptor protocol's `error ...` line for bad
//!   images (no FUSE needed).
//! - `serves_like_the_source`: for every compressor mksquashfs offers here,
//!   an image of a tree with every kind of entry is mounted through
//!   fusermount3 (`--mount`) and compared with the source tree: contents,
//!   modes, owners, mtimes, nlink, sizes, rdev, symlink targets, xattrs,
//!   readdir contents and order.
//! - `matches_the_kernel_driver`: the same trusted image (built here, never
//!   modified) mounted by the kernel's squashfs driver (loop device) and by
//!   the server shows identical stat data, xattrs, readdir order and statfs.
//! - `mount_runs_a_command`: `--mount IMAGE DIR -- COMMAND`, and SIGTERM in
//!   the foreground.
//! - `descriptor_contract`: the way squashfs-mount runs the server (a FUSE
//!   mount made with mount(2) and `fd=`, `--fuse-fd/--image-fd/--ready-fd/
//!   --watch-pidfd`): ready line, serving, exit on unmount and on the
//!   watched process's exit.
//! - `detached_server`: `--detached --log-fd`, as a cached instance is
//!   started: it outlives its starter, holds none of the starter's
//!   descriptors (stdout, stderr, a stray pipe reach EOF), has a session
//!   of its own, logs to the given file, exits 0 when unmounted and on
//!   SIGTERM; after SIGKILL a reader waiting on it gets an error, not a
//!   hang.
//! - `crash_image_is_served_safely`: the image that oopsed the kernel
//!   driver, served by this server only: every read fails or returns data,
//!   the server neither crashes nor hangs, one line on stderr, dmesg clean.
//!
//! The mounting tests need root (device nodes, owners, trusted.* xattrs,
//! mount(2)) and /dev/fuse, and must run under the machine-wide lock:
//! `flock /tmp/sqfsmnt-integration.lock cargo test -p squashfs-mount-fuse`.
//! Without them they are skipped, loudly.
#![deny(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqfsmnt_test_support::cmd::{run, try_run};
use sqfsmnt_test_support::ends;

use sqfsmnt_test_support::tree::{Rng, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_squashfs-mount-fuse");

fn skip(msg: &str) {
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED {msg} ***\n");
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn can_fuse(test: &str) -> bool {
    if !is_root() {
        skip(&format!("{test}: needs root (device nodes, owners, trusted xattrs, mounting); run as root under flock /tmp/sqfsmnt-integration.lock"));
        return false;
    }
    if !Path::new("/dev/fuse").exists() {
        skip(&format!("{test}: no /dev/fuse"));
        return false;
    }
    if try_run(Command::new("fusermount3").arg("-V")).is_none() {
        skip(&format!(
            "{test}: fusermount3 missing (apt-get install fuse3)"
        ));
        return false;
    }
    true
}

fn mksquashfs(src: &Path, img: &Path, extra: &[&str]) -> bool {
    let r = run(Command::new("mksquashfs")
        .arg(src)
        .arg(img)
        .args(["-noappend", "-quiet", "-no-progress", "-processors", "2"])
        .args(extra));
    if !r.success() {
        eprintln!("mksquashfs {extra:?}: {r:?}");
    }
    r.success()
}

fn setxattr(p: &Path, name: &str, value: &[u8]) {
    rustix::fs::lsetxattr(p, name, value, rustix::fs::XattrFlags::empty())
        .unwrap_or_else(|e| panic!("setxattr {name} on {}: {e}", p.display()));
}

fn set_mtime(p: &Path, secs: i64) {
    let t = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: secs,
            tv_nsec: 0,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: secs,
            tv_nsec: 0,
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        p,
        &t,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// `n` bytes of a pattern that starts at `seed`.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 31 + i / 7) as u8).wrapping_add(seed))
        .collect()
}

/// A tree with every kind of entry the format has.
fn build_tree(root: &Path) {
    build_files(root);
    build_names(root);
    build_modes_and_specials(root);
    build_xattrs(root);
    // Distinct mtimes everywhere (last, so nothing above changes them).
    let mut all = Vec::new();
    walk(root, &mut all);
    for (i, p) in all.iter().enumerate() {
        set_mtime(p, 1_600_000_000 + i as i64 * 3601);
    }
    set_mtime(root, 1_500_000_000);
}

/// Files of every size class: empty, one byte, block edges, random,
/// sparse.
fn build_files(root: &Path) {
    let w = |p: &str, data: &[u8]| fs::write(root.join(p), data).unwrap();
    fs::create_dir_all(root.join("dir/empty")).unwrap();
    let bs = 131072usize;
    w("empty-file", b"");
    w("one-byte", b"x");
    w("exactly-block", &pattern(bs, 1));
    w("block-plus-one", &pattern(bs + 1, 2));
    w("three-and-a-bit", &pattern(3 * bs + 4321, 3));
    w("small-text", b"hello, fuse\n");
    // Incompressible data (stored uncompressed by mksquashfs).
    w("random", &Rng(0x9e37_79b9_7f4a_7c15).bytes(300_000));
    // Sparse: holes of whole blocks around some data.
    {
        let f = fs::File::create(root.join("sparse")).unwrap();
        f.set_len(10 * bs as u64 + 777).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, b"in the middle", 5 * bs as u64 + 3).unwrap();
    }
}

/// Hard links, symlinks, long names, a large directory, deep nesting.
fn build_names(root: &Path) {
    let w = |p: &str, data: &[u8]| fs::write(root.join(p), data).unwrap();
    // Hard links.
    w("dir/linked", b"one inode, three names\n");
    fs::hard_link(root.join("dir/linked"), root.join("linked-2")).unwrap();
    fs::hard_link(root.join("dir/linked"), root.join("dir/empty/../linked-3")).unwrap();
    // Symlinks: relative, absolute, dangling, long target.
    symlink("small-text", root.join("link-rel")).unwrap();
    symlink("/etc/hostname", root.join("link-abs")).unwrap();
    symlink("does/not/exist", root.join("link-dangling")).unwrap();
    symlink("t".repeat(4000), root.join("link-long")).unwrap();
    // Long names.
    w(&"n".repeat(255), b"long name\n");
    fs::create_dir(root.join("d".repeat(255))).unwrap();
    // A directory with > 1000 entries: the directory index is used.
    fs::create_dir(root.join("big")).unwrap();
    for i in 0..1500 {
        fs::write(
            root.join(format!("big/entry-{i:05}-{}", "p".repeat(i % 40))),
            format!("{i}\n"),
        )
        .unwrap();
    }
    // Deep nesting.
    let mut deep = root.join("deep");
    for i in 0..40 {
        deep = deep.join(format!("level{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("bottom"), b"bottom\n").unwrap();
}

/// Modes, owners and special files.
fn build_modes_and_specials(root: &Path) {
    let w = |p: &str, data: &[u8]| fs::write(root.join(p), data).unwrap();
    // Modes and owners.
    w("setuid", b"#!/bin/sh\n");
    fs::set_permissions(root.join("setuid"), fs::Permissions::from_mode(0o4755)).unwrap();
    w("no-perms", b"secret\n");
    fs::set_permissions(root.join("no-perms"), fs::Permissions::from_mode(0o000)).unwrap();
    w("owned", b"owned by 1234:5678\n");
    rustix::fs::chown(
        root.join("owned"),
        Some(rustix::fs::Uid::from_raw(1234)),
        Some(rustix::fs::Gid::from_raw(5678)),
    )
    .unwrap();
    fs::create_dir(root.join("sticky")).unwrap();
    fs::set_permissions(root.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    // Special files.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("chardev"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o644),
        rustix::fs::makedev(1, 3),
    )
    .unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("blockdev"),
        rustix::fs::FileType::BlockDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(259, 70000),
    )
    .unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .unwrap();
    {
        let s = std::os::unix::net::UnixListener::bind(root.join("socket")).unwrap();
        drop(s);
    }
}

/// Xattrs: several prefixes, a large value, the same value on several
/// files (mksquashfs stores repeated values out of line).
fn build_xattrs(root: &Path) {
    setxattr(&root.join("small-text"), "user.mime", b"text/plain");
    setxattr(&root.join("small-text"), "trusted.note", b"trusted value");
    setxattr(&root.join("small-text"), "security.label", b"sec\0bytes");
    let shared = pattern(3000, 9);
    for f in ["one-byte", "exactly-block", "dir/linked"] {
        setxattr(&root.join(f), "user.shared", &shared);
    }
    setxattr(&root.join("dir"), "user.on-a-dir", b"d");
    setxattr(&root.join("link-rel"), "trusted.on-a-symlink", b"s");
    setxattr(&root.join("fifo"), "trusted.on-a-fifo", b"f");
}

/// Every path below `root` (not `root`), children before parents.
fn walk(root: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            walk(&p, out);
        }
        out.push(p);
    }
}

fn xattrs(p: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut names = vec![0u8; 65536];
    let n = rustix::fs::llistxattr(p, &mut names).unwrap_or(0);
    let mut m = BTreeMap::new();
    for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let mut v = vec![0u8; 65536];
        let cname = std::ffi::OsStr::from_bytes(name);
        let len = rustix::fs::lgetxattr(p, cname, &mut v)
            .unwrap_or_else(|e| panic!("getxattr {} {cname:?}: {e}", p.display()));
        v.truncate(len);
        m.insert(name.to_vec(), v);
    }
    m
}

/// Compares one entry of the source tree with the mounted one.
fn compare(src: &Path, mnt: &Path, rel: &Path, errors: &mut Vec<String>) {
    let (s, m) = (src.join(rel), mnt.join(rel));
    let sm = fs::symlink_metadata(&s).unwrap();
    let mm = match fs::symlink_metadata(&m) {
        Ok(x) => x,
        Err(e) => return errors.push(format!("{}: {e}", rel.display())),
    };
    let mut check = |what: &str, a: String, b: String| {
        if a != b {
            errors.push(format!(
                "{}: {what}: source {a}, mounted {b}",
                rel.display()
            ));
        }
    };
    check(
        "mode",
        format!("{:o}", sm.mode()),
        format!("{:o}", mm.mode()),
    );
    check("uid", sm.uid().to_string(), mm.uid().to_string());
    check("gid", sm.gid().to_string(), mm.gid().to_string());
    check("mtime", sm.mtime().to_string(), mm.mtime().to_string());
    check("nlink", sm.nlink().to_string(), mm.nlink().to_string());
    let ft = sm.file_type();
    if !ft.is_dir() {
        check("size", sm.size().to_string(), mm.size().to_string());
    }
    if ft.is_block_device() || ft.is_char_device() {
        check("rdev", sm.rdev().to_string(), mm.rdev().to_string());
    }
    if ft.is_symlink() {
        check(
            "target",
            format!("{:?}", fs::read_link(&s).ok()),
            format!("{:?}", fs::read_link(&m).ok()),
        );
    }
    if ft.is_file() {
        let a = fs::read(&s).unwrap();
        match fs::read(&m) {
            Ok(b) if a == b => {}
            Ok(b) => check(
                "contents",
                format!("{} bytes", a.len()),
                format!("{} different bytes", b.len()),
            ),
            Err(e) => check("read", "ok".into(), e.to_string()),
        }
    }
    let (xa, xb) = (xattrs(&s), xattrs(&m));
    if xa != xb {
        let keys = |x: &BTreeMap<Vec<u8>, Vec<u8>>| {
            let names: Vec<_> = x.keys().map(|k| String::from_utf8_lossy(k)).collect();
            format!("{names:?}")
        };
        check("xattrs", keys(&xa), keys(&xb));
    }
    if ft.is_dir() {
        let names = |d: &Path| -> Vec<OsString> {
            fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect()
        };
        let mut a = names(&s);
        let b = names(&m);
        a.sort();
        // squashfs lists entries sorted by name.
        check("readdir", format!("{a:?}"), format!("{b:?}"));
    }
}

/// A `--mount` server; if the test fails while it runs, dropping this
/// unmounts and stops it, so that no server or mount outlives the test
/// (a leaked server also kept `make test`'s output pipe open).
struct Served {
    child: std::process::Child,
    mnt: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = try_run(
                Command::new("fusermount3")
                    .args(["-u", "-z"])
                    .arg(&self.mnt),
            );
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until `mnt` is no longer on the device `dev`: the mount appeared.
/// A minute at most (a busy machine starts the server slowly; this only
/// catches a server that never mounts).
fn wait_for_mount(served: &mut Served, dev: u64) {
    let start = Instant::now();
    while fs::metadata(&served.mnt).unwrap().dev() == dev {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the mount did not appear within 60 s"
        );
        if let Some(s) = served.child.try_wait().unwrap() {
            let mut e = String::new();
            if let Some(mut err) = served.child.stderr.take() {
                let _ = err.read_to_string(&mut e);
            }
            panic!("squashfs-mount-fuse --mount exited: {s}: {e}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Mounts `img` on `mnt` through `--mount` and runs `f` while it is mounted.
fn with_mount<T>(img: &Path, mnt: &Path, f: impl FnOnce() -> T) -> T {
    fs::create_dir_all(mnt).unwrap();
    let dev = fs::metadata(mnt).unwrap().dev();
    let child = Command::new(BIN)
        .arg("--mount")
        .arg(img)
        .arg(mnt)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut served = Served {
        child,
        mnt: mnt.to_path_buf(),
    };
    wait_for_mount(&mut served, dev);
    let r = f();
    run(Command::new("fusermount3").arg("-u").arg(mnt)).ok();
    let status =
        wait_timeout(&mut served.child, ends::HANG).expect("the server did not exit after unmount");
    let mut e = String::new();
    served
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut e)
        .unwrap();
    assert!(status.success(), "server exit status {status}: {e}");
    assert!(
        !e.contains("squashfs-mount:"),
        "messages from a healthy image: {e}"
    );
    r
}

/// Waits up to `t` for the child `c` to exit (its end, on its pidfd); kills
/// it and returns `None` if it did not.
fn wait_timeout(c: &mut std::process::Child, t: Duration) -> Option<std::process::ExitStatus> {
    if !ends::wait_ended(&[c.id()], t).is_empty() {
        let _ = c.kill();
        let _ = c.wait();
        return None;
    }
    Some(c.wait().unwrap())
}

fn compressors() -> Vec<&'static str> {
    let help = try_run(Command::new("mksquashfs").arg("-help"))
        .map(|r| r.stdout() + &r.stderr())
        .unwrap_or_default();
    ["gzip", "lzo", "lz4", "xz", "zstd", "lzma"]
        .into_iter()
        .filter(|c| {
            help.lines().any(|l| {
                l.trim_start().starts_with(c) && l.starts_with('\t') && !l.starts_with("\t\t")
            })
        })
        .collect()
}

#[test]
fn serves_like_the_source() {
    if !can_fuse("serves_like_the_source") {
        return;
    }
    let t = TempDir::new("tree");
    let src = t.0.join("src");
    fs::create_dir(&src).unwrap();
    build_tree(&src);
    let mut rels = Vec::new();
    walk(&src, &mut rels);
    let rels: Vec<PathBuf> = rels
        .iter()
        .map(|p| p.strip_prefix(&src).unwrap().to_path_buf())
        .collect();
    let mut built = 0;
    for (name, args) in &image_variants() {
        let img = t.0.join("img.sqfs");
        if !mksquashfs(&src, &img, args) {
            assert_eq!(name, "lzma", "mksquashfs failed for {name}");
            skip(&format!(
                "compressor {name}: this mksquashfs cannot write it"
            ));
            continue;
        }
        built += 1;
        let mnt = t.0.join("mnt");
        let errors = with_mount(&img, &mnt, || served_like(&src, &mnt, &rels));
        assert!(
            errors.is_empty(),
            "{name}: {} differences:\n{}",
            errors.len(),
            errors.join("\n")
        );
        eprintln!("{name}: {} entries identical", rels.len() + 1);
    }
    assert!(built >= 5);
}

/// Every compressor mksquashfs offers here, and four layouts.
fn image_variants() -> Vec<(String, Vec<&'static str>)> {
    let comps = compressors();
    assert!(
        comps.contains(&"gzip") && comps.contains(&"zstd"),
        "compressors found: {comps:?}"
    );
    let mut variants: Vec<(String, Vec<&str>)> = comps
        .iter()
        .map(|c| (c.to_string(), vec!["-comp", c]))
        .collect();
    variants.push(("no-fragments".into(), vec!["-no-fragments"]));
    variants.push((
        "always-fragments, 4K blocks".into(),
        vec!["-always-use-fragments", "-b", "4096"],
    ));
    variants.push((
        "uncompressed, 1M blocks".into(),
        vec!["-noI", "-noD", "-noF", "-noX", "-b", "1M"],
    ));
    variants.push((
        "exportable, no duplicates".into(),
        vec!["-exports", "-no-duplicates"],
    ));
    variants
}

/// `mnt` serves what `src` holds (every entry of `rels`): the
/// differences found; panics on a wrong read, link, lookup or statfs.
fn served_like(src: &Path, mnt: &Path, rels: &[PathBuf]) -> Vec<String> {
    // Several readers at once (the workers answer in parallel), each in
    // its own order, on a fresh mount's caches.
    let files: Vec<&PathBuf> = rels
        .iter()
        .filter(|r| fs::symlink_metadata(src.join(r)).unwrap().is_file())
        .collect();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let files = &files;
            s.spawn(move || {
                for k in 0..files.len() {
                    let r = files[(k * 7 + t * 131) % files.len()];
                    assert_eq!(
                        fs::read(mnt.join(r)).unwrap(),
                        fs::read(src.join(r)).unwrap(),
                        "{}",
                        r.display()
                    );
                }
            });
        }
    });
    let mut errors = Vec::new();
    compare(src, mnt, Path::new(""), &mut errors);
    for r in rels {
        compare(src, mnt, r, &mut errors);
    }
    served_links_and_xattrs(src, mnt);
    served_lookups_reads_and_statfs(src, mnt);
    errors
}

/// Hard links share one inode (st_ino is the SquashFS inode number), and
/// getfattr shows what the source has.
fn served_links_and_xattrs(src: &Path, mnt: &Path) {
    let ino = |p: &str| fs::symlink_metadata(mnt.join(p)).unwrap().ino();
    assert_eq!(ino("dir/linked"), ino("linked-2"));
    assert_eq!(ino("dir/linked"), ino("dir/linked-3"));
    assert_ne!(ino("dir/linked"), ino("small-text"));
    let getfattr = |root: &Path| {
        run(Command::new("getfattr")
            .args(["-d", "-m", "-", "-e", "hex"])
            .arg("small-text")
            .arg("dir")
            .arg("one-byte")
            .current_dir(root))
        .stdout()
    };
    let (a, b) = (getfattr(src), getfattr(mnt));
    assert!(
        a.contains("user.mime") && a.contains("security.label"),
        "{a}"
    );
    assert_eq!(a, b, "getfattr");
}

/// Lookups of missing names (in the big, indexed, directory too), reads
/// at odd offsets and sizes, statfs.
fn served_lookups_reads_and_statfs(src: &Path, mnt: &Path) {
    for missing in [
        "big/entry-99999",
        "big/a",
        "big/zzz",
        "nothing",
        "dir/nothing",
    ] {
        assert!(
            fs::symlink_metadata(mnt.join(missing)).is_err(),
            "{missing} exists"
        );
    }
    let f = fs::File::open(mnt.join("three-and-a-bit")).unwrap();
    let whole = fs::read(src.join("three-and-a-bit")).unwrap();
    for (off, len) in [
        (0u64, 1usize),
        (131071, 2),
        (131072 * 3, 5000),
        (131072 * 3 + 4320, 10),
        (1, 400_000),
    ] {
        let mut b = vec![0u8; len];
        let n = std::os::unix::fs::FileExt::read_at(&f, &mut b, off).unwrap();
        let end = (off as usize + len).min(whole.len());
        assert_eq!(&b[..n], &whole[off as usize..end], "read_at({off}, {len})");
    }
    let st = rustix::fs::statfs(mnt).unwrap();
    assert!(
        st.f_bsize >= 4096 && st.f_namelen == 256,
        "statfs: bsize {} namelen {}",
        st.f_bsize,
        st.f_namelen
    );
    assert!(st.f_files > 1500);
}

/// The server's descriptors as squashfs-mount passes them (and the
/// tests' name and thread count).
fn fd_args(fuse: BorrowedFd<'_>, image: BorrowedFd<'_>, ready: BorrowedFd<'_>) -> Vec<String> {
    let fd = |f: BorrowedFd<'_>| f.as_raw_fd().to_string();
    [
        "--fuse-fd",
        &fd(fuse),
        "--image-fd",
        &fd(image),
        "--ready-fd",
        &fd(ready),
        "--name",
        "test.sqfs",
        "--threads",
        "3",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs the server as squashfs-mount does, with descriptors; returns the
/// child, the ready line and the read end of its stderr.
fn spawn_with_fds(
    fuse: &OwnedFd,
    image: &fs::File,
    watch: Option<&OwnedFd>,
) -> (std::process::Child, String) {
    let (ready_r, ready_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let mut keep = vec![fuse.as_fd(), image.as_fd(), ready_w.as_fd()];
    keep.extend(watch.map(|w| w.as_fd()));
    for &fd in &keep {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).unwrap();
    }
    let mut cmd = Command::new(BIN);
    cmd.args(fd_args(fuse.as_fd(), image.as_fd(), ready_w.as_fd()));
    if let Some(w) = watch {
        cmd.args(["--watch-pidfd", &w.as_raw_fd().to_string()]);
    }
    let child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    for &fd in &keep {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC).unwrap();
    }
    drop(keep);
    drop(ready_w);
    let mut line = String::new();
    BufReader::new(fs::File::from(ready_r))
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

#[test]
fn ready_line_for_bad_images() {
    let t = TempDir::new("bad");
    let src = t.0.join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("f"), vec![7u8; 100_000]).unwrap();
    let good = t.0.join("good.sqfs");
    assert!(mksquashfs(&src, &good, &[]));
    let bytes = fs::read(&good).unwrap();
    let truncated = t.0.join("truncated.sqfs");
    let bytes_used = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    fs::write(&truncated, &bytes[..bytes_used / 2]).unwrap();
    let magic = t.0.join("magic.sqfs");
    let mut m = bytes.clone();
    m[0..4].copy_from_slice(b"\x1f\x8b\x08\x00");
    fs::write(&magic, &m).unwrap();
    let empty = t.0.join("empty.sqfs");
    fs::write(&empty, b"").unwrap();
    // The FUSE descriptor is not touched before the image is checked.
    let fake_fuse: OwnedFd = fs::File::open("/dev/null").unwrap().into();
    for (img, expect) in [
        (&truncated, "truncated"),
        (&magic, "not a SquashFS image"),
        (&empty, "empty"),
    ] {
        let (mut child, line) = spawn_with_fds(&fake_fuse, &fs::File::open(img).unwrap(), None);
        let status =
            wait_timeout(&mut child, ends::HANG).unwrap_or_else(|| panic!("hangs after {line:?}"));
        assert_eq!(status.code(), Some(1), "{}", img.display());
        assert!(
            line.starts_with("error ") && line.ends_with('\n') && line.contains(expect),
            "{}: {line:?}",
            img.display()
        );
        assert_eq!(line.matches('\n').count(), 1);
    }
    // Usage errors.
    let r = run(Command::new(BIN).args(["--fuse-fd", "3"]));
    assert_eq!(r.code(), Some(2), "{r:?}");
    let r =
        run(Command::new(BIN).args(["--fuse-fd", "900", "--image-fd", "901", "--ready-fd", "902"]));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("not open"), "{r:?}");
}

/// A FUSE mount made as squashfs-mount makes it, on `dir`; returns the
/// /dev/fuse descriptor.
fn kernel_fuse_mount(dir: &Path) -> OwnedFd {
    use rustix::fs::{open, Mode, OFlags};
    let fd = open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).unwrap();
    let opts = std::ffi::CString::new(format!("fd={},rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other,max_read=1048576", fd.as_raw_fd())).unwrap();
    rustix::mount::mount(
        "squashfs-test",
        dir,
        "fuse.squashfs",
        rustix::mount::MountFlags::RDONLY
            | rustix::mount::MountFlags::NOSUID
            | rustix::mount::MountFlags::NODEV,
        opts.as_c_str(),
    )
    .unwrap();
    fd
}

#[test]
fn descriptor_contract() {
    if !can_fuse("descriptor_contract") {
        return;
    }
    let t = TempDir::new("fds");
    let src = t.0.join("src");
    fs::create_dir_all(src.join("a")).unwrap();
    fs::write(src.join("a/f"), b"served\n").unwrap();
    let img = t.0.join("img.sqfs");
    assert!(mksquashfs(&src, &img, &[]));
    let mnt = t.0.join("mnt");
    fs::create_dir(&mnt).unwrap();

    // 1. Served until unmounted; then exits 0 quickly.
    let fuse = kernel_fuse_mount(&mnt);
    let (mut child, line) = spawn_with_fds(&fuse, &fs::File::open(&img).unwrap(), None);
    drop(fuse);
    assert_eq!(line, "ready\n");
    assert_eq!(fs::read(mnt.join("a/f")).unwrap(), b"served\n");
    rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::empty()).unwrap();
    let status = wait_timeout(&mut child, ends::HANG).expect("server still running after unmount");
    assert!(status.success());
    let mut e = String::new();
    child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
    assert_eq!(e, "", "quiet on success");

    // 2. Exits when the watched process exits (the mount stays until we
    // unmount it; the connection is then dead).
    let fuse = kernel_fuse_mount(&mnt);
    let mut sleeper = Command::new("sleep").arg("100").spawn().unwrap();
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(sleeper.id() as i32).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .unwrap();
    let (mut child, line) = spawn_with_fds(&fuse, &fs::File::open(&img).unwrap(), Some(&pidfd));
    drop(fuse);
    assert_eq!(line, "ready\n");
    assert_eq!(fs::read(mnt.join("a/f")).unwrap(), b"served\n");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let status = wait_timeout(&mut child, ends::HANG)
        .expect("server still running after the watched process exited");
    assert!(status.success());
    rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::DETACH).unwrap();
    // No leftover process of ours.
    assert!(child.try_wait().unwrap().is_some());
}

fn crash_image() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SQFS_CRASH_IMAGE") {
        return Some(PathBuf::from(p));
    }
    // testdata/README.md: never for the kernel's driver.
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/crash-squashfs_copy_data.sqfs"))
        .filter(|p| p.exists())
}

#[test]
fn crash_image_is_served_safely() {
    if !can_fuse("crash_image_is_served_safely") {
        return;
    }
    let Some(img) = crash_image() else {
        skip("crash_image_is_served_safely: testdata/crash-squashfs_copy_data.sqfs not found (set SQFS_CRASH_IMAGE)");
        return;
    };
    let before = sqfsmnt_test_support::kernel::problems();
    let t = TempDir::new("crash");
    let mnt = t.0.join("mnt");
    fs::create_dir(&mnt).unwrap();
    let fuse = kernel_fuse_mount(&mnt);
    let (mut child, line) = spawn_with_fds(&fuse, &fs::File::open(&img).unwrap(), None);
    drop(fuse);
    if line != "ready\n" {
        // Refused at the start: fine, as long as it says why.
        assert!(line.starts_with("error "), "{line:?}");
        rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::DETACH).unwrap();
        return;
    }
    // Walk everything in a child process with a deadline, so that a hang
    // would fail the test instead of blocking it.
    let script = format!(
        "find {0} -xdev 2>/dev/null | while IFS= read -r p; do stat \"$p\" >/dev/null 2>&1; [ -f \"$p\" ] && cat \"$p\" >/dev/null 2>&1; [ -L \"$p\" ] && readlink \"$p\" >/dev/null; getfattr -d -m - \"$p\" >/dev/null 2>&1; done; ls -laR {0} >/dev/null 2>&1; echo walked",
        mnt.display()
    );
    let mut walker = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status =
        wait_timeout(&mut walker, Duration::from_secs(120)).expect("reading the crash image hangs");
    let mut out = String::new();
    walker
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success() && out.contains("walked"));
    // The server is still alive and answering.
    assert!(child.try_wait().unwrap().is_none(), "the server died");
    fs::metadata(&mnt).unwrap();
    rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::empty()).unwrap();
    let status = wait_timeout(&mut child, ends::HANG).expect("no exit after unmount");
    assert!(status.success());
    let mut e = String::new();
    child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
    eprintln!("server said: {e}");
    assert!(e.lines().count() <= 1, "one line at most: {e}");
    if !e.is_empty() {
        assert!(
            e.starts_with("squashfs-mount: test.sqfs: corrupt") && e.contains("EIO"),
            "{e}"
        );
    }
    assert_eq!(
        sqfsmnt_test_support::kernel::problems(),
        before,
        "new kernel problems in dmesg"
    );
}

#[test]
fn mount_runs_a_command() {
    if !can_fuse("mount_runs_a_command") {
        return;
    }
    let t = TempDir::new("cmd");
    let src = t.0.join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("f"), b"from the image\n").unwrap();
    let img = t.0.join("img.sqfs");
    assert!(mksquashfs(&src, &img, &[]));
    let mnt = t.0.join("mnt");
    fs::create_dir(&mnt).unwrap();
    let r = run(Command::new(BIN).arg("--mount").arg(&img).arg(&mnt).args([
        "--",
        "sh",
        "-c",
        &format!("cat {}/f; exit 7", mnt.display()),
    ]));
    assert_eq!(r.code(), Some(7), "{r:?}");
    assert_eq!(r.stdout(), "from the image\n", "{r:?}");
    assert_eq!(r.stderr(), "", "{r:?}");
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains(&*mnt.to_string_lossy()), "still mounted");
    // In the foreground, SIGTERM unmounts and exits 0.
    let dev = fs::metadata(&mnt).unwrap().dev();
    let child = Command::new(BIN)
        .arg("--mount")
        .arg(&img)
        .arg(&mnt)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut served = Served {
        child,
        mnt: mnt.clone(),
    };
    wait_for_mount(&mut served, dev);
    let pid = rustix::process::Pid::from_raw(served.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = wait_timeout(&mut served.child, ends::HANG).expect("no exit after SIGTERM");
    assert!(status.success(), "{status}");
    assert!(
        !fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .contains(&*mnt.to_string_lossy()),
        "SIGTERM left the mount"
    );
    let r = run(Command::new(BIN)
        .arg("--mount")
        .arg(&img)
        .arg(&mnt)
        .args(["--", "/nonexistent/cmd"]));
    assert_eq!(r.code(), Some(127), "{r:?}");
    assert!(!fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .contains(&*mnt.to_string_lossy()));
}

/// Unmounts on drop (also when an assertion fails).
struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = try_run(Command::new("umount").arg(&self.0));
    }
}

/// One line per entry with everything stat shows, in readdir order.
fn stat_lines(root: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(root.join(&d)).unwrap() {
            let e = e.unwrap();
            let rel = d.join(e.file_name());
            let m = fs::symlink_metadata(root.join(&rel)).unwrap();
            let xattrs: Vec<String> = xattrs(&root.join(&rel))
                .iter()
                .map(|(k, v)| format!("{}={v:?}", String::from_utf8_lossy(k)))
                .collect();
            lines.push(format!(
                "{} ino={} mode={:o} nlink={} uid={} gid={} size={} blocks={} mtime={} rdev={} link={:?} xattrs={xattrs:?}",
                rel.display(),
                m.ino(),
                m.mode(),
                m.nlink(),
                m.uid(),
                m.gid(),
                m.size(),
                m.blocks(),
                m.mtime(),
                m.rdev(),
                fs::read_link(root.join(&rel)).ok()
            ));
            if m.is_dir() {
                dirs.push(rel);
            }
        }
    }
    lines
}

/// A trusted image (built here by mksquashfs, never modified) mounted by the
/// kernel driver and by the server shows the same: inode numbers, modes,
/// link counts, owners, sizes (also of directories), blocks, mtimes, device
/// numbers, symlink targets, xattrs, readdir order, statfs.
#[test]
fn matches_the_kernel_driver() {
    if !can_fuse("matches_the_kernel_driver") {
        return;
    }
    let t = TempDir::new("kernel");
    let src = t.0.join("src");
    fs::create_dir(&src).unwrap();
    build_tree(&src);
    let img = t.0.join("img.sqfs");
    assert!(mksquashfs(&src, &img, &["-comp", "zstd"]));
    let (k, f) = (t.0.join("kernel"), t.0.join("fuse"));
    fs::create_dir(&k).unwrap();
    let mounted = run(Command::new("mount")
        .args(["-t", "squashfs", "-o", "loop,ro"])
        .arg(&img)
        .arg(&k));
    if !mounted.success() {
        skip("matches_the_kernel_driver: the kernel could not mount the image (no squashfs or loop support?)");
        return;
    }
    let _k = Unmount(k.clone());
    let (kernel, kstat) = (stat_lines(&k), rustix::fs::statfs(&k).unwrap());
    let (served, fstat) = with_mount(&img, &f, || {
        (stat_lines(&f), rustix::fs::statfs(&f).unwrap())
    });
    assert!(kernel.len() > 1500);
    for (a, b) in kernel.iter().zip(&served) {
        assert_eq!(a, b);
    }
    assert_eq!(kernel.len(), served.len());
    assert_eq!(
        (
            kstat.f_bsize,
            kstat.f_blocks,
            kstat.f_bfree,
            kstat.f_files,
            kstat.f_ffree,
            kstat.f_namelen
        ),
        (
            fstat.f_bsize,
            fstat.f_blocks,
            fstat.f_bfree,
            fstat.f_files,
            fstat.f_ffree,
            fstat.f_namelen
        )
    );
}

/// A detached server started as a launch would start it: through a
/// starter (`sh`) that exits at once, with the descriptors of
/// `spawn_with_fds` plus `--detached --log-fd`, and an extra descriptor
/// (`stray`, the write end of a pipe) that it must not keep. Checks that
/// the starter's stdout, stderr and the stray pipe reach EOF while the
/// server lives (it holds none of them). Returns the server's pid (a
/// child of this process, a subreaper; also added to `servers` as soon as
/// it is known) and its ready line.
fn start_detached(
    fuse: OwnedFd,
    image: &fs::File,
    log: &fs::File,
    servers: &std::cell::RefCell<Vec<rustix::process::Pid>>,
    first: &[&str],
) -> (rustix::process::Pid, String) {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let (ready_r, ready_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let (stray_r, stray_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let keep = [
        fuse.as_fd(),
        image.as_fd(),
        ready_w.as_fd(),
        log.as_fd(),
        stray_w.as_fd(),
    ];
    let set = |cloexec: bool| {
        for &fd in &keep {
            let f = if cloexec {
                rustix::io::FdFlags::CLOEXEC
            } else {
                rustix::io::FdFlags::empty()
            };
            rustix::io::fcntl_setfd(fd, f).unwrap();
        }
    };
    set(false);
    let pid_file = std::env::temp_dir().join(format!("sqfs-fuse-test-pid-{}", std::process::id()));
    let _ = fs::remove_file(&pid_file);
    let mut starter = Command::new("sh")
        .arg("-c")
        .arg(r#"pid_file=$1; shift; "$@" & echo $! >"$pid_file""#)
        .arg("sh")
        .arg(&pid_file)
        .arg(BIN)
        .args(first)
        .args(fd_args(fuse.as_fd(), image.as_fd(), ready_w.as_fd()))
        .args(["--log-fd", &log.as_raw_fd().to_string(), "--detached"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    set(true);
    // Only the server holds the FUSE connection now (as after a launch).
    drop(fuse);
    drop(ready_w);
    drop(stray_w);
    let mut line = String::new();
    BufReader::new(fs::File::from(ready_r))
        .read_line(&mut line)
        .unwrap();
    let status = wait_timeout(&mut starter, ends::HANG).expect("the starter hangs");
    assert!(status.success());
    let pid: i32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = fs::remove_file(&pid_file);
    let pid = rustix::process::Pid::from_raw(pid).unwrap();
    servers.borrow_mut().push(pid);
    let out = read_to_eof(starter.stdout.take().unwrap(), "the starter's stdout");
    let err = read_to_eof(starter.stderr.take().unwrap(), "the starter's stderr");
    read_to_eof(
        fs::File::from(stray_r),
        "a descriptor the server was not given",
    );
    assert_eq!(out, "");
    assert_eq!(err, "", "a detached server prints nothing");
    (pid, line)
}

/// Everything `r` yields until EOF, which must come (a process holding
/// the write end would block it until the hang limit).
fn read_to_eof(mut r: impl Read + Send + 'static, what: &str) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    rx.recv_timeout(ends::HANG)
        .unwrap_or_else(|_| panic!("no EOF on {what}: the detached server holds it"))
}

/// Waits up to `t` for `pid` (a child, see `start_detached`) to exit (its
/// end, on its pidfd), and reaps it.
fn wait_pid(pid: rustix::process::Pid, t: Duration) -> Option<rustix::process::WaitStatus> {
    if !ends::wait_ended(&[pid.as_raw_nonzero().get() as u32], t).is_empty() {
        return None;
    }
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
        .unwrap()
        .map(|(_, s)| s)
}

fn kill_pid(pid: rustix::process::Pid, sig: rustix::process::Signal) {
    rustix::process::kill_process(pid, sig).unwrap();
}

/// The image, mount point and log of `detached_server`, and every server
/// it started (killed and reaped at the end, also on a failure).
struct DetachedRig {
    img: PathBuf,
    mnt: PathBuf,
    log_path: PathBuf,
    servers: std::cell::RefCell<Vec<rustix::process::Pid>>,
}

impl DetachedRig {
    /// Four files of text and four of 4 MiB of noise, packed; an empty
    /// mount point.
    fn new(t: &TempDir) -> DetachedRig {
        let src = t.0.join("src");
        fs::create_dir_all(src.join("a")).unwrap();
        for f in ["f", "g", "h"] {
            fs::write(src.join("a").join(f), format!("served {f}\n")).unwrap();
        }
        let mut noise = Rng(0x2545_f491_4f6c_dd1d);
        for i in 0..4 {
            fs::write(src.join(format!("big{i}")), noise.bytes(4 << 20)).unwrap();
        }
        let img = t.0.join("img.sqfs");
        assert!(mksquashfs(&src, &img, &[]));
        let mnt = t.0.join("mnt");
        fs::create_dir(&mnt).unwrap();
        DetachedRig {
            img,
            mnt,
            log_path: t.0.join("log"),
            servers: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// A detached server on a fresh FUSE mount that said `ready` and
    /// serves a/f.
    fn start(&self, first: &[&str]) -> rustix::process::Pid {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .unwrap();
        let image = fs::File::open(&self.img).unwrap();
        let fuse = kernel_fuse_mount(&self.mnt);
        let (pid, line) = start_detached(fuse, &image, &log, &self.servers, first);
        assert_eq!(line, "ready\n");
        assert_eq!(fs::read(self.mnt.join("a/f")).unwrap(), b"served f\n");
        pid
    }

    fn log_lines(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    fn unmount(&self) {
        rustix::mount::unmount(&self.mnt, rustix::mount::UnmountFlags::empty()).unwrap();
    }
}

impl Drop for DetachedRig {
    /// No mount and no server left behind.
    fn drop(&mut self) {
        use rustix::process::Signal;
        for &pid in self.servers.borrow().iter() {
            // Only a child not reaped yet (never a recycled pid).
            let running = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
            if matches!(running, Ok(None)) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
                let _ = wait_pid(pid, ends::HANG);
            }
        }
        let _ = rustix::mount::unmount(&self.mnt, rustix::mount::UnmountFlags::DETACH);
    }
}

#[test]
fn detached_server() {
    if !can_fuse("detached_server") {
        return;
    }
    let t = TempDir::new("detached");
    let rig = DetachedRig::new(&t);
    detached_outlives_its_starter(&rig);
    fs::write(&rig.log_path, b"").unwrap();
    detached_exits_on_sigterm(&rig);
    detached_killed_fails_its_reader(&rig);
    // Usage: --detached excludes --watch-pidfd.
    let r = run(Command::new(BIN).args([
        "--fuse-fd",
        "0",
        "--image-fd",
        "1",
        "--ready-fd",
        "2",
        "--watch-pidfd",
        "5",
        "--detached",
    ]));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("exclude each other"), "{r:?}");
}

/// First: outlives its starter, holds only its own descriptors, serves, and
/// exits 0 when the mount is gone; here started as squashfs-mount starts
/// it, as root becoming the caller (nobody).
fn detached_outlives_its_starter(rig: &DetachedRig) {
    let pid = rig.start(&["--run-as", "65534:65534:"]);
    let proc_dir = proc_dir_of(pid);
    detached_holds_only_its_own(&proc_dir, rig);
    detached_workers_on_demand(&proc_dir, &rig.mnt);
    let stat = fs::read_to_string(proc_dir.join("stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(
        fields[3],
        pid.as_raw_nonzero().to_string(),
        "a session of its own: {stat}"
    );
    let status = fs::read_to_string(proc_dir.join("status")).unwrap();
    assert!(status.lines().any(|l| l.starts_with("VmRSS:")), "{status}");
    assert!(
        status.lines().any(|l| l
            .split_whitespace()
            .eq(["Uid:", "65534", "65534", "65534", "65534"])),
        "{status}"
    );
    rig.unmount();
    let s = wait_pid(pid, ends::HANG).expect("still running after unmount");
    assert_eq!(s.exit_status(), Some(0), "{s:?}");
    let l = rig.log_lines();
    assert!(
        l.contains("squashfs-mount-fuse[") && l.contains("test.sqfs: serving"),
        "{l}"
    );
    assert!(l.contains("test.sqfs: the mount is gone; exiting"), "{l}");
    assert_eq!(l.lines().count(), 2, "{l}");
}

/// The server's descriptors: /dev/null as 0-2, and else only /dev/fuse,
/// the image and the log.
fn detached_holds_only_its_own(proc_dir: &Path, rig: &DetachedRig) {
    let mut fds = BTreeMap::new();
    for e in fs::read_dir(proc_dir.join("fd")).unwrap() {
        let e = e.unwrap();
        let target = fs::read_link(e.path()).unwrap_or_default();
        fds.insert(
            e.file_name().to_string_lossy().parse::<i32>().unwrap(),
            target.to_string_lossy().into_owned(),
        );
    }
    for n in 0..3 {
        assert_eq!(fds[&n], "/dev/null", "descriptor {n}: {fds:?}");
    }
    for (n, target) in &fds {
        assert!(
            *n < 3
                || target == "/dev/fuse"
                || Path::new(target) == rig.img
                || Path::new(target) == rig.log_path,
            "the server holds descriptor {n} = {target}: {fds:?}"
        );
    }
}

/// Workers on demand: one for a sequential walk, more (at most 3,
/// `--threads 3`) once requests queue up.
fn detached_workers_on_demand(proc_dir: &Path, mnt: &Path) {
    let tasks = || fs::read_dir(proc_dir.join("task")).unwrap().count();
    run(Command::new("find").arg(mnt)).ok();
    assert_eq!(
        tasks(),
        2,
        "the main thread and one worker after a sequential walk"
    );
    let readers: Vec<_> = (0..4)
        .map(|i| {
            Command::new("cat")
                .arg(mnt.join(format!("big{i}")))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut r in readers {
        assert!(wait_timeout(&mut r, Duration::from_secs(60))
            .unwrap()
            .success());
    }
    let n = tasks();
    assert!((3..=4).contains(&n), "{n} threads after parallel reads");
}

/// Second: SIGTERM; exits 0 at once, says so; the dead mount fails with
/// ENOTCONN until it is unmounted.
fn detached_exits_on_sigterm(rig: &DetachedRig) {
    let pid = rig.start(&[]);
    kill_pid(pid, rustix::process::Signal::TERM);
    let s = wait_pid(pid, ends::HANG).expect("still running after SIGTERM");
    assert_eq!(s.exit_status(), Some(0), "{s:?}");
    assert!(
        rig.log_lines().contains("test.sqfs: SIGTERM; exiting"),
        "{}",
        rig.log_lines()
    );
    let e = fs::read(rig.mnt.join("a/g")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    rig.unmount();
}

/// Third: SIGKILL while a reader waits for it: the reader gets an error at
/// once (ECONNABORTED for the request in flight), not a hang, and so does
/// every later access but to what the kernel still has cached.
fn detached_killed_fails_its_reader(rig: &DetachedRig) {
    use rustix::process::Signal;
    let pid = rig.start(&[]);
    kill_pid(pid, Signal::STOP);
    // Every thread of the server stopped before the reader starts (a
    // thread on the other CPU stops only once it is scheduled).
    let all_stopped = || {
        fs::read_dir(proc_dir_of(pid).join("task"))
            .unwrap()
            .all(|t| task_state(&t.unwrap().path()) == Some('T'))
    };
    let started = Instant::now();
    while !all_stopped() {
        assert!(
            started.elapsed() < ends::HANG,
            "the server did not stop on SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut reader = reader_waiting_in_fuse(&rig.mnt.join("a/g"));
    kill_pid(pid, Signal::KILL);
    let status = wait_timeout(&mut reader, ends::HANG)
        .expect("the reader hangs after SIGKILL of the server");
    assert!(!status.success());
    let mut e = String::new();
    reader
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut e)
        .unwrap();
    assert!(
        e.contains("Software caused connection abort")
            || e.contains("not connected")
            || e.contains("Input/output error"),
        "{e}"
    );
    let s = wait_pid(pid, ends::HANG).expect("SIGKILL did not end the server");
    assert!(s.terminating_signal().is_some(), "{s:?}");
    let e = fs::read(rig.mnt.join("a/h")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN), "{e}");
    rig.unmount();
}

/// `cat file`, once it waits in a FUSE request (its kernel stack says so;
/// the file was never looked up): no delay guessed. Panics if it ended
/// without waiting.
fn reader_waiting_in_fuse(file: &Path) -> std::process::Child {
    let mut reader = Command::new("cat")
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader_pid = reader.id();
    let in_fuse = || {
        fs::read_to_string(format!("/proc/{reader_pid}/stack")).is_ok_and(|s| s.contains("fuse"))
    };
    let started = Instant::now();
    loop {
        if let Some(status) = reader.try_wait().unwrap() {
            let mut e = String::new();
            let _ = reader.stderr.take().unwrap().read_to_string(&mut e);
            panic!("the reader did not wait for the stopped server: {status:?}, {e:?}");
        }
        if in_fuse() {
            return reader;
        }
        assert!(
            started.elapsed() < ends::HANG,
            "the reader never reached the server"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// /proc/<pid> of a child.
fn proc_dir_of(pid: rustix::process::Pid) -> PathBuf {
    PathBuf::from(format!("/proc/{}", pid.as_raw_nonzero()))
}

/// The state letter of a task (`/proc/<pid>/task/<tid>`), from its stat.
fn task_state(task: &Path) -> Option<char> {
    let stat = fs::read_to_string(task.join("stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// The stdout of `sh -c script` run by `--mount img mnt [extra] --`,
/// which must succeed.
fn mount_and_run(img: &Path, mnt: &Path, extra: &[&str], script: &str) -> String {
    run(Command::new(BIN)
        .arg("--mount")
        .arg(img)
        .arg(mnt)
        .args(extra)
        .args(["--", "sh", "-c", script]))
    .ok()
    .stdout()
}

/// A temporary directory `name` with an image (mksquashfs `extra`) of
/// `dirs` directories of `files` files each, each file named and filled by
/// `entry` (directory number, file number: path, contents), and an empty
/// mount point: the directory, the image, the mount point.
fn image_of_files(
    name: &str,
    (dirs, files): (u32, u32),
    extra: &[&str],
    entry: impl Fn(u32, u32) -> (String, Vec<u8>),
) -> (TempDir, PathBuf, PathBuf) {
    let t = TempDir::new(name);
    let src = t.0.join("src");
    for d in 0..dirs {
        for f in 0..files {
            let (rel, body) = entry(d, f);
            let path = src.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, body).unwrap();
        }
    }
    let img = t.0.join("img.sqfs");
    assert!(mksquashfs(&src, &img, extra));
    let mnt = t.0.join("mnt");
    fs::create_dir(&mnt).unwrap();
    (t, img, mnt)
}

/// The server's anonymous memory (RssAnon, KiB) after it served a
/// full scan and a read of every file of `mnt`, read by the command it
/// runs (`--mount ... -- COMMAND`: the server is the command's parent).
fn memory_after_reading_all(img: &Path, mnt: &Path, cache_mem: &str) -> u64 {
    let script = format!(
        "find {m} -print | wc -l >/dev/null && find {m} -type f -exec cat {{}} + | wc -c >/dev/null && awk '/^RssAnon/ {{print $2}}' /proc/$PPID/status",
        m = mnt.display()
    );
    let out = mount_and_run(img, mnt, &["--cache-mem", cache_mem], &script);
    out.trim().parse().unwrap()
}

/// Issue 30: a launch of 56 images starts 56 servers, so each one's caches
/// must hold to the budget it is given (`--cache-mem`), whatever the size
/// of the image: after a scan and a read of 30 MB of small files (about
/// 240 fragment blocks, 2 MB of metadata), a server given 512 KiB stays
/// under 8 MiB of anonymous memory, where one with the default budget
/// (40 MiB) holds well over that.
#[test]
fn caches_hold_to_their_budget() {
    if !can_fuse("caches_hold_to_their_budget") {
        return;
    }
    let (_t, img, mnt) = image_of_files("budget", (100, 200), &["-comp", "zstd"], |d, f| {
        let n = d * 200 + f;
        let body: Vec<u8> = (0..1500u32)
            .map(|i| b'a' + ((i.wrapping_mul(n + 7) ^ (i >> 3)) % 26) as u8)
            .collect();
        (format!("d{d:03}/f{f:03}"), body)
    });
    let small = memory_after_reading_all(&img, &mnt, "524288");
    let default = memory_after_reading_all(&img, &mnt, "0");
    eprintln!("RssAnon after a scan and a full read: {small} KiB (--cache-mem 512K), {default} KiB (default)");
    assert!(small < 8 << 10, "RssAnon {small} KiB with --cache-mem 512K");
    assert!(
        default > 2 * small,
        "RssAnon {default} KiB with the default budget, {small} KiB with 512K"
    );
}

/// Issue 36: once mounted, the server reads the image's metadata region
/// ahead by itself, in large reads, before anything asks for it: the
/// command (which never touches the mount) waits until the server has read
/// the region's bytes (`rchar` of /proc/PID/io) and reports how many read
/// calls that took. Without the read-ahead the server reads only the
/// superblock and the tables it checks at start (a few KiB), and the wait
/// ends after a minute with the test failing.
#[test]
fn the_server_reads_the_metadata_ahead() {
    if !can_fuse("the_server_reads_the_metadata_ahead") {
        return;
    }
    // Uncompressed inodes: about half a MiB of tables.
    let (_t, img, mnt) = image_of_files("readahead", (100, 100), &["-noI"], |d, f| {
        (
            format!("dir-{d:03}/file-{f:03}"),
            format!("{d} {f}\n").into_bytes(),
        )
    });
    let head = fs::read(&img).unwrap();
    let le64 = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap());
    let region = le64(40) - le64(64);
    assert!(region > 256 << 10, "a region of {region} bytes");
    let script = format!(
        "io() {{ awk -v k=$1 '$1 == k\":\" {{print $2}}' /proc/$PPID/io; }}; i=0; \
         while [ \"$(io rchar)\" -lt {region} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; \
         echo $(io rchar) $(io syscr)"
    );
    let text = mount_and_run(&img, &mnt, &[], &script);
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let (rchar, syscr) = (v[0], v[1]);
    eprintln!("server: {rchar} bytes read in {syscr} read calls; metadata region {region} bytes");
    assert!(
        rchar >= region,
        "the server read {rchar} bytes, the metadata region is {region}"
    );
    // 256 KiB reads: a handful for the region, plus the start's and the
    // kernel's INIT; 8 KiB metadata blocks would take over a hundred.
    assert!(syscr < 40, "{syscr} read calls");
}

/// The server's requests: `syscr` of /proc/PID/io (each request is one
/// read of /dev/fuse; the image's metadata is read ahead in a few reads).
fn requests_of_a_walk(img: &Path, mnt: &Path, find_args: &str) -> u64 {
    let script = format!(
        "find {} {find_args} | wc -l >/dev/null && awk '$1 == \"syscr:\" {{print $2}}' /proc/$PPID/io",
        mnt.display()
    );
    let out = mount_and_run(img, mnt, &[], &script);
    out.trim().parse().unwrap()
}

/// Issue 36: a walk that stats every entry (`find -printf %s`, 10,000
/// files in 400 directories) gets attributes for files in READDIRPLUS once
/// the server sees it look files up, instead of one LOOKUP round trip per
/// file: the server reads well under half as many requests as there are
/// files. Without it (attributes for directories only) every file costs a
/// LOOKUP: over 10,000 requests. A plain walk sends two READDIRPLUS per
/// directory either way.
#[test]
fn a_walk_that_stats_gets_attributes_for_files() {
    if !can_fuse("a_walk_that_stats_gets_attributes_for_files") {
        return;
    }
    let (_t, img, mnt) = image_of_files("plus", (400, 25), &["-comp", "zstd"], |d, f| {
        (
            format!("dir-{d:03}/file-{f:02}"),
            format!("{d} {f}\n").into_bytes(),
        )
    });
    let plain = requests_of_a_walk(&img, &mnt, "-print");
    let stat = requests_of_a_walk(&img, &mnt, "-printf '%s\\n'");
    eprintln!(
        "requests: {plain} for find, {stat} for find -printf %s (10,000 files, 401 directories)"
    );
    assert!(plain < 2_000, "{plain} requests for a plain walk");
    assert!(
        stat < 5_000,
        "{stat} requests for a walk that stats 10,000 files"
    );
}
