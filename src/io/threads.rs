//! Threads drainit starts and how they wake the event loop.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::core::event::Input;

/// Threads started and not yet past their first lines, where they block
/// drainit's signals: the child does not start while any is
/// (`wait_until_blocked`).
static OPENING: Mutex<usize> = Mutex::new(0);
static ALL_BLOCKED: Condvar = Condvar::new();

fn opening() -> MutexGuard<'static, usize> {
    OPENING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One thread fewer in its first lines.
fn opened() {
    let mut n = opening();
    *n -= 1;
    if *n == 0 {
        ALL_BLOCKED.notify_all();
    }
}

/// Starts a named worker thread. Every thread drainit starts (requests,
/// name lookups, the notify reader) goes through this one non-generic
/// function: each `Builder::spawn` instance costs KiBs of the 1 MiB
/// static-binary budget. It returns without waiting for the thread to run:
/// `wait_until_blocked`, before the child starts, waits for them all.
#[inline(never)]
pub fn spawn_thread(
    name: &str,
    stack_size: usize,
    work: Box<dyn FnOnce() + Send>,
) -> std::io::Result<()> {
    *opening() += 1;
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack_size)
        .spawn(move || {
            // Both C libraries unblock their own cancellation signal (musl
            // 33, glibc 32) in a new thread, whatever its creator blocked:
            // block it again, or every `kill -33` sent to drainit could
            // land here, where it is discarded (drainit ignores both, so it
            // cannot end drainit: `signals::ignore_reserved`) instead of
            // forwarded. Nothing in drainit may call set*id from a thread:
            // glibc would wait on 33 for every thread.
            crate::io::signals::block_handled();
            opened();
            work()
        });
    match spawned {
        Ok(_) => {
            // glibc unblocks 32 and 33 in the creating thread too, the first
            // time any thread is created (and installs its set*id handler
            // on 33): block them again here.
            crate::io::signals::block_handled();
            Ok(())
        }
        Err(e) => {
            opened();
            Err(e)
        }
    }
}

/// Waits until every thread started so far has run its first lines and
/// blocked drainit's signals: until then a signal could land in it. Called
/// just before the child starts, so that the threads' start runs beside
/// the rest of drainit's, not one after the other.
pub fn wait_until_blocked() {
    let mut n = opening();
    while *n > 0 {
        n = ALL_BLOCKED.wait(n).unwrap_or_else(PoisonError::into_inner);
    }
}

/// Wakes the loop from another thread (a worker's result in the inbox, the
/// health listener's ask for a turn): SIGCHLD queued to the loop's thread
/// with rt_tgsigqueueinfo (`signals::wake_info`). The loop takes SIGCHLD
/// anyway and never forwards it, and a pending one stays pending until the
/// loop takes it, so no wake-up is lost. The signal proves nothing about
/// who sent it (anyone in the container can queue the same one), so the
/// loop reaps after every SIGCHLD: a wake-up costs one `waitpid` that finds
/// nothing, and no tick when the inbox is empty and no timer is due (a
/// health ask).
#[derive(Clone, Copy)]
pub struct Waker {
    pid: libc::pid_t,
    tid: libc::pid_t,
}

impl Waker {
    pub fn for_this_thread() -> Waker {
        // SAFETY: getpid/gettid have no preconditions.
        unsafe {
            Waker {
                pid: libc::getpid(),
                tid: libc::gettid(),
            }
        }
    }

    /// The process's main thread, where the event loop runs (and the
    /// fallback's, and the exit): a wake-up sent before the loop waits, or
    /// after it ended, stays pending (SIGCHLD is blocked from the start).
    pub fn for_main_thread() -> Waker {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        Waker { pid, tid: pid }
    }

    pub fn wake(&self) {
        let info = crate::io::signals::wake_info();
        // SAFETY: rt_tgsigqueueinfo to our own loop thread, which blocks
        // SIGCHLD; the kernel reads a whole siginfo (128 bytes) from `info`.
        unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                self.pid,
                self.tid,
                libc::SIGCHLD,
                info.as_ptr(),
            )
        };
    }
}

