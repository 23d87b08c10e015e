//! The sequence without root (`cargo test`, any machine): [`mount_all`]
//! under test credentials, with the recording fake (`fake_root_side.rs`) in place of
//! every root-side operation. Images are copies of testdata/tiny.sqfs in a
//! directory of the test's own; mount points are real directories there
//! (resolved and judged as the caller, as always); nothing is mounted.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::fake_root_side::Recorder;
use super::{mount_all, Context, FrontEnd, FuseServer, Mounted, WorkingDir};
use crate::cli::{self, Invocation};
use crate::config::policy::KernelImages;
use crate::config::Settings;
use crate::privilege::fake_privilege::Fake;
use crate::privilege::Credentials;
use crate::system::error::Failure;
use crate::system::Uid;
use squashfs_format::kernel::KernelConfig;

const TINY: &[u8] = include_bytes!("../../../../testdata/tiny.sqfs");

/// A directory of the test's own, removed on drop.
struct Place {
    dir: PathBuf,
    images: Vec<PathBuf>,
}

impl Place {
    fn new() -> Place {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sqfsmnt-unit-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("mkdir");
        mode(&dir, 0o755);
        Place {
            dir,
            images: Vec::new(),
        }
    }

    /// A copy of tiny.sqfs, world-readable.
    fn image(&mut self, name: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, TINY).expect("write");
        mode(&path, 0o644);
        self.images.push(path.clone());
        path.display().to_string()
    }

    /// A directory anyone may enter (and with `writable`, create in).
    fn dir(&self, name: &str, writable: bool) -> String {
        let path = self.dir.join(name);
        std::fs::create_dir_all(&path).expect("mkdir");
        mode(&path, if writable { 0o777 } else { 0o755 });
        path.display().to_string()
    }

    /// The fake, with the site's `settings`, knowing the images' names.
    fn recorder(&self, settings: Settings) -> Recorder {
        let mut r = Recorder::new(settings);
        for i in &self.images {
            r.knows(i);
        }
        r
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The settings of a site whose kernel takes every image.
fn kernel_for_all() -> Settings {
    let mut s = Settings::default();
    s.policy.kernel_images = KernelImages::All;
    s
}

/// `squashfs-mount ARGS -- true` from the place's directory, as the setuid
/// command (or rootless), with the fake.
fn run_as<const ROOTLESS: bool>(
    place: &Place,
    rec: &mut Recorder,
    args: &[&str],
) -> Result<Mounted, Failure> {
    run_with::<ROOTLESS>(place, rec, args, "/bin/true")
}

/// [`run_as`], the FUSE server (and the layer helper next to it) in
/// `server`'s directory.
fn run_with<const ROOTLESS: bool>(
    place: &Place,
    rec: &mut Recorder,
    args: &[&str],
    server: &str,
) -> Result<Mounted, Failure> {
    let mut argv: Vec<OsString> = args.iter().map(OsString::from).collect();
    argv.extend(["--".into(), "true".into()]);
    let Ok(Invocation::Run(request)) = cli::parse(&argv) else {
        panic!("not a run: {args:?}");
    };
    let ctx = Context {
        front: &FrontEnd::default(),
        cwd: WorkingDir::At(place.dir.clone().into_os_string()),
        fuse_server: FuseServer::At(Some(server.into())),
        caller_limits: None,
    };
    // After the place: the credentials act as nobody when the tests run
    // as root, and give root back on drop.
    let mut creds = Fake::<ROOTLESS>::new();
    mount_all(&mut creds, rec, &request, &ctx)
}

fn run(place: &Place, rec: &mut Recorder, args: &[&str]) -> Result<Mounted, Failure> {
    run_as::<false>(place, rec, args)
}

fn pair(image: &str, mount_point: &str) -> String {
    format!("{image}:{mount_point}")
}

/// The level-1 notes that mention `what`.
fn notes<'a>(mounted: &'a Mounted, what: &str) -> Vec<&'a str> {
    mounted
        .notes
        .iter()
        .filter(|(level, n)| *level == 1 && n.contains(what))
        .map(|(_, n)| n.as_str())
        .collect()
}

