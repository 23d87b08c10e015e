//! Progress bars on standard error for anything that runs longer than a
//! second. They stay hidden when standard error is not a terminal, and for
//! the first second, so quick operations print nothing extra.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const DELAY: Duration = Duration::from_secs(1);

static DISABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// No progress bars from now on (`--quiet`, `--no-progress`).
pub fn disable() {
    DISABLED.store(true, std::sync::atomic::Ordering::Relaxed);
}

pub struct Bar {
    bar: ProgressBar,
    started: Instant,
    shown: std::cell::Cell<bool>,
    wanted: bool,
}

impl Bar {
    fn make(len: Option<u64>, template: &str, message: &str) -> Self {
        let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.to_string());
        Bar {
            bar,
            started: Instant::now(),
            shown: std::cell::Cell::new(false),
            wanted: std::io::stderr().is_terminal()
                && std::env::var_os("SQFS_NO_PROGRESS").is_none()
                && !DISABLED.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A bar counting bytes out of `total`.
    pub fn bytes(message: &str, total: u64) -> Self {
        Self::make(
            Some(total),
            "{msg} [{bar:30}] {bytes}/{total_bytes} ({elapsed}, {eta} left)",
            message,
        )
    }

    /// A bar counting steps (mksquashfs blocks, benchmark runs...).
    pub fn steps(message: &str, total: u64) -> Self {
        Self::make(
            Some(total),
            "{msg} [{bar:30}] {pos}/{len} ({elapsed}, {eta} left)",
            message,
        )
    }

    /// A bar that never shows (progress reported elsewhere).
    pub fn hidden() -> Self {
        let mut b = Self::make(None, "{msg}", "");
        b.wanted = false;
        b
    }

    /// A spinner for work of unknown length, counting items.
    pub fn spinner(message: &str) -> Self {
        Self::make(None, "{spinner} {msg} {human_pos} ({elapsed})", message)
    }

    fn maybe_show(&self) {
        if self.wanted && !self.shown.get() && self.started.elapsed() >= DELAY {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            if self.bar.length().is_none() {
                self.bar.enable_steady_tick(Duration::from_millis(200));
            }
            self.shown.set(true);
        }
    }

    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
        self.maybe_show();
    }

    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        self.maybe_show();
    }

    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    pub fn set_message(&self, msg: impl Into<String>) {
        self.bar.set_message(msg.into());
        self.maybe_show();
    }

    /// Prints a line without tearing the bar.
    pub fn println(&self, line: impl AsRef<str>) {
        if self.shown.get() {
            self.bar.suspend(|| eprintln!("{}", line.as_ref()));
        } else {
            eprintln!("{}", line.as_ref());
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}
