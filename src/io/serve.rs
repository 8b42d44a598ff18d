//! The health listener (`--serve`): one thread, non-blocking sockets and
//! `poll`, answering GET and HEAD from the status the core published
//! (`Shared`), never deciding anything itself and never waiting on the
//! event loop. Every resource a peer can make it spend has a bound:
//! `MAX_CONNECTIONS` at once (`LOOPBACK_RESERVED` of them kept for
//! loopback peers, at most `MAX_PER_PEER` for one outside address), a head
//! of at most `http_request::HEAD_LIMIT`,
//! `HEAD_TIMEOUT` to send it (and when the listener is full, a connection
//! silent for `EVICT_AFTER` gives its place to a new one), one request per
//! connection, no body read.
//!
//! `/readyz` and `/status` first let the loop catch up: the listener asks
//! for a turn (`Shared::ask`, a SIGCHLD to the loop's thread) and answers
//! once the loop has published with no other signal pending, or after
//! `SYNC_WAIT`, so a request sent after a stop signal sees the stop.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use log::{error, warn};

use crate::core::health::{self, Reply, Route};
use crate::core::status::Status;
use crate::io::threads::Waker;
use crate::io::workers::Pool;
use crate::proto::http::Target;
use crate::proto::http_request::{self, Method, Parsed};

/// Connections open at once; more are accepted and closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// Of those, kept for loopback peers (the container's own health check).
pub const LOOPBACK_RESERVED: usize = 8;
/// Connections one outside address may hold at once, so one flooding
/// address cannot take every outside place (the kubelet's or the load
/// balancer's probe comes from outside too).
pub const MAX_PER_PEER: usize = 16;
/// A connection that has not sent a whole head by then is closed; so is
/// one whose answer could not be written by then.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// When the listener is full, a connection that has not sent a whole head
/// this long may be closed to make room for a new one.
pub const EVICT_AFTER: Duration = Duration::from_secs(1);
/// The longest `/readyz` or `/status` waits for the loop to catch up.
pub const SYNC_WAIT: Duration = Duration::from_millis(100);
/// The app's readiness URL gets this long.
pub const APP_TIMEOUT: Duration = Duration::from_millis(800);
/// An answer of the app's readiness URL this young is shared by the
/// `/readyz` requests that come after it: a flood of `/readyz` costs the app
/// at most a request per this period.
pub const APP_FRESH: Duration = Duration::from_millis(100);
/// The longest a `/readyz` waits for the app's answer (its request's
/// timeout and a margin); then it is 503.
const APP_WAIT: Duration = Duration::from_millis(1000);
/// After EMFILE or ENFILE, the listener is left alone this long.
const BACKOFF: Duration = Duration::from_millis(100);

/// The thread that asks `--ready-url`: one request at a time.
static READY: Pool = Pool::new("drainit-ready", 1);

/// What the loop published, and the last turn it served.
#[derive(Default)]
struct Published {
    status: Option<Arc<Status>>,
    /// The highest ask the loop has caught up with.
    served: u64,
    /// The app's readiness URL's last answer, not yet taken.
    app: Option<Result<(), String>>,
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

    fn lock(&self) -> MutexGuard<'_, Published> {
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

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to our eventfd; EAGAIN (counter full)
        // means a wake-up is pending anyway.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    fn drain_wake(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: an 8-byte read from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

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
        READY.prestart(1)?;
    }
    let mut server = Server {
        listener,
        shared,
        loop_waker,
        ready_url,
        conns: Vec::new(),
        issued: 0,
        app_in_flight: false,
        app_answer: None,
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

/// Where a connection is.
enum State {
    /// Reading the head.
    Reading(Vec<u8>),
    /// Waiting for the loop to publish turn `ticket`.
    Syncing {
        ticket: u64,
        since: Instant,
        route: Route,
        head: bool,
    },
    /// Waiting for the app's readiness URL since `since`.
    AwaitApp { head: bool, since: Instant },
    /// Writing the answer from `pos`.
    Writing(Vec<u8>, usize),
}

struct Conn {
    stream: TcpStream,
    peer: std::net::IpAddr,
    loopback: bool,
    accepted: Instant,
    state: State,
    done: bool,
}

struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    loop_waker: Waker,
    ready_url: Option<String>,
    conns: Vec<Conn>,
    /// The last ask the listener made of the loop; at most one is
    /// outstanding, so a flood of `/readyz` costs the loop one turn per
    /// turn it has time for, not one per request.
    issued: u64,
    app_in_flight: bool,
    /// The app's last readiness answer and when it came.
    app_answer: Option<(Result<(), String>, Instant)>,
    backoff_until: Option<Instant>,
    said_accept_error: bool,
}

