//! The one privileged sequence: [`mount_all`]. The setuid command
//! (`launch.rs`) and the Slurm plugin's worker thread both call it with
//! their own [`Credentials`]; everything they may do, and every refusal,
//! is here.
//!
//! | file        | concern                                               |
//! |-------------|-------------------------------------------------------|
//! | `plan.rs`   | checks without system calls, mount order (pure)       |
//! | `source.rs` | kernel instances: cached clones or fresh              |
//! | `bind.rs`   | `--bind-mount`: sources pinned as the caller, copies   |
//! | `view.rs`   | `-r`: missing mount points made in the view only      |
//! | `report.rs` | what `--verbose` says about each image                |
//! | `mod.rs`    | the sequence                                          |

pub mod bind;
pub mod fuse_source;
mod fuse_stage;
pub mod plan;
mod report;
pub mod source;
pub mod view;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};

use crate::cli::RunRequest;
use crate::config::Settings;
use crate::environment;
use crate::error::Failure;
use crate::fuse;
use crate::fuse_server;
use crate::image::Image;
use crate::mount;
use crate::mountpoint::MountPoint;
use crate::overlay::{self, WritableTmpfs};
use crate::privilege::Credentials;
use crate::system;
use crate::system::limits::CallerLimits;
pub use plan::{FrontEnd, Plan};
use source::{KernelSource, Wanted};

/// Where `squashfs-mount-fuse` is. Looked up only when an image needs it:
/// finding the program's own location costs a /proc lookup.
pub enum FuseServer {
    /// Known (None: no FUSE path available).
    At(Option<OsString>),
    /// Next to the running program (`fuse::server_for_command`): the
    /// setuid command's only place.
    NextToProgram,
    /// Rootless mode: next to the program, in the packages' places, then
    /// on `path`, the caller's PATH (`fuse_server.rs`).
    Search { path: Option<OsString> },
}

impl FuseServer {
    /// The server, or why there is none for the image `first` (the first
    /// one the FUSE path serves).
    pub(super) fn locate(&self, first: &str) -> Result<OsString, Failure> {
        let missing = || {
            Failure::new(format!(
                "{first}: the site policy serves this image through FUSE, but {} is not installed",
                fuse::SERVER_NAME
            ))
        };
        match self {
            FuseServer::At(path) => path.clone().ok_or_else(missing),
            FuseServer::NextToProgram => fuse::server_for_command().ok_or_else(missing),
            FuseServer::Search { path } => fuse_server::find_for_rootless(path.as_deref())
                .map_err(|looked| Failure::new(fuse_server::not_found(first, &looked))),
        }
    }
}

/// What a front end tells the sequence besides the request.
pub struct Context<'a> {
    pub settings: &'a Settings,
    pub front: &'a FrontEnd,
    /// The absolute current directory relative paths are resolved against.
    pub cwd: OsString,
    /// Where `squashfs-mount-fuse` is.
    pub fuse_server: FuseServer,
    /// Rootless: no kernel path at all (no root, no loop devices, no cache).
    pub rootless: bool,
    /// The caller's resource limits, when the front end raised them for
    /// the privileged phase: the FUSE servers get them back.
    pub caller_limits: Option<&'a CallerLimits>,
}

/// The outcome: everything is mounted in the (process's or thread's)
/// private mount namespace.
#[derive(Debug)]
pub struct Mounted {
    /// `UENV_MOUNT_LIST` for the command.
    pub mount_list: OsString,
    /// What `--verbose` reports, each line with the verbosity it needs
    /// (1: which path each image took and why, cache reuse, binds, `-r`;
    /// 2: where each mount point resolved; 3: how long each step took).
    pub notes: Vec<(u8, String)>,
    /// Warnings worth printing even without `--verbose` (the cache or the
    /// loop-device budget could not be used as they should have been).
    pub warnings: Vec<String>,
    /// Pidfds of the FUSE servers started (the Slurm plugin kills them
    /// when the step ends).
    pub servers: Vec<OwnedFd>,
    /// `--writable=DIR`: what the caller's stage stacks its layer on
    /// (`layer`), once every privilege is gone.
    pub layer: Option<crate::layer::Plan>,
}

/// One opened image and the way it is mounted.
pub(super) struct Opened {
    pub(super) image: Image,
    pub(super) kernel: bool,
    pub(super) public: bool,
    /// On a FUSE file system (root's or a user's): never cached.
    pub(super) on_fuse: bool,
}

