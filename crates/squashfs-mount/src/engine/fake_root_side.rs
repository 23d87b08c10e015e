//! A recording fake of the root side, for the engine's unit tests: every
//! operation is logged in words ("loop a.sqfs for the cache", "attach
//! a.sqfs#cached on /…/m"), and its "mounts" are descriptors of /dev/null
//! whose labels the log uses. Its image cache is a set of keys (a file's
//! kernel instance, a user's FUSE instance of a file); another launch can
//! be made to hold a claim (and to cache the instance while the test's
//! launch waits for it); a cached FUSE instance's server can be gone.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

use super::mirror::Mirror;
use super::root_side::{FreshImage, FreshInstances, FuseFacts, RootSide};
use crate::cache::store::OnStranded;
use crate::cache::{CacheError, Key, Kind, Meta, Offer, Placed, Reused, Want};
use crate::config::LoopOptions;
use crate::config::Settings;
use crate::mounts::budgets::{LaunchSlot, Shares};
use crate::mounts::fuse::{FuseError, Launcher, Starting};
use crate::mounts::fuse_log::Detached;
use crate::mounts::image::Image;
use crate::mounts::instance::Fresh;
use crate::mounts::mount_point::MountPoint;
use crate::mounts::overlay::{RootAttributes, WritableLimits};
use crate::privilege::{ActingAsCaller, AsRoot, Caller};
use crate::system::error::Failure;
use crate::system::{self, AwayFromWorkingDir, Uid};
use squashfs_format::kernel::KernelConfig;

/// The fake, and what it is to answer.
pub struct Recorder {
    /// What was done, in order.
    pub log: Vec<String>,
    labels: HashMap<RawFd, String>,
    /// What `/etc/squashfs-mount.conf` says.
    pub settings: Settings,
    /// The image cache, by key; None: it cannot be opened.
    pub cache: Option<HashSet<Key>>,
    /// Cached FUSE instances whose server is gone.
    pub gone: HashSet<Key>,
    /// How many more instances the cache takes.
    pub room: usize,
    /// How many more fresh instances the caller's share of the cache
    /// leaves room for (counted under their hold).
    pub share: usize,
    /// Instances another launch is making (it caches them while this one
    /// waits).
    pub theirs: HashSet<Key>,
    /// Names of the images, by file.
    names: HashMap<(u64, u64), String>,
    next_loop: u32,
    /// The caller, as the launch slot was asked for.
    caller: Option<Uid>,
    /// The running kernel's configuration (None: unreadable), and how
    /// many times it was read.
    pub kernel: Option<KernelConfig>,
    pub kernel_reads: usize,
}

impl Recorder {
    pub(crate) fn new(settings: Settings) -> Recorder {
        Recorder {
            log: Vec::new(),
            labels: HashMap::new(),
            settings,
            cache: Some(HashSet::new()),
            gone: HashSet::new(),
            room: 100,
            share: 100,
            theirs: HashSet::new(),
            names: HashMap::new(),
            next_loop: 0,
            caller: None,
            kernel: None,
            kernel_reads: 0,
        }
    }

    fn file(path: &str) -> (u64, u64) {
        let st = std::fs::metadata(path).expect("stat");
        (
            std::os::unix::fs::MetadataExt::dev(&st),
            std::os::unix::fs::MetadataExt::ino(&st),
        )
    }

    /// The key of the image at `path`'s kernel instance (`fuse_user`
    /// None), or of that user's FUSE instance of it.
    pub(crate) fn key(path: &str, fuse_user: Option<Uid>) -> Key {
        let (dev, ino) = Self::file(path);
        Key {
            dev,
            ino,
            fuse_user,
        }
    }

    /// Logs the image file at `path` by its name.
    pub(crate) fn knows(&mut self, path: &std::path::Path) {
        let path = path.display().to_string();
        self.names
            .insert(Self::file(&path), file_name(OsStr::new(&path)));
    }

    /// The cache holds the kernel instance of the image at `path`.
    pub(crate) fn cache_holds(&mut self, path: &str) {
        self.cache_holds_key(Self::key(path, None));
    }