/// How many inputs may wait for the loop; a sender finding it full waits
/// (workers and the notify reader, never the loop).
pub const INBOX_CAPACITY: usize = 256;

/// The room an empty inbox keeps after a burst: a few inputs' worth.
const KEEP_EMPTY: usize = 8;

/// The inbox itself: a queue that grows as inputs come, up to
/// `INBOX_CAPACITY`, and a loop end that may be gone. Not std's
/// `sync_channel`, which writes all its slots up front (256 inputs, 44 kB
/// of private memory for the process's whole life, however idle).
struct Queue {
    state: Mutex<Waiting>,
    /// A sender that found the queue full waits here for room.
    room: Condvar,
    /// The loop waits here for an input (`recv_timeout`).
    arrived: Condvar,
}

struct Waiting {
    inputs: VecDeque<Input>,
    /// The loop's end is gone: sends fail instead of waiting.
    closed: bool,
    /// Senders waiting for room, and whether the loop waits for an input:
    /// a condition variable is signalled only when someone waits on it
    /// (each signal is a system call).
    senders_waiting: usize,
    loop_waiting: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        // The queue stays whole whatever a panicking holder was doing.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The one way a worker thread hands the loop an input: the loop's inbox,
/// and a wake-up.
#[derive(Clone)]
pub struct Outbox {
    queue: Arc<Queue>,
    waker: Waker,
}

/// The loop's end of the inbox. Dropping it closes the inbox.
pub struct Inbox {
    queue: Arc<Queue>,
}

/// The inbox of the calling thread (the loop's).
pub fn inbox() -> (Outbox, Inbox) {
    let queue = Arc::new(Queue {
        state: Mutex::new(Waiting {
            inputs: VecDeque::new(),
            closed: false,
            senders_waiting: 0,
            loop_waiting: false,
        }),
        room: Condvar::new(),
        arrived: Condvar::new(),
    });
    let waker = Waker::for_this_thread();
    let outbox = Outbox {
        queue: Arc::clone(&queue),
        waker,
    };
    (outbox, Inbox { queue })
}

impl Outbox {
    /// Hands `input` to the loop and wakes it, waiting while the inbox is
    /// full; a loop that is gone (drainit is exiting) is no error.
    pub fn send(&self, input: Input) {
        let mut waiting = self.queue.lock();
        while waiting.inputs.len() >= INBOX_CAPACITY && !waiting.closed {
            waiting.senders_waiting += 1;
            waiting = self
                .queue
                .room
                .wait(waiting)
                .unwrap_or_else(PoisonError::into_inner);
            waiting.senders_waiting -= 1;
        }
        if waiting.closed {
            return;
        }
        waiting.inputs.push_back(input);
        let loop_waits = waiting.loop_waiting;
        drop(waiting);
        if loop_waits {
            self.queue.arrived.notify_one();
        }
        self.waker.wake();
    }
}

impl Inbox {
    /// The oldest input waiting, if any; never waits.
    pub fn try_recv(&self) -> Option<Input> {
        let mut waiting = self.queue.lock();
        let input = waiting.inputs.pop_front();
        if waiting.inputs.is_empty() && waiting.inputs.capacity() > KEEP_EMPTY {
            // After a burst: an idle loop keeps no room for it.
            waiting.inputs.shrink_to(KEEP_EMPTY);
        }
        Self::made_room(waiting, &self.queue.room, input.is_some());
        input
    }

    /// Lets a sender waiting for room go on, when one waits and there is.
    fn made_room(waiting: MutexGuard<'_, Waiting>, room: &Condvar, took: bool) {
        let wake = took && waiting.senders_waiting > 0;
        drop(waiting);
        if wake {
            room.notify_one();
        }
    }

