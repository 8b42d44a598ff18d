//! The drain sources of a run, as one part of the core: the round (who is
//! asked, who answered, a stale answer known as such, at most `MAX_POLLS`
//! asks out at once and the rest queued in the same round), the asks made
//! for task protection (their own `MAX_POLLS`), the command runs' kill
//! timers, each answer logged when it changes, and what the report and the
//! listener say about each source. What a source is, how it is asked and
//! how its answer reads is its kind's, one file each: `url.rs`, `exec.rs`,
//! `file.rs` (the `Kind` trait). `board.rs` keeps who was asked in a round
//! and who answered; `reply.rs` the words between the two (`How`, `Reply`,
//! `Read`).

mod board;
pub mod exec;
pub mod file;
mod reply;
pub mod url;

use std::time::{Duration, Instant};

use log::{debug, info, warn};
use serde_json::Value;

use crate::core::asks::{Asks, Owner};
use crate::core::complaints::Key;
use crate::core::counters::RequestKind;
use crate::core::event::{Action, Answer, Lane, Token};
use crate::core::outcome::InFlight;
use crate::core::rules;
use crate::core::settings::Config;
use crate::core::timeline::Ticket;
use crate::core::timers::RunTimers;

use crate::proto::exchange::Endpoint;
use crate::proto::http::Kind as HttpKind;
use crate::util::text::{escape, Fold};
pub use board::{Board, Source};
pub use reply::{How, Read, Reply};
pub use url::Count;

/// Polls of one kind (drain rounds; task protection) in flight at once;
/// the rest wait for a slot in the same round.
pub const MAX_POLLS: usize = 8;

/// Task protection's start-up window: a drain source that refuses the
/// connection (the app does not listen yet) is not a warning until it
/// first answers, or this long after protection first asked.
pub const STARTUP_WINDOW: Duration = Duration::from_secs(30);

/// What a 401, 403, 404 or 405 from a drain URL says.
pub const WRONG_URL_SAYS: &str =
    "the URL looks wrong (check its path, port and method: drainit sends GET)";

/// Task protection over several sources: see `core::protect`.
pub use crate::core::protect::protect_busy;

/// A kind of drain source: what a source of it is (`About`), how it is
/// asked, how its answer reads. A new kind is one file implementing this,
/// one variant of `AnyKind` (named again in `each!`) and one line in
/// `kinds`.
pub trait Kind {
    /// What the source is, as the report, the listener and the shell see it.
    fn about(&self) -> About;
    /// How to ask it once.
    fn ask(&self) -> How;
    /// What an answer to that says.
    fn read(&self, reply: Reply<'_>) -> Read;
}

/// A source of any kind: one variant per kind (dispatched without a
/// vtable, so each kind's code is inlined where it is used).
pub enum AnyKind {
    Url(url::Url),
    Exec(exec::Exec),
    File(file::File),
}

/// Runs `$body` with `$k` bound to the kind inside `$any`: the one place
/// besides `AnyKind` that names every variant.
macro_rules! each {
    ($any:expr, $k:ident => $body:expr) => {
        match $any {
            AnyKind::Url($k) => $body,
            AnyKind::Exec($k) => $body,
            AnyKind::File($k) => $body,
        }
    };
}

impl AnyKind {
    pub fn about(&self) -> About {
        each!(self, k => k.about())
    }

    pub fn ask(&self) -> How {
        each!(self, k => k.ask())
    }

    pub fn read(&self, reply: Reply<'_>) -> Read {
        each!(self, k => k.read(reply))
    }
}

/// What a source is.
#[derive(Debug, Clone)]
pub struct About {
    /// Its kind, as the report and the logs name it: "url".
    pub name: &'static str,
    /// As configured (the report, the logs).
    pub target: String,
    /// As the health listener may show it to anyone.
    pub public: String,
    /// Asked for task protection while the app runs.
    pub protects: bool,
}

/// The run's sources, in the order the report lists them: one line per kind.
pub fn kinds(config: &Config) -> Vec<AnyKind> {
    let mut kinds = Vec::new();
    kinds.extend(url::from_config(config));
    kinds.extend(exec::from_config(config));
    kinds.extend(file::from_config(config));
    kinds
}

/// Request threads the run's sources need on a lane (the shell starts
/// them before the child): one per source its kind asks by a request
/// (`How::Send`); and the URLs they ask, whose host names it checks at
/// start.
pub fn threads(config: &Config) -> (usize, Vec<String>) {
    let (mut threads, mut hosts) = (0, Vec::new());
    for kind in kinds(config) {
        // Every way of asking is named: a new one must say what it needs.
        match kind.ask() {
            How::Send(request) => {
                threads += 1;
                match request.endpoint {
                    Endpoint::HttpUrl(url) => hosts.push(url),
                    Endpoint::K8sPod => {}
                }
            }
            How::Run(_) | How::Look(_) => {}
        }
    }
    (threads, hosts)
}

/// What a source is asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ask {
    /// Source `usize` in the round with this ticket.
    Round(Ticket, usize),
    /// Source `usize` for task protection, every `interval`.
    Protect(usize, Duration),
}