impl Server {
    /// Serves until an error of the listener itself; returns it.
    fn run(&mut self) -> io::Error {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        loop {
            let now = Instant::now();
            fds.clear();
            fds.push(pollfd(self.shared.wake.as_raw_fd(), libc::POLLIN));
            let listening = self.backoff_until.map_or(true, |t| now >= t);
            if listening {
                self.backoff_until = None;
                fds.push(pollfd(self.listener.as_raw_fd(), libc::POLLIN));
            }
            for conn in &self.conns {
                // A connection waiting for the loop or the app is not
                // polled (a hang-up would wake the thread in a spin).
                let (fd, events) = match conn.state {
                    State::Reading(_) => (conn.stream.as_raw_fd(), libc::POLLIN),
                    State::Writing(..) => (conn.stream.as_raw_fd(), libc::POLLOUT),
                    _ => (-1, 0),
                };
                fds.push(pollfd(fd, events));
            }
            let timeout = self.next_timeout(now);
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
            let first_conn = if listening { 2 } else { 1 };
            // Connections first (their indices match `fds`), new ones after.
            for (i, conn) in self.conns.iter_mut().enumerate() {
                let revents = fds[first_conn + i].revents;
                if revents != 0 {
                    conn.progress(revents);
                }
            }
            // Heads just read are parsed before new connections come in:
            // a connection whose head just completed is never taken for a
            // silent one.
            self.advance(now);
            if listening && fds[1].revents != 0 {
                if let Err(e) = self.accept(now) {
                    return e;
                }
            }
            self.conns.retain(|c| !c.done);
        }
    }

    /// Milliseconds until the earliest timeout of a connection, a sync
    /// wait or the backoff; -1 for none.
    fn next_timeout(&self, now: Instant) -> libc::c_int {
        let mut next: Option<Instant> = self.backoff_until;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for conn in &self.conns {
            at(conn.accepted + HEAD_TIMEOUT);
            match conn.state {
                State::Syncing { since, .. } => at(since + SYNC_WAIT),
                State::AwaitApp { since, .. } => at(since + APP_WAIT),
                _ => {}
            }
        }
        match next {
            None => -1,
            Some(t) => {
                let ms = t.saturating_duration_since(now).as_millis() + 1;
                ms.min(60_000) as libc::c_int
            }
        }
    }

