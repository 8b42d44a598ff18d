//! The health listener's rules, sans-IO: which connection is let in and
//! which gives way (admission), how long a peer may take to send its head,
//! when `/readyz` and `/status` wait for the loop to catch up and when
//! `/readyz` is "busy", when the app's `--ready-url` is asked and how long
//! its answer is shared, what each path answers, and how much CPU the
//! listener may spend. `io/serve.rs` owns the sockets and feeds this state
//! what it read (`admit`, `head`, `closed`, `published`, `app_answered`,
//! `advance`); it performs the `Action`s this state queues. Pure: every
//! call takes `now`; nothing here reads a clock or makes a syscall.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::health::{self, Reply, Route};
use crate::core::status::Status;
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
/// New connections taken per turn (each is read at once): a bounded batch,
/// so a flood of connects cannot keep the others from being served.
pub const ACCEPT_BATCH: usize = 16;
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
pub const APP_WAIT: Duration = Duration::from_millis(1000);
/// A rendered `/status` or `/metrics` page is served again until the
/// published status changes or it is this old (its clock fields).
pub const PAGE_FRESH: Duration = Duration::from_millis(100);
/// The share of one core the listener thread may use, in percent,
/// measured over `CPU_WINDOW`: past it, the listener stops taking and
/// reading connections until its average is back under the share.
pub const CPU_SHARE_PERCENT: u32 = 10;
/// The window the CPU share is measured over; a rest after a turn of
/// ordinary cost is shorter than this, so the kernel's queue of
/// connections (128) does not overflow meanwhile.
pub const CPU_WINDOW: Duration = Duration::from_millis(25);

/// A connection's number, given by `admit`.
pub type Id = u64;

/// Who holds places: one outside address, or every loopback peer together
/// (the container's own checks, and a service mesh's sidecar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Loopback,
    Outside(IpAddr),
}

impl Peer {
    pub fn of(ip: IpAddr) -> Peer {
        let loopback = ip.is_loopback()
            || matches!(ip, IpAddr::V6(v6)
                if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()));
        if loopback {
            Peer::Loopback
        } else {
            Peer::Outside(ip)
        }
    }
}

/// What `io/serve.rs` does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write this answer on the connection, then close it.
    Answer {
        id: Id,
        reply: Arc<Reply>,
        head: bool,
    },
    /// Close the connection now (its time is up, or it gave way).
    Close(Id),
    /// Ask the loop for turn `ticket` (and wake it).
    AskLoop(u64),
    /// Ask the app's `--ready-url` (one request at a time).
    AskApp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The head is not whole yet.
    Reading,
    /// Waiting for the loop to publish turn `ticket`.
    Syncing {
        ticket: u64,
        since: Instant,
        route: Route,
        head: bool,
    },
    /// Waiting for the app's readiness URL since `since`.
    AwaitApp { head: bool, since: Instant },
    /// The answer is being written.
    Writing,
}

#[derive(Debug)]
struct Conn {
    id: Id,
    peer: Peer,
    accepted: Instant,
    phase: Phase,
}

/// The listener's state.
#[derive(Debug)]
pub struct Listener {
    conns: Vec<Conn>,
    next_id: Id,
    /// The last turn asked of the loop; at most one is outstanding, so a
    /// flood of `/readyz` costs the loop one turn per turn it has time
    /// for, not one per request.
    issued: u64,
    /// The highest turn the loop caught up with.
    served: u64,
    status: Option<Arc<Status>>,
    /// The published status changed since the pages were rendered.
    generation: u64,
    ready_url: bool,
    app_in_flight: bool,
    /// The app's last readiness answer and when it came.
    app_answer: Option<(Result<(), String>, Instant)>,
    /// Rendered `/status` and `/metrics`.
    pages: [Option<Page>; 2],
    budget: Budget,
    actions: VecDeque<Action>,
}

/// A rendered page and what it was rendered from.
#[derive(Debug)]
struct Page {
    generation: u64,
    lost: u64,
    at: Instant,
    reply: Arc<Reply>,
}

/// What `io/serve.rs` tells the state at each turn besides `now`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outside {
    /// Wall-clock seconds since the epoch (`/metrics`).
    pub unix: f64,
    /// Log lines dropped so far (`/status`).
    pub lost: u64,
}

