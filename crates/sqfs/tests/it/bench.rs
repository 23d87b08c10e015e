//! `sqfs bench` on a small tree: a table with every compressor and a valid
//! SVG chart. The timed part needs squashfs-mount able to mount (installed
//! setuid root, or run as root); without it that part is skipped loudly.

use sqfsmnt_test_support::cmd::{ok, run_for, Run};
use sqfsmnt_test_support::count::loops_under;
use sqfsmnt_test_support::loud_skip;
use sqfsmnt_test_support::tree::{names_in, sqfs_command, temp_with, write, Rng, TempDir};

fn sqfs() -> std::process::Command {
    sqfs_command(env!("CARGO_BIN_EXE_sqfs"))
}
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LABELS: [&str; 6] = ["gzip", "lzo", "lz4", "xz", "zstd:3", "zstd:15"];

fn small_tree(root: &Path) {
    let mut rng = Rng(3);
    for d in 0..3 {
        let dir = root.join(format!("pkg{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..8 {
            let data = if f % 3 == 0 {
                rng.bytes(20_000)
            } else {
                rng.text(9_000)
            };
            write(&dir.join(format!("mod{f}.py")), &data, 1_600_000_000);
        }
    }
}

/// Checks the chart: well-formed SVG with a label, a size bar and (if
/// `boxes`) cold and warm box plots for every compressor.
fn check_svg(path: &Path, boxes: bool) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the chart is well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let w: f64 = root.attribute("width").unwrap().parse().unwrap();
    let h: f64 = root.attribute("height").unwrap().parse().unwrap();
    assert!(w > 500.0 && h > 300.0, "{w}x{h}");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").to_string())
        .collect();
    for label in LABELS {
        assert!(texts.iter().any(|t| t == label), "no axis label {label}");
    }
    let groups = |class: &str| -> Vec<roxmltree::Node> {
        doc.descendants()
            .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(class))
            .collect()
    };
    let bars = groups("bar");
    assert_eq!(bars.len(), LABELS.len());
    for (bar, label) in bars.iter().zip(LABELS) {
        assert_eq!(bar.attribute("data-series"), Some(label));
        let rect = bar.children().find(|n| n.has_tag_name("rect")).unwrap();
        let height: f64 = rect.attribute("height").unwrap().parse().unwrap();
        assert!(height > 1.0, "{label}: bar height {height}");
    }
    let box_groups = groups("box");
    if boxes {
        // cold and warm, for the command and for the walk
        assert_eq!(box_groups.len(), 4 * LABELS.len());
        for label in LABELS {
            assert!(box_groups.iter().any(|g| g
                .attribute("data-series")
                .unwrap()
                .starts_with(&format!("{label} cold"))));
            assert!(box_groups
                .iter()
                .any(|g| g.attribute("data-series") == Some(&format!("{label} warm"))));
        }
    } else {
        assert!(box_groups.is_empty());
    }
    // Every coordinate is a finite number inside the picture.
    for n in doc.descendants().filter(|n| n.is_element()) {
        for a in [
            "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "width", "height",
        ] {
            if let Some(v) = n.attribute(a) {
                if v.ends_with('%') {
                    continue;
                }
                let v: f64 = v.parse().unwrap_or_else(|_| panic!("{a}={v}"));
                assert!(
                    v.is_finite() && v >= 0.0 && v <= w.max(h),
                    "{a}={v} on <{}>",
                    n.tag_name().name()
                );
            }
        }
    }
}

fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| {
            LABELS
                .iter()
                .any(|lab| l.split_whitespace().next() == Some(lab))
        })
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn mount_usable() -> Option<PathBuf> {
    let exe = Path::new(env!("CARGO_BIN_EXE_sqfs")).with_file_name("squashfs-mount");
    let Ok(meta) = std::fs::metadata(&exe) else {
        loud_skip(&format!(
            "{} is not built (run cargo build --workspace first)",
            exe.display()
        ));
        return None;
    };
    let setuid_root = meta.mode() & 0o4000 != 0 && meta.uid() == 0;
    let root = rustix_uid() == 0;
    // As root: the machine-wide lock of the privileged suites (loop devices).
    if root && !sqfsmnt_test_support::privileged("sqfs bench through squashfs-mount", &[]) {
        return None;
    }
    if !(setuid_root || root) {
        loud_skip(&format!(
            "{} is not setuid root and the tests do not run as root, so nothing can be mounted; \
             timed runs of sqfs bench not tested",
            exe.display()
        ));
        return None;
    }
    Some(exe)
}