#[test]
fn one_image_at_two_mount_points_is_opened_once_and_cached_once() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(kernel_for_all());
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&a, &m2)]).expect("mounted");
    assert_eq!(rec.lines("launch slot").len(), 1, "{:?}", rec.log);
    assert_eq!(
        &rec.log[2..],
        [
            "open the cache",
            "reuse a.sqfs",
            // Again once the making is claimed (single flight).
            "reuse a.sqfs",
            "loop a.sqfs for the cache",
            "place a.sqfs: cached",
            "attach a.sqfs#cached on m1",
            "attach a.sqfs#cached on m2",
        ]
    );
    let list = mounted.mount_list.to_string_lossy().into_owned();
    assert_eq!(list, format!("{a}:{m1},{a}:{m2}"));
    assert_eq!(
        notes(&mounted, "a.sqfs: kernel"),
        [format!(
            "{a}: kernel (kernel-images = all); new instance, kept in the image cache"
        )]
    );
}

#[test]
fn a_cached_instance_is_reused_without_a_loop_device() {
    let mut place = Place::new();
    let (a, b) = (place.image("a.sqfs"), place.image("b.sqfs"));
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(kernel_for_all());
    rec.cache_holds(&a);
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&b, &m2)]).expect("mounted");
    assert_eq!(
        &rec.log[3..],
        [
            "reuse a.sqfs b.sqfs",
            "reuse b.sqfs",
            "loop b.sqfs for the cache",
            "place b.sqfs: cached",
            "attach a.sqfs#cached on m1",
            "attach b.sqfs#cached on m2",
        ]
    );
    assert_eq!(notes(&mounted, "cached instance reused").len(), 1);
}

/// The running kernel's configuration is root's read, made through the
/// root side, and only for a fresh instance: an image whose compressor
/// the kernel lacks is refused before any loop device; a cached instance
/// proves the kernel mounts it, and nothing is read.
#[test]
fn the_kernel_configuration_is_read_through_the_root_side_for_fresh_instances_only() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let without_compressors = KernelConfig {
        source: "the fake".into(),
        text: "CONFIG_SQUASHFS=y\n".into(),
    };
    let mut rec = place.recorder(kernel_for_all());
    rec.kernel = Some(without_compressors.clone());
    let refused = run(&place, &mut rec, &[&pair(&a, &m)])
        .err()
        .expect("refused");
    assert_eq!(rec.kernel_reads, 1, "{:?}", rec.log);
    assert!(refused.to_string().contains("a.sqfs"), "{refused}");
    assert!(rec.lines("loop").is_empty(), "{:?}", rec.log);

    let mut rec = place.recorder(kernel_for_all());
    rec.kernel = Some(without_compressors);
    rec.cache_holds(&a);
    run(&place, &mut rec, &[&pair(&a, &m)]).expect("mounted");
    assert_eq!(rec.kernel_reads, 0, "{:?}", rec.log);
}

#[test]
fn without_room_in_the_cache_the_instance_is_private_and_counted_for_the_caller() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(kernel_for_all());
    rec.room = 0;
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&a, &m2)]).expect("mounted");
    assert_eq!(
        &rec.log[5..],
        [
            "loop a.sqfs for the cache".to_string(),
            "place a.sqfs: no room".into(),
            // Two copies: the fresh instance and one clone of it (each
            // mount takes the last one left).
            "attach a.sqfs#fresh+clone on m1".into(),
            "attach a.sqfs#fresh on m2".into(),
        ]
    );
    assert_eq!(
        notes(&mounted, "not cached: the image cache had no room for it").len(),
        1
    );
}

#[test]
fn beyond_the_callers_share_of_the_cache_an_instance_is_private_and_theirs() {
    let mut place = Place::new();
    let (a, b) = (place.image("a.sqfs"), place.image("b.sqfs"));
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(kernel_for_all());
    rec.share = 1;
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&b, &m2)]).expect("mounted");
    let uid = rec.caller_uid();
    assert_eq!(
        rec.lines("loop"),
        [
            "loop a.sqfs for the cache".to_string(),
            format!("loop b.sqfs for uid {uid}"),
        ]
    );
    // Only what was made for the cache is offered to it.
    assert_eq!(rec.lines("place"), ["place a.sqfs: cached"]);
    assert_eq!(
        notes(&mounted, "not cached: the image cache had no room for it").len(),
        1
    );
}

