//! Issue 39's blocker, the way a user meets it: a dataset behind a
//! symbolic link (`ln -s ~/dataset HCP`, as `$SCRATCH` and project
//! directories often are) packed with `sqfs pack --split ... ./HCP hcp`
//! and launched with `--union` of the images, as an unprivileged test
//! user with the installed setuid binary, through FUSE (the user's own
//! images) and the kernel (root's copies). The launch must show the
//! dataset's own files, read from the images, and no link to the host's
//! tree. What mksquashfs makes of the link (an image whose root holds only
//! it) is flagged by `sqfs check`, and its launch shows why: the link, and
//! through it the host's files.

use std::fs;
use std::path::{Path, PathBuf};

use sqfsmnt_test_support::cmd::run;
use sqfsmnt_test_support::{install, s, site, Fixture};

use crate::case;

/// The images `sqfs pack --split` wrote for `prefix` in `dir`, in order.
fn split_images(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&format!("{prefix}-")) && n.ends_with(".sqfs")
        })
        .collect();
    v.sort();
    v
}

/// The way `--policy` says squashfs-mount mounts `image` for the user.
fn path_of(fx: &Fixture, image: &Path) -> &'static str {
    let r = fx.run(["--policy".to_string(), s(image)]);
    assert!(r.success(), "{}", r.stderr());
    let line = format!("{}: kernel (", image.display());
    if r.stdout().contains(&line) {
        "kernel"
    } else {
        "FUSE"
    }
}

/// Every entry under `dir` with its kind, and the digest of every file,
/// as the user sees them (in a launch when `dir` is a mount point).
const LIST: &str = "cd \"$1\" && find . -printf '%y %p\\n' | LC_ALL=C sort && find . -type f | LC_ALL=C sort | xargs cat | md5sum";

#[test]
fn a_dataset_behind_a_symlink_is_split_and_launched_as_its_files() {
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        let sqfs = Path::new(env!("CARGO_BIN_EXE_squashfs-mount")).with_file_name("sqfs");
        assert!(
            sqfs.exists(),
            "{} is not built: cargo build --release --workspace first (make test does)",
            sqfs.display()
        );
        let sqfs = install::install(&sqfs, &fx.root, 0o755);
        let home = fx.user_dir();
        // The user's dataset: 6 subjects of incompressible scans (so the
        // split needs several images), and the link to it.
        let made = fx.user_sh(&format!(
            "set -e; cd '{}'
             for s in 0 1 2 3 4 5; do for ses in 1 2; do
               mkdir -p dataset/sub-0$s/ses-$ses
               head -c 20000 /dev/urandom > dataset/sub-0$s/ses-$ses/scan.nii
               echo subject $s session $ses > dataset/sub-0$s/ses-$ses/notes.txt
             done; done
             echo a dataset > dataset/README
             ln -s \"$PWD/dataset\" HCP
             '{}' pack --no-progress --split 64K --block-size 16K --comp lz4 ./HCP hcp",
            home.display(),
            sqfs.display()
        ));
        made.quiet();
        let images = split_images(&home, "hcp");
        let want = run(fx
            .user
            .command("sh")
            .args(["-c", LIST, "sh"])
            .arg(home.join("dataset")));
        want.ok();
        // Root's copies of the same images take the kernel path.
        let roots: Vec<PathBuf> = images
            .iter()
            .map(|i| {
                let to = fx.path("images").join(format!(
                    "symlinked-{}",
                    i.file_name().unwrap().to_string_lossy()
                ));
                fs::copy(i, &to).unwrap();
                to
            })
            .collect();
        let m = fx.mount_point("hcp");
        for (set, path) in [(&images, "FUSE"), (&roots, "kernel")] {
            assert_eq!(path_of(fx, &set[0]), path, "{}", set[0].display());
            let union: Vec<String> = set.iter().map(|p| s(p)).collect();
            let got = fx.run([
                format!("--union={}:{}", union.join(","), m.display()),
                "--".into(),
                "sh".into(),
                "-c".into(),
                LIST.into(),
                "sh".into(),
                s(&m),
            ]);
            got.ok();
            assert_eq!(got.stdout(), want.stdout(), "{path} path");
            assert!(!got.stdout().contains("l ./"), "a link: {}", got.stdout());
        }
        for r in &roots {
            let _ = fs::remove_file(r);
        }
        assert!(images.len() >= 2, "{images:?}: {}", made.stdout());
        // 6 * (1 + 2 * 3) + 1 = 43 entries, counted in the images.
        assert_eq!(entries_stored(&made.stdout()), 43, "{}", made.stdout());
    });
}

/// The entries the images of a split hold, as `sqfs pack` counts them
/// (its lines `hcp-NN ... N entries`).
fn entries_stored(said: &str) -> u64 {
    said.lines()
        .filter(|l| l.starts_with("hcp-"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| x.starts_with("entr")).unwrap();
            w[at - 1].parse::<u64>().unwrap()
        })
        .sum()
}

#[test]
fn an_image_of_the_link_alone_is_flagged_and_shows_the_hosts_tree() {
    case(|fx| {
        let _conf = site::no_config();
        let _fuse = site::FuseForUsers::enable();
        let sqfs = Path::new(env!("CARGO_BIN_EXE_squashfs-mount")).with_file_name("sqfs");
        let sqfs = install::install(&sqfs, &fx.root, 0o755);
        let home = fx.user_dir();
        // What mksquashfs makes of the link (and sqfs pack did before it
        // followed links): a root directory holding only the link.
        let made = fx.user_sh(&format!(
            "set -e; cd '{}'; mkdir dataset; echo host file > dataset/README
             ln -s \"$PWD/dataset\" HCP
             mksquashfs HCP old.sqfs -noappend -quiet -no-progress >/dev/null
             ! '{}' check old.sqfs",
            home.display(),
            sqfs.display()
        ));
        made.ok();
        assert!(
            made.stderr()
                .contains("root holds nothing but a symbolic link, HCP -> "),
            "{}",
            made.stderr()
        );
        // Mounted, it shows the link, and reads go to the host's tree.
        let m = fx.mount_point("old");
        let img = home.join("old.sqfs");
        let r = fx.run([
            format!("{}:{}", img.display(), m.display()),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "readlink \"$1/HCP\"; cat \"$1/HCP/README\"".into(),
            "sh".into(),
            s(&m),
        ]);
        r.ok();
        assert_eq!(
            r.stdout(),
            format!("{}/dataset\nhost file\n", home.display())
        );
    });
}
