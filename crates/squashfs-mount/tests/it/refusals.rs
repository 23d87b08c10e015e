//! The refusal table every front end must pass
//! (`sqfsmnt_test_support::refusals`), through the setuid command, as an
//! unprivileged test user. The Slurm suite runs the same table through
//! `srun` (crates/spank/tests/slurm.rs).

use sqfsmnt_test_support::install::LAYER_HELPER;
use sqfsmnt_test_support::refusals::{self, HelperMustNotRun, TABLE};

#[test]
fn the_shared_refusal_table() {
    sqfsmnt_test_support::case(env!("CARGO_BIN_EXE_squashfs-mount"), |fx| {
        let dir = fx.path("refusals");
        let root = fx.mount_point("refusals");
        let _busy = refusals::make_images(&dir, &fx.user, &root);
        // Every refusal is the sequence's: the layer helper never runs.
        let _helper = HelperMustNotRun::at(&fx.path("lib/squashfs-mount").join(LAYER_HELPER));
        for r in TABLE {
            let _site = r.site.map(sqfsmnt_test_support::site::config);
            let mut args: Vec<String> = Vec::new();
            if r.mutable_root {
                args.push("-r".into());
            }
            if let Some(w) = r.writable {
                args.push(format!("--writable={}", refusals::writable(&dir, w)));
            }
            args.extend(refusals::pairs(r, &dir, &root));
            for bind in refusals::binds(r, &dir, &root) {
                args.push(format!("--bind-mount={bind}"));
            }
            if !r.union.is_empty() {
                let list = refusals::union(r, &dir);
                args.push(format!("--union={list}:{}", root.display()));
            }
            args.extend(["--".into(), "true".into()]);
            let run = fx.run(&args);
            assert_eq!(run.code(), Some(1), "{}: {}", r.name, run.stderr());
            run.refused(r.expect);
            refusals::assert_no_lock_left(&dir, r);
        }
    });
}

/// Removes a test's installed copies (setuid and setgid files) however
/// the test ends.
struct RemoveTree(std::path::PathBuf);
impl Drop for RemoveTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A set-group-ID installation is refused before anything else happens
/// (as uenv's tool refuses it), with one line naming the file and the fix;
/// also where the caller's own group is the file's (the effective gid is
/// then the real one: only the file's mode tells), and for a copy that is
/// only setgid (rootless mode with the bit). A plain copy (rootless mode)
/// and the setuid install still run.
#[test]
fn a_set_group_id_installation_is_refused() {
    use sqfsmnt_test_support::cmd::run;
    use sqfsmnt_test_support::install::install;
    sqfsmnt_test_support::case(env!("CARGO_BIN_EXE_squashfs-mount"), |fx| {
        let prefix = fx.path("setgid-install");
        let _gone = RemoveTree(prefix.clone());
        let (img, m) = fx.image_at("setgid", &[("hello", "hi\n")]);
        let launch = |bin: &std::path::Path| {
            run(fx
                .user
                .command(bin)
                .arg(format!("{}:{}", img.display(), m.display()))
                .args(["--", "cat", &format!("{}/hello", m.display())]))
        };
        let refused = |bin: &std::path::Path, mode: u32| {
            for args in [vec!["--version"], vec!["--help"]] {
                let run = run(fx.user.command(bin).args(&args));
                run.refused(&["set-group-ID", &format!("mode {mode:o}"), "chmod g-s"]);
                run.refused(&[&bin.display().to_string()]);
                assert_eq!(run.stdout(), "", "{args:?} printed: {run:?}");
            }
            let run = launch(bin);
            run.refused(&["set-group-ID", "chmod g-s"]);
            assert_eq!(run.stdout(), "", "the command ran: {run:?}");
        };
        for mode in [0o6755, 0o2755] {
            let bin = install(&fx.bin, &prefix, mode);
            refused(&bin, mode);
        }
        // The file's group is the caller's: effective gid == real gid.
        let bin = install(&fx.bin, &prefix, 0o4755);
        std::os::unix::fs::chown(&bin, Some(0), Some(fx.gid)).expect("chown");
        let perm = std::os::unix::fs::PermissionsExt::from_mode(0o6755);
        std::fs::set_permissions(&bin, perm).expect("chmod");
        refused(&bin, 0o6755);
        // Without the bit: the setuid install and a rootless copy run.
        assert_eq!(launch(&fx.bin).ok().stdout(), "hi\n");
        let own = fx.rootless_copy();
        assert_eq!(launch(&own).ok().stdout(), "hi\n");
    });
}