fn rustix_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn bench_without_runs_gives_table_and_chart() {
    let (t, tree, ()) = temp_with("bench-norun", "tree", small_tree);
    let svg = t.path().join("chart.svg");
    let o = ok(sqfs()
        .args(["bench", "--no-run", "--svg"])
        .arg(&svg)
        .arg("--work-dir")
        .arg(t.path())
        .arg(&tree));
    let stdout = o.stdout();
    let rows = table_rows(&stdout);
    assert_eq!(
        rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        LABELS,
        "{stdout}"
    );
    check_svg(&svg, false);
    // JSON, and the work directory is cleaned up.
    let o = ok(sqfs()
        .args([
            "bench",
            "--no-run",
            "--json",
            "--comp",
            "lz4,zstd:1",
            "--svg",
        ])
        .arg(&svg)
        .arg("--work-dir")
        .arg(t.path())
        .arg(&tree));
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    let v = j["variants"].as_array().unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[1]["label"], "zstd:1");
    assert_eq!(v[1]["level"], 1);
    assert!(
        v[0]["bytes"].as_u64().unwrap() > v[1]["bytes"].as_u64().unwrap(),
        "lz4 compresses less than zstd"
    );
    let leftovers = names_in(t.path(), |n| n.starts_with("sqfs-bench"));
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn bench_times_every_compressor_through_squashfs_mount() {
    let Some(_mount) = mount_usable() else { return };
    let (t, tree, ()) = temp_with("bench-run", "tree", small_tree);
    let svg = t.path().join("chart.svg");
    let loops_before = loops_under(t.path()).len();
    // The command must see the image: it checks that it runs on squashfs.
    let run = format!(
        "cat {0}/pkg0/mod1.py {0}/pkg2/mod5.py > /dev/null && stat -f -c %T {0} | grep -qx squashfs",
        tree.display()
    );
    let o = run_for(
        sqfs()
            .args(["bench", "--runs", "2", "--run", &run, "--svg"])
            .arg(&svg)
            .arg("--work-dir")
            .arg(t.path())
            .arg(&tree),
        Duration::from_secs(120),
    );
    o.ok();
    bench_table_says_it_all(&o.stdout(), &o.stderr());
    check_svg(&svg, true);
    // Mounts lived only in squashfs-mount's private namespaces.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(&tree.display().to_string()),
        "a mount was left on the host"
    );
    // Autoclear detaches them once their namespaces are gone (waited
    // for; the hang limit only catches a leak).
    let mut loops_after = loops_under(t.path()).len();
    let started = std::time::Instant::now();
    while loops_after != loops_before && started.elapsed() < sqfsmnt_test_support::ends::HANG {
        std::thread::sleep(Duration::from_millis(100));
        loops_after = loops_under(t.path()).len();
    }
    assert_eq!(loops_before, loops_after, "loop devices leaked");
    // A failing command is reported as such.
    let o = run_for(
        sqfs()
            .args([
                "bench", "--runs", "1", "--comp", "lz4", "--run", "exit 3", "--svg",
            ])
            .arg(&svg)
            .arg(&tree),
        Duration::from_secs(60),
    );
    assert_eq!(o.code(), Some(1));
    assert!(o.stderr().contains("failed"), "{}", o.stderr());
}

/// A bench's table: a row of timings for every compressor, the kind of
/// cold run, each kind of run explained once on stdout.
fn bench_table_says_it_all(stdout: &str, stderr: &str) {
    let rows = table_rows(stdout);
    assert_eq!(
        rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        LABELS,
        "{stdout}"
    );
    for r in &rows {
        // label, size (2 words), %, build (2 words), then four timing cells.
        assert!(!stdout.contains(" - "), "a timing is missing:\n{stdout}");
        assert!(r.len() >= 10, "{r:?}");
    }
    let cold_kind = if rustix_uid() == 0 {
        "drop_caches"
    } else {
        "posix_fadvise"
    };
    assert!(stdout.contains(cold_kind), "{stdout}");
    // Each kind of run explained once, on standard output.
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("cold")).count(),
        1,
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("warm:")).count(),
        1,
        "{stdout}"
    );
    assert!(!stderr.contains("cold"), "{stderr}");
}

/// A stand-in for squashfs-mount that mounts nothing: it logs every call,
/// keeps a list of "cached instances" (launches without --no-cache),
/// answers --cache-status with it, and --gc IMAGE by dropping IMAGE (or
/// fails on --gc IMAGE when FAKE_NO_GC_IMAGE is set, as versions without
/// it do); --policy IMAGE says the image takes the path FAKE_ROUTE
/// (default kernel). The command runs on the tree itself.
const FAKE_SQUASHFS_MOUNT: &str = r#"#!/bin/sh
echo "$*" >> "$FAKE_DIR/log"
state="$FAKE_DIR/instances"
touch "$state"
case "$1" in
  --help) echo "  --no-cache   mount private instances"; exit 0 ;;
  --gc)
    if [ -n "$2" ]; then
      [ -n "$FAKE_NO_GC_IMAGE" ] && { echo "'$2' cannot be combined with --gc" >&2; exit 1; }
      grep -vxF "$2" "$state" > "$state.new"; mv "$state.new" "$state"
    fi
    exit 0 ;;
  --cache-status) echo "STATE DEVICE SIZE LAST USE  IMAGE"; sed 's/^/idle \/dev\/loop9 1 0s  /' "$state"; exit 0 ;;
  --policy) echo '# site policy'; echo "$2: ${FAKE_ROUTE:-kernel} (fake reason)"; exit 0 ;;
