//! Task protection as one part of the core: while the app runs, every
//! source that drives protection is asked once per interval (through
//! `core::sources`), and this decides, once per poll, whether the app is
//! busy, idle or unknown (`protect_busy`), idle only once it has lasted the
//! back-end's hold (`Backend::idle_hold`). A platform's back-end turns busy
//! or idle into its own request and reads the answer: `ecs.rs` (ECS task
//! scale-in protection) and `k8s.rs` (the Kubernetes pod annotations). A
//! new platform is one module implementing `Backend`, one variant of
//! `Platform` (named again in `each!`) and one line in `backends`; it may
//! read its platform once at start (`Backend::start`) and set the
//! deadline from what it read (`Backend::take_grace`). One request is out
//! at a time. Protection ends when the stop begins: nothing more is sent,
//! but for the back-end's read at the stop (`Backend::stop_read`: the
//! Kubernetes pod's deletion, the kill time), which has a slot of its own
//! and never waits behind the request out.
//! When the app ends by itself while protected (a crash, no stop under
//! way), a back-end may take protection off with one request
//! (`Backend::on_crash`; asked again when the request then out answers,
//! the start's read of what the platform holds): the run's exit waits for
//! them at most `CRASH_BOUND`, so a crashed pod never keeps its node.

pub mod ecs;
#[cfg(feature = "k8s")]
pub mod k8s;
#[cfg(feature = "k8s")]
pub mod record;

use std::time::{Duration, Instant};

use crate::core::asks::{Asks, Owner};
use crate::core::complaints::Key;
use crate::core::counters::RequestKind;
use crate::core::deadline::{stop_read_timeout, Deadline, Grace, Learnt};
use crate::core::event::{Answer, Lane, Token};
use crate::core::settings::Config;
use crate::core::timers::{timer_kind, Slots};

timer_kind! {
    /// What protection's timers are for.
    pub enum ProtectTimer {
        /// The next protection poll.
        Poll,
        /// The end of the wait for the crash request's answer.
        Crash,
        /// The back-end's read at the stop (and once more, if it asks).
        StopRead,
    }
}

/// The longest the exit waits for the answer to the request that takes
/// protection off after a crash, whatever the platform does.
pub const CRASH_BOUND: Duration = Duration::from_millis(1500);
use crate::proto::exchange::Request;
use crate::proto::http::{Failure, Response};

/// A platform that protects the app while it is busy.
pub trait Backend {
    /// How often the sources are asked (`--protect-interval`); also the
    /// time a request to the platform may take.
    fn interval(&self) -> Duration;
    /// How long the app must have been idle before idle is acted on (a
    /// worker between two jobs must not flap the platform's state).
    fn idle_hold(&self) -> Duration {
        Duration::ZERO
    }
    /// A request to send once at start (to read the platform's state left
    /// by an earlier run of the container), answered by `on_answer`.
    fn start(&mut self) -> Option<Request> {
        None
    }
    /// Given that the app is busy (or idle) at `now`: the request that
    /// says so to the platform, if one is due (only changes and renewals;
    /// never while another is out).
    fn request(&mut self, busy: bool, now: Instant) -> Option<Request>;
    /// The platform answered the last request, at `now`.
    fn on_answer(&mut self, result: Result<Response, Failure>, now: Instant);
    /// A request to send at once after an answer (a retry with a token
    /// read again), if one is due.
    fn follow_up(&mut self) -> Option<Request> {
        None
    }
    /// A deadline learnt from the platform since the last call (`stopping`:
    /// a stop is under way, and keeps its own).
    fn take_grace(&mut self, _stopping: bool) -> Option<Grace> {
        None
    }
    /// The app ended by itself while no stop was under way: the request
    /// that takes protection off, if it may be on (sent beside any request
    /// still out; answered by `crash_answered`). Asked again when the
    /// request out then answers, within `CRASH_BOUND`.
    fn on_crash(&mut self) -> Option<Request> {
        None
    }
    /// After a crash with no request due (`on_crash`): the request out may
    /// still show protection on (the start's read), so its answer is
    /// waited for, within `CRASH_BOUND`, and `on_crash` asked again.
    fn crash_waits(&self) -> bool {
        false
    }
    /// The crash request's answer, or None when none came within
    /// `CRASH_BOUND`; the next request of the crash's, if one is due (a
    /// read after a conflict, then the request again), sent within what
    /// is left of the bound.
    fn crash_answered(&mut self, _result: Option<Result<Response, Failure>>) -> Option<Request> {
        None
    }
    /// At the stop (and again when `on_stop_answer` asks): a read of the
    /// platform that may tell when the kill comes. It has a slot of its
    /// own: it never waits behind `request`'s.
    fn stop_read(&mut self, _now: Instant) -> Option<Request> {
        None
    }
    /// The stop read's answer at `now`: the kill time learnt, if any, and
    /// when to read once more, if ever.
    fn on_stop_answer(
        &mut self,
        _result: Result<Response, Failure>,
        _now: Instant,
    ) -> (Option<Learnt>, Option<Instant>) {
        (None, None)
    }
    /// What the back-end says of itself (`Report`), with the run's grace
    /// (`deadline`).
    fn report(&self, deadline: &Deadline) -> Report;
    /// Protection is on, as the platform last accepted.
    fn is_on(&self) -> bool;
    /// A failure worth saying once per `key`.
    fn complain(&mut self, key: Key, message: &str);
}