    /// The cache holds the instance `key`.
    pub(crate) fn cache_holds_key(&mut self, key: Key) {
        if let Some(cache) = &mut self.cache {
            cache.insert(key);
        }
    }

    /// Another launch is making the kernel instance of the image at `path`.
    pub(crate) fn another_launch_makes(&mut self, path: &str) {
        self.theirs.insert(Self::key(path, None));
    }

    /// The caller's uid, as the launch slot was asked for.
    pub(crate) fn caller_uid(&self) -> Uid {
        self.caller.expect("no launch slot asked for")
    }

    /// The lines of the log that start with `what`.
    pub(crate) fn lines(&self, what: &str) -> Vec<&str> {
        self.log
            .iter()
            .filter(|l| l.starts_with(what))
            .map(String::as_str)
            .collect()
    }

    fn mount(&mut self, label: String) -> OwnedFd {
        let fd: OwnedFd = std::fs::File::open("/dev/null").expect("/dev/null").into();
        self.labels.insert(fd.as_raw_fd(), label);
        fd
    }

    fn label(&self, fd: BorrowedFd<'_>) -> String {
        self.labels
            .get(&fd.as_raw_fd())
            .cloned()
            .unwrap_or_default()
    }

    fn name_of(&mut self, image: &Image) -> String {
        let name = file_name(&image.path);
        self.names
            .insert((image.id.dev, image.id.ino), name.clone());
        name
    }

    /// The image's name, `fuse:` before it for a user's FUSE instance.
    fn named(&self, key: &Key) -> String {
        let name = self
            .names
            .get(&(key.dev, key.ino))
            .cloned()
            .unwrap_or_default();
        match key.fuse_user {
            None => name,
            Some(_) => format!("fuse:{name}"),
        }
    }

    fn clones(&mut self, name: &str, n: usize) -> Vec<OwnedFd> {
        (0..n.max(1))
            .map(|_| self.mount(format!("{name}#cached")))
            .collect()
    }
}

fn file_name(path: &OsStr) -> String {
    let bytes = path.as_bytes();
    let name = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
    String::from_utf8_lossy(name).into_owned()
}

impl RootSide for Recorder {
    type Claim = ();
    type Hold = ();
    type Writable = ();

    fn site_settings(&mut self) -> Settings {
        self.log.push("settings".into());
        self.settings.clone()
    }

    fn launch_slot(
        &mut self,
        _root: &AsRoot,
        caller: &Caller,
        _settings: &Settings,
    ) -> Result<LaunchSlot, Failure> {
        self.caller = Some(caller.uid);
        self.log.push(format!("launch slot of uid {}", caller.uid));
        Ok(LaunchSlot::unbounded())
    }

    fn fuse_instance(
        &mut self,
        _root: &AsRoot,
        image: &Image,
        _device: OwnedFd,
        launcher: &Launcher<'_>,
        subject: &str,
    ) -> Result<(OwnedFd, Starting), Failure> {
        let name = self.name_of(image);
        let drops = if launcher.drop_to_caller {
            ", server drops to the caller"
        } else {
            ""
        };
        let detached = match launcher.detached {
            Some(_) => ", detached",
            None => "",
        };
        self.log.push(format!("fuse {name}{drops}{detached}"));
        let (ready, answer) = system::pipe().expect("pipe");
        std::io::Write::write_all(&mut std::fs::File::from(answer), b"ready\n").expect("ready");
        let server = self.mount(format!("{name} server"));
        Ok((
            self.mount(format!("{name}#fuse")),
            Starting::new(ready, subject, server),
        ))
    }

    fn fuse_log(&mut self, _root: &AsRoot, caller: &Caller) -> Result<Detached, FuseError> {
        self.log.push(format!("log of uid {}", caller.uid));
        Ok(Detached::stand_in())
    }

    fn fuse_reporter(
        &mut self,
        _root: &AsRoot,
        _launcher: &Launcher<'_>,
        _log: &Detached,
        servers: &[u32],
    ) -> Result<OwnedFd, FuseError> {
        self.log.push(format!("reporter for servers {servers:?}"));
        Ok(self.mount("reporter".into()))
    }

