//! The one writer of stderr once the child runs: log lines go into a
//! bounded queue, and what writes them out never waits for a reader, so a
//! pipe nobody reads (a stalled log driver, `docker logs` in blocking mode)
//! can never hold the event loop. When fd 2 is a pipe, a FIFO or
//! `/dev/null`, drainit opens the same file again through
//! `/proc/self/fd/2` as a description of its own, made non-blocking:
//! whoever logs writes at once what the file takes, and the event loop
//! writes the rest when it has room ([`pump`], [`retry_in`]); no thread.
//! Otherwise (a regular file, a socket, a terminal, no `/proc`, a pipe
//! drainit may not open, an fd 2 not open for writing) one thread writes
//! the queue out, blocking as it must.
//!
//! Every line is written whole or dropped and counted, never cut: a line
//! that does not fit the queue is dropped and counted; on a stderr the
//! app made non-blocking (`O_NONBLOCK` on the open file description fd 2
//! shares) the writer thread waits for room with `poll` instead of losing
//! the rest of the line; a reader that went away (EPIPE) costs counted
//! lines. At exit the writing gets a bounded time ([`flush`]); what it
//! could not write by then is counted, and a line longer than the pipe's
//! atomic size is only started at exit when the pipe can take it whole;
//! while it waits, the shorter lines behind it go ahead of it.
//! File descriptor 2 keeps its flags: the child shares its open file
//! description, and a non-blocking stderr would make the app's own writes
//! fail with EAGAIN.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::io::early::{pipe_takes_whole, stderr_is_pipe, wait_writable};

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
/// Without a writer thread: the first and the longest wait before the loop
/// tries a full stderr again (doubled after each try that wrote nothing,
/// so a stderr nobody reads costs a wake-up a second).
const RETRY_FIRST: Duration = Duration::from_millis(2);
const RETRY_MAX: Duration = Duration::from_secs(1);

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
    /// Without a writer thread: bytes of the first line already written.
    front_done: usize,
    /// Without a writer thread: since when the first line, longer than a
    /// pipe takes at once, waits for room for all of it.
    front_waits: Option<Instant>,
    /// Without a writer thread: the wait before the next try.
    retry: Duration,
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    /// Signals the writer (a line came) and `flush` (the queue went empty).
    changed: Condvar,
}

static QUEUE: OnceLock<Queue> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);
/// The description of its own drainit writes through when it needs no
/// writer thread (non-blocking, close-on-exec); -1 otherwise.
static DIRECT: AtomicI32 = AtomicI32::new(-1);
/// Without a writer thread: lines wait for room in stderr.
static BACKLOG: AtomicBool = AtomicBool::new(false);
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

/// Takes stderr for the log: through a description of its own when fd 2
/// allows one ([`open_direct`]), else with the writer thread (before the
/// child: see `Pool::prestart`). `write` never blocks on stderr, before
/// or after.
pub fn start() -> std::io::Result<()> {
    if started() {
        return Ok(());
    }
    let queue = QUEUE.get_or_init(Queue::default);
    if let Some(fd) = open_direct() {
        DIRECT.store(fd, Ordering::Release);
        STARTED.store(true, Ordering::Release);
        // Lines logged before now go out as the first one would.
        pump_locked(&mut lock(queue), fd);
        return Ok(());
    }
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
                    } else if let Some(line) = pop_next(&mut state) {
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
            let shorter_waits = || {
                let state = lock(queue);
                state.lines.iter().any(|l| l.bytes.len() <= PIPE_BUF)
            };
            let put = put(&line, &|| lock(queue).deadline, &shorter_waits);
            if put == Put::Back {
                // At exit a long line waiting for room must not cost the
                // shorter lines behind it: it goes back, they go first.
                let mut state = lock(queue);
                if line.last {
                    state.finals += 1;
                } else {
                    state.bytes += line.bytes.len();
                }
                state.lines.push_front(line);
                state.writing = false;
                drop(state);
                queue.changed.notify_all();
                continue;
            }
            let whole = put == Put::Whole;
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
    let fd = DIRECT.load(Ordering::Acquire);
    if fd >= 0 {
        // Nobody waits on the queue: the line goes out now, or waits for
        // the loop's next try.
        pump_locked(&mut state, fd);
        return true;
    }
    drop(state);
    queue.changed.notify_all();
    true
}

