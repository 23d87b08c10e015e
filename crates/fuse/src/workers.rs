//! Worker threads, started on demand: one at first, another one only when
//! a worker takes a request while no other worker is waiting and more
//! requests are already queued in the kernel, up to a maximum.
//!
//! A single-threaded, metadata-heavy workload (Python imports, a tree
//! walk) sends one request at a time and is served by one thread: every
//! request goes to the same, warm thread instead of rotating through idle
//! ones (the kernel hands each request to the reader that has waited
//! longest). Parallel workloads (several processes, readahead) queue
//! requests and get more workers. Workers, once started, stay.
//!
//! Each worker after the first reads its own descriptor cloned with
//! FUSE_DEV_IOC_CLONE (its own processing queue; requests still come from
//! the connection's one input queue), or shares the first one if /dev/fuse
//! cannot be opened.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use squashfs_reader::table::Source;

use crate::server::{Busy, End, Fs};
use crate::sys;

/// What to do when a worker's connection ends (it returns only if the
/// worker should just stop).
pub type OnEnd = fn(End, &str);

pub struct Pool<S> {
    /// This pool (a worker that sees requests queue up starts another).
    me: Weak<Pool<S>>,
    fs: Arc<Fs<S>>,
    session: Arc<OwnedFd>,
    max: usize,
    started: AtomicUsize,
    idle: AtomicUsize,
    on_end: OnEnd,
}

impl<S: Source + Send + Sync + 'static> Pool<S> {
    /// Starts the first worker on `session`; at most `max` (at least 1)
    /// will run.
    pub fn start(fs: Arc<Fs<S>>, session: OwnedFd, max: usize, on_end: OnEnd) -> Arc<Self> {
        let pool = Arc::new_cyclic(|me| Pool {
            me: me.clone(),
            fs,
            session: Arc::new(session),
            max: max.max(1),
            started: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            on_end,
        });
        pool.clone().add();
        pool
    }

    /// Workers started so far.
    pub fn workers(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    /// Starts one more worker unless `max` are running.
    fn add(self: Arc<Self>) {
        let mut n = self.started.load(Ordering::Relaxed);
        loop {
            if n >= self.max {
                return;
            }
            match self
                .started
                .compare_exchange_weak(n, n + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        let own = if n == 0 {
            None
        } else {
            sys::clone_fuse_fd(&self.session)
        };
        self.idle.fetch_add(1, Ordering::SeqCst);
        let pool = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("fuse-{n}"))
            .spawn(move || {
                let fd = own.as_ref().unwrap_or(&pool.session);
                let end = pool.fs.serve(fd, &*pool);
                (pool.on_end)(end, &pool.fs.name);
            });
        if let Err(e) = spawned {
            self.idle.fetch_sub(1, Ordering::SeqCst);
            self.started.fetch_sub(1, Ordering::Relaxed);
            if n == 0 {
                crate::log::message(
                    crate::log::Level::Error,
                    &format!("squashfs-mount-fuse: cannot start a thread: {e}"),
                );
                std::process::exit(1);
            }
        }
    }
}

impl<S: Source + Send + Sync + 'static> Busy for Pool<S> {
    fn taken(&self, dev: &OwnedFd) {
        let idle = self.idle.fetch_sub(1, Ordering::SeqCst) - 1;
        if idle == 0 && self.started.load(Ordering::Relaxed) < self.max && pending(dev) {
            if let Some(me) = self.me.upgrade() {
                me.add();
            }
        }
    }
    fn done(&self) {
        self.idle.fetch_add(1, Ordering::SeqCst);
    }
}

/// Whether requests are queued on the connection of `dev` (poll without
/// waiting: readable when its input queue is not empty).
fn pending(dev: &OwnedFd) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut p = [PollFd::new(dev, PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut p, Some(&now)), Ok(n) if n > 0) && p[0].revents().contains(PollFlags::IN)
}
