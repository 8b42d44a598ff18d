//! The one writer of stderr once the child runs: log lines go into a
//! bounded queue, and one thread writes them out, so a pipe nobody reads
//! (a stalled log driver, `docker logs` in blocking mode) can hold that
//! thread, never the event loop. A line that does not fit is dropped and
//! counted. File descriptor 2 keeps its flags: the child shares its open
//! file description, and a non-blocking stderr would make the app's own
//! writes fail with EAGAIN.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Lines that may wait for the writer, and their bytes in all.
pub const MAX_LINES: usize = 1024;
pub const MAX_BYTES: usize = 256 * 1024;

#[derive(Default)]
struct State {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The writer is in a `write` of a line it took.
    writing: bool,
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    /// Signals the writer (a line came) and `flush` (the queue went empty).
    changed: Condvar,
}

static QUEUE: OnceLock<Queue> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);
/// Lines dropped since the last one that got through, and in all.
static LOST: AtomicU64 = AtomicU64::new(0);
static LOST_TOTAL: AtomicU64 = AtomicU64::new(0);

fn lock(queue: &Queue) -> MutexGuard<'_, State> {
    // A panicked holder left plain data behind.
    queue.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the writer thread (before the child: see `Pool::prestart`).
/// `write` never blocks on stderr, before or after.
pub fn start() -> std::io::Result<()> {
    if started() {
        return Ok(());
    }
    let queue = QUEUE.get_or_init(Queue::default);
    crate::io::threads::spawn_thread(
        "drainit-log",
        64 * 1024,
        Box::new(move || loop {
            let line = {
                let mut state = lock(queue);
                loop {
                    if let Some(line) = state.lines.pop_front() {
                        state.bytes -= line.len();
                        state.writing = true;
                        break line;
                    }
                    state.writing = false;
                    queue.changed.notify_all();
                    state = queue.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            // Blocking, on this thread only; a reader that went away loses
            // the line (EPIPE), nothing else.
            let _ = std::io::stderr().lock().write_all(&line);
        }),
    )?;
    STARTED.store(true, Ordering::Release);
    Ok(())
}

/// True once the writer owns stderr.
pub fn started() -> bool {
    STARTED.load(Ordering::Acquire)
}

/// Queues one whole line (dropped and counted when the queue is full:
/// false). Lines logged before the writer starts wait for it: nothing
/// before the child's start may block on stderr either.
pub fn write(line: Vec<u8>) -> bool {
    let queue = QUEUE.get_or_init(Queue::default);
    let mut state = lock(queue);
    if state.lines.len() >= MAX_LINES || state.bytes + line.len() > MAX_BYTES {
        drop(state);
        LOST.fetch_add(1, Ordering::Relaxed);
        LOST_TOTAL.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    state.bytes += line.len();
    state.lines.push_back(line);
    drop(state);
    queue.changed.notify_all();
    true
}

/// Lines dropped since this was last asked (the next line says so).
pub fn take_lost() -> u64 {
    LOST.swap(0, Ordering::Relaxed)
}

/// Gives lines back to the count when the note about them was dropped too.
pub fn restore_lost(n: u64) {
    LOST.fetch_add(n, Ordering::Relaxed);
}

/// Lines dropped in all (the exit report's `log_lines_dropped`).
pub fn lost_total() -> u64 {
    LOST_TOTAL.load(Ordering::Relaxed)
}

/// Waits at most `limit` for the writer to write everything queued (it is
/// started now if it never was); false when stderr did not take it in time
/// (the last lines may be lost).
pub fn flush(limit: Duration) -> bool {
    let Some(queue) = QUEUE.get() else {
        return true;
    };
    if !started() && start().is_err() {
        // No thread: the last lines are written here, as they would have
        // been before the queue existed.
        let mut state = lock(queue);
        let lines: Vec<Vec<u8>> = state.lines.drain(..).collect();
        state.bytes = 0;
        drop(state);
        for line in lines {
            let _ = std::io::stderr().lock().write_all(&line);
        }
        return true;
    }
    let until = Instant::now() + limit;
    let mut state = lock(queue);
    while !state.lines.is_empty() || state.writing {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        state = match queue.changed.wait_timeout(state, left) {
            Ok((state, _)) => state,
            Err(e) => e.into_inner().0,
        };
    }
    true
}
