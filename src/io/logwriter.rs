//! The one writer of stderr once the child runs: log lines go into a
//! bounded queue, and one thread writes them out, so a pipe nobody reads
//! (a stalled log driver, `docker logs` in blocking mode) can hold that
//! thread, never the event loop. Every line is written whole or dropped
//! and counted, never cut: a line that does not fit the queue is dropped
//! and counted; on a stderr the app made non-blocking (`O_NONBLOCK` on the
//! open file description fd 2 shares) the writer waits for room with
//! `poll` instead of losing the rest of the line; a reader that went away
//! (EPIPE) costs counted lines. At exit it gets a bounded time
//! ([`flush`]); what it could not write by then is counted, and a line
//! longer than the pipe's atomic size is only started at exit when the
//! pipe can take it whole. File descriptor 2 keeps its flags: the child
//! shares its open file description, and a non-blocking stderr would make
//! the app's own writes fail with EAGAIN.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Lines that may wait for the writer, and their bytes in all.
pub const MAX_LINES: usize = 1024;
pub const MAX_BYTES: usize = 256 * 1024;
/// Final lines (the exit report's and the EMF line) queued beyond those
/// bounds: they are never dropped for want of room in the queue.
pub const MAX_FINAL: usize = 4;
/// How long a final line waits for a pipe to have room for all of it
/// before the exit begins; then it goes out in pieces (it is finished,
/// however long that takes, while drainit runs).
const WHOLE_PATIENCE: Duration = Duration::from_secs(1);
/// The step of that wait (`poll` only says a pipe has some room).
const WHOLE_STEP: Duration = Duration::from_millis(2);
/// Writes up to this size are atomic on a pipe: all or nothing.
const PIPE_BUF: usize = libc::PIPE_BUF;

struct Line {
    bytes: Vec<u8>,
    /// The exit report or the EMF line.
    last: bool,
}

#[derive(Default)]
struct State {
    lines: VecDeque<Line>,
    /// Bytes of the ordinary lines queued.
    bytes: usize,
    /// Final lines queued.
    finals: usize,
    /// The writer holds a line it took and has not finished.
    writing: bool,
    /// The exit's deadline, once [`flush`] began.
    deadline: Option<Instant>,
    /// [`flush`] ran out of time: what was queued is counted as dropped,
    /// the line in hand only if it is not written whole (see
    /// [`lost_total`]), and nothing more is written.
    closed: bool,
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
/// The line the writer holds is all out (set the moment its last byte is
/// written, before the writer takes the lock to say so).
static HELD_WRITTEN: AtomicBool = AtomicBool::new(false);

fn lock(queue: &Queue) -> MutexGuard<'_, State> {
    // A panicked holder left plain data behind.
    queue.state.lock().unwrap_or_else(|e| e.into_inner())
}

fn count_lost(n: u64) {
    LOST.fetch_add(n, Ordering::Relaxed);
    LOST_TOTAL.fetch_add(n, Ordering::Relaxed);
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
                    if state.closed {
                        // The exit counted what was left; nothing more.
                        state.writing = false;
                        queue.changed.notify_all();
                    } else if let Some(line) = state.lines.pop_front() {
                        if line.last {
                            state.finals -= 1;
                        } else {
                            state.bytes -= line.bytes.len();
                        }
                        state.writing = true;
                        HELD_WRITTEN.store(false, Ordering::Release);
                        break line;
                    } else {
                        state.writing = false;
                        queue.changed.notify_all();
                    }
                    state = queue.changed.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            };
            let whole = put(&line, &|| lock(queue).deadline);
            if whole {
                HELD_WRITTEN.store(true, Ordering::Release);
            }
            crate::util::fault::point("log_line_written");
            let mut state = lock(queue);
            // Counted here, also after the exit closed the queue (until
            // now, `lost_total` counted it as long as it was not all out).
            if !whole {
                count_lost(1);
            }
            state.writing = false;
            drop(state);
            queue.changed.notify_all();
        }),
    )?;
    STARTED.store(true, Ordering::Release);
    Ok(())
}

