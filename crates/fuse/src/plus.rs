//! Which entries READDIRPLUS gives attributes for.
//!
//! Attributes for an entry make the kernel create its inode at once (about
//! 5 us each here); without them, the first stat of the entry costs a
//! LOOKUP round trip (50 us or more when the requester and the server run
//! on different CPUs). A plain walk (`find`) stats directories only: giving
//! attributes for files would create a kernel inode for every file for
//! nothing (issue 36: a cold `find` of 1.19 million entries took 13.2-14.9
//! s with them against 8.2-8.8 s without). A walk that stats everything
//! (`find -printf %s`, `ls -l`, `du`, a curator's tools) needs them: the
//! same scan took 65-68 s with a LOOKUP per file, 12.7-13.5 s with them.
//!
//! So directories always get attributes, and files do while the workload
//! looks up the files it lists: each listing that left files without
//! attributes is remembered (the last [`RECENT`]); when a LOOKUP finds a
//! file in one of them, that listing counts as followed. Once
//! [`TURN_ON`] of the last [`WINDOW`] listings that left the window were
//! followed, files get attributes too. Then every [`PROBE`]-th listing
//! still leaves them out, as a probe; when at most [`TURN_OFF`] of the
//! last [`WINDOW`] probes were followed, files go back to having none.
//! State is a few words per server; nothing grows.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

/// Listings remembered, waiting for lookups of their files.
pub const RECENT: usize = 32;
/// Listings (or probes) a decision looks back on.
pub const WINDOW: u32 = 16;
/// Followed listings among the last [`WINDOW`] that turn attributes for
/// files on.
pub const TURN_ON: u32 = 12;
/// Followed probes among the last [`WINDOW`] at or below which they go off.
pub const TURN_OFF: u32 = 4;
/// While files get attributes, one listing in this many is a probe.
pub const PROBE: u32 = 16;

#[derive(Default)]
struct Recent {
    /// Listings that left files without attributes: (directory node id,
    /// whether a file of it was looked up since), oldest first.
    listings: VecDeque<(u64, bool)>,
    /// One bit per listing that left `listings`, the newest lowest: 1 if it
    /// was followed.
    history: u32,
    /// How many have left (up to [`WINDOW`] count).
    seen: u32,
}

pub struct Plus {
    /// Files get attributes now.
    files: AtomicBool,
    /// Never adapt: attributes for every entry ([`Plus::always`]).
    always: AtomicBool,
    listings: AtomicU32,
    recent: Mutex<Recent>,
}

impl Default for Plus {
    fn default() -> Self {
        Self::new()
    }
}

impl Plus {
    pub fn new() -> Self {
        Plus {
            files: AtomicBool::new(false),
            always: AtomicBool::new(false),
            listings: AtomicU32::new(0),
            recent: Mutex::new(Recent::default()),
        }
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        // Every update leaves the state consistent: poisoning is ignored.
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attributes for every entry from now on, whatever the workload.
    pub fn always(&self) {
        self.always.store(true, Ordering::Relaxed);
    }

    /// Whether files get attributes now (tests, reports).
    pub fn files(&self) -> bool {
        self.always.load(Ordering::Relaxed) || self.files.load(Ordering::Relaxed)
    }

    /// Whether the READDIRPLUS being answered gives files attributes.
    pub fn for_listing(&self) -> bool {
        if self.always.load(Ordering::Relaxed) {
            return true;
        }
        if !self.files.load(Ordering::Relaxed) {
            return false;
        }
        // A probe: this one leaves them out, to see whether they are still
        // looked up.
        !self
            .listings
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(PROBE)
    }

    /// A READDIRPLUS of `dir` left files without attributes.
    pub fn listed(&self, dir: u64) {
        let mut r = self.recent();
        if r.listings.iter().any(|&(d, _)| d == dir) {
            return;
        }
        if r.listings.len() == RECENT {
            if let Some((_, followed)) = r.listings.pop_front() {
                r.history = (r.history << 1) | u32::from(followed);
                r.seen = (r.seen + 1).min(WINDOW);
                self.decide(&mut r);
            }
        }
        r.listings.push_back((dir, false));
    }

    /// A LOOKUP in `dir` found a file (anything but a directory).
    pub fn looked_up_file(&self, dir: u64) {
        let mut r = self.recent();
        if let Some(l) = r.listings.iter_mut().find(|(d, _)| *d == dir) {
            l.1 = true;
        }
    }

    fn decide(&self, r: &mut Recent) {
        if r.seen < WINDOW {
            return;
        }
        let followed = (r.history & ((1 << WINDOW) - 1)).count_ones();
        let on = self.files.load(Ordering::Relaxed);
        if !on && followed >= TURN_ON || on && followed <= TURN_OFF {
            self.files.store(!on, Ordering::Relaxed);
            // The other mode's history says nothing about this one.
            r.seen = 0;
            r.history = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists `n` directories, looking up a file in each when `stat`.
    fn walk(p: &Plus, from: u64, n: u64, stat: bool) -> u64 {
        let mut with_files = 0;
        for d in from..from + n {
            if p.for_listing() {
                with_files += 1;
                continue;
            }
            p.listed(d);
            if stat {
                p.looked_up_file(d);
            }
        }
        with_files
    }

    #[test]
    fn files_get_attributes_while_they_are_looked_up() {
        let p = Plus::new();
        // A plain walk: never.
        assert_eq!(walk(&p, 0, 1000, false), 0);
        assert!(!p.files());
        // A walk that stats: after RECENT + WINDOW listings, then nearly
        // all of them (one in PROBE is a probe).
        let with = walk(&p, 1000, 10_000, true);
        assert!(p.files());
        assert!(with > 10_000 - 10_000 / u64::from(PROBE) - 100, "{with}");
        // Back to a plain walk: off after WINDOW probes have left.
        walk(
            &p,
            20_000,
            u64::from(PROBE * (RECENT as u32 + WINDOW + 1)),
            false,
        );
        assert!(!p.files());
        // Lookups in directories not listed recently change nothing.
        for d in 0..1000 {
            p.listed(50_000 + d);
            p.looked_up_file(90_000 + d);
        }
        assert!(!p.files());
    }

    #[test]
    fn always_means_every_listing() {
        let p = Plus::new();
        p.always();
        assert_eq!(walk(&p, 0, 100, false), 100);
    }
}