impl Listener {
    /// `ready_url`: the app has a readiness URL to ask.
    pub fn new(ready_url: bool, now: Instant) -> Listener {
        Listener {
            conns: Vec::new(),
            next_id: 0,
            issued: 0,
            served: 0,
            status: None,
            generation: 0,
            ready_url,
            app_in_flight: false,
            app_answer: None,
            pages: [None, None],
            budget: Budget::new(now),
            actions: VecDeque::new(),
        }
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Connections held.
    pub fn open(&self) -> usize {
        self.conns.len()
    }

    /// A new connection from `ip`: its id, or None when it must be closed
    /// at once. When every place it may have is taken, the oldest
    /// connection of the peer holding the most places it may take gives
    /// way (a `Close` is queued), whatever its age: a newcomer always gets
    /// in, and a peer that holds many places loses them first. A loopback
    /// peer's reserve is never taken by an outside one; one outside
    /// address never holds more than `MAX_PER_PEER`.
    pub fn admit(&mut self, now: Instant, ip: IpAddr) -> Option<Id> {
        let peer = Peer::of(ip);
        let outside = self
            .conns
            .iter()
            .filter(|c| c.peer != Peer::Loopback)
            .count();
        let mine = self.conns.iter().filter(|c| c.peer == peer).count();
        let own_full = peer != Peer::Loopback && mine >= MAX_PER_PEER;
        let outside_full = peer != Peer::Loopback && outside >= MAX_CONNECTIONS - LOOPBACK_RESERVED;
        let victim = if own_full {
            // Its own share is full: its own oldest gives way.
            self.oldest_of(peer)
        } else if outside_full || self.conns.len() >= MAX_CONNECTIONS {
            // With the outside places full, an outside newcomer takes an
            // outside place: the loopback reserve stays.
            self.largest_peer(outside_full)
                .and_then(|p| self.oldest_of(p))
        } else {
            // Room.
            None
        };
        if own_full || outside_full || self.conns.len() >= MAX_CONNECTIONS {
            let victim = victim?;
            self.conns.retain(|c| c.id != victim);
            self.actions.push_back(Action::Close(victim));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.conns.push(Conn {
            id,
            peer,
            accepted: now,
            phase: Phase::Reading,
        });
        Some(id)
    }

    /// The peer holding the most places (only outside ones when
    /// `outside_only`); of equal ones, the one seen first in `conns`
    /// (which is in order of arrival), whose oldest is the oldest.
    fn largest_peer(&self, outside_only: bool) -> Option<Peer> {
        // At most `MAX_CONNECTIONS` peers: one pass, counted in place.
        let mut counts: Vec<(Peer, usize)> = Vec::new();
        for c in &self.conns {
            if outside_only && c.peer == Peer::Loopback {
                continue;
            }
            match counts.iter_mut().find(|(p, _)| *p == c.peer) {
                Some((_, n)) => *n += 1,
                None => counts.push((c.peer, 1)),
            }
        }
        let most = counts.iter().map(|(_, n)| *n).max()?;
        counts.into_iter().find(|(_, n)| *n == most).map(|(p, _)| p)
    }

    /// The peer's oldest connection still sending its head, else its
    /// oldest: an answer under way is thrown away last.
    fn oldest_of(&self, peer: Peer) -> Option<Id> {
        let mine = || self.conns.iter().filter(move |c| c.peer == peer);
        mine()
            .filter(|c| c.phase == Phase::Reading)
            .min_by_key(|c| c.accepted)
            .or_else(|| mine().min_by_key(|c| c.accepted))
            .map(|c| c.id)
    }

    /// The connection waits for the loop or the app: nothing to read or
    /// write on it meanwhile.
    pub fn waits(&self, id: Id) -> bool {
        self.conns.iter().any(|c| {
            c.id == id && matches!(c.phase, Phase::Syncing { .. } | Phase::AwaitApp { .. })
        })
    }

    /// The connection is gone (written, closed by its peer, or failed).
    pub fn closed(&mut self, id: Id) {
        self.conns.retain(|c| c.id != id);
    }

    /// The head read so far on `id`, parsed: an answer is queued, or the
    /// connection waits for the loop; a partial head waits for more.
    pub fn head(&mut self, now: Instant, id: Id, parsed: Parsed) {
        let Some(i) = self.conns.iter().position(|c| c.id == id) else {
            return;
        };
        if self.conns[i].phase != Phase::Reading {
            return;
        }
        let (route, head) = match parsed {
            Parsed::Partial => return,
            Parsed::Refuse(code) => {
                let reply = Reply::text(code, http_request::reason(code));
                return self.answer(i, reply, false);
            }
            Parsed::Request {
                method: Method::Other,
                ..
            } => return self.answer(i, Reply::text(405, "only GET and HEAD"), false),
            Parsed::Request { method, path } => (Route::of(&path), method == Method::Head),
        };
        match route {
            // These see every signal sent before they came: they wait for
            // an ask made after now.
            Route::Readyz | Route::Status => {
                self.conns[i].phase = Phase::Syncing {
                    ticket: self.issued + 1,
                    since: now,
                    route,
                    head,
                }
            }
            Route::Healthz => {
                let reply = health::healthz(self.status.as_deref());
                self.answer(i, reply, head)
            }
            Route::Metrics => {
                // Rendered in `advance`, which knows the wall clock.
                self.conns[i].phase = Phase::Syncing {
                    ticket: 0,
                    since: now,
                    route,
                    head,
                }
            }
            Route::NotFound => self.answer(i, Reply::text(404, "not found"), head),
        }
    }

    fn answer(&mut self, i: usize, reply: Reply, head: bool) {
        self.answer_shared(i, Arc::new(reply), head);
    }

    fn answer_shared(&mut self, i: usize, reply: Arc<Reply>, head: bool) {
        let conn = &mut self.conns[i];
        conn.phase = Phase::Writing;
        self.actions.push_back(Action::Answer {
            id: conn.id,
            reply,
            head,
        });
    }

    /// The loop published: a new status (when it changed) and the turn it
    /// caught up with.
    pub fn published(&mut self, status: Option<Arc<Status>>, served: u64) {
        if let Some(status) = status {
            self.status = Some(status);
            self.generation += 1;
        }
        self.served = self.served.max(served);
    }

    /// The app's readiness URL answered (`Err`: why it is not ready).
    pub fn app_answered(&mut self, now: Instant, answer: Result<(), String>) {
        self.app_in_flight = false;
        self.app_answer = Some((answer, now));
    }

    /// Moves every connection on: waits resolved, timeouts applied, the
    /// loop and the app asked when a request waits for them.
    pub fn advance(&mut self, now: Instant, outside: Outside) {
        let mut i = 0;
        while i < self.conns.len() {
            if now >= self.conns[i].accepted + HEAD_TIMEOUT {
                let id = self.conns.remove(i).id;
                self.actions.push_back(Action::Close(id));
                continue;
            }
            i += 1;
        }
        let fresh = self
            .app_answer
            .as_ref()
            .filter(|(_, at)| now.saturating_duration_since(*at) < APP_FRESH)
            .map(|(answer, _)| answer.clone());
        let ready = health::readiness(self.status.as_deref()).is_ok();
        let mut waiting = false;
        let mut want_app = false;
        for i in 0..self.conns.len() {
            match self.conns[i].phase {
                Phase::Syncing {
                    ticket,
                    since,
                    route,
                    head,
                } => {
                    let caught_up = self.served >= ticket;
                    if !caught_up && now < since + SYNC_WAIT {
                        waiting |= ticket > self.issued;
                        continue;
                    }
                    let reply = match route {
                        // The loop did not catch up in time (starved, or
                        // drainit is in its last resort): not ready is the
                        // safe answer.
                        Route::Readyz if !caught_up && ready => {
                            Reply::text(503, "not ready: drainit is busy")
                        }
                        Route::Readyz if ready && self.ready_url => match &fresh {
                            Some(app) => health::readyz(self.status.as_deref(), Some(app.clone())),
                            None => {
                                want_app = true;
                                self.conns[i].phase = Phase::AwaitApp { head, since: now };
                                continue;
                            }
                        },
                        Route::Readyz => health::readyz(self.status.as_deref(), None),
                        Route::Status | Route::Metrics => {
                            let page = self.page(route, now, outside);
                            self.answer_shared(i, page, head);
                            continue;
                        }
                        _ => Reply::text(404, "not found"),
                    };
                    self.answer(i, reply, head);
                }
                Phase::AwaitApp { head, since } => {
                    if let Some(app) = fresh.clone() {
                        // Concurrent requests share the one answer.
                        let reply = health::readyz(self.status.as_deref(), Some(app));
                        self.answer(i, reply, head);
                    } else if now >= since + APP_WAIT {
                        let no_answer = Some(Err("no answer in time".to_string()));
                        let reply = health::readyz(self.status.as_deref(), no_answer);
                        self.answer(i, reply, head);
                    } else {
                        want_app = true;
                    }
                }
                _ => {}
            }
        }
        // One ask outstanding at most: the next is made once the loop
        // served the last, for every request that came since.
        if waiting && self.served >= self.issued {
            self.issued += 1;
            self.actions.push_back(Action::AskLoop(self.issued));
        }
        if want_app && !self.app_in_flight {
            self.app_in_flight = true;
            self.actions.push_back(Action::AskApp);
        }
    }

    /// `/status` or `/metrics`, rendered once per change of the published
    /// status (or of the dropped-lines count), and again once it is
    /// `PAGE_FRESH` old; served from that copy in between.
    fn page(&mut self, route: Route, now: Instant, outside: Outside) -> Arc<Reply> {
        let slot = usize::from(route == Route::Metrics);
        if let Some(page) = &self.pages[slot] {
            if page.generation == self.generation
                && page.lost == outside.lost
                && now.saturating_duration_since(page.at) < PAGE_FRESH
            {
                return Arc::clone(&page.reply);
            }
        }
        let status = self.status.as_deref();
        let page = Arc::new(match route {
            Route::Metrics => crate::core::metrics::render(status, now, outside.unix),
            _ => health::status_json(status, now, outside.lost),
        });
        self.pages[slot] = Some(Page {
            generation: self.generation,
            lost: outside.lost,
            at: now,
            reply: Arc::clone(&page),
        });
        page
    }

    /// When `advance` must run next at the latest (a head's time, a wait's
    /// end), if any connection is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        for conn in &self.conns {
            at(conn.accepted + HEAD_TIMEOUT);
            match conn.phase {
                Phase::Syncing { since, .. } => at(since + SYNC_WAIT),
                Phase::AwaitApp { since, .. } => at(since + APP_WAIT),
                _ => {}
            }
        }
        next
    }

