//! Threads drainit starts and how they wake the event loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use crate::core::event::Input;

/// Starts a named worker thread. Every thread drainit starts (requests,
/// name lookups, the notify reader) goes through this one non-generic
/// function: each `Builder::spawn` instance costs KiBs of the 1 MiB
/// static-binary budget.
#[inline(never)]
pub fn spawn_thread(
    name: &str,
    stack_size: usize,
    work: Box<dyn FnOnce() + Send>,
) -> std::io::Result<()> {
    let creator = std::thread::current();
    let blocked = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&blocked);
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack_size)
        .spawn(move || {
            // Both C libraries unblock their own signals (32-34) in a new
            // thread, whatever its creator blocked: block them again, or a
            // `kill -33` sent to drainit could land here and end it (or be
            // lost). Nothing in drainit may call set*id from a thread:
            // glibc would wait on 33 for every thread.
            crate::io::signals::block_handled();
            done.store(true, Ordering::Release);
            creator.unpark();
            work()
        })
        .map(|_| {
            // glibc unblocks 32 and 33 in the creating thread too, the first
            // time any thread is created (and installs its set*id handler
            // on 33): block them again here.
            crate::io::signals::block_handled();
            // And the new thread's own window closes before this returns:
            // until it has run its first lines, a signal could land there.
            while !blocked.load(Ordering::Acquire) {
                std::thread::park();
            }
        })
}

/// Wakes the loop from another thread (a worker's result in the inbox, the
/// health listener's ask for a turn): SIGCHLD queued to the loop's thread
/// with rt_tgsigqueueinfo and drainit's tag (`signals::wake_info`). The
/// loop takes SIGCHLD anyway and never forwards it, and a pending one
/// stays pending until the loop takes it, so no wake-up is lost. The loop tells it from a child's SIGCHLD by its origin
/// (`signals::Received::is_wake`): a wake-up costs no `waitpid`, and no
/// tick when the inbox is empty and no timer is due (a health ask).
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

/// The one way a worker thread hands the loop an input: the loop's inbox,
/// and a wake-up.
#[derive(Clone)]
pub struct Outbox {
    tx: SyncSender<Input>,
    waker: Waker,
}

/// The loop's end of the inbox.
pub type Inbox = Receiver<Input>;

/// The inbox of the calling thread (the loop's).
pub fn inbox() -> (Outbox, Inbox) {
    let (tx, rx) = sync_channel(INBOX_CAPACITY);
    let waker = Waker::for_this_thread();
    (Outbox { tx, waker }, rx)
}

impl Outbox {
    /// Hands `input` to the loop and wakes it; a loop that is gone (drainit
    /// is exiting) is no error.
    pub fn send(&self, input: Input) {
        if self.tx.send(input).is_ok() {
            self.waker.wake();
        }
    }
}