/// True once the writer owns stderr.
pub fn started() -> bool {
    STARTED.load(Ordering::Acquire)
}

/// Set when the run takes stderr for its log without a writer: no line can
/// pass the log's filter, so none will ever need one.
static OWNED: AtomicBool = AtomicBool::new(false);

/// The run's stderr is the log's from now on, though no writer runs (the
/// log lets no line through): a panic's message goes to the log too, and is
/// dropped there, rather than written on stderr by std's hook.
pub fn own_without_writer() {
    OWNED.store(true, Ordering::Release);
}

/// True once stderr is the log's: the writer started, or no line can come.
pub fn owns_stderr() -> bool {
    started() || OWNED.load(Ordering::Acquire)
}

/// Queues one whole line (dropped and counted when the queue is full:
/// false). Lines logged before the writer starts wait for it: nothing
/// before the child's start may block on stderr either.
pub fn write(line: Vec<u8>) -> bool {
    enqueue(line, false)
}

/// Queues the exit report's line or the EMF line: beyond the queue's
/// bounds (up to [`MAX_FINAL`] of them), and at exit written only whole.
/// False (and counted) only past that many or after [`flush`] gave up.
pub fn write_final(line: Vec<u8>) -> bool {
    enqueue(line, true)
}

fn enqueue(bytes: Vec<u8>, last: bool) -> bool {
    let queue = QUEUE.get_or_init(Queue::default);
    let mut state = lock(queue);
    let full = if last {
        state.finals >= MAX_FINAL
    } else {
        state.lines.len() - state.finals >= MAX_LINES || state.bytes + bytes.len() > MAX_BYTES
    };
    if full || state.closed {
        drop(state);
        count_lost(1);
        return false;
    }
    if last {
        state.finals += 1;
    } else {
        state.bytes += bytes.len();
    }
    state.lines.push_back(Line { bytes, last });
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

/// Lines dropped in all (the exit report's `log_lines_dropped`): once
/// [`flush`] gave up, the line the writer still holds counts until all of
/// it is out (the process may end before the rest is).
pub fn lost_total() -> u64 {
    let held = QUEUE.get().is_some_and(|queue| {
        let state = lock(queue);
        state.closed && state.writing && !HELD_WRITTEN.load(Ordering::Acquire)
    });
    LOST_TOTAL.load(Ordering::Relaxed) + u64::from(held)
}

/// Waits at most `limit` for the writer to write everything queued (it is
/// started now if it never was); false when stderr did not take it in
/// time: the lines still queued are then counted as dropped, the one in
/// the writer's hand only while it is not all out ([`lost_total`]), and
/// nothing more is written.
pub fn flush(limit: Duration) -> bool {
    let Some(queue) = QUEUE.get() else {
        return true;
    };
    let until = Instant::now() + limit;
    if !started() && start().is_err() {
        // No thread: the last lines are written here, within the same time.
        let mut state = lock(queue);
        let lines = std::mem::take(&mut state.lines);
        state.bytes = 0;
        state.finals = 0;
        state.deadline = Some(until);
        drop(state);
        let mut all = true;
        for line in lines {
            if !put(&line, &|| Some(until)) {
                count_lost(1);
                all = false;
            }
        }
        return all;
    }
    let mut state = lock(queue);
    state.deadline = Some(until);
    while !state.lines.is_empty() || state.writing {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // The line in hand is the writer's to count: it may yet go out
            // whole.
            let left_over = state.lines.len();
            state.lines.clear();
            state.bytes = 0;
            state.finals = 0;
            state.closed = true;
            drop(state);
            count_lost(left_over as u64);
            return false;
        }
        state = match queue.changed.wait_timeout(state, left) {
            Ok((state, _)) => state,
            Err(e) => e.into_inner().0,
        };
    }
    true
}

