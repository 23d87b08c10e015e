//! Work shared between threads: each goes depth first through the work it
//! made and hands its oldest items to a shared queue while another waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use super::error::DiffError;

/// Runs `step` on `first` and on the work it returns, on `threads`
/// threads, each with a context of its own (`init`) and its own
/// accumulator; stops at the first error. Each thread goes depth first
/// through the work it made (neighbours in the tree are neighbours in the
/// image's tables, which its readers then decompress once) and hands its
/// oldest items to the shared queue only while another thread waits.
pub(super) fn parallel<W: Send, C, R: Send + Default>(
    first: impl IntoIterator<Item = W>,
    threads: usize,
    init: impl Fn() -> Result<C, DiffError> + Sync,
    step: impl Fn(&C, W, &mut R) -> Result<Vec<W>, DiffError> + Sync,
) -> Result<Vec<R>, DiffError> {
    let shared = Shared {
        queue: Mutex::new(Queue {
            work: first.into_iter().collect(),
            busy: 0,
            error: None,
        }),
        wake: Condvar::new(),
        waiting: AtomicUsize::new(0),
    };
    let results: Vec<R> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| worker(&shared, &init, &step)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    match shared
        .queue
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .error
    {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

/// The work the threads share.
struct Queue<W> {
    work: Vec<W>,
    /// Threads that hold work (their own or taken from the queue).
    busy: usize,
    error: Option<DiffError>,
}

struct Shared<W> {
    queue: Mutex<Queue<W>>,
    wake: Condvar,
    /// Threads waiting for work.
    waiting: AtomicUsize,
}

impl<W> Shared<W> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue<W>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Work from the queue (the thread is then busy), or None at the end
    /// or after an error.
    fn take(&self) -> Option<W> {
        let mut q = self.lock();
        loop {
            if q.error.is_some() {
                return None;
            }
            if let Some(w) = q.work.pop() {
                q.busy += 1;
                return Some(w);
            }
            if q.busy == 0 {
                self.wake.notify_all();
                return None;
            }
            self.waiting.fetch_add(1, Ordering::SeqCst);
            q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One thread: its context, then work until there is none.
fn worker<W, C, R: Default>(
    shared: &Shared<W>,
    init: &(impl Fn() -> Result<C, DiffError> + Sync),
    step: &(impl Fn(&C, W, &mut R) -> Result<Vec<W>, DiffError> + Sync),
) -> R {
    let mut acc = R::default();
    let context = match init() {
        Ok(c) => c,
        Err(e) => {
            shared.lock().error.get_or_insert(e);
            shared.wake.notify_all();
            return acc;
        }
    };
    let mut mine: Vec<W> = Vec::new();
    while let Some(item) = mine.pop().or_else(|| shared.take()) {
        match step(&context, item, &mut acc) {
            Ok(more) => mine.extend(more.into_iter().rev()),
            Err(e) => {
                shared.lock().error.get_or_insert(e);
                shared.wake.notify_all();
                return acc;
            }
        }
        if mine.len() > 1 && shared.waiting.load(Ordering::SeqCst) > 0 {
            let half = mine.len() / 2;
            shared.lock().work.extend(mine.drain(..half));
            shared.wake.notify_all();
        }
        if mine.is_empty() {
            let mut q = shared.lock();
            q.busy -= 1;
            let end = q.busy == 0 && q.work.is_empty();
            drop(q);
            if end {
                shared.wake.notify_all();
            }
        }
    }
    acc
}