/// What a back-end reports, rendered by `/status`, `/metrics` and the
/// exit report without naming a platform: the names are its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// On, as the platform last accepted.
    pub protected: bool,
    /// `/status` says `protected` at its top level (ECS's, as it always
    /// has); otherwise the state is only in `words`.
    pub top_level: bool,
    /// The gauge of `protected` in `/metrics`: name and help.
    pub gauge: (&'static str, &'static str),
    /// The counter of its requests (`protect_update`) by result.
    pub requests: (&'static str, &'static str),
    /// Its own object in `/status` and the exit report, under its key.
    pub words: Option<(&'static str, serde_json::Value)>,
}

/// The platforms protection can act on: one variant per back-end
/// (dispatched without a vtable).
pub enum Platform {
    Ecs(ecs::Protection),
    /// Boxed: its pod's values make it the largest by far. Only with the
    /// `k8s` feature: without its client it could never act.
    #[cfg(feature = "k8s")]
    K8s(Box<k8s::Protection>),
    /// A back-end for the unit tests of this file.
    #[cfg(test)]
    Test(tests::Held),
}

/// Runs `$body` with `$b` bound to the back-end inside `$platform`: the
/// one place besides `Platform` that names every variant.
macro_rules! each {
    ($platform:expr, $b:ident => $body:expr) => {
        match $platform {
            Platform::Ecs($b) => $body,
            #[cfg(feature = "k8s")]
            Platform::K8s($b) => $body,
            #[cfg(test)]
            Platform::Test($b) => $body,
        }
    };
}

/// The run's protection back-end, if any platform asks for one: one line
/// per platform.
fn backends(config: &Config) -> Option<Platform> {
    let ecs = ecs::from_config(config).map(Platform::Ecs);
    #[cfg(feature = "k8s")]
    let ecs = ecs.or_else(|| k8s::from_config(config).map(|p| Platform::K8s(Box::new(p))));
    ecs
}

/// Protection runs: a platform's back-end is configured (the shell starts
/// protection's request threads before the child).
pub fn active(config: &Config) -> bool {
    backends(config).is_some()
}

/// Task protection over several sources: busy while any source that
/// answered is not ready; idle when every one answered ready; None (leave
/// protection as it is) when a source gave no answer and no other said
/// busy.
pub fn protect_busy(answers: &[Answer]) -> Option<bool> {
    if answers.iter().any(|a| matches!(a, Answer::NotReady(_))) {
        return Some(true);
    }
    if answers.iter().all(Answer::is_ready) {
        return Some(false);
    }
    None
}