/// What the sources have to say to the rest of the core.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// The round is over: whether every source has been ready.
    Round { ticket: Ticket, ready: bool },
    /// A source answered protection's ask (with a complaint when it gave
    /// no answer at all).
    Protect {
        answer: Answer,
        complaint: Option<(Key, String)>,
    },
}

/// What the stop says about asking: when it began and its deadline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stopping {
    pub since: Option<Instant>,
    pub deadline: Option<Instant>,
}

/// A command run not yet reaped.
#[derive(Debug)]
struct Run {
    token: Token,
    ask: Ask,
    started: Instant,
    /// Killed for running too long, after this long.
    timed_out: Option<Duration>,
}

/// The drain sources as one part of the core.
#[derive(Default)]
pub struct Sources {
    kinds: Vec<AnyKind>,
    pub board: Board,
    /// When each source last answered (for `/status`).
    pub answered_at: Vec<Option<Instant>>,
    /// Each source's answer lines, at most one a second per source.
    said: Vec<Fold>,
    queued: Vec<Ask>,
    /// Asks out (requests, runs, looks), stale ones included.
    out: Vec<(Token, Ask)>,
    runs: Vec<Run>,
    /// The runs' kill times.
    timers: RunTimers,
    /// What the last drain poll said, for the report and the ready line.
    pub last_drain: Option<String>,
    /// The app's in-flight count (`--drain-count-field`).
    pub in_flight: InFlight,
    count_unreadable: bool,
    /// The wrong-URL status each source was last said to answer.
    wrong_said: Vec<Option<u16>>,
    /// When protection first asked (its start-up window's start), and
    /// which sources have answered it since.
    protect_since: Option<Instant>,
    protect_answered: Vec<bool>,
    interval: Duration,
    run_limit: Duration,
}

impl Sources {
    pub fn new(config: &Config) -> Sources {
        let kinds = kinds(config);
        let mut board = Board::default();
        for kind in &kinds {
            let about = kind.about();
            board.add(about.name, &about.target);
            if let Some(source) = board.sources.last_mut() {
                source.public = about.public;
                source.protects = about.protects;
            }
        }
        Sources {
            // A source answers once a round: a few changes a second pass, a
            // flapping source at a tiny interval is folded.
            said: vec![Fold::with_burst(3); kinds.len()],
            answered_at: vec![None; kinds.len()],
            wrong_said: vec![None; kinds.len()],
            protect_answered: vec![false; kinds.len()],
            kinds,
            board,
            interval: config.timeline.drain_interval,
            run_limit: config.drain_timeout,
            ..Sources::default()
        }
    }

    /// After a panic of the core: the records for the report, nothing
    /// asked, nothing awaited, no source asked again.
    pub fn after(old: &mut Sources) -> Sources {
        let mut board = std::mem::take(&mut old.board);
        board.abandon_round();
        Sources {
            board,
            answered_at: std::mem::take(&mut old.answered_at),
            last_drain: old.last_drain.take(),
            in_flight: old.in_flight,
            ..Sources::default()
        }
    }

    /// The run has drain sources (the timeline polls).
    pub fn any(&self) -> bool {
        !self.kinds.is_empty()
    }