    /// The listener thread's CPU time so far, at `now`: None when it may
    /// go on, else the time until which it takes and reads nothing.
    pub fn spent(&mut self, now: Instant, cpu: Duration) -> Option<Instant> {
        self.budget.spent(now, cpu)
    }
}

/// The CPU share rule: over each window, the thread may use
/// `CPU_SHARE_PERCENT` of it; having used `c` since the window began, it
/// rests until `c / share` after that start, so its average over any
/// window stays within the share (plus one turn's work).
#[derive(Debug)]
struct Budget {
    start: Instant,
    cpu_at_start: Option<Duration>,
}

impl Budget {
    fn new(now: Instant) -> Budget {
        Budget {
            start: now,
            cpu_at_start: None,
        }
    }

    fn spent(&mut self, now: Instant, cpu: Duration) -> Option<Instant> {
        let base = *self.cpu_at_start.get_or_insert(cpu);
        let used = cpu.saturating_sub(base);
        let allowed_until = self.start + used * (100 / CPU_SHARE_PERCENT);
        if now >= allowed_until && now >= self.start + CPU_WINDOW {
            // Within the share: a new window begins.
            self.start = now;
            self.cpu_at_start = Some(cpu);
            return None;
        }
        (now < allowed_until).then_some(allowed_until)
    }
}

/// The rule for the app's `--ready-url`: a 2xx status means ready; any
/// other status, or no answer, says why not.
pub fn app_ready(answer: Result<u16, String>) -> Result<(), String> {
    match answer {
        Ok(status) if (200..300).contains(&status) => Ok(()),
        Ok(status) => Err(format!("HTTP {status}")),
        Err(why) => Err(why),
    }
}

#[cfg(test)]
#[path = "listener_tests.rs"]
mod tests;