/// Protection while the app runs.
pub struct Protection {
    platform: Platform,
    /// The next poll; disarmed while one is out and once the stop began.
    timers: Slots<ProtectTimer>,
    next_poll: Option<Instant>,
    /// The poll out: answers so far, answers still due.
    round: Option<(Vec<Answer>, usize)>,
    /// The platform request out.
    request: Option<Token>,
    /// After a crash: the run's exit waits, at most until the `Crash`
    /// timer, for the crash request (Some) or for the request out (None).
    crash: Option<Option<Token>>,
    /// The back-end's read at the stop out (`Backend::stop_read`).
    stop_request: Option<Token>,
    /// Since when every answer said idle (for the back-end's hold).
    idle_since: Option<Instant>,
    /// The stop began: nothing more is sent.
    ended: bool,
}

impl Protection {
    /// Protection for the run, polled first at `now`; the back-end's
    /// start request, if any, goes out at once.
    pub fn new(config: &Config, now: Instant, asks: &mut Asks) -> Option<Protection> {
        let mut timers = Slots::default();
        timers.set(ProtectTimer::Poll, Some(now));
        let mut protection = Protection {
            platform: backends(config)?,
            timers,
            next_poll: None,
            round: None,
            request: None,
            crash: None,
            stop_request: None,
            idle_since: None,
            ended: false,
        };
        if let Some(request) = each!(&mut protection.platform, b => b.start()) {
            protection.send(request, asks);
        }
        Some(protection)
    }

    fn send(&mut self, request: Request, asks: &mut Asks) {
        let (kind, timeout) = (
            RequestKind::ProtectUpdate,
            each!(&self.platform, b => b.interval()),
        );
        let token = asks.send(Owner::Protect, kind, Lane::Protect, request, timeout);
        self.request = Some(token);
    }

    /// Busy, idle (once it lasted the back-end's hold) or unknown (None:
    /// leave the platform's state as it is), from one poll's answers.
    fn decide(&mut self, answers: &[Answer], now: Instant) -> Option<bool> {
        let busy = protect_busy(answers)?;
        if busy {
            self.idle_since = None;
            return Some(true);
        }
        let since = *self.idle_since.get_or_insert(now);
        (now.saturating_duration_since(since) >= each!(&self.platform, b => b.idle_hold()))
            .then_some(false)
    }

    pub fn timer(&self, timer: ProtectTimer) -> Option<Instant> {
        self.timers.get(timer)
    }

    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Protection is on, as the platform last accepted.
    pub fn is_on(&self) -> bool {
        each!(&self.platform, b => b.is_on())
    }

    /// The poll is due: the interval it asks with, the next poll armed
    /// once this one is answered.
    pub fn due(&mut self, now: Instant) -> Option<Duration> {
        if !self.timers.due(ProtectTimer::Poll, now) {
            return None;
        }
        let interval = each!(&self.platform, b => b.interval());
        self.next_poll = Some(now + interval);
        self.timers.set(ProtectTimer::Poll, None);
        Some(interval)
    }

    /// The poll asked `n` sources.
    pub fn asked(&mut self, n: usize) {
        self.round = Some((Vec::new(), n));
    }

    /// One source answered the poll; when all have, busy or idle goes to
    /// the back-end, whose request goes out. No answer is neither (an
    /// unrenewed protection simply expires).
    pub fn on_answer(
        &mut self,
        now: Instant,
        answer: Answer,
        complaint: Option<(Key, String)>,
        asks: &mut Asks,
    ) {
        if let Some((key, message)) = complaint {
            each!(&mut self.platform, b => b.complain(key, &message));
        }
        let Some((answers, due)) = self.round.as_mut().filter(|(_, due)| *due > 0) else {
            return; // no poll in flight: nothing to answer
        };
        answers.push(answer);
        *due = due.saturating_sub(1);
        if *due > 0 {
            return;
        }
        let answers = std::mem::take(answers);
        self.round = None;
        self.timers.set(ProtectTimer::Poll, self.next_poll);
        let busy = self.decide(&answers, now);
        if self.request.is_some() {
            return;
        }
        if let Some(request) =
            busy.and_then(|busy| each!(&mut self.platform, b => b.request(busy, now)))
        {
            self.send(request, asks);
        }
    }