/// The description [`start`] writes through instead of a thread: fd 2's
/// pipe or FIFO, or `/dev/null`, opened again (`/proc/self/fd/2`), so
/// that its `O_NONBLOCK` is drainit's alone (the child shares fd 2's).
/// None for anything else: a regular file opened again would write from
/// its own offset, a socket cannot be opened again, a terminal written
/// without blocking may take part of a line (and the app's output would
/// land in the middle of it), and other devices run their driver's open.
fn open_direct() -> Option<i32> {
    // Tests take the thread on a pipe too (the fault-injection build).
    if crate::util::fault::switched("log_writer_thread") {
        return None;
    }
    crate::io::early::reopen(libc::STDERR_FILENO, crate::io::early::Reopen::Pipes)
}

/// Writes what the queue holds while stderr takes it, never waiting:
/// without a writer thread, every line goes out here. A line the file
/// took part of keeps its place at the front; a line longer than a pipe
/// takes at once waits for room for all of it where [`put`]'s rules say
/// so. Sets [`BACKLOG`] while lines are left, and wakes the loop when
/// another thread leaves the first. True when anything was written (or
/// given up on).
fn pump_locked(state: &mut State, fd: i32) -> bool {
    let mut wrote = false;
    while let Some(line) = state.lines.front() {
        if state.closed {
            break;
        }
        let len = line.bytes.len();
        if state.front_done == 0 && len > PIPE_BUF && stderr_is_pipe() {
            let exiting = state.deadline.is_some();
            let patient = state
                .front_waits
                .is_some_and(|since| since.elapsed() >= WHOLE_PATIENCE);
            // At exit only whole; a final line before the exit waits so
            // at most WHOLE_PATIENCE, then goes out in pieces.
            if exiting || (line.last && !patient) {
                if let Some(false) = pipe_takes_whole(len) {
                    state.front_waits.get_or_insert_with(Instant::now);
                    // At exit a long line waiting for room must not cost
                    // the lines behind it (the EMF line after a long
                    // report): the first that a pipe takes all or nothing
                    // of goes ahead of it.
                    let short = state
                        .lines
                        .iter()
                        .skip(1)
                        .position(|l| l.bytes.len() <= PIPE_BUF);
                    if let Some(at) = short.filter(|_| exiting) {
                        if let Some(ahead) = state.lines.remove(at + 1) {
                            state.lines.push_front(ahead);
                            continue;
                        }
                    }
                    break;
                }
            }
        }
        let rest = &line.bytes[state.front_done..];
        // SAFETY: writes from a live slice to drainit's own fd.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            // Started: no more waiting for room for all of it.
            state.front_waits = None;
        }
        if n >= 0 && (n as usize) < rest.len() {
            state.front_done += n as usize;
            wrote |= n > 0;
            if n > 0 {
                continue;
            }
            break;
        }
        let error = (n < 0).then(|| std::io::Error::last_os_error().raw_os_error());
        match error {
            Some(Some(libc::EINTR)) => continue,
            Some(Some(libc::EAGAIN)) => break,
            Some(Some(libc::EPIPE)) => crate::io::early::take_own_sigpipe(),
            _ => {}
        }
        // All of it out, or never: the reader went away (EPIPE), or the
        // file is not there at all.
        let whole = error.is_none();
        let last = line.last;
        state.front_done = 0;
        state.front_waits = None;
        wrote = true;
        if let Some(line) = state.lines.pop_front() {
            if last {
                state.finals -= 1;
            } else {
                state.bytes -= line.bytes.len();
            }
        }
        if !whole {
            count_lost(1);
        }
    }
    let left = !state.lines.is_empty();
    if !left || wrote {
        state.retry = RETRY_FIRST;
    }
    let was = BACKLOG.swap(left, Ordering::AcqRel);
    // Lines left by another thread (a request thread, the notify reader,
    // the health listener): the loop may be waiting with no timeout, so
    // it is woken to take up the retries (a wake-up with nothing in the
    // inbox costs the core nothing).
    // SAFETY: getpid and gettid have no preconditions.
    if left && !was && unsafe { libc::gettid() != libc::getpid() } {
        crate::io::threads::Waker::for_main_thread().wake();
    }
    wrote
}