#[test]
fn a_broken_cache_is_said_once_and_every_instance_is_private() {
    let mut place = Place::new();
    let (a, b) = (place.image("a.sqfs"), place.image("b.sqfs"));
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(kernel_for_all());
    rec.cache = None;
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&b, &m2)]).expect("mounted");
    let uid = rec.caller_uid();
    assert_eq!(
        &rec.log[3..],
        [
            format!("loop a.sqfs for uid {uid}"),
            format!("loop b.sqfs for uid {uid}"),
            "attach a.sqfs#fresh on m1".into(),
            "attach b.sqfs#fresh on m2".into(),
        ]
    );
    assert_eq!(
        mounted.warnings,
        ["image cache unavailable (/run/squashfs-mount is not a directory owned by root with mode 0700); mounting private instances"]
    );
    assert_eq!(
        notes(&mounted, "the image cache could not be used").len(),
        2
    );
}

#[test]
fn no_cache_leaves_the_cache_alone() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let mut rec = place.recorder(kernel_for_all());
    let mounted = run(&place, &mut rec, &["--no-cache", &pair(&a, &m)]).expect("mounted");
    let uid = rec.caller_uid();
    // Only read, to count loop devices (see `mounts::loop_device`).
    assert_eq!(
        &rec.log[2..],
        [
            "read the cache's records".into(),
            format!("loop a.sqfs for uid {uid}"),
            "attach a.sqfs#fresh on m".into()
        ]
    );
    assert_eq!(notes(&mounted, "not cached: --no-cache").len(), 1);
}

#[test]
fn a_launch_waits_for_another_making_the_same_instance() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let mut rec = place.recorder(kernel_for_all());
    rec.another_launch_makes(&a);
    run(&place, &mut rec, &[&pair(&a, &m)]).expect("mounted");
    assert_eq!(
        &rec.log[3..],
        [
            "reuse a.sqfs",
            "await a.sqfs",
            "reuse a.sqfs",
            "attach a.sqfs#cached on m"
        ]
    );
}

#[test]
fn a_writable_union_is_stacked_over_one_tmpfs() {
    let mut place = Place::new();
    let (a, b) = (place.image("a.sqfs"), place.image("b.sqfs"));
    let (u, m) = (place.dir("u", false), place.dir("m", false));
    let mut rec = place.recorder(kernel_for_all());
    let union = format!("--union={a},{b}:{u}");
    let mounted =
        run(&place, &mut rec, &["--writable=16M", &union, &pair(&a, &m)]).expect("mounted");
    let after = |line: &str| rec.log.iter().position(|l| l == line).expect(line);
    assert!(
        after("writable tmpfs of 16777216 bytes") < after("attach (a.sqfs#cached + writable) on m")
    );
    assert_eq!(
        rec.lines("stack"),
        [
            format!("stack a.sqfs#cached + writable for {a}:{m}"),
            format!("stack a.sqfs#cached over b.sqfs#cached + writable for {a},{b}:{u}"),
        ]
    );
    // a is used twice (the union's top layer, and alone): one instance,
    // two clones of it from the cache.
    assert_eq!(
        rec.lines("loop"),
        ["loop a.sqfs for the cache", "loop b.sqfs for the cache"]
    );
    let list = mounted.mount_list.to_string_lossy().into_owned();
    assert_eq!(list, format!("{a}:{m},{a}:{u},{b}:{u}"));
}

#[test]
fn a_hard_link_is_the_same_image() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let link = place.dir.join("link.sqfs");
    std::fs::hard_link(&a, &link).expect("link");
    let link = link.display().to_string();
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(kernel_for_all());
    run(&place, &mut rec, &[&pair(&a, &m1), &pair(&link, &m2)]).expect("mounted");
    assert_eq!(rec.lines("loop"), ["loop a.sqfs for the cache"]);
    assert_eq!(rec.lines("attach").len(), 2);
}