    /// The oldest input, waiting for one at most `wait`.
    pub fn recv_timeout(&self, wait: Duration) -> Option<Input> {
        let until = Instant::now().checked_add(wait);
        let mut waiting = self.queue.lock();
        loop {
            if let Some(input) = waiting.inputs.pop_front() {
                Self::made_room(waiting, &self.queue.room, true);
                return Some(input);
            }
            // No deadline that far: wait a year at a time.
            let left = until.map_or(Duration::from_secs(365 * 86_400), |until| {
                until.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return None;
            }
            waiting.loop_waiting = true;
            waiting = self
                .queue
                .arrived
                .wait_timeout(waiting, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            waiting.loop_waiting = false;
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        let mut waiting = self.queue.lock();
        waiting.closed = true;
        // What waits is never taken now: give its memory back at once.
        waiting.inputs = VecDeque::new();
        let wake = waiting.senders_waiting > 0;
        drop(waiting);
        if wake {
            self.queue.room.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn input(pid: i32) -> Input {
        Input::OrphanReaped { pid }
    }

    /// Until a sender waits for room in the full inbox.
    fn wait_for_a_sender(inbox: &Inbox) {
        let until = Instant::now() + Duration::from_secs(20);
        while inbox.queue.lock().senders_waiting == 0 {
            assert!(Instant::now() < until, "no sender waits");
            std::thread::yield_now();
        }
    }

    #[test]
    fn inputs_come_in_order_and_nothing_is_written_before_they_come() {
        let (outbox, inbox) = inbox();
        assert_eq!(inbox.queue.lock().inputs.capacity(), 0);
        for n in 0..3 {
            outbox.send(input(n));
        }
        for n in 0..3 {
            assert!(matches!(inbox.try_recv(), Some(Input::OrphanReaped { pid }) if pid == n));
        }
        assert!(inbox.try_recv().is_none());
        let started = Instant::now();
        assert!(inbox.recv_timeout(Duration::from_millis(30)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_full_inbox_holds_the_sender_until_the_loop_takes_one() {
        let (outbox, inbox) = inbox();
        for n in 0..INBOX_CAPACITY as i32 {
            outbox.send(input(n));
        }
        let sent = Arc::new(AtomicBool::new(false));
        let (done, late) = (Arc::clone(&sent), outbox.clone());
        let sender = std::thread::spawn(move || {
            late.send(input(999));
            done.store(true, Ordering::Release);
        });
        wait_for_a_sender(&inbox);
        assert!(!sent.load(Ordering::Acquire), "sent past the bound");
        assert_eq!(inbox.queue.lock().inputs.len(), INBOX_CAPACITY);
        assert!(matches!(
            inbox.try_recv(),
            Some(Input::OrphanReaped { pid: 0 })
        ));
        sender.join().unwrap();
        assert!(sent.load(Ordering::Acquire));
        // The held input came in last, behind the rest.
        let mut last = None;
        while let Some(input) = inbox.try_recv() {
            last = Some(input);
        }
        assert!(matches!(last, Some(Input::OrphanReaped { pid: 999 })));
        // Emptied, the inbox gave the burst's room back.
        assert!(inbox.queue.lock().inputs.capacity() <= KEEP_EMPTY);
    }

    #[test]
    fn a_sender_waiting_on_a_full_inbox_returns_when_the_loop_is_gone() {
        let (outbox, inbox) = inbox();
        for n in 0..INBOX_CAPACITY as i32 {
            outbox.send(input(n));
        }
        let sender = std::thread::spawn(move || outbox.send(input(999)));
        wait_for_a_sender(&inbox);
        drop(inbox);
        sender.join().unwrap();
    }

    #[test]
    fn recv_timeout_returns_what_another_thread_sends() {
        let (outbox, inbox) = inbox();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            outbox.send(input(7));
        });
        let got = inbox.recv_timeout(Duration::from_secs(20));
        assert!(matches!(got, Some(Input::OrphanReaped { pid: 7 })));
        sender.join().unwrap();
    }
}