    /// Takes every waiting connection; beyond the bounds each is closed at
    /// once. (Not inlined, like `advance` and `progress`: the idle loop's
    /// stack frame stays small, so the idle thread touches few pages.)
    #[inline(never)]
    fn accept(&mut self, now: Instant) -> Result<(), io::Error> {
        // A bounded batch per turn, so a flood cannot keep the other
        // connections from being served.
        for _ in 0..MAX_CONNECTIONS * 2 {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let loopback = peer.ip().is_loopback()
                        || matches!(peer.ip(), std::net::IpAddr::V6(ip)
                            if ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()));
                    let ip = peer.ip();
                    let mine = self
                        .conns
                        .iter()
                        .filter(|c| !c.done && c.peer == ip)
                        .count();
                    let room = if !loopback && mine >= MAX_PER_PEER {
                        // One outside address never holds more than its
                        // share: only its own silent ones give way.
                        self.evict(now, |c| c.peer == ip)
                    } else {
                        self.room(loopback)
                            || (self.evict(now, |c| loopback || !c.loopback) && self.room(loopback))
                    };
                    if !room || stream.set_nonblocking(true).is_err() {
                        drop(stream);
                        continue;
                    }
                    self.conns.push(Conn {
                        stream,
                        peer: ip,
                        loopback,
                        accepted: now,
                        state: State::Reading(Vec::new()),
                        done: false,
                    });
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

    /// Whether a peer (loopback or not) may have one more connection.
    fn room(&self, loopback: bool) -> bool {
        let open = self.conns.iter().filter(|c| !c.done);
        let (all, outside) = open.fold((0, 0), |(a, o), c| (a + 1, o + usize::from(!c.loopback)));
        all < MAX_CONNECTIONS && (loopback || outside < MAX_CONNECTIONS - LOOPBACK_RESERVED)
    }

    /// Makes room by closing the connection, among those `may` allows,
    /// that has waited longest, over `EVICT_AFTER`, without sending a whole
    /// head: idle connections cannot hold the listener for their whole
    /// `HEAD_TIMEOUT`. Outside connections go first. True when one went.
    fn evict(&mut self, now: Instant, may: impl Fn(&Conn) -> bool) -> bool {
        let victim = self
            .conns
            .iter_mut()
            .filter(|c| {
                !c.done
                    && matches!(c.state, State::Reading(_))
                    && now.saturating_duration_since(c.accepted) >= EVICT_AFTER
                    && may(c)
            })
            .min_by_key(|c| (c.loopback, c.accepted));
        match victim {
            Some(c) => {
                c.done = true;
                true
            }
            None => false,
        }
    }

    /// Moves every connection on: heads parsed into answers or waits,
    /// waits resolved, timeouts applied.
    #[inline(never)]
    fn advance(&mut self, now: Instant) {
        let (status, served, app) = {
            let mut state = self.shared.lock();
            (state.status.clone(), state.served, state.app.take())
        };
        if let Some(answer) = app {
            self.app_in_flight = false;
            self.app_answer = Some((answer, now));
        }
        let next = self.issued + 1;
        let mut want_app = false;
        let mut waiting = false;
        for conn in &mut self.conns {
            if conn.done {
                continue;
            }
            if now >= conn.accepted + HEAD_TIMEOUT {
                conn.done = true;
                continue;
            }
            let State::Reading(buf) = &conn.state else {
                continue;
            };
            match http_request::parse(buf) {
                Parsed::Partial => {}
                Parsed::Refuse(code) => {
                    conn.reply(Reply::text(code, http_request::reason(code)), false)
                }
                Parsed::Request { method, path } => {
                    let head = method == Method::Head;
                    match (method, Route::of(&path)) {
                        (Method::Other, _) => {
                            conn.reply(Reply::text(405, "only GET and HEAD"), false)
                        }
                        // These see every signal sent before they came: they
                        // wait for an ask made after now.
                        (_, route @ (Route::Readyz | Route::Status)) => {
                            conn.state = State::Syncing {
                                ticket: next,
                                since: now,
                                route,
                                head,
                            };
                        }
                        (_, route) => conn.reply(answer(route, status.as_deref(), now), head),
                    }
                }
            }
        }
        let fresh = self
            .app_answer
            .as_ref()
            .filter(|(_, at)| now.saturating_duration_since(*at) < APP_FRESH)
            .map(|(answer, _)| answer.clone());
        for conn in &mut self.conns {
            match conn.state {
                State::Syncing {
                    ticket,
                    since,
                    route,
                    head,
                } => {
                    let caught_up = served >= ticket;
                    if !caught_up && now < since + SYNC_WAIT {
                        waiting |= ticket > self.issued;
                        continue;
                    }
                    let ready = health::readiness(status.as_deref()).is_ok();
                    match route {
                        // The loop did not catch up in time (starved, or
                        // drainit is in its last resort): not ready is the
                        // safe answer.
                        Route::Readyz if !caught_up && ready => {
                            conn.reply(Reply::text(503, "not ready: drainit is busy"), head)
                        }
                        Route::Readyz if ready && self.ready_url.is_some() => match &fresh {
                            Some(app) => conn
                                .reply(health::readyz(status.as_deref(), Some(app.clone())), head),
                            None => {
                                want_app = true;
                                conn.state = State::AwaitApp { head, since: now };
                            }
                        },
                        route => conn.reply(answer(route, status.as_deref(), now), head),
                    }
                }
                State::AwaitApp { head, since } => {
                    if let Some(app) = fresh.clone() {
                        // Concurrent requests share the one answer.
                        conn.reply(health::readyz(status.as_deref(), Some(app)), head);
                    } else if now >= since + APP_WAIT {
                        let no_answer = Some(Err("no answer in time".to_string()));
                        conn.reply(health::readyz(status.as_deref(), no_answer), head);
                    }
                }
                _ => {}
            }
        }
        // One ask outstanding at most: the next is made once the loop
        // served the last, for every request that came since.
        if waiting && served >= self.issued {
            self.issued = self.shared.asked.fetch_add(1, Ordering::AcqRel) + 1;
            self.loop_waker.wake();
        }
        if want_app && !self.app_in_flight {
            self.ask_app();
        }
        // Answers just queued: write what the socket takes now.
        for conn in &mut self.conns {
            if let State::Writing(..) = conn.state {
                conn.progress(libc::POLLOUT);
            }
        }
    }

    /// Asks `--ready-url` on its own thread; the answer (always one, even
    /// after a panic of the request) wakes the listener.
    fn ask_app(&mut self) {
        let Some(url) = self.ready_url.clone() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let job = Box::new(move || {
            let target = Target {
                method: "GET".into(),
                url,
            };
            let asked =
                std::panic::catch_unwind(|| crate::io::http::send_for_status(&target, APP_TIMEOUT));
            let answer = match asked {
                Ok(Ok(status)) if (200..300).contains(&status) => Ok(()),
                Ok(Ok(status)) => Err(format!("HTTP {status}")),
                Ok(Err(failure)) => Err(failure.kind().to_string()),
                Err(_) => Err("internal error".to_string()),
            };
            shared.lock().app = Some(answer);
            shared.wake();
        });
        self.app_in_flight = true;
        if READY.submit(job).is_err() {
            self.app_in_flight = false;
            self.shared.lock().app = Some(Err("cannot start the request".into()));
            self.shared.wake();
        }
    }
}

/// The answer of a route that needs nothing more than the status. Never
/// inlined: its formatting's stack frame is touched only when a request
/// comes, not by the idle loop.
#[inline(never)]
fn answer(route: Route, status: Option<&Status>, now: Instant) -> Reply {
    match route {
        Route::Readyz => health::readyz(status, None),
        Route::Healthz => health::healthz(status),
        Route::Status => health::status_json(status, now, crate::io::logwriter::lost_total()),
        Route::Metrics => {
            let unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            crate::core::metrics::render(status, now, unix)
        }
        Route::NotFound => Reply::text(404, "not found"),
    }
}

impl Conn {
    fn reply(&mut self, reply: Reply, head: bool) {
        let bytes = http_request::render(
            reply.status,
            reply.content_type,
            reply.body.as_bytes(),
            head,
        );
        self.state = State::Writing(bytes, 0);
    }

    /// Reads or writes what the socket allows now.
    #[inline(never)]
    fn progress(&mut self, revents: libc::c_short) {
        match &mut self.state {
            State::Reading(buf) => {
                if revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                    self.done = true;
                    return;
                }
                let mut chunk = [0u8; 1024];
                match self.stream.read(&mut chunk) {
                    // Closed before a whole head: nothing to answer.
                    Ok(0) => self.done = true,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if retry(&e) => {}
                    Err(_) => self.done = true,
                }
            }
            State::Writing(out, pos) => {
                while *pos < out.len() {
                    match self.stream.write(&out[*pos..]) {
                        Ok(0) => break,
                        Ok(n) => *pos += n,
                        Err(e) if retry(&e) => return,
                        Err(_) => {
                            self.done = true;
                            return;
                        }
                    }
                }
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
            _ => {}
        }
    }
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