#[test]
fn binds_and_images_are_attached_in_path_order() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let sub = place.dir("m/sub", false);
    let src = place.dir("src", false);
    let mut rec = place.recorder(kernel_for_all());
    let bind = format!("--bind-mount={src}:{sub}");
    let mounted = run(&place, &mut rec, &[&bind, &pair(&a, &m)]).expect("mounted");
    let subject = format!("bind {src}:{sub}");
    assert_eq!(
        rec.log
            .iter()
            .filter(|l| l.starts_with("copy") || l.starts_with("attach"))
            .collect::<Vec<_>>(),
        [
            &format!("copy {subject}"),
            &"attach a.sqfs#cached on m".to_string(),
            &format!("attach {subject} on sub"),
        ]
    );
    assert_eq!(notes(&mounted, "bound on").len(), 1);
}

#[test]
fn mutable_root_makes_a_missing_mount_point_in_the_view() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let parent = place.dir("view", true);
    place.dir("view/old", false);
    let new = format!("{parent}/new");
    let mut rec = place.recorder(kernel_for_all());
    let mounted = run(&place, &mut rec, &["-r", &pair(&a, &new)]).expect("mounted");
    assert_eq!(rec.lines("mirror"), ["mirror view (1 entries)"]);
    assert_eq!(rec.lines("attach"), ["attach a.sqfs#cached on new"]);
    assert_eq!(notes(&mounted, "-r: created").len(), 1);
}

/// The settings of a site whose kernel takes no image (FUSE for all).
fn fuse_for_all() -> Settings {
    let mut s = Settings::default();
    s.policy.kernel_images = KernelImages::None;
    s
}

/// The uid the test credentials act as.
fn test_caller() -> Uid {
    Fake::<false>::new().caller().uid
}

#[test]
fn images_the_policy_does_not_trust_get_fuse_servers_kept_in_the_cache() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(fuse_for_all());
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&a, &m2)]).expect("mounted");
    let uid = rec.caller_uid();
    assert_eq!(
        &rec.log[2..],
        [
            "open the cache".to_string(),
            format!("log of uid {uid}"),
            "reuse fuse:a.sqfs".into(),
            // Again once the making is claimed (single flight).
            "reuse fuse:a.sqfs".into(),
            "fuse a.sqfs, server drops to the caller, detached".into(),
            "facts of a.sqfs#fuse".into(),
            "place fuse:a.sqfs: cached".into(),
            // Its server's read errors, told when the launch exits.
            "reporter for servers [1001]".into(),
            "attach fuse:a.sqfs#cached on m1".into(),
            "attach fuse:a.sqfs#cached on m2".into(),
        ]
    );
    // The cached instance's server outlives the launch: not the launch's
    // to end.
    assert!(mounted.servers.is_empty());
    assert_eq!(
        notes(&mounted, "a.sqfs: FUSE"),
        [format!("{a}: FUSE (kernel-images = none); a FUSE server of yours started, its instance kept in the image cache for your next launches")]
    );
}

#[test]
fn without_the_cache_a_fuse_server_lives_as_long_as_the_launch() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(fuse_for_all());
    let args = ["--no-cache", &pair(&a, &m1), &pair(&a, &m2)];
    let mounted = run(&place, &mut rec, &args).expect("mounted");
    assert_eq!(
        &rec.log[2..],
        [
            "fuse a.sqfs, server drops to the caller",
            "attach a.sqfs#fuse+clone on m1",
            "attach a.sqfs#fuse on m2",
        ]
    );
    assert_eq!(mounted.servers.len(), 1);
    assert_eq!(
        notes(&mounted, "not cached: --no-cache").len(),
        1,
        "{:?}",
        mounted.notes
    );
}

#[test]
fn the_callers_cached_fuse_instance_is_reused_and_no_server_started() {
    let mut place = Place::new();
    let (a, b) = (place.image("a.sqfs"), place.image("b.sqfs"));
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    let mut rec = place.recorder(fuse_for_all());
    rec.cache_holds_key(Recorder::key(&a, Some(test_caller())));
    // Someone else's FUSE instance of b, and b's kernel instance: neither
    // is the caller's FUSE instance.
    rec.cache_holds_key(Recorder::key(&b, Some(Uid::from_raw(4321))));
    rec.cache_holds(&b);
    let mounted = run(&place, &mut rec, &[&pair(&a, &m1), &pair(&b, &m2)]).expect("mounted");
    assert_eq!(
        &rec.log[4..],
        [
            "reuse fuse:a.sqfs fuse:b.sqfs",
            "reuse fuse:b.sqfs",
            "fuse b.sqfs, server drops to the caller, detached",
            "facts of b.sqfs#fuse",
            "place fuse:b.sqfs: cached",
            "reporter for servers [4000, 1001]",
            "attach fuse:a.sqfs#cached on m1",
            "attach fuse:b.sqfs#cached on m2",
        ]
    );
    assert_eq!(notes(&mounted, "your cached FUSE instance reused").len(), 1);
}