    /// The platform answered protection's request at `now`: a retry the
    /// back-end asks for goes out at once (never once the stop began), and
    /// a deadline it learnt is handed back for the timeline.
    pub fn on_http(
        &mut self,
        now: Instant,
        token: Token,
        result: Result<Response, Failure>,
        stopping: bool,
        asks: &mut Asks,
    ) -> Option<Grace> {
        if self.crash == Some(Some(token)) {
            let until = self.timers.get(ProtectTimer::Crash).unwrap_or(now);
            self.crash = None;
            self.timers.set(ProtectTimer::Crash, None);
            let next = each!(&mut self.platform, b => b.crash_answered(Some(result)));
            if let Some(request) = next.filter(|_| now < until) {
                self.send_crash(request, now, until, asks);
            }
            return None;
        }
        if self.request != Some(token) {
            return None; // the crash request's answer, after its bound
        }
        self.request = None;
        each!(&mut self.platform, b => b.on_answer(result, now));
        if self.crash == Some(None) {
            // The answer the crash waited for: perhaps a patch is due now.
            let until = self.timers.get(ProtectTimer::Crash).unwrap_or(now);
            self.crash = None;
            self.timers.set(ProtectTimer::Crash, None);
            self.crash_request(now, until, asks);
        }
        let follow = each!(&mut self.platform, b => b.follow_up());
        if let Some(request) = follow.filter(|_| !self.ended && !stopping) {
            self.send(request, asks);
        }
        each!(&mut self.platform, b => b.take_grace(stopping))
    }

    /// A stop began at `now`: the back-end's read at the stop is due (it
    /// goes out after the turn's other actions: the stop signal first).
    pub fn begin_stop(&mut self, now: Instant) {
        self.timers.set(ProtectTimer::StopRead, Some(now));
    }

    /// Sends the back-end's read at the stop when it is due, bounded by
    /// `stop_read_timeout` of the stop's `deadline`.
    pub fn stop_read(&mut self, now: Instant, deadline: Option<Instant>, asks: &mut Asks) {
        if !self.timers.due(ProtectTimer::StopRead, now) || self.stop_request.is_some() {
            return;
        }
        self.timers.set(ProtectTimer::StopRead, None);
        if let Some(request) = each!(&mut self.platform, b => b.stop_read(now)) {
            let timeout = stop_read_timeout(deadline, now);
            let token = asks.send(
                Owner::Protect,
                RequestKind::ProtectUpdate,
                Lane::Protect,
                request,
                timeout,
            );
            self.stop_request = Some(token);
        }
    }

    /// `token` is the read at the stop.
    pub fn is_stop_read(&self, token: Token) -> bool {
        self.stop_request == Some(token)
    }

    /// The read at the stop answered at `now`: what it learnt of the kill,
    /// and the next read armed if the back-end asks for one.
    pub fn on_stop_read(
        &mut self,
        now: Instant,
        result: Result<Response, Failure>,
    ) -> Option<Learnt> {
        self.stop_request = None;
        let (learnt, again) = each!(&mut self.platform, b => b.on_stop_answer(result, now));
        if let Some(at) = again {
            self.timers.set(ProtectTimer::StopRead, Some(at));
        }
        learnt
    }

    /// What the back-end reports (`Report`), with the run's grace.
    pub fn report(&self, deadline: &Deadline) -> Report {
        each!(&self.platform, b => b.report(deadline))
    }

    /// The app ended by itself at `now` with no stop under way: the
    /// back-end's request to take protection off goes out, and the exit
    /// waits for it (`holds_exit`) at most `CRASH_BOUND`.
    pub fn on_crash(&mut self, now: Instant, asks: &mut Asks) {
        self.crash_request(now, now + CRASH_BOUND, asks);
        let waits = each!(&self.platform, b => b.crash_waits());
        if self.crash.is_none() && self.request.is_some() && waits {
            // The request out (the start's read) may show protection on.
            self.crash = Some(None);
            self.timers
                .set(ProtectTimer::Crash, Some(now + CRASH_BOUND));
        }
    }