esac
cached=1
if [ "$1" = --no-cache ]; then cached=0; shift; fi
img=${1%%:*}
shift; shift
if [ $cached = 1 ] && ! grep -qxF "$img" "$state"; then echo "$img" >> "$state"; fi
exec "$@"
"#;

/// `bench` with a fake squashfs-mount, unprivileged: warm runs are second
/// launches through the image cache when squashfs-mount can evict one
/// image's instances, every cached instance is evicted at the end, and
/// without `--gc IMAGE` warm runs are fresh mounts and say so; images that
/// take the FUSE path go through the cache too (a user's FUSE instances are
/// cached for them), and the table says which path was measured.
#[test]
fn bench_warm_runs_go_through_the_image_cache() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempDir::new("bench-cache");
    let bin = t.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_sqfs"), bin.join("sqfs")).unwrap();
    std::fs::write(bin.join("squashfs-mount"), FAKE_SQUASHFS_MOUNT).unwrap();
    std::fs::set_permissions(
        bin.join("squashfs-mount"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let tree = t.path().join("tree");
    small_tree(&tree);
    for d in [t.path(), &bin] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    for (gc_image, route, want) in [
        (true, "kernel", "image_cache"),
        (false, "kernel", "page_cache"),
        (true, "FUSE", "image_cache"),
    ] {
        let state = t.path().join(format!("state-{gc_image}-{route}"));
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
        let run = |json: bool| fake_bench(&bin, t.path(), &tree, &state, gc_image, route, json);
        let o = run(false);
        let stdout = o.stdout();
        let stderr = o.stderr();
        o.ok();
        assert!(stderr.is_empty(), "quiet success: {stderr}");
        assert_eq!(
            stdout.lines().filter(|l| l.starts_with("cold*:")).count(),
            1,
            "{stdout}"
        );
        let warm: Vec<&str> = stdout.lines().filter(|l| l.starts_with("warm:")).collect();
        assert_eq!(warm.len(), 1, "{stdout}");
        let path: Vec<&str> = stdout.lines().filter(|l| l.starts_with("path: ")).collect();
        assert_eq!(path.len(), 1, "{stdout}");
        assert!(
            path[0].starts_with(&format!("path: {route}")),
            "{}",
            path[0]
        );
        fake_launches_as_said(&state, gc_image, warm[0]);
        let o = run(true);
        o.ok();
        let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
        assert_eq!(j["warm_method"], want);
        assert_eq!(j["mount_path"]["path"], route);
        assert_eq!(j["mount_path"]["reason"], "fake reason");
        assert_eq!(j["cold_method"], "fadvise");
        assert_eq!(j["variants"][0]["warm"].as_array().unwrap().len(), 2);
    }
}

/// What issue 22 found: a user benchmarking their own tree with the
/// installed (setuid) squashfs-mount measures the FUSE path (the default
/// policy does not let the kernel parse a user's own image). The table says
/// so, with the policy's reason, and explains warm runs by it (not as "cache
/// off"). squashfs-mount installed setuid into a temporary prefix with sqfs
/// beside it, run by a test user.
#[test]
fn bench_by_a_user_on_their_own_tree_says_it_measured_the_fuse_path() {
    use sqfsmnt_test_support::{install, site, Users};
    use std::os::unix::fs::PermissionsExt;
    let built = Path::new(env!("CARGO_BIN_EXE_sqfs")).with_file_name("squashfs-mount");
    if !built.exists() {
        loud_skip(&format!(
            "{} is not built (cargo build --workspace)",
            built.display()
        ));
        return;
    }
    if !sqfsmnt_test_support::privileged("sqfs bench as a user", &["mksquashfs", "setpriv"]) {
        return;
    }
    let _conf = site::no_config();
    // The FUSE path opens /dev/fuse as the user.
    let _fuse = site::FuseDevice::open_to_all();
    // The prefix holds a setuid-root program: removed on drop.
    let prefix = TempDir::new("bench-user-prefix");
    install::install_setuid(&built, prefix.path());
    let sqfs = install::install(Path::new(env!("CARGO_BIN_EXE_sqfs")), prefix.path(), 0o755);
    let users = Users::create(1, false);
    let user = users.first();
    let work = TempDir::new("bench-user-work");
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tree = work.path().join("tree");
    small_tree(&tree);
    for p in [work.path().to_path_buf(), tree.clone()] {
        ok(std::process::Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", user.uid, user.gid))
            .arg(&p));
    }
    let run = |json: bool| {
        let mut c = user.command(&sqfs);
        c.args(["bench", "--runs", "1", "--comp", "lz4", "--run"])
            .arg(format!("cat {}/pkg0/mod1.py > /dev/null", tree.display()))
            .arg("--svg")
            .arg(work.path().join("c.svg"))
            .arg("--work-dir")
            .arg(work.path())
            .arg(&tree)
            .env_remove("SOURCE_DATE_EPOCH");
        if json {
            c.arg("--json");
        }
        run_for(&mut c, Duration::from_secs(120))
    };
    let o = run(false);
    let stdout = o.stdout();
    o.ok();
    let path: Vec<&str> = stdout.lines().filter(|l| l.starts_with("path: ")).collect();
    assert_eq!(path.len(), 1, "{stdout}");
    assert!(
        path[0].starts_with("path: FUSE, as you (")
            && path[0].ends_with("; see squashfs-mount --policy")
            && path[0].len() <= 120,
        "{}",
        path[0]
    );
    let warm: Vec<&str> = stdout.lines().filter(|l| l.starts_with("warm:")).collect();
    assert_eq!(warm.len(), 1, "{stdout}");
    assert!(!warm[0].contains("cache off"), "{}", warm[0]);
    let o = run(true);
    o.ok();
    let j: serde_json::Value = serde_json::from_slice(&o.0.stdout).unwrap();
    assert_eq!(j["mount_path"]["path"], "FUSE");
    // The user's FUSE instances are cached: warm runs reuse them.
    assert_eq!(j["warm_method"], "image_cache");
}

/// `sqfs bench --runs 2 --comp lz4,zstd:1` of `tree` with the fake
/// squashfs-mount in `bin` (as nobody when root: cold runs then evict the
/// image instead of dropping the whole machine's caches), logging into
/// `state`.
fn fake_bench(
    bin: &Path,
    work: &Path,
    tree: &Path,
    state: &Path,
    gc_image: bool,
    route: &str,
    json: bool,
) -> Run {
    let mut inner = std::process::Command::new(bin.join("sqfs"));
    inner.args(["bench", "--runs", "2", "--comp", "lz4,zstd:1", "--svg"]);
    inner.arg(work.join(format!("c-{gc_image}.svg")));
    inner.arg("--work-dir").arg(work).arg(tree);
    if json {
        inner.arg("--json");
    }
    let mut cmd = if rustix_uid() == 0 {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"]);
        c.arg(inner.get_program()).args(inner.get_args());
        c
    } else {
        inner
    };
    cmd.env("FAKE_DIR", state)
        .env("FAKE_ROUTE", route)
        .env_remove("SOURCE_DATE_EPOCH");
    if !gc_image {
        cmd.env("FAKE_NO_GC_IMAGE", "1");
    }
    run_for(&mut cmd, Duration::from_secs(120))
}

/// The fake's log: with `--gc IMAGE` (`gc_image`) warm runs are second
/// launches through the cache and every image is evicted at the end;
/// without, warm runs are fresh mounts.
fn fake_launches_as_said(state: &Path, gc_image: bool, warm: &str) {
    let log = std::fs::read_to_string(state.join("log")).unwrap();
    let launches: Vec<&str> = log.lines().filter(|l| l.contains(" -- ")).collect();
    let cached = launches
        .iter()
        .filter(|l| !l.starts_with("--no-cache"))
        .count();
    // 2 compressors x 2 rounds x (command, walk).
    if gc_image {
        assert!(
            warm.contains("second launch") && warm.contains("image cache"),
            "{}",
            warm
        );
        // Per pair: a fresh cold run, a first and a second cached launch;
        // plus the probe.
        assert_eq!(launches.len(), 8 * 3 + 1, "{log}");
        assert_eq!(cached, 8 * 2 + 1, "{log}");
        // Both images evicted at the end: nothing left cached.
        assert_eq!(
            log.lines().filter(|l| l.starts_with("--gc ")).count(),
            1 + 2,
            "{log}"
        );
        assert_eq!(
            std::fs::read_to_string(state.join("instances")).unwrap(),
            ""
        );
    } else {
        assert!(
            warm.contains("fresh mount") && warm.contains("--gc IMAGE"),
            "{}",
            warm
        );
        assert_eq!(cached, 0, "{log}");
        assert_eq!(launches.len(), 8 * 2, "{log}");
    }
}