    fn fuse_facts(&mut self, mount: &OwnedFd, _server: &OwnedFd) -> Option<FuseFacts> {
        let label = self.label(std::os::fd::AsFd::as_fd(mount));
        self.log.push(format!("facts of {label}"));
        self.next_loop += 1;
        Some(FuseFacts {
            kind: Kind::Fuse {
                pid: 1000 + self.next_loop,
                started: 1,
            },
            device: u64::from(self.next_loop),
            cost: 1 << 20,
        })
    }

    fn fuse_device(
        &mut self,
        _as_caller: &impl ActingAsCaller,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        Ok(self.mount(format!("/dev/fuse for {subject}")))
    }

    fn copy_tree(
        &mut self,
        _root: &AsRoot,
        _source: BorrowedFd<'_>,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        self.log.push(format!("copy {subject}"));
        Ok(self.mount(subject.to_string()))
    }

    fn open_cache(
        &mut self,
        _root: &AsRoot,
        _settings: &Settings,
        _stranded: OnStranded,
    ) -> Result<bool, CacheError> {
        self.log.push("open the cache".into());
        match self.cache {
            Some(_) => Ok(true),
            None => Err(CacheError::NotRootOnly),
        }
    }

    fn read_cache_records(&mut self, _root: &AsRoot, _stranded: OnStranded) {
        self.log.push("read the cache's records".into());
    }

    fn leave_working_dir(&mut self, _root: &AsRoot) -> Result<AwayFromWorkingDir, Failure> {
        Ok(AwayFromWorkingDir::stayed())
    }

    fn return_to_working_dir(
        &mut self,
        _root: &AsRoot,
        _away: AwayFromWorkingDir,
    ) -> Result<(), system::Stranded> {
        Ok(())
    }

    fn reuse(&mut self, _root: &AsRoot, wanted: &[Want]) -> Result<Vec<Reused>, CacheError> {
        let names: Vec<String> = wanted.iter().map(|w| self.named(&w.key)).collect();
        self.log.push(format!("reuse {}", names.join(" ")));
        let cache = self.cache.clone().unwrap_or_default();
        Ok(wanted
            .iter()
            .zip(&names)
            .map(|(w, name)| {
                if !cache.contains(&w.key) {
                    return (Vec::new(), None);
                }
                if self.gone.contains(&w.key) {
                    // Its server is gone: a stale entry, and its record.
                    let kind = Kind::Fuse {
                        pid: 4242,
                        started: 1,
                    };
                    let uid = w.key.fuse_user.unwrap_or(Uid::ROOT);
                    return (Vec::new(), Some(Meta::new(&w.id, kind, 0, uid, 0, b"")));
                }
                // A FUSE instance comes with its record (its server's pid),
                // as from the real cache.
                let meta = w.key.fuse_user.map(|uid| {
                    let kind = Kind::Fuse {
                        pid: 4000,
                        started: 1,
                    };
                    Meta::new(&w.id, kind, 0, uid, 0, b"")
                });
                (self.clones(name, w.copies), meta)
            })
            .collect())
    }

    fn open_claims(&mut self, _root: &AsRoot, _caller: Uid) -> Result<(), CacheError> {
        Ok(())
    }

    fn claim(&mut self, _root: &AsRoot, key: &Key) -> Result<Option<()>, CacheError> {
        Ok((!self.theirs.contains(key)).then_some(()))
    }

    fn await_claim(
        &mut self,
        _root: &AsRoot,
        key: &Key,
        _deadline: Instant,
    ) -> Result<(), CacheError> {
        self.log.push(format!("await {}", self.named(key)));
        // The other launch cached its instance meanwhile.
        self.gone.remove(key);
        if let Some(cache) = &mut self.cache {
            cache.insert(*key);
        }
        Ok(())
    }