    /// The back-end's crash request, if it has one, out until `until`.
    fn crash_request(&mut self, now: Instant, until: Instant, asks: &mut Asks) {
        let Some(request) = each!(&mut self.platform, b => b.on_crash()) else {
            return;
        };
        self.send_crash(request, now, until, asks);
    }

    /// The crash's `request`, out until `until`.
    fn send_crash(&mut self, request: Request, now: Instant, until: Instant, asks: &mut Asks) {
        let timeout = until
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        let kind = RequestKind::ProtectUpdate;
        let token = asks.send(Owner::Protect, kind, Lane::Protect, request, timeout);
        self.crash = Some(Some(token));
        self.timers.set(ProtectTimer::Crash, Some(now + timeout));
    }

    /// After a crash, a request is out and within its bound: the exit
    /// waits.
    pub fn holds_exit(&self) -> bool {
        self.crash.is_some()
    }

    /// The crash's bound passed at `now` with no answer: the exit waits no
    /// more.
    pub fn crash_due(&mut self, now: Instant) {
        if self.crash.is_some() && self.timers.due(ProtectTimer::Crash, now) {
            if let Some(Some(_)) = self.crash.take() {
                // Past the bound: nothing more is sent.
                let _ = each!(&mut self.platform, b => b.crash_answered(None));
            }
            self.timers.set(ProtectTimer::Crash, None);
        }
    }

    /// The stop began (or the child is gone): no poll is due any more, and
    /// none may keep the loop awake.
    pub fn end(&mut self) {
        self.ended = true;
        self.timers.set(ProtectTimer::Poll, None);
        self.next_poll = None;
        self.round = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_ignores_sources_without_an_answer() {
        let no = || Answer::NoAnswer("refused".into());
        let busy = || Answer::NotReady("exit 1".into());
        assert_eq!(protect_busy(&[Answer::Ready, Answer::Ready]), Some(false));
        assert_eq!(protect_busy(&[Answer::Ready, busy()]), Some(true));
        assert_eq!(protect_busy(&[no(), busy()]), Some(true));
        assert_eq!(protect_busy(&[Answer::Ready, no()]), None);
        assert_eq!(protect_busy(&[no()]), None);
    }

    /// A back-end with a hold, recording what it is asked to send.
    #[derive(Default)]
    pub struct Held {
        said: Vec<bool>,
    }

    impl Backend for Held {
        fn interval(&self) -> Duration {
            Duration::from_secs(1)
        }
        fn idle_hold(&self) -> Duration {
            Duration::from_secs(5)
        }
        fn request(&mut self, busy: bool, _: Instant) -> Option<Request> {
            self.said.push(busy);
            None
        }
        fn on_answer(&mut self, _: Result<Response, Failure>, _: Instant) {}
        fn is_on(&self) -> bool {
            false
        }
        fn report(&self, _: &Deadline) -> Report {
            Report {
                protected: false,
                top_level: false,
                gauge: ("test_protected", ""),
                requests: ("test_requests_total", ""),
                words: None,
            }
        }
        fn complain(&mut self, _: Key, _: &str) {}
    }

    #[test]
    fn idle_is_acted_on_only_once_it_lasted_the_hold() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut p = Protection {
            platform: Platform::Test(Held::default()),
            timers: Slots::default(),
            next_poll: None,
            round: None,
            request: None,
            crash: None,
            stop_request: None,
            idle_since: None,
            ended: false,
        };
        let busy = [Answer::NotReady("busy".into())];
        let no = [Answer::NoAnswer("refused".into())];
        assert_eq!(p.decide(&busy, t0), Some(true));
        assert_eq!(p.decide(&[Answer::Ready], t0 + s(1)), None, "idle 0 s");
        assert_eq!(p.decide(&no, t0 + s(3)), None, "unknown");
        assert_eq!(p.decide(&[Answer::Ready], t0 + s(5)), None, "idle 4 s");
        assert_eq!(p.decide(&[Answer::Ready], t0 + s(6)), Some(false));
        assert_eq!(p.decide(&busy, t0 + s(7)), Some(true), "busy at once");
        assert_eq!(p.decide(&[Answer::Ready], t0 + s(8)), None, "hold anew");
    }
}
