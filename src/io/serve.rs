//! The health listener (`--serve`): one thread, non-blocking sockets and
//! `poll`. It owns the sockets, reads heads and writes answers; every rule
//! (admission, timeouts, the sync with the loop, `--ready-url`, what each
//! path answers, its CPU share) is `core::listener`'s, fed from here and
//! performed here. Bounds: `listener::MAX_CONNECTIONS` connections, a head
//! of at most `http_request::HEAD_LIMIT`, one request per connection, no
//! body read.
//!
//! `/readyz` and `/status` first let the loop catch up: the listener asks
//! for a turn (`Shared::ask`, a wake-up of the loop's thread) and answers
//! once the loop has published with no signal pending, or after
//! `listener::SYNC_WAIT`, so a request sent after a stop signal sees the
//! stop.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{error, warn};

use crate::core::listener::{self, Action, Id, Listener, Outside};
pub use crate::io::handoff::Shared;
use crate::io::threads::Waker;
use crate::proto::http_request;

/// After EMFILE or ENFILE, the listener is left alone this long.
const BACKOFF: Duration = Duration::from_millis(100);

/// Binds `--serve`'s address before the child starts (non-blocking,
/// close-on-exec: the child never inherits it).
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Starts the listener thread, and the `--ready-url` thread if needed
/// (before the child, like every thread).
pub fn start(
    listener: TcpListener,
    shared: Arc<Shared>,
    loop_waker: Waker,
    ready_url: Option<String>,
) -> io::Result<()> {
    if ready_url.is_some() {
        crate::io::handoff::prestart_ready()?;
    }
    let mut server = Server {
        listener,
        shared,
        loop_waker,
        rules: Listener::new(ready_url.is_some(), Instant::now()),
        ready_url,
        conns: Vec::new(),
        backoff_until: None,
        said_accept_error: false,
    };
    crate::io::threads::spawn_thread(
        "drainit-serve",
        64 * 1024,
        Box::new(move || {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server.run()));
            match run {
                Ok(e) => error!("the health listener stopped: {e}; drainit goes on without it"),
                Err(_) => error!("the health listener failed; drainit goes on without it"),
            }
        }),
    )
}

/// One connection's socket and bytes: the head read so far, then the
/// answer and how much of it is written.
struct Conn {
    id: Id,
    stream: TcpStream,
    head: Vec<u8>,
    answer: Option<(Vec<u8>, usize)>,
    done: bool,
}

struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    loop_waker: Waker,
    ready_url: Option<String>,
    rules: Listener,
    conns: Vec<Conn>,
    backoff_until: Option<Instant>,
    said_accept_error: bool,
}