    fn fresh(
        &mut self,
        _root: &AsRoot,
        images: &[FreshImage<'_>],
        _shares: Shares,
        _options: LoopOptions,
        caller: Uid,
    ) -> Result<FreshInstances<()>, Failure> {
        let mut instances = Vec::new();
        for f in images {
            let name = self.name_of(f.image);
            let for_cache = f.for_cache && self.share > 0;
            self.share -= usize::from(for_cache);
            let owner = match for_cache {
                true => "the cache".to_string(),
                false => format!("uid {caller}"),
            };
            self.log.push(format!("loop {name} for {owner}"));
            self.next_loop += 1;
            let fresh = Fresh {
                mount: self.mount(format!("{name}#fresh")),
                loop_number: self.next_loop,
                loop_rdev: u64::from(self.next_loop),
            };
            instances.push((fresh, for_cache));
        }
        Ok(FreshInstances {
            instances,
            hold: (),
        })
    }

    fn kernel_config(&mut self, _root: &AsRoot) -> Option<KernelConfig> {
        self.kernel_reads += 1;
        self.kernel.clone()
    }

    fn place(
        &mut self,
        _root: &AsRoot,
        offers: Vec<Offer>,
        _protected: &[Key],
    ) -> Result<Vec<Placed>, (CacheError, Vec<Offer>)> {
        let mut out = Vec::new();
        for offer in offers {
            let key = offer.meta.key();
            let name = self.named(&key);
            if self.room == 0 {
                self.log.push(format!("place {name}: no room"));
                out.push(Placed::Private(offer));
                continue;
            }
            self.room -= 1;
            self.log.push(format!("place {name}: cached"));
            self.gone.remove(&key);
            if let Some(cache) = &mut self.cache {
                cache.insert(key);
            }
            out.push(Placed::Cached(self.clones(&name, offer.copies)));
        }
        Ok(out)
    }

    fn clone(
        &mut self,
        _root: &AsRoot,
        mount: &OwnedFd,
        _image: &Image,
        _subject: &str,
    ) -> Result<OwnedFd, Failure> {
        let label = self.label(std::os::fd::AsFd::as_fd(mount));
        Ok(self.mount(format!("{label}+clone")))
    }

    fn writable_tmpfs(&mut self, _root: &AsRoot, limits: WritableLimits) -> Result<(), Failure> {
        self.log
            .push(format!("writable tmpfs of {} bytes", limits.bytes));
        Ok(())
    }

    fn mirror(&mut self, _root: &AsRoot, m: Mirror<'_>) -> Result<(), Failure> {
        // Where the real one shows the new directories in the view, the
        // fake makes them in place (the tests' directories are writable).
        for rel in m.new {
            let mut path = m.real.as_bytes().to_vec();
            for c in rel {
                path.push(b'/');
                path.extend_from_slice(c);
            }
            std::fs::create_dir_all(OsStr::from_bytes(&path)).expect("mkdir");
        }
        self.log.push(format!(
            "mirror {} ({} entries)",
            file_name(m.real),
            m.entries.len()
        ));
        Ok(())
    }

    fn stack(
        &mut self,
        _root: &AsRoot,
        layers: &[OwnedFd],
        writable: Option<&mut ()>,
        _attributes: RootAttributes,
        subject: &str,
    ) -> Result<OwnedFd, Failure> {
        let labels: Vec<String> = layers
            .iter()
            .map(|l| self.label(std::os::fd::AsFd::as_fd(l)))
            .collect();
        let upper = if writable.is_some() {
            " + writable"
        } else {
            ""
        };
        self.log.push(format!(
            "stack {}{upper} for {subject}",
            labels.join(" over ")
        ));
        Ok(self.mount(format!("({}{upper})", labels.join(", "))))
    }

    fn attach(
        &mut self,
        _root: &AsRoot,
        mount: &OwnedFd,
        target: &MountPoint,
        _subject: &str,
    ) -> Result<(), Failure> {
        let label = self.label(std::os::fd::AsFd::as_fd(mount));
        self.log
            .push(format!("attach {label} on {}", file_name(&target.real)));
        Ok(())
    }
}