/// Mounts what `request` asks for, in a private mount namespace, under
/// `creds`. In order:
///
///  1. plan: duplicates, nesting order, limits, policy switches, front-end
///     rules (pure, `plan::build`);
///  2. as the caller: open every image, check its superblock, judge where
///     it comes from on the opened fd and route it (kernel or FUSE, by the
///     site policy); kernel-routed images must suit a loop device (and,
///     when no cached instance exists, the kernel's compressors: step 5);
///  3. as root, in the namespace the launch started in: the image cache
///     (opened, or created once) and, for FUSE-routed images, the FUSE
///     mounts, whose servers start as the caller; then wait for them;
///  4. a private mount namespace (all mounts slaves of the host's);
///  5. as root: the kernel instances (cached clones, or fresh: loop device
///     bound to the image fd and verified, squashfs ro,nosuid,nodev) and
///     the writable layer's tmpfs;
///  6. for each mount point and bind destination in path order: with
///     `-r`, if it is missing, make it in the view (`view.rs`); as the
///     caller, resolve and pin it, refuse forbidden places and what would
///     hide an earlier mount; as root, stack (unions, `--writable`) and
///     attach onto the pinned fd (a bind: the copy made in step 3).
///
/// Bind sources are pinned as the caller in step 2 and copied as root in
/// step 3, in the namespace they are on (`bind.rs`).
///
/// Any failure returns before the command runs; the namespace, its mounts,
/// the autoclear loop devices and the FUSE servers go away with the
/// process (or the worker thread).
pub fn mount_all<C: Credentials>(
    creds: &mut C,
    request: &RunRequest,
    ctx: &Context<'_>,
) -> Result<Mounted, Failure> {
    let settings = ctx.settings;
    let mut clock = report::Clock::start();
    // 1.
    // RAM sizes only `--writable=N%`.
    let ram = if request.writable.is_some() {
        system::total_memory()
    } else {
        0
    };
    let plan = plan::build(request, &ctx.cwd, &settings.policy, ctx.front, ram)?;
    clock.lap("plan");

    // 2.
    let (opened, layers, route_notes) = open_and_route(creds, &plan, ctx)?;
    let sources = bind::open_sources(creds, &plan)?;
    clock.lap("open and route the images, pin the bind sources");
    // How many detached mounts of each image the call needs.
    let mut copies = vec![0usize; opened.len()];
    for l in &layers {
        for &i in l {
            copies[i] += 1;
        }
    }

    // 3.
    let fused = fuse_stage::run(creds, &opened, &copies, &plan, ctx)?;
    let servers = fused.servers;
    let use_cache =
        !ctx.rootless && settings.cache && !plan.no_cache && opened.iter().any(|o| o.kernel);
    let stranded: crate::cache::store::Stranded = C::stranded;
    let caller_uid = creds.caller().uid.as_raw();
    let mut kernel = if ctx.rootless || !opened.iter().any(|o| o.kernel) {
        None
    } else {
        Some(away_from_working_dir(creds, || {
            KernelSource::open(settings, use_cache, caller_uid, stranded)
        })?)
    };
    let mut bound = bind::copies(creds, &plan, &sources)?;
    clock.lap("FUSE servers, the image cache, the bind copies");

    // 4.
    creds.enter_private_mount_namespace()?;

    // 5.
    let wanted: Vec<(usize, Wanted<'_>)> = opened
        .iter()
        .enumerate()
        .filter(|(_, o)| o.kernel)
        .map(|(i, o)| {
            (
                i,
                Wanted {
                    image: &o.image,
                    copies: copies[i],
                    cacheable: use_cache && o.public && !o.on_fuse,
                    subject: "",
                },
            )
        })
        .collect();
    let subjects: Vec<String> = wanted
        .iter()
        .map(|(i, _)| subject_of(&plan, &layers, *i))
        .collect();
    let wanted_refs: Vec<Wanted<'_>> = wanted
        .iter()
        .zip(&subjects)
        .map(|((_, w), s)| Wanted { subject: s, ..*w })
        .collect();
    let mut instances: BTreeMap<usize, Vec<OwnedFd>> = fused.mounts;
    let mut notes: Vec<(u8, String)> = Vec::new();
    let mut outcomes: Vec<Option<source::Outcome>> = vec![None; opened.len()];
    for (i, o) in fused.outcomes {
        outcomes[i] = Some(o);
    }
    if let Some(source) = kernel.as_mut() {
        let made = away_from_working_dir(creds, || source.instances(&wanted_refs))??;
        for (((i, _), m), outcome) in wanted.iter().zip(made).zip(source.outcomes()) {
            instances.insert(*i, m);
            outcomes[*i] = Some(*outcome);
        }
    }
    let why_not_cached = report::why_not_cached(ctx, &plan, settings);
    for (i, (o, note)) in opened.iter().zip(route_notes).enumerate() {
        let cache = report::instance(o.kernel, outcomes[i], &why_not_cached, o.public, o.on_fuse);
        notes.push((1, format!("{note}; {cache}")));
    }
    let mut writable = match plan.writable {
        Some(limits) => Some(creds.as_root(|| WritableTmpfs::create(limits))??),
        None => None,
    };
    clock.lap("kernel instances, the writable layer");

    // 6.
    // Rootless: the user namespace maps the caller's uid and primary gid
    // only; directories are created by the caller, as the caller.
    let owners = if ctx.rootless {
        let gid = creds.caller().gid.as_raw();
        view::Owners {
            caller_uid,
            caller_gids: vec![gid],
            creator: (caller_uid, gid),
        }
    } else {
        view::Owners {
            caller_uid,
            caller_gids: creds.caller().all_gids(),
            creator: (0, 0),
        }
    };
    let create_hint = match ctx.front.mutable_root_option {
        Some(option) => format!("create it, or give {option} to create it in the job's view only"),
        None => {
            "create it, or give -r (--mutable-root) to create it in the command's view only".into()
        }
    };
    let mut mounted: Vec<OsString> = Vec::new();
    let mut mirrored: Vec<OsString> = Vec::new();
    let mut list: Vec<(OsString, OsString)> = Vec::new();
    // `--writable=DIR`: what is made where, for the caller's stage.
    let mut layer_view: Vec<crate::layer::ViewMount> = Vec::new();
    for (k, (m, l)) in plan.mounts.iter().zip(&layers).enumerate() {
        if plan.mutable_root {
            if let Some(mirror) = view::make_missing(creds, &plan, k, &owners)? {
                notes.push((1, mirror.note()));
                layer_view.push(crate::layer::ViewMount {
                    path: mirror.dir.clone(),
                    made: crate::layer::Made::Directory,
                });
                mirrored.push(mirror.dir);
            }
        }
        let what = if m.bind.is_some() {
            "bind destination"
        } else {
            "mount path"
        };
        let target = MountPoint::resolve(creds, &m.key, &m.subject, what, &create_hint)
            .map_err(|e| Failure::new(format!("{e}{}", plan::tilde_hint(&m.mount_point))))?;
        plan::check_resolved(&mounted, &target.real, &m.subject)?;
        plan::check_allowed(&target.real, &settings.policy, ctx.front, &m.subject)?;
        notes.push((
            2,
            format!(
                "{}: {} resolved to {}",
                m.subject,
                what,
                target.real.to_string_lossy()
            ),
        ));
        if m.bind.is_some() {
            let copy = bound
                .remove(&k)
                .ok_or_else(|| Failure::about(&m.subject, "internal error: no bind copy"))?;
            creds.as_root(|| mount::attach(&copy, &target, &m.subject))??;
            if let Some(source) = sources.get(&k) {
                notes.push((1, bind::note(source, &target.real)));
            }
            layer_view.push(crate::layer::ViewMount {
                path: target.real.clone(),
                made: crate::layer::Made::Bind,
            });
            mounted.push(target.real.clone());
            continue;
        }
        let trees: Vec<OwnedFd> =
            l.iter()
                .map(|i| {
                    instances.get_mut(i).and_then(Vec::pop).ok_or_else(|| {
                        Failure::about(&m.subject, "internal error: no instance left")
                    })
                })
                .collect::<Result<_, _>>()?;
        creds.as_root(|| -> Result<(), Failure> {
            let tree = if trees.len() == 1 && writable.is_none() {
                trees
                    .into_iter()
                    .next()
                    .ok_or_else(|| Failure::about(&m.subject, "internal error: no instance"))?
            } else {
                let top = system::fstat(trees[0].as_fd()).map_err(|e| {
                    Failure::about(&m.subject, format!("cannot stat the image's root: {e}"))
                })?;
                let root = overlay::RootAttributes::sanitized(
                    (top.uid, top.gid, top.mode),
                    caller_uid,
                    &owners.caller_gids,
                    owners.creator,
                );
                overlay::stack(&trees, writable.as_mut(), root, &m.subject)?
            };
            mount::attach(&tree, &target, &m.subject)
        })??;
        if plan.layer_dir.is_some() {
            let ids = l
                .iter()
                .map(|&i| crate::layer::identity_of(&opened[i].image, &m.subject))
                .collect::<Result<_, _>>()?;
            layer_view.push(crate::layer::ViewMount {
                path: target.real.clone(),
                made: crate::layer::Made::Images(ids),
            });
        }
        mounted.push(target.real.clone());
        for &i in l {
            list.push((opened[i].image.path.clone(), target.real.clone()));
        }
    }
    clock.lap("mount points resolved and mounted");
    let mut warnings = fused.warnings;
    warnings.extend(kernel.iter().flat_map(|k| k.warnings().iter().cloned()));
    notes.extend(fused.notes.into_iter().map(|n| (1, n)));
    if let Some(k) = &kernel {
        notes.extend(k.notes().iter().map(|n| (1, n.clone())));
    }
    let mount_list =
        environment::mount_list(list.iter().map(|(i, m)| (i.as_os_str(), m.as_os_str())));
    mounted.extend(mirrored);
    reenter_working_directory(&ctx.cwd, &mounted, &mut notes);
    notes.extend(clock.notes());
    let layer = plan.layer_dir.map(|dir| crate::layer::Plan {
        dir,
        mounts: layer_view,
        cwd: ctx.cwd.clone(),
        verbose: 0,
    });
    Ok(Mounted {
        mount_list,
        notes,
        warnings,
        servers,
        layer,
    })
}

/// A working directory at or below a mount point would show the tree the
/// mount hides: enter it again by its path, as the caller, so that the
/// command starts in the mounted tree (as container runtimes do). Where
/// that path does not exist in the mounted tree the command starts where
/// it was.
fn reenter_working_directory(cwd: &OsString, mounted: &[OsString], notes: &mut Vec<(u8, String)>) {
    if !mounted.iter().any(|m| crate::paths::is_within(cwd, m)) {
        return;
    }
    if let Err(e) = system::change_dir(cwd) {
        notes.push((1, format!("the working directory {} is not in the mounted tree ({e}); the command starts in the directory it hides", cwd.to_string_lossy())));
    }
}

/// Opened images, for each mount the indices of its images, and notes.
type Routed = (Vec<Opened>, Vec<Vec<usize>>, Vec<String>);

/// Step 2: every image of the plan opened as the caller (once per file),
/// checked, judged and routed (kernel or FUSE); for each mount, the indices
/// of its images; one note per image for `--verbose`.
fn open_and_route<C: Credentials>(
    creds: &C,
    plan: &Plan,
    ctx: &Context<'_>,
) -> Result<Routed, Failure> {
    let (mut opened, mut notes) = (Vec::new(), Vec::new());
    let mut index: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut layers = Vec::with_capacity(plan.mounts.len());
    for m in &plan.mounts {
        let mut ids = Vec::with_capacity(m.images.len());
        for given in &m.images {
            let img = Image::open(creds, given, &m.subject)?;
            plan::refuse_separators(&img.path, &m.subject, "image")?;
            let key = (img.id.dev, img.id.ino);
            ids.push(key);
            if index.contains_key(&key) {
                continue;
            }
            let on_fuse = system::filesystem_type(img.fd.as_fd()).ok() == Some(system::FUSE_MAGIC);
            let (kernel, public, why) = if ctx.rootless {
                (false, false, "rootless mode: no kernel path".to_string())
            } else {
                let (prov, public) = img.provenance(creds, creds.caller());
                let route = ctx.settings.policy.route(&prov);
                (route.kernel, public, route.reason)
            };
            if kernel {
                // Whether the kernel has the image's compressor is checked
                // when a fresh instance is made (`KernelSource::instances`):
                // a cached one proves it, and reading the kernel's
                // configuration costs every launch about 12 us.
                img.check_loop_fit(&m.subject)?;
            }
            notes.push(format!(
                "{}: {} ({why})",
                img.path.to_string_lossy(),
                if kernel { "kernel" } else { "FUSE" }
            ));
            debug_assert_eq!(notes.len(), opened.len() + 1);
            index.insert(key, opened.len());
            opened.push(Opened {
                image: img,
                kernel,
                public,
                on_fuse,
            });
        }
        if m.union {
            plan::check_union_layers(&ids, &m.images, &m.subject)?;
        }
        layers.push(ids.iter().map(|k| index[k]).collect());
    }
    Ok((opened, layers, notes))
}

/// The subject (`image:mountpoint`) of the first mount using image `i`.
fn subject_of(plan: &Plan, layers: &[Vec<usize>], i: usize) -> String {
    plan.mounts
        .iter()
        .zip(layers)
        .find(|(_, l)| l.contains(&i))
        .map(|(m, _)| m.subject.clone())
        .unwrap_or_default()
}

/// Runs `f` as root from "/", then goes back to the working directory: `f`
/// visits the image cache under its lock, and the working directory may be
/// on a file system the caller serves (FUSE), whose stalled answer to
/// root's fchdir back into it must not hold the lock for everyone. The
/// way back happens after `f`, lock released (it can stall only this
/// launch).
pub(super) fn away_from_working_dir<C: Credentials, T>(
    creds: &mut C,
    f: impl FnOnce() -> T,
) -> Result<T, Failure> {
    creds.as_root(|| {
        let away = system::leave_working_dir()
            .map_err(|e| Failure::new(format!("cannot leave the working directory for /: {e}")))?;
        let t = f();
        if let Err(s) = system::return_to_working_dir(away) {
            C::stranded(&s);
        }
        Ok(t)
    })?
}
