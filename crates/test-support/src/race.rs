//! The race harness of the path tests: a thread flips a symlink between two
//! targets (a new link beside it renamed over it, so the name always
//! exists) while the test launches through it in a loop, and the race
//! counts only when both outcomes were seen.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A symlink flipping between two targets until [`SymlinkFlip::launches`]
/// ends (or the value is dropped, e.g. when a launch's check panics).
pub struct SymlinkFlip {
    stop: Arc<AtomicBool>,
    flipper: Option<JoinHandle<()>>,
}

impl SymlinkFlip {
    /// Starts flipping `link` to `first`, `second`, `first`, ... as fast as
    /// it can.
    pub fn start(link: &Path, first: &Path, second: &Path) -> SymlinkFlip {
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let stop = stop.clone();
            let (link, targets): (PathBuf, [PathBuf; 2]) = (
                link.to_path_buf(),
                [first.to_path_buf(), second.to_path_buf()],
            );
            std::thread::spawn(move || {
                let tmp = link.with_extension("tmp");
                let mut flip = false;
                while !stop.load(Ordering::Relaxed) {
                    let _ = fs::remove_file(&tmp);
                    std::os::unix::fs::symlink(&targets[usize::from(flip)], &tmp).unwrap();
                    fs::rename(&tmp, &link).unwrap();
                    flip = !flip;
                }
            })
        };
        SymlinkFlip {
            stop,
            flipper: Some(flipper),
        }
    }

    /// Runs `launch` while the link flips, until it has run `max` times or
    /// `limit` has passed and both outcomes were seen (a loaded machine
    /// launches fewer times in `limit`: it goes on until it saw both, up to
    /// `max` launches or the hang limit); `launch` checks its own outcome
    /// and says whether it mounted (`true`) or was refused (`false`). Then
    /// stops the flipping and asserts that both outcomes happened:
    /// otherwise the race was not exercised.
    pub fn launches(mut self, limit: Duration, max: usize, mut launch: impl FnMut() -> bool) {
        let (mut mounted, mut refused) = (0, 0);
        let start = Instant::now();
        let enough = |mounted: usize, refused: usize| {
            let elapsed = start.elapsed();
            (elapsed >= limit && mounted > 0 && refused > 0) || elapsed >= crate::ends::HANG
        };
        while !enough(mounted, refused) && mounted + refused < max {
            if launch() {
                mounted += 1;
            } else {
                refused += 1;
            }
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(flipper) = self.flipper.take() {
            flipper.join().unwrap();
        }
        assert!(
            mounted > 0 && refused > 0,
            "race not exercised: {mounted} mounted, {refused} refused"
        );
    }
}

impl Drop for SymlinkFlip {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(flipper) = self.flipper.take() {
            let _ = flipper.join();
        }
    }
}