    /// When the runs' kill times are due.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// One round over the sources not yet ready: each waits for a poll
    /// slot; files are looked at at once. Said at once when no source is
    /// left to ask.
    pub fn begin_round(
        &mut self,
        now: Instant,
        ticket: Ticket,
        stop: Stopping,
        asks: &mut Asks,
    ) -> Option<Said> {
        let ask = self.board.begin_round(ticket);
        if ask.is_empty() {
            let ready = self.board.all_ready();
            return Some(Said::Round { ticket, ready });
        }
        for index in ask {
            let ask = Ask::Round(ticket, index);
            match self.kinds[index].ask() {
                How::Look(path) => {
                    let token = asks.look(Owner::Sources, path, stop.since.unwrap_or(now));
                    self.out.push((token, ask));
                }
                _ => self.queued.push(ask),
            }
        }
        self.pump(now, stop, asks);
        None
    }

    /// Protection asks every source that drives it, once per `interval`;
    /// how many were asked.
    pub fn ask_protect(
        &mut self,
        now: Instant,
        interval: Duration,
        stop: Stopping,
        asks: &mut Asks,
    ) -> usize {
        self.protect_since.get_or_insert(now);
        let before = self.queued.len();
        for (i, source) in self.board.sources.iter().enumerate() {
            if source.protects {
                self.queued.push(Ask::Protect(i, interval));
            }
        }
        let n = self.queued.len() - before;
        self.pump(now, stop, asks);
        n
    }

    /// Starts the queued asks that have a slot: at most `MAX_POLLS` of
    /// each purpose at once, so a thousand slow sources cost eight
    /// threads, and neither waits behind the other.
    fn pump(&mut self, now: Instant, stop: Stopping, asks: &mut Asks) {
        if self.queued.is_empty() {
            return;
        }
        let mut waiting = std::mem::take(&mut self.queued);
        // Asks out of each purpose: requests and runs not yet answered,
        // stale ones included, since their thread or process still exists.
        let (mut round, mut protect) = (0, 0);
        for (_, ask) in &self.out {
            match ask {
                Ask::Round(..) => round += 1,
                Ask::Protect(..) => protect += 1,
            }
        }
        waiting.retain(|ask| {
            let slot = match ask {
                Ask::Round(..) => &mut round,
                Ask::Protect(..) => &mut protect,
            };
            if *slot >= MAX_POLLS {
                return true;
            }
            *slot += 1;
            self.start(now, *ask, stop, asks);
            false
        });
        waiting.append(&mut self.queued);
        self.queued = waiting;
    }

    /// Asks one source: a round's ask has the interval (a command:
    /// `--drain-timeout`), never past the deadline; protection's its
    /// interval.
    fn start(&mut self, now: Instant, ask: Ask, stop: Stopping, asks: &mut Asks) {
        let (index, interval, run_limit, lane, kind) = match ask {
            Ask::Round(_, i) => (
                i,
                self.interval,
                self.run_limit,
                Lane::Poll,
                RequestKind::Drain,
            ),
            Ask::Protect(i, every) => (
                i,
                every,
                self.run_limit.min(every),
                Lane::Protect,
                RequestKind::ProtectPoll,
            ),
        };
        let token = match self.kinds[index].ask() {
            How::Send(request) => {
                let timeout = rules::time_left(interval, stop.deadline, now, false);
                asks.send(Owner::Sources, kind, lane, request, timeout)
            }
            How::Run(cmd) => {
                let limit = rules::time_left(run_limit, stop.deadline, now, false);
                let token = asks.run(Owner::Sources, cmd);
                self.runs.push(Run {
                    token,
                    ask,
                    started: now,
                    timed_out: None,
                });
                self.timers.set(token, Some(now + limit));
                token
            }
            How::Look(path) => asks.look(Owner::Sources, path, stop.since.unwrap_or(now)),
        };
        self.out.push((token, ask));
    }

    /// The runs whose time is up are killed; queued asks start as slots free.
    pub fn on_time(&mut self, now: Instant, stop: Stopping, asks: &mut Asks) {
        for token in self.timers.runs_due(now) {
            let at = self.timers.get(token).unwrap_or(now);
            self.timers.set(token, None);
            if let Some(run) = self.runs.iter_mut().find(|r| r.token == token) {
                // The time it was given, not when the loop woke: the same
                // answer each time, so a source stuck hanging is logged once.
                run.timed_out = Some(at.saturating_duration_since(run.started));
                asks.push(Action::KillRun(token));
            }
        }
        self.pump(now, stop, asks);
    }