#[test]
fn a_cached_fuse_instance_whose_server_is_gone_is_said_and_replaced() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let mut rec = place.recorder(fuse_for_all());
    let key = Recorder::key(&a, Some(test_caller()));
    rec.cache_holds_key(key);
    rec.gone.insert(key);
    let mounted = run(&place, &mut rec, &[&pair(&a, &m)]).expect("mounted");
    assert_eq!(
        mounted.warnings,
        [format!(
            "{a}: your cached FUSE instance's server (pid 4242) is gone; starting a new one"
        )]
    );
    assert_eq!(rec.lines("fuse ").len(), 1);
    assert_eq!(rec.lines("attach"), ["attach fuse:a.sqfs#cached on m"]);
}

#[test]
fn a_launch_waits_for_another_making_the_same_fuse_instance() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let mut rec = place.recorder(fuse_for_all());
    rec.theirs.insert(Recorder::key(&a, Some(test_caller())));
    // Another user's launch making its own instance of the same file is
    // not waited for.
    rec.theirs
        .insert(Recorder::key(&a, Some(Uid::from_raw(4321))));
    let mounted = run(&place, &mut rec, &[&pair(&a, &m)]).expect("mounted");
    assert_eq!(
        &rec.log[4..],
        [
            "reuse fuse:a.sqfs",
            "await fuse:a.sqfs",
            "reuse fuse:a.sqfs",
            "reporter for servers [4000]",
            "attach fuse:a.sqfs#cached on m"
        ]
    );
    assert!(rec.lines("fuse ").is_empty());
    assert_eq!(notes(&mounted, "your cached FUSE instance reused").len(), 1);
}

#[test]
fn without_room_a_fuse_instance_is_private_and_its_server_the_launchs() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let mut rec = place.recorder(fuse_for_all());
    rec.room = 0;
    let mounted = run(&place, &mut rec, &[&pair(&a, &m)]).expect("mounted");
    assert_eq!(rec.lines("place"), ["place fuse:a.sqfs: no room"]);
    assert_eq!(rec.lines("attach"), ["attach a.sqfs#fuse on m"]);
    assert_eq!(mounted.servers.len(), 1);
    assert_eq!(
        notes(
            &mounted,
            "for this launch only, not cached: the image cache had no room"
        )
        .len(),
        1
    );
}

#[test]
fn kernel_and_fuse_images_share_one_cache_visit_each() {
    let mut place = Place::new();
    let (a, b) = (place.image("a.sqfs"), place.image("b.sqfs"));
    let (m1, m2) = (place.dir("m1", false), place.dir("m2", false));
    // a is the test's own, b anyone may change: the kernel takes a only.
    mode(Path::new(&b), 0o666);
    let mut settings = Settings::default();
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&a).expect("stat"));
    settings.policy.trusted_owners.push(Uid::from_raw(owner));
    let mut rec = place.recorder(settings);
    run(&place, &mut rec, &[&pair(&a, &m1), &pair(&b, &m2)]).expect("mounted");
    assert_eq!(rec.lines("open the cache").len(), 1, "{:?}", rec.log);
    assert_eq!(
        rec.lines("reuse"),
        [
            "reuse fuse:b.sqfs",
            "reuse fuse:b.sqfs",
            "reuse a.sqfs",
            "reuse a.sqfs"
        ]
    );
    assert_eq!(
        rec.lines("attach"),
        [
            "attach a.sqfs#cached on m1",
            "attach fuse:b.sqfs#cached on m2"
        ]
    );
}

#[test]
fn rootless_mode_has_no_root_steps() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let mut rec = place.recorder(kernel_for_all());
    let mounted = run_as::<true>(&place, &mut rec, &["--quiet", &pair(&a, &m)]).expect("mounted");
    // No admission, no launch slot, no cache: the site cannot grant the
    // kernel path, and the server is the caller's from the start.
    assert_eq!(
        rec.log,
        ["settings", "fuse a.sqfs", "attach a.sqfs#fuse on m"]
    );
    assert_eq!(
        notes(&mounted, "a.sqfs: FUSE"),
        [format!("{a}: FUSE (rootless mode: no kernel path); a FUSE server of yours started for this launch only, not cached: rootless mode has no image cache")]
    );
}

