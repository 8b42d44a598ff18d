//! Where the loop and the health listener meet: what the loop published
//! (the status when it changed, the last turn it caught up with), the
//! listener's ask for a turn, the app's `--ready-url` answer, and the
//! eventfd that wakes the listener. A mutex held for a copy, an atomic ask
//! counter; no policy (the rules are `core::listener`'s). Also the one
//! thread that asks `--ready-url`, one request at a time.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::core::listener;
use crate::core::status::Status;
use crate::io::http;
use crate::io::workers::Pool;
use crate::proto::http::Target;

/// The thread that asks `--ready-url`: one request at a time.
static READY: Pool = Pool::new("drainit-ready", 1);

/// Starts the `--ready-url` thread (before the child, like every thread).
pub fn prestart_ready() -> io::Result<()> {
    READY.prestart(1)
}

/// What the loop published, and the last turn it served.
#[derive(Default)]
pub struct Published {
    /// A status the listener has not taken yet.
    pub status: Option<Arc<Status>>,
    /// The highest ask the loop has caught up with.
    pub served: u64,
    /// The app's readiness URL's last answer, not yet taken.
    pub app: Option<Result<(), String>>,
}

/// Shared between the loop (which publishes) and the listener (which
/// reads): a mutex held for a copy, an ask counter, and an eventfd that
/// wakes the listener.
pub struct Shared {
    state: Mutex<Published>,
    asked: AtomicU64,
    wake: OwnedFd,
}

impl Shared {
    pub fn new() -> io::Result<Arc<Shared>> {
        // SAFETY: eventfd with flags; the fd is owned from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Arc::new(Shared {
            state: Mutex::new(Published::default()),
            asked: AtomicU64::new(0),
            // SAFETY: a fresh fd nobody else owns.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        }))
    }

    pub fn lock(&self) -> MutexGuard<'_, Published> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The highest turn the listener asked for.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::Acquire)
    }

    /// The loop publishes: a new status (when it changed) and the ask it
    /// caught up with (`u64::MAX`: the loop is over, nothing more comes).
    pub fn publish(&self, status: Option<Status>, served: Option<u64>) {
        {
            let mut state = self.lock();
            if let Some(status) = status {
                state.status = Some(Arc::new(status));
            }
            if let Some(served) = served {
                state.served = state.served.max(served);
            }
        }
        self.wake();
    }

    /// Wakes the listener.
    pub fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to our eventfd; EAGAIN (counter full)
        // means a wake-up is pending anyway.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// The fd the listener polls.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// The listener asks for turn `ticket` (the caller wakes the loop).
    pub fn ask(&self, ticket: u64) {
        self.asked.store(ticket, Ordering::Release);
    }

    pub fn drain_wake(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: an 8-byte read from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }

    /// Asks `url` on the `--ready-url` thread; the answer (always one, even
    /// after a panic of the request) is left here and wakes the listener.
    pub fn ask_app(self: &Arc<Shared>, url: String) {
        let shared = Arc::clone(self);
        let job = Box::new(move || {
            let target = Target {
                method: "GET".into(),
                url,
            };
            let timeout = listener::APP_TIMEOUT;
            let asked = http::contain(|| http::send_for_status(&target, timeout));
            let answer = listener::app_ready(asked.map_err(|f| f.kind.as_str().to_string()));
            shared.lock().app = Some(answer);
            shared.wake();
        });
        if READY.submit(job).is_err() {
            self.lock().app = Some(Err("cannot start the request".into()));
            self.wake();
        }
    }
}
