//! The refusal table every front end must pass
//! (`sqfsmnt_test_support::refusals`), through the setuid command, as an
//! unprivileged test user. The Slurm suite runs the same table through
//! `srun` (crates/spank/tests/slurm.rs).

use sqfsmnt_test_support::refusals::{self, TABLE};

#[test]
fn the_shared_refusal_table() {
    sqfsmnt_test_support::case(env!("CARGO_BIN_EXE_squashfs-mount"), |fx| {
        let dir = fx.path("refusals");
        refusals::make_images(&dir);
        let root = fx.mount_point("refusals");
        for r in TABLE {
            let _site = r.site.map(sqfsmnt_test_support::site::config);
            let mut args: Vec<String> = Vec::new();
            if r.mutable_root {
                args.push("-r".into());
            }
            if let Some(w) = r.writable {
                args.push(format!("--writable={w}"));
            }
            for (img, sub) in r.pairs {
                args.push(format!(
                    "{}:{}",
                    dir.join(img).display(),
                    refusals::mount_point(&root, sub).display()
                ));
            }
            for (src, sub) in r.binds {
                args.push(format!(
                    "--bind-mount={}:{}",
                    dir.join(src).display(),
                    refusals::mount_point(&root, sub).display()
                ));
            }
            if !r.union.is_empty() {
                let list: Vec<String> = r
                    .union
                    .iter()
                    .map(|i| dir.join(i).display().to_string())
                    .collect();
                args.push(format!("--union={}:{}", list.join(","), root.display()));
            }
            args.extend(["--".into(), "true".into()]);
            let run = fx.run(&args);
            assert_eq!(run.code(), Some(1), "{}: {}", r.name, run.stderr());
            run.refused(r.expect);
        }
    });
}