#[test]
fn a_refusal_stops_before_any_root_side_operation_of_its_stage() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let missing = format!("{}/missing", place.dir.display());
    let mut rec = place.recorder(kernel_for_all());
    let e = run(&place, &mut rec, &[&pair(&a, &missing)])
        .err()
        .expect("refused");
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(rec.lines("attach").is_empty());
}

/// `check` (the plugin's, on the login node) runs stages 0 to 2 dry: what
/// they refuse it refuses in the same words, from the plan (a mount point
/// given twice), the images (one missing, one given twice in a union) and
/// the bind sources (a file); what they accept passes.
#[test]
fn the_dry_check_refuses_what_the_sequence_refuses_in_the_same_words() {
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let missing = format!("{}/missing.sqfs", place.dir.display());
    let dry = |args: &[String]| {
        let mut argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        argv.extend(["--".into(), "true".into()]);
        let Ok(Invocation::Run(request)) = cli::parse(&argv) else {
            panic!("not a run: {args:?}");
        };
        let cwd = WorkingDir::At(place.dir.clone().into_os_string());
        let settings = Settings::default();
        let creds = Fake::<false>::new();
        super::check_under(&creds, &request, &cwd, &FrontEnd::default(), &settings)
    };
    let refused = [
        vec![pair(&a, &m), pair(&a, &m)],
        vec![pair(&missing, &m)],
        vec![format!("--union={a},{a}:{m}")],
        vec![format!("--bind-mount={a}:{m}")],
    ];
    for args in refused {
        let mut rec = place.recorder(Settings::default());
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let launch = run(&place, &mut rec, &argv).err().expect("refused");
        let checked = dry(&args).expect_err("refused by the check");
        assert_eq!(checked.to_string(), launch.to_string(), "{args:?}");
    }
    dry(&[pair(&a, &m)]).expect("passes");
}