/// What fd 2 is, read once: a pipe (FIFO) gets the whole-line check.
fn stderr_is_pipe() -> bool {
    static PIPE: OnceLock<bool> = OnceLock::new();
    *PIPE.get_or_init(|| {
        // SAFETY: fstat writes only into `st`.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstat(libc::STDERR_FILENO, &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFIFO
        }
    })
}

/// The pipe behind fd 2 certainly takes `len` more bytes at once: its
/// free buffers, counted as if every byte queued held one of them (a
/// kernel buffer holds at most a page), hold `len`. Only ever true too
/// rarely, never wrongly; `None` when the pipe could never hold it.
fn pipe_takes_whole(len: usize) -> Option<bool> {
    // SAFETY: fcntl and ioctl on fd 2 with an int out-parameter; sysconf
    // reads the auxiliary vector.
    let (size, queued, page) = unsafe {
        let size = libc::fcntl(libc::STDERR_FILENO, libc::F_GETPIPE_SZ);
        let mut queued: libc::c_int = 0;
        let rc = libc::ioctl(libc::STDERR_FILENO, libc::FIONREAD, &mut queued);
        if size <= 0 || rc != 0 {
            return None;
        }
        (
            size as usize,
            queued.max(0) as usize,
            libc::sysconf(libc::_SC_PAGESIZE).max(1) as usize,
        )
    };
    let buffers = size / page;
    let need = len.div_ceil(page);
    if need > buffers {
        return None;
    }
    Some(buffers - queued.min(buffers) >= need)
}

/// Waits for fd 2 to take more (POLLOUT) until `until`, or for ever;
/// false when the time ran out.
fn wait_writable(until: Option<Instant>) -> bool {
    let timeout = match until {
        None => -1,
        Some(until) => {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            // Rounded up: a wait never ends just short of the deadline.
            left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32
        }
    };
    let mut fds = libc::pollfd {
        fd: libc::STDERR_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd we own. An error or POLLERR/POLLHUP is left to the
    // next write, which says what it is.
    unsafe { libc::poll(&mut fds, 1, timeout) };
    true
}

/// Sleeps one step of the whole-line wait; false past `until`.
fn step(until: Option<Instant>) -> bool {
    let mut wait = WHOLE_STEP;
    if let Some(until) = until {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        wait = wait.min(left);
    }
    // SAFETY: poll with no descriptors is a sleep.
    unsafe { libc::poll(std::ptr::null_mut(), 0, wait.as_millis().max(1) as i32) };
    true
}

/// Writes one line to fd 2, whole, or none of it when it can be helped:
/// true when all of it went out. `deadline` is the exit's, asked again at
/// each wait (it comes when the exit begins).
fn put(line: &Line, deadline: &dyn Fn() -> Option<Instant>) -> bool {
    let bytes = &line.bytes[..];
    if bytes.is_empty() {
        return true;
    }
    // Up to PIPE_BUF bytes a pipe takes all or nothing. A longer line goes
    // in pieces, and at exit the process may end between two of them: so
    // the exit's lines, and any long line once the exit began, start only
    // when the pipe can take them whole (or never, and are counted).
    if bytes.len() > PIPE_BUF && stderr_is_pipe() {
        let began = Instant::now();
        loop {
            let until = deadline();
            if until.is_none() && !line.last {
                break;
            }
            match pipe_takes_whole(bytes.len()) {
                Some(true) | None => break,
                Some(false) if until.is_none() && began.elapsed() >= WHOLE_PATIENCE => break,
                Some(false) => {
                    if !step(until) {
                        return false;
                    }
                }
            }
        }
    }
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        // SAFETY: writes from a live slice.
        let n = unsafe { libc::write(libc::STDERR_FILENO, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            done += n as usize;
            continue;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => {}
            // A stderr the app made non-blocking: wait for room, never
            // leave the line half written while there is time.
            Some(libc::EAGAIN) => {
                if !wait_writable(deadline()) {
                    return false;
                }
            }
            // The reader went away (EPIPE), or stderr is not there at all.
            _ => return false,
        }
    }
    true
}