    /// An answer to one of the sources' asks; what it leads to, if anything.
    /// `stopping`: a stop began (the in-flight count's stop figures).
    pub fn on_reply(
        &mut self,
        now: Instant,
        token: Token,
        reply: Reply<'_>,
        stopping: bool,
    ) -> Option<Said> {
        let at = self.out.iter().position(|(t, _)| *t == token)?;
        let (_, ask) = self.out.swap_remove(at);
        let mut reply = reply;
        if let Some(at) = self.runs.iter().position(|r| r.token == token) {
            let run = self.runs.swap_remove(at);
            self.timers.set(token, None);
            if let Reply::Run(ended, _) = reply {
                reply = Reply::Run(ended, run.timed_out);
            }
        }
        match ask {
            Ask::Round(ticket, _) if !self.board.awaits(ticket) => {
                debug!("ignoring a late answer: the stop moved on without it");
                None
            }
            Ask::Round(ticket, index) => {
                let read = self.kinds[index].read(reply);
                self.record_count(&read, stopping);
                if let Some(summary) = &read.summary {
                    self.last_drain = Some(summary.clone());
                }
                self.on_answer(now, ticket, index, read.answer, read.wrong_url)
            }
            Ask::Protect(index, _) => {
                let read = self.kinds[index].read(reply);
                self.record_count(&read, stopping);
                let starting = self.starting(index, now, read.failure.is_some());
                let complaint = match (read.failure, read.wrong_url) {
                    (Some((HttpKind::Refused, message)), _) if starting => {
                        debug!("task protection: {message} (the app may not listen yet: start-up window)");
                        None
                    }
                    (Some((kind, message)), _) => Some((Key::SourceFailed(index, kind), message)),
                    (None, Some(status)) => {
                        let source = &self.board.sources[index];
                        let target = escape(&source.target, 200);
                        Some((
                            Key::SourceWrongUrl(index),
                            format!(
                                "drain source {} {target}: HTTP {status}: {WRONG_URL_SAYS}",
                                source.kind
                            ),
                        ))
                    }
                    (None, None) => None,
                };
                Some(Said::Protect {
                    answer: read.answer,
                    complaint,
                })
            }
        }
    }

    /// Whether protection's start-up window is open for source `index`:
    /// it has not answered yet (`failed`: this answer was none) and the
    /// window since protection first asked has not passed.
    fn starting(&mut self, index: usize, now: Instant, failed: bool) -> bool {
        let Some(answered) = self.protect_answered.get_mut(index) else {
            return false;
        };
        *answered |= !failed;
        !*answered
            && self
                .protect_since
                .is_some_and(|since| now.saturating_duration_since(since) < STARTUP_WINDOW)
    }

    /// The app's in-flight count in a drain body (`--drain-count-field`),
    /// recorded for the report and the listener. A field that is missing or
    /// not a whole number is said once and nothing is recorded: no count is
    /// better than a wrong one.
    fn record_count(&mut self, read: &Read, stopping: bool) {
        match &read.count {
            None => {}
            Some((_, Count::Unreadable)) => self.in_flight.last = None,
            Some((_, Count::Read(n))) => {
                let n = *n;
                self.in_flight.last = Some(n);
                if stopping {
                    self.in_flight.at_stop.get_or_insert(n);
                    self.in_flight.max = Some(self.in_flight.max.map_or(n, |m| m.max(n)));
                }
            }
            Some((pointer, Count::Bad(why))) => {
                self.in_flight.last = None;
                if !std::mem::replace(&mut self.count_unreadable, true) {
                    warn!("--drain-count-field {pointer}: {why} in the drain body; no in-flight count is reported (said once)");
                }
            }
        }
    }