/// Issue 29: the kept layer's checks are a stage of the sequence. A
/// layer helper missing, or a DIR refused (here: on /proc), stops the
/// call after admission, before anything is opened or mounted; with both
/// in order, the call goes on to mount.
#[test]
fn a_refused_kept_layer_stops_the_call_before_anything_is_mounted() {
    use crate::layer::LayerError;
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let lib = place.dir("lib", false);
    let server = format!("{lib}/squashfs-mount-fuse");
    std::fs::write(&server, "").expect("write");
    let layer = |dir: &str| format!("--writable={dir}");
    let only_admitted = |rec: &Recorder| {
        rec.log
            .iter()
            .all(|l| l == "settings" || l.starts_with("launch slot"))
    };
    // No helper next to the server.
    let mut rec = place.recorder(kernel_for_all());
    let args = [layer(&format!("{}/l", place.dir.display())), pair(&a, &m)];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = run_with::<false>(&place, &mut rec, &args, &server)
        .err()
        .expect("refused");
    assert!(
        matches!(
            e.kind::<LayerError>(),
            Some(LayerError::PluginHelperUnopenable(..))
        ),
        "{e}"
    );
    assert!(only_admitted(&rec), "{:?}", rec.log);
    // A DIR on a file system that cannot hold a layer.
    std::fs::write(format!("{lib}/squashfs-mount-layer"), "").expect("write");
    let mut rec = place.recorder(kernel_for_all());
    let args = [layer("/proc/sqfsmnt-layer"), pair(&a, &m)];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = run_with::<false>(&place, &mut rec, &args, &server)
        .err()
        .expect("refused");
    assert!(
        matches!(e.kind::<LayerError>(), Some(LayerError::FileSystem { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("/proc/sqfsmnt-layer is on"), "{e}");
    assert!(only_admitted(&rec), "{:?}", rec.log);
    // Both in order: mounted, the helper and DIR handed to the front end.
    let dir = format!("{}/l", place.dir("layers", true));
    let mut rec = place.recorder(kernel_for_all());
    let args = [layer(&dir), pair(&a, &m)];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mounted = run_with::<false>(&place, &mut rec, &args, &server).expect("mounted");
    let kept = mounted.layer.expect("a kept layer");
    assert_eq!(
        kept.helper,
        OsString::from(format!("{lib}/squashfs-mount-layer"))
    );
    assert_eq!(kept.plan.dir, OsString::from(dir));
    assert!(!rec.lines("attach").is_empty(), "{:?}", rec.log);
}

/// Issue 29: the kept layer's last refusals are the sequence's too, once
/// everything is attached (`kept_layer::claim`): a DIR another launch
/// holds, a layer made on other images, a mount inside an image's mount
/// point. The sequence takes DIR's lock as the caller and hands it,
/// held, to the front end; a refusal leaves no lock held.
#[test]
fn a_kept_layer_in_use_or_made_on_other_images_is_refused_by_the_sequence() {
    use crate::layer::LayerError;
    use crate::system::{try_lock, unlock, LockKind};
    use std::os::fd::AsFd;
    let mut place = Place::new();
    let a = place.image("a.sqfs");
    let m = place.dir("m", false);
    let sub = place.dir("m/sub", false);
    let src = place.dir("src", false);
    let lib = place.dir("lib", false);
    let server = format!("{lib}/squashfs-mount-fuse");
    for program in [&server, &format!("{lib}/squashfs-mount-layer")] {
        std::fs::write(program, "").expect("write");
    }
    let layers = place.dir("layers", true);
    let dir = format!("{layers}/l");
    let w = format!("--writable={dir}");
    let launch = |args: &[&str]| {
        let mut rec = place.recorder(kernel_for_all());
        let r = run_with::<false>(&place, &mut rec, args, &server);
        (r, rec)
    };
    let refused = |r: Result<Mounted, Failure>| r.err().expect("refused");
    // Claimed: DIR made, its lock held by what the sequence hands over.
    let (first, rec) = launch(&[&w, &pair(&a, &m)]);
    let first = first.expect("mounted").layer.expect("a kept layer");
    assert!(first.plan.dir_made, "{:?}", first.plan);
    assert!(!rec.lines("attach").is_empty(), "{:?}", rec.log);
    // A second launch on DIR meanwhile: refused after attach.
    let (second, rec) = launch(&[&w, &pair(&a, &m)]);
    let e = refused(second);
    assert!(
        matches!(e.kind::<LayerError>(), Some(LayerError::InUse { .. })),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains(&format!("{dir} is in use by another launch")),
        "{e}"
    );
    assert!(!rec.lines("attach").is_empty(), "{:?}", rec.log);
    drop(first);
    // A layer made on other images at m.
    let real = std::fs::canonicalize(&m).expect("realpath");
    let stamp = format!(
        "{}\nmount 0 {}\nimage {} 4096 /elsewhere/b.sqfs\n",
        squashfs_format::stamp::HEADER,
        real.display(),
        "0".repeat(64)
    );
    let stamp_file = format!("{dir}/{}", crate::layer::STAMP_FILE);
    std::fs::write(&stamp_file, stamp).expect("write the stamp");
    mode(Path::new(&stamp_file), 0o644);
    let e = refused(launch(&[&w, &pair(&a, &m)]).0);
    assert!(
        matches!(e.kind::<LayerError>(), Some(LayerError::Stamp(_))),
        "{e}"
    );
    let said = format!("{dir} does not belong to the images on {}", real.display());
    assert!(e.to_string().contains(&said), "{e}");
    // Neither refusal left DIR's lock held.
    let lock = std::fs::File::open(format!("{dir}/lock")).expect("the lock file");
    assert_eq!(try_lock(lock.as_fd(), LockKind::Exclusive), Ok(true));
    unlock(lock.as_fd()).expect("unlock");
    // A bind mount inside the image's mount point: refused before DIR is
    // made.
    let fresh = format!("{layers}/fresh");
    let bind = format!("--bind-mount={src}:{sub}");
    let e = refused(launch(&[&format!("--writable={fresh}"), &pair(&a, &m), &bind]).0);
    assert!(
        matches!(e.kind::<LayerError>(), Some(LayerError::Nested { .. })),
        "{e}"
    );
    assert!(!Path::new(&fresh).exists());
}