impl Server {
    /// Serves until an error of the listener itself; returns it.
    fn run(&mut self) -> io::Error {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        loop {
            let now = Instant::now();
            // Over its CPU share, the listener takes and reads nothing
            // until its average is back (the kernel queues meanwhile).
            let resting = self.rules.spent(now, thread_cpu());
            fds.clear();
            fds.push(pollfd(self.shared.wake_fd(), libc::POLLIN));
            let listening = resting.is_none() && self.backoff_until.map_or(true, |t| now >= t);
            if listening {
                self.backoff_until = None;
            }
            fds.push(pollfd(
                if listening {
                    self.listener.as_raw_fd()
                } else {
                    -1
                },
                libc::POLLIN,
            ));
            for conn in &self.conns {
                let events = if conn.answer.is_some() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                };
                // A connection waiting for the loop or the app is not
                // polled (a hang-up would wake the thread in a spin).
                let waiting = conn.answer.is_none() && self.rules.waits(conn.id);
                let fd = if resting.is_some() || waiting {
                    -1
                } else {
                    conn.stream.as_raw_fd()
                };
                fds.push(pollfd(fd, events));
            }
            let next = [self.rules.next_deadline(), self.backoff_until, resting]
                .into_iter()
                .flatten()
                .min();
            let timeout = match next {
                None => -1,
                Some(t) => (t.saturating_duration_since(now).as_millis() + 1).min(60_000) as i32,
            };
            // SAFETY: `fds` is a valid array of pollfd of that length.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    // Out of memory for the poll set: a moment, then again.
                    Some(libc::ENOMEM | libc::EAGAIN) => std::thread::sleep(BACKOFF),
                    _ => return e,
                }
                continue;
            }
            let now = Instant::now();
            if fds[0].revents != 0 {
                self.shared.drain_wake();
            }
            self.take_published(now);
            // Connections first (their indices match `fds`), new ones after
            // (each read at once), then the rules move every one on.
            for (i, conn) in self.conns.iter_mut().enumerate() {
                let revents = fds[2 + i].revents;
                if revents != 0 {
                    conn.progress(revents, now, &mut self.rules);
                }
            }
            if listening && fds[1].revents != 0 {
                if let Err(e) = self.accept(now) {
                    return e;
                }
            }
            self.advance(now);
            self.conns.retain(|c| !c.done);
        }
    }

    /// What the loop and the `--ready-url` thread left in `Shared`.
    fn take_published(&mut self, now: Instant) {
        let (status, served, app) = {
            let mut state = self.shared.lock();
            (state.status.take(), state.served, state.app.take())
        };
        self.rules.published(status, served);
        if let Some(answer) = app {
            self.rules.app_answered(now, answer);
        }
    }

    /// The rules move every connection on; their actions are performed.
    #[inline(never)]
    fn advance(&mut self, now: Instant) {
        let outside = Outside {
            unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            lost: crate::io::logwriter::lost_total(),
        };
        self.rules.advance(now, outside);
        self.perform(now);
    }

    fn perform(&mut self, now: Instant) {
        while let Some(action) = self.rules.poll_action() {
            match action {
                Action::Answer { id, reply, head } => {
                    if let Some(conn) = self.conns.iter_mut().find(|c| c.id == id) {
                        let bytes = http_request::render(
                            reply.status,
                            reply.content_type,
                            reply.body.as_bytes(),
                            head,
                        );
                        conn.answer = Some((bytes, 0));
                        // Written at once as far as the socket takes it.
                        conn.progress(libc::POLLOUT, now, &mut self.rules);
                    }
                }
                Action::Close(id) => {
                    if let Some(conn) = self.conns.iter_mut().find(|c| c.id == id) {
                        conn.done = true;
                    }
                }
                Action::AskLoop(ticket) => {
                    self.shared.ask(ticket);
                    self.loop_waker.wake();
                }
                Action::AskApp => {
                    if let Some(url) = &self.ready_url {
                        self.shared.ask_app(url.clone());
                    }
                }
            }
        }
    }

    /// Takes waiting connections, a bounded batch per turn so that a flood
    /// cannot keep the others from being served; the rules admit each or
    /// close it at once. (Not inlined, like `progress`: the idle loop's
    /// stack frame stays small, so the idle thread touches few pages.)
    #[inline(never)]
    fn accept(&mut self, now: Instant) -> Result<(), io::Error> {
        for _ in 0..listener::ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if let Some(id) = self.rules.admit(now, peer.ip()) {
                        let mut conn = Conn {
                            id,
                            stream,
                            head: Vec::new(),
                            answer: None,
                            done: false,
                        };
                        // Its request is usually in already: read at once,
                        // so a probe is answered (or waits with its
                        // request in) before newer connections can come.
                        conn.progress(libc::POLLIN, now, &mut self.rules);
                        self.conns.push(conn);
                        self.perform(now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The listener itself is broken: nothing to retry.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT)
                    ) =>
                {
                    return Err(e)
                }
                // The peer went away before it was taken: the next one.
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                // Out of descriptors or memory, or a network error of a
                // connection that went away (accept(2) passes those on, to
                // be retried): leave the listener for a moment instead of
                // spinning on it.
                Err(e) => {
                    if !std::mem::replace(&mut self.said_accept_error, true) {
                        warn!("health listener: {e}; new connections wait (said once)");
                    }
                    self.backoff_until = Some(now + BACKOFF);
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

impl Conn {
    /// Reads or writes what the socket allows now; a head read is handed
    /// to the rules, a connection that ends is forgotten by them.
    #[inline(never)]
    fn progress(&mut self, revents: libc::c_short, now: Instant, rules: &mut Listener) {
        if self.done {
            return;
        }
        match &mut self.answer {
            None => {
                if revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                    self.done = true;
                } else {
                    let mut chunk = [0u8; 1024];
                    match self.stream.read(&mut chunk) {
                        // Closed before a whole head: nothing to answer.
                        Ok(0) => self.done = true,
                        Ok(n) => {
                            self.head.extend_from_slice(&chunk[..n]);
                            rules.head(now, self.id, http_request::parse(&self.head));
                        }
                        Err(e) if retry(&e) => {}
                        Err(_) => self.done = true,
                    }
                }
            }
            Some((out, pos)) => {
                while *pos < out.len() {
                    match self.stream.write(&out[*pos..]) {
                        Ok(0) => break,
                        Ok(n) => *pos += n,
                        Err(e) if retry(&e) => return,
                        Err(_) => {
                            self.done = true;
                            break;
                        }
                    }
                }
                if !self.done {
                    let _ = self.stream.shutdown(Shutdown::Write);
                    // What the peer sent beyond the head, read so the close
                    // does not reset the answer away (a bounded amount).
                    let mut sink = [0u8; 1024];
                    for _ in 0..16 {
                        match self.stream.read(&mut sink) {
                            Ok(n) if n > 0 => continue,
                            _ => break,
                        }
                    }
                    self.done = true;
                }
            }
        }
        if self.done {
            rules.closed(self.id);
        }
    }
}

/// The calling thread's CPU time so far.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}