/// Without a writer thread, lines waiting for room in stderr: how long
/// the event loop may wait before it calls [`pump`]. None when nothing
/// waits (or a thread writes).
pub fn retry_in() -> Option<Duration> {
    if !BACKLOG.load(Ordering::Acquire) {
        return None;
    }
    QUEUE.get().map(|queue| lock(queue).retry.max(RETRY_FIRST))
}

/// Without a writer thread: writes what waits and stderr now takes (the
/// event loop calls it after each wait while [`retry_in`] says so).
pub fn pump() {
    let fd = DIRECT.load(Ordering::Acquire);
    if fd < 0 || !BACKLOG.load(Ordering::Acquire) {
        return;
    }
    if let Some(queue) = QUEUE.get() {
        let mut state = lock(queue);
        // Only the loop's tries lengthen the wait: lines queued meanwhile
        // do not.
        if !pump_locked(&mut state, fd) && !state.lines.is_empty() {
            state.retry = (state.retry * 2).clamp(RETRY_FIRST, RETRY_MAX);
        }
    }
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
            if put(&line, &|| Some(until), &|| false) != Put::Whole {
                count_lost(1);
                all = false;
            }
        }
        return all;
    }
    let direct = DIRECT.load(Ordering::Acquire);
    if direct >= 0 {
        return flush_direct(queue, direct, until);
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

/// [`flush`] without a writer thread: writes here until the queue is
/// empty or `until`; then counts what is left, a line partly written too
/// (the process may end before the rest is).
fn flush_direct(queue: &Queue, fd: i32, until: Instant) -> bool {
    let mut state = lock(queue);
    state.deadline = Some(until);
    let mut polled = false;
    loop {
        let wrote = pump_locked(&mut state, fd);
        if state.lines.is_empty() || state.closed {
            return state.lines.is_empty();
        }
        // A line waiting for room for all of it, or a file that said it
        // had room and took nothing: steps, not a spin on `poll`.
        let steps = state.front_waits.is_some() || (polled && !wrote);
        drop(state);
        polled = !steps;
        let more = if steps {
            step(Some(until))
        } else {
            wait_writable(fd, Some(until))
        };
        state = lock(queue);
        if !more {
            let left_over = state.lines.len();
            state.lines.clear();
            state.bytes = 0;
            state.finals = 0;
            state.front_done = 0;
            state.closed = true;
            BACKLOG.store(false, Ordering::Release);
            drop(state);
            count_lost(left_over as u64);
            return false;
        }
    }
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

/// What [`put`] did with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Put {
    /// All of it went out.
    Whole,
    /// Not all of it, and it never will.
    Lost,
    /// None of it: at exit it waits for room for all of it while a
    /// shorter line waits behind it, which goes first.
    Back,
}

/// The writer thread's next line: the first, unless the exit began and it
/// is a long line the pipe cannot take whole yet while a shorter one
/// waits behind it (that one goes first, as without a thread).
fn pop_next(state: &mut State) -> Option<Line> {
    let waits = state.lines.front().is_some_and(|l| {
        state.deadline.is_some()
            && l.bytes.len() > PIPE_BUF
            && stderr_is_pipe()
            && pipe_takes_whole(l.bytes.len()) == Some(false)
    });
    let at = match waits {
        true => state
            .lines
            .iter()
            .position(|l| l.bytes.len() <= PIPE_BUF)
            .unwrap_or(0),
        false => 0,
    };
    state.lines.remove(at)
}

/// Writes one line to fd 2, whole, or none of it when it can be helped.
/// `deadline` is the exit's, asked again at each wait (it comes when the
/// exit begins); `shorter_waits` says, once it has, whether a shorter line
/// waits behind this one (then a long line waiting for room goes back).
fn put(
    line: &Line,
    deadline: &dyn Fn() -> Option<Instant>,
    shorter_waits: &dyn Fn() -> bool,
) -> Put {
    let bytes = &line.bytes[..];
    if bytes.is_empty() {
        return Put::Whole;
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
                    if until.is_some() && shorter_waits() {
                        return Put::Back;
                    }
                    if !step(until) {
                        return Put::Lost;
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
                if !wait_writable(libc::STDERR_FILENO, deadline()) {
                    return Put::Lost;
                }
            }
            // The reader went away (EPIPE), or stderr is not there at all.
            _ => return Put::Lost,
        }
    }
    Put::Whole
}