    /// A source answered its round: logged when its answer changes (so a
    /// source stuck on one failure is logged once); said when it was the
    /// last of the round.
    fn on_answer(
        &mut self,
        now: Instant,
        ticket: Ticket,
        index: usize,
        answer: Answer,
        wrong_url: Option<u16>,
    ) -> Option<Said> {
        let text = match &answer {
            Answer::Ready => "ready".to_string(),
            Answer::NotReady(why) => format!("not ready ({why})"),
            Answer::NoAnswer(why) => format!("no answer ({why})"),
        };
        let (previous, over) = self.board.answer(ticket, index, answer.clone())?;
        if let Some(at) = self.answered_at.get_mut(index) {
            *at = Some(now);
        }
        // Each change once. "Not ready" in any form is the app's answer
        // (INFO); a source that could not be asked is WARN, once until it
        // answers again.
        let failing_again = matches!(
            (&previous, &answer),
            (Some(Answer::NoAnswer(_)), Answer::NoAnswer(_))
        );
        // A status saying the URL is wrong is one warning per source, until
        // its answer changes (never folded).
        let wrong_said = self.wrong_said.get_mut(index).map(|said| {
            let new = wrong_url.is_some() && *said != wrong_url;
            *said = wrong_url;
            new
        });
        if previous.as_ref() != Some(&answer) || wrong_said == Some(true) {
            // Ready sticks, so it is said once per source and never folded.
            let said = match answer {
                Answer::Ready => Some(String::new()),
                _ if wrong_said == Some(true) => Some(String::new()),
                _ => self.said.get_mut(index).and_then(|f| f.allow(now)),
            };
            if let Some(note) = said {
                let source = &self.board.sources[index];
                let (kind, target) = (source.kind, escape(&source.target, 200));
                match answer {
                    _ if wrong_said == Some(true) => {
                        warn!("drain source {kind} {target}: {text}: {WRONG_URL_SAYS}")
                    }
                    Answer::NoAnswer(_) if !failing_again => {
                        warn!("drain source {kind} {target}: {text}{note}")
                    }
                    _ => info!("drain source {kind} {target}: {text}{note}"),
                }
            }
        }
        over.then(|| Said::Round {
            ticket,
            ready: self.board.all_ready(),
        })
    }

    /// The round in flight is dropped (escalation, the child ended, the
    /// app's word): its queued asks with it.
    pub fn abandon_round(&mut self) {
        self.board.abandon_round();
        self.queued.retain(|a| !matches!(a, Ask::Round(..)));
    }

    /// The stop began: protection's asks end, so a command still asked for
    /// protection never runs beside the round.
    pub fn end_protection(&mut self, asks: &mut Asks) {
        self.queued.retain(|a| matches!(a, Ask::Round(..)));
        self.kill_runs(asks, false, "the stop began");
    }

    /// SIGKILL to the groups of the round's commands (`round`), or of
    /// protection's; they stay in the table until reaped, so none is taken
    /// for an orphan.
    pub fn kill_runs(&mut self, asks: &mut Asks, round: bool, why: &str) {
        for run in &self.runs {
            if matches!(run.ask, Ask::Round(..)) == round {
                debug!("killing command {:?}: {why}", run.token);
                self.timers.set(run.token, None);
                asks.push(Action::KillRun(run.token));
            }
        }
    }

    /// The report's `sources`.
    pub fn report(&self) -> Vec<Value> {
        self.board.report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_targets_show_no_secrets() {
        assert_eq!(
            url::public_url("http://user:pw@127.0.0.1:8080/drain?token=x#f"),
            "http://127.0.0.1:8080/drain?token=REDACTED"
        );
        assert_eq!(url::public_url("http://h/?a=b"), "http://h/?a=REDACTED");
        assert_eq!(
            exec::public_command("'/opt/my tool' --password hunter2"),
            "/opt/my tool"
        );
        let mut config = crate::core::machine::tests::config();
        config.drain_files = vec!["/tmp/done".into()];
        let sources = Sources::new(&config);
        assert_eq!(sources.board.sources[0].public, "/tmp/done");
    }

    #[test]
    fn refusals_are_quiet_until_the_first_answer_or_the_window_ends() {
        let mut config = crate::core::machine::tests::config();
        config.drain_urls = vec!["http://127.0.0.1:1/a".into(), "http://127.0.0.1:1/b".into()];
        let mut sources = Sources::new(&config);
        let t0 = Instant::now();
        sources.protect_since = Some(t0);
        let s = Duration::from_secs;
        assert!(sources.starting(0, t0 + s(1), true));
        assert!(sources.starting(0, t0 + s(29), true));
        assert!(
            !sources.starting(0, t0 + STARTUP_WINDOW, true),
            "the window ended"
        );
        // Source 1 answers once: its window is over at once.
        assert!(sources.starting(1, t0 + s(2), true));
        assert!(!sources.starting(1, t0 + s(3), false));
        assert!(!sources.starting(1, t0 + s(4), true));
    }
}
