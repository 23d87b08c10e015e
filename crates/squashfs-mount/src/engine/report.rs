//! What `--verbose` says about the instances of each image (a new one, a
//! cached one reused, why the cache was not used) and, at `-vvv`, how long
//! each step of the sequence took. Nothing here decides anything.

use std::time::Instant;

use super::plan::Plan;
use super::source::{NotCached, Outcome};
use super::Context;
use crate::config::Settings;

/// Why no image of this launch may be cached, when that holds for all of
/// them (None: it depends on each image).
pub fn why_not_cached(ctx: &Context<'_>, plan: &Plan, settings: &Settings) -> Option<&'static str> {
    if ctx.rootless {
        Some("rootless mode has no image cache")
    } else if plan.no_cache {
        Some("--no-cache")
    } else if !settings.cache {
        Some("the image cache is off for this launch (cache = no)")
    } else {
        None
    }
}

/// The instance part of an image's `--verbose` line.
pub fn instance(
    kernel: bool,
    outcome: Option<Outcome>,
    launch: &Option<&'static str>,
    public: bool,
    on_fuse: bool,
) -> String {
    if !kernel {
        return fuse_instance(outcome, launch);
    }
    let why = match outcome {
        Some(Outcome::Reused) => return "cached instance reused".into(),
        Some(Outcome::Cached) => return "new instance, kept in the image cache".into(),
        Some(Outcome::Private(NotCached::Refused)) => {
            "the image cache had no room for it (or could not store it)"
        }
        Some(Outcome::Private(NotCached::NoCache)) => {
            "the image cache could not be used"
        }
        Some(Outcome::Private(NotCached::NotCacheable)) | None => match launch {
            Some(why) => why,
            None if on_fuse => "the file is on a FUSE file system, whose server could change it",
            None if !public => {
                "its path is not open to everyone (a directory on it is not searchable by all), and only such images are shared"
            }
            None => "not cacheable",
        },
    };
    format!("new private instance, not cached: {why}")
}

/// The instance part of a FUSE-routed image's `--verbose` line.
fn fuse_instance(outcome: Option<Outcome>, launch: &Option<&'static str>) -> String {
    let why = match outcome {
        Some(Outcome::Reused) => return "your cached FUSE instance reused".into(),
        Some(Outcome::Cached) => {
            return "a FUSE server of yours started, its instance kept in the image cache for your next launches".into()
        }
        Some(Outcome::Private(NotCached::Refused)) => {
            "the image cache had no room for it (or could not store it)"
        }
        Some(Outcome::Private(NotCached::NoCache)) => "the image cache could not be used",
        Some(Outcome::Private(NotCached::NotCacheable)) | None => {
            launch.unwrap_or("not cacheable")
        }
    };
    format!("a FUSE server of yours started for this launch only, not cached: {why}")
}

/// The time each step took, for `-vvv`.
pub struct Clock {
    last: Instant,
    laps: Vec<(&'static str, u128)>,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            last: Instant::now(),
            laps: Vec::new(),
        }
    }

    /// The step `what` ended now.
    pub fn lap(&mut self, what: &'static str) {
        let now = Instant::now();
        self.laps
            .push((what, now.duration_since(self.last).as_micros()));
        self.last = now;
    }

    /// One level-3 line per step.
    pub fn notes(&self) -> Vec<(u8, String)> {
        self.laps
            .iter()
            .map(|(what, us)| (3, format!("{us} us: {what}")))
            .collect()
    }
}
