//! The stop timeline as a pure state machine: it takes an event and the
//! current instant and returns what to do (forward a signal, send a request,
//! kill, exit). No clock, no syscall, no thread. It owns its phase and its
//! timer slots (the deadline, the delay, the hook's time, the next round,
//! the ready grace, the orphan grace, the kill watchdog): it arms and
//! disarms them itself, fires what is due from them, and the machine asks
//! it for its next one (`next_timer`). Requests in flight are tracked here
//! by ticket, so a late or abandoned answer is recognised and none can be
//! forgotten. What a kill, a failed kill and the child's end mean is
//! `core::rules`, which the shell's last resort calls too.

use std::time::{Duration, Instant};

use crate::core::deadline::{Deadline, GraceFrom};
use crate::core::outcome::{Ended, Outcome, Trigger};
pub use crate::core::rules::Escalation;
use crate::core::rules::{self, Kill};
use crate::core::timers::{timer_kind, Kind, Slots};

timer_kind! {
    /// What the stop timeline's timers are for: the deadline, then its
    /// phases'.
    pub enum Timer {
        /// The stop's deadline.
        Deadline,
        /// The end of `--pre-stop-delay`.
        PreStop,
        /// The hooks' time is up.
        Hook,
        /// The next drain round.
        Round,
        /// `--ready-grace` is over: the ready app is killed.
        ReadyKill,
        /// `--orphan-grace` is over.
        OrphanGrace,
        /// A SIGKILLed child is still not gone.
        Watchdog,
    }
}

/// What the timeline needs from the configuration: the configuration's
/// own value (`Config::timeline`).
pub use crate::core::settings::TimelineSettings as Settings;

mod words;
pub use words::{Action, Event, Phase, Request, Ticket};

/// How long drainit waits for a SIGKILLed child to be reaped before it
/// treats the kill as failed: SIGKILL takes effect at once unless the
/// child sleeps uninterruptibly in the kernel.
pub const KILL_WATCHDOG: Duration = Duration::from_secs(5);

/// Where the run is, as the timeline keeps it: the moments it waits for
/// are in its timer slots, nowhere else.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Running,
    PreStop,
    Hook(Ticket),
    Draining,
    Ready,
    Killed(Kill),
    OrphanGrace(Outcome),
    Done(Outcome),
}

/// The one stop of a run: never restarted once begun.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stop {
    pub trigger: Trigger,
    pub since: Instant,
    /// Moves only through the machine (a later notify source may extend it).
    pub deadline: Option<Instant>,
    /// The signal the app gets (before `--rewrite`).
    pub signal: i32,
    /// The app got `signal`.
    pub signalled: bool,
    /// After an ECS stop: the platform's signal still to absorb, once.
    pub absorb: Option<i32>,
}

/// The stop timeline of one run.
#[derive(Debug)]
pub struct Timeline {
    settings: Settings,
    state: State,
    stop: Option<Stop>,
    /// The poll in flight, if any (one at a time), and when the next round
    /// is due once it is answered: the round's slot stays disarmed while it
    /// is out.
    poll: Option<(Ticket, Option<Instant>)>,
    next_ticket: u32,
    timers: Slots<Timer>,
    /// `--grace-max`: extensions never move the deadline past t0 + this.
    grace_max: Option<Duration>,
    /// When the app got its stop signal: the readiness word counts after.
    signalled_at: Option<Instant>,
    /// An extension already moved the deadline in this stop.
    extended: bool,
    /// No extension moves the deadline past this (a kill time learnt at
    /// the stop: `Deadline::cap`).
    cap: Option<Instant>,
    /// The grace came from the platform (the pod's period or its
    /// deletion, or a platform's default the delay does not fit in):
    /// `--pre-stop-delay` is cut so the drain keeps at least half of the
    /// time to the deadline.
    cut_delay: bool,
    /// The last instant an event came with.
    seen: Option<Instant>,
}

impl Timeline {
    pub fn new(settings: Settings) -> Timeline {
        let cut_delay = settings.delay_gives_way;
        Timeline {
            settings,
            state: State::Running,
            stop: None,
            poll: None,
            next_ticket: 0,
            timers: Slots::default(),
            grace_max: None,
            signalled_at: None,
            extended: false,
            cap: None,
            cut_delay,
            seen: None,
        }
    }

    /// `--grace-max` (None: as `--grace`, extensions move nothing).
    pub fn set_grace_max(&mut self, grace_max: Option<Duration>) {
        self.grace_max = grace_max;
    }

    /// The grace of the run's owner of the deadline (`core::deadline`),
    /// as configured or learnt after start (from the pod,
    /// `--k8s-protect`): a stop already under way keeps the deadline it
    /// has.
    pub fn follow(&mut self, deadline: &Deadline) {
        self.settings.grace = deadline.grace();
        self.grace_max = deadline.grace_max();
        self.cap = deadline.cap();
        self.cut_delay = self.settings.delay_gives_way
            || matches!(deadline.from(), GraceFrom::Pod | GraceFrom::Deletion);
    }

    /// The stop's deadline moves to `deadline` (a kill time learnt at the
    /// stop, `Deadline::learn_kill`), earlier or later, while it still
    /// matters (not once drainit escalated or the child is gone). A
    /// `--pre-stop-delay` or a hook still running is cut so the drain
    /// keeps at least half of the time from `now` to the new deadline; a
    /// ready app's time never passes it. What is now due fires.
    pub fn hold(&mut self, now: Instant, deadline: Instant, out: &mut Vec<Action>) {
        if matches!(
            self.state,
            State::Running | State::Killed(_) | State::OrphanGrace(_) | State::Done(_)
        ) {
            return;
        }
        let Some(stop) = &mut self.stop else {
            return;
        };
        self.seen = Some(now);
        stop.deadline = Some(deadline);
        self.timers.set(Timer::Deadline, Some(deadline));
        let half = now + deadline.saturating_duration_since(now) / 2;
        for timer in [Timer::PreStop, Timer::Hook] {
            if self.timers.get(timer).is_some_and(|at| at > half) {
                self.timers.set(timer, Some(half));
            }
        }
        if let Some(at) = self.timers.get(Timer::ReadyKill) {
            self.timers.set(Timer::ReadyKill, Some(at.min(deadline)));
        }
        self.on_time(now, out);
    }

    /// The phase, with the moments it waits for.
    pub fn phase(&self) -> Phase {
        // Nothing happened yet: running. Every later state arms its slot
        // as it is entered; the last instant seen only stands in should one
        // not be.
        let Some(seen) = self.seen else {
            return Phase::Running;
        };
        // The moment the state waits for, from its slot.
        let slot = match self.state {
            State::PreStop => Timer::PreStop,
            State::Hook(_) => Timer::Hook,
            State::Ready => Timer::ReadyKill,
            _ => Timer::OrphanGrace,
        };
        let at = self.timers.get(slot).unwrap_or(seen);
        match self.state {
            State::Running => Phase::Running,
            State::PreStop => Phase::PreStop { until: at },
            State::Hook(ticket) => Phase::Hook {
                ticket,
                give_up_at: at,
            },
            State::Draining => Phase::Draining {
                next_poll: self
                    .timers
                    .get(Timer::Round)
                    .or(self.poll.and_then(|(_, next)| next)),
            },
            State::Ready => Phase::Ready { kill_at: at },
            State::Killed(Kill { reason, failed }) => Phase::Killed { reason, failed },
            State::OrphanGrace(outcome) => Phase::OrphanGrace { until: at, outcome },
            State::Done(outcome) => Phase::Done { outcome },
        }
    }

    pub fn stop(&self) -> Option<Stop> {
        self.stop
    }

    /// The child runs and no stop began (ECS pollers work only then).
    pub fn is_running(&self) -> bool {
        matches!(self.state, State::Running)
    }

    /// The main child has not been seen to end.
    pub fn child_alive(&self) -> bool {
        !matches!(self.state, State::OrphanGrace(_) | State::Done(_))
    }

    /// The answer with this ticket is still awaited: a stale one (late,
    /// abandoned, after escalation) must not count or be logged.
    pub fn awaits(&self, ticket: Ticket) -> bool {
        self.poll.is_some_and(|(t, _)| t == ticket)
            || matches!(self.state, State::Hook(t) if t == ticket)
    }

    /// One of the timeline's timers (None: not armed). `Deadline` is the
    /// one that still holds: until drainit escalated or the child is gone.
    pub fn timer(&self, timer: Timer) -> Option<Instant> {
        self.timers.get(timer)
    }

    /// The next moment something is due without an event; None: sleep
    /// until an event comes.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// A timer is due at `now`: a `Tick` would do something.
    pub fn due(&self, now: Instant) -> bool {
        self.timers.next().is_some_and(|at| now >= at)
    }

    /// Moves to `state`; the slots of the state left are disarmed (the
    /// deadline too, once drainit escalated or the child is gone).
    fn enter(&mut self, state: State) {
        for timer in &Timer::ALL[1..] {
            self.timers.set(*timer, None);
        }
        if matches!(
            state,
            State::Killed(_) | State::OrphanGrace(_) | State::Done(_)
        ) {
            self.timers.set(Timer::Deadline, None);
        }
        self.state = state;
    }

    /// Takes over a stop another timeline began (after a panic of the
    /// event loop): same start, same deadline, extensions included, and
    /// the platform's signal still to absorb after an ECS stop; the app
    /// gets its stop signal now unless it already had it. No hook, no
    /// delay and no poll follow: the deadline is what is left to keep.
    pub fn resume(&mut self, now: Instant, stop: Stop, signal_sent: bool, out: &mut Vec<Action>) {
        if !matches!(self.state, State::Running) {
            return;
        }
        self.seen = Some(now);
        // An ECS-begun stop still absorbs the platform's own signal once:
        // it must not reach the app as a second stop signal.
        self.stop = Some(Stop {
            signalled: signal_sent,
            ..stop
        });
        self.timers.set(Timer::Deadline, stop.deadline);
        if signal_sent {
            self.signalled_at = Some(now);
            self.enter(State::Draining);
        } else {
            self.send_stop_signal(now, out);
        }
        self.on_time(now, out);
    }

    /// Feeds one event; returns the actions to perform, in order.
    pub fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_into(now, event, &mut out);
        out
    }

    /// As `handle`, appending to the caller's buffer (no allocation per
    /// signal). The timers due at `now` fire after the event, in this run.
    pub fn handle_into(&mut self, now: Instant, event: Event, out: &mut Vec<Action>) {
        self.seen = Some(now);
        match event {
            Event::Signal(signo) => self.on_signal(now, signo, out),
            Event::PlatformStop(trigger) => {
                if matches!(self.state, State::Running) {
                    let signal = self.default_stop_signal();
                    let absorb = trigger.signal_follows().then_some(signal);
                    self.begin_stop(now, trigger, signal, absorb, out);
                }
            }
            Event::ChildExited(ended) => self.on_child_exit(now, ended, out),
            Event::OthersGone => {
                if let State::OrphanGrace(outcome) = self.state {
                    self.finish(outcome, out);
                }
            }
            Event::HookDone(ticket) => {
                if matches!(self.state, State::Hook(t) if t == ticket) {
                    self.send_stop_signal(now, out);
                }
            }
            Event::Polled { ticket, ready } => self.on_polled(now, ticket, ready, out),
            Event::KillFailed { pid1 } => {
                if let State::Killed(kill) = self.state {
                    match rules::failed_kill(pid1) {
                        Some(outcome) => self.finish(outcome, out),
                        None => self.enter(State::Killed(Kill {
                            failed: true,
                            ..kill
                        })),
                    }
                }
            }
            Event::Tick => {}
            Event::NotifyReady { at } => self.on_notify_ready(now, at, out),
            Event::Extend { at, by } => self.on_extend(at, by, out),
        }
        self.on_time(now, out);
    }

    /// A poll came back: a stale answer is skipped; a ready one starts the
    /// ready grace; otherwise the next round's slot is armed.
    fn on_polled(&mut self, now: Instant, ticket: Ticket, ready: bool, out: &mut Vec<Action>) {
        let Some((_, next)) = self.poll.filter(|(t, _)| *t == ticket) else {
            return;
        };
        self.poll = None;
        if !matches!(self.state, State::Draining) {
            return;
        }
        if ready {
            self.ready(now, out);
        } else {
            self.timers.set(Timer::Round, next);
        }
    }

    /// The app is ready: it has `--ready-grace` (never past the deadline)
    /// to exit by itself.
    fn ready(&mut self, now: Instant, out: &mut Vec<Action>) {
        let mut kill_at = now + self.settings.ready_grace;
        if let Some(deadline) = self.stop.and_then(|s| s.deadline) {
            kill_at = kill_at.min(deadline);
        }
        self.enter(State::Ready);
        self.timers.set(Timer::ReadyKill, Some(kill_at));
        out.push(Action::Ready {
            left: kill_at.saturating_duration_since(now),
        });
    }

    /// The app's word counts once it got its stop signal: the stop is
    /// drained then, whatever a poll says (one in flight is dropped).
    fn on_notify_ready(&mut self, now: Instant, at: Instant, out: &mut Vec<Action>) {
        let early = !self.signalled_at.is_some_and(|s| at >= s);
        match self.state {
            State::Draining if !early => {}
            State::Running | State::PreStop | State::Hook(_) | State::Draining => {
                return out.push(Action::NotifyIgnored)
            }
            // Already ready, escalated or over: nothing to say.
            _ => return,
        }
        self.poll = None;
        self.ready(now, out);
    }

    /// The deadline becomes the later of itself and `at + by`, never past
    /// t0 + `--grace-max`; only while the deadline still matters.
    fn on_extend(&mut self, at: Instant, by: Duration, out: &mut Vec<Action>) {
        let armed = self.timers.get(Timer::Deadline).is_some();
        let (Some(stop), Some(max)) = (&mut self.stop, self.grace_max) else {
            return;
        };
        let Some(deadline) = stop.deadline.filter(|_| armed && at >= stop.since) else {
            return;
        };
        // A cap past what an Instant holds is no cap; a kill time learnt
        // caps it too.
        let cap = match (stop.since.checked_add(max), self.cap) {
            (Some(by_max), Some(kill)) => Some(by_max.min(kill)),
            (by_max, kill) => by_max.or(kill),
        };
        let wanted = match (at.checked_add(by), cap) {
            (Some(w), Some(cap)) => w.min(cap),
            (Some(w), None) => w,
            (None, Some(cap)) => cap,
            (None, None) => return,
        };
        if wanted > deadline {
            stop.deadline = Some(wanted);
            self.timers.set(Timer::Deadline, Some(wanted));
            out.push(Action::Extended {
                deadline: wanted,
                first: !self.extended,
            });
            self.extended = true;
        }
    }

    fn default_stop_signal(&self) -> i32 {
        self.settings
            .stop_signals
            .first()
            .copied()
            .unwrap_or(libc::SIGTERM)
    }

    fn on_signal(&mut self, now: Instant, signo: i32, out: &mut Vec<Action>) {
        if !self.child_alive() {
            return;
        }
        let is_stop_signal = rules::is_stop_signal(&self.settings.stop_signals, signo);
        let Some(stop) = &mut self.stop else {
            if is_stop_signal {
                self.begin_stop(now, Trigger::Signal(signo), signo, None, out);
            } else {
                out.push(Action::Forward(signo));
            }
            return;
        };
        if stop.absorb == Some(signo) {
            stop.absorb = None;
            out.push(Action::Absorbed(signo));
        } else if is_stop_signal && !stop.signalled {
            // The app gets its stop signal once, when the delay and the
            // hook are over, not earlier.
            out.push(Action::Held(signo));
        } else {
            // Other signals, and a repeated stop signal once the app got its
            // first (a second Ctrl-C must still reach it), are forwarded.
            out.push(Action::Forward(signo));
        }
    }

    /// t0 of the stop timeline.
    fn begin_stop(
        &mut self,
        now: Instant,
        trigger: Trigger,
        signal: i32,
        absorb: Option<i32>,
        out: &mut Vec<Action>,
    ) {
        let deadline = rules::deadline(now, self.settings.grace);
        self.stop = Some(Stop {
            trigger,
            since: now,
            deadline,
            signal,
            signalled: false,
            absorb,
        });
        self.timers.set(Timer::Deadline, deadline);
        out.push(Action::StopBegan(trigger));
        if self.settings.pre_stop_delay.is_zero() {
            self.fire_hooks(now, out);
        } else {
            let mut until = now + self.settings.pre_stop_delay;
            if let Some(d) = deadline.filter(|_| self.cut_delay) {
                // A grace from the platform is kept: the delay gives way.
                until = until.min(now + d.saturating_duration_since(now) / 2);
            }
            if until <= now {
                return self.fire_hooks(now, out);
            }
            self.enter(State::PreStop);
            self.timers.set(Timer::PreStop, Some(until));
        }
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket = self.next_ticket.wrapping_add(1);
        Ticket(self.next_ticket)
    }

    fn fire_hooks(&mut self, now: Instant, out: &mut Vec<Action>) {
        if !self.settings.hook {
            return self.send_stop_signal(now, out);
        }
        let ticket = self.ticket();
        let deadline = self.stop.and_then(|s| s.deadline);
        let timeout = rules::time_left(self.settings.hook_timeout, deadline, now, true);
        out.push(Action::Send {
            ticket,
            request: Request::Hook,
            timeout,
        });
        self.enter(State::Hook(ticket));
        self.timers.set(Timer::Hook, Some(now + timeout));
    }

    /// Forwards the stop signal; the first poll follows at once.
    fn send_stop_signal(&mut self, now: Instant, out: &mut Vec<Action>) {
        let Some(stop) = &mut self.stop else {
            return;
        };
        stop.signalled = true;
        self.signalled_at = Some(now);
        out.push(Action::Forward(stop.signal));
        self.enter(State::Draining);
        self.timers
            .set(Timer::Round, self.settings.drain.then_some(now));
    }

    fn start_poll(&mut self, now: Instant, out: &mut Vec<Action>) {
        let ticket = self.ticket();
        let deadline = self.stop.and_then(|s| s.deadline);
        let timeout = rules::time_left(self.settings.drain_interval, deadline, now, false);
        // The next round is due an interval on, once this one is answered.
        self.poll = Some((ticket, Some(now + self.settings.drain_interval)));
        self.timers.set(Timer::Round, None);
        out.push(Action::Send {
            ticket,
            request: Request::Poll,
            timeout,
        });
    }

    fn escalate(&mut self, now: Instant, reason: Escalation, out: &mut Vec<Action>) {
        out.push(Action::Kill(reason));
        self.poll = None;
        self.enter(State::Killed(Kill {
            reason,
            failed: false,
        }));
        self.timers.set(Timer::Watchdog, Some(now + KILL_WATCHDOG));
    }

    /// The timers due at `now`, from the slots.
    fn on_time(&mut self, now: Instant, out: &mut Vec<Action>) {
        if !self.due(now) {
            return;
        }
        if self.timers.due(Timer::Watchdog, now) {
            self.timers.set(Timer::Watchdog, None);
            return out.push(Action::KillStuck);
        }
        if self.timers.due(Timer::ReadyKill, now) {
            return self.escalate(now, Escalation::Ready, out);
        }
        if self.timers.due(Timer::Deadline, now) {
            if matches!(self.state, State::PreStop | State::Hook(_)) {
                // Only a late wake-up gets here (the delay and the hook end
                // before the deadline): the stop signal still comes first.
                if matches!(self.state, State::Hook(_)) {
                    out.push(Action::HookAbandoned);
                }
                self.send_stop_signal(now, out);
            }
            return self.escalate(now, Escalation::Deadline, out);
        }
        if self.timers.due(Timer::PreStop, now) {
            // No hook: the first poll is due now.
            self.fire_hooks(now, out);
            self.on_time(now, out);
        } else if self.timers.due(Timer::Hook, now) {
            out.push(Action::HookAbandoned);
            self.send_stop_signal(now, out);
            self.on_time(now, out);
        } else if self.timers.due(Timer::Round, now) {
            self.start_poll(now, out);
        } else if self.timers.due(Timer::OrphanGrace, now) {
            if let State::OrphanGrace(outcome) = self.state {
                self.finish(outcome, out);
            }
        }
    }

    fn on_child_exit(&mut self, now: Instant, ended: Ended, out: &mut Vec<Action>) {
        if !self.child_alive() {
            return;
        }
        let kill = match self.state {
            State::Killed(kill) => Some(kill),
            _ => None,
        };
        let outcome = rules::child_outcome(kill, ended);
        self.poll = None;
        if self.settings.orphan_grace.is_zero() {
            return self.finish(outcome, out);
        }
        self.enter(State::OrphanGrace(outcome));
        let until = now + self.settings.orphan_grace;
        self.timers.set(Timer::OrphanGrace, Some(until));
        out.push(Action::TerminateOthers {
            wait: self.settings.orphan_grace,
        });
    }

    fn finish(&mut self, outcome: Outcome, out: &mut Vec<Action>) {
        self.enter(State::Done(outcome));
        out.push(Action::Exit(outcome));
    }
}

#[cfg(test)]
mod tests {
    //! A fake clock: `t(ms)` is an instant `ms` after a fixed origin.
    use super::*;

    /// A poll's answer: what most tests feed.
    fn polled(ticket: Ticket, ready: bool) -> Event {
        Event::Polled { ticket, ready }
    }
    use std::sync::OnceLock;

    const TERM: i32 = libc::SIGTERM;
    const INT: i32 = libc::SIGINT;
    const HUP: i32 = libc::SIGHUP;
    const KILLED: Ended = Ended::Signaled(libc::SIGKILL);

    fn t(ms: u64) -> Instant {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        *ORIGIN.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// grace 10 s, drain URL polled every 1 s, ready grace 2 s, no delay,
    /// no hook, no orphan grace.
    fn base() -> Settings {
        Settings {
            stop_signals: vec![TERM, INT],
            grace: Some(ms(10_000)),
            pre_stop_delay: Duration::ZERO,
            delay_gives_way: false,
            hook: false,
            hook_timeout: ms(1_000),
            drain: true,
            drain_interval: ms(1_000),
            ready_grace: ms(2_000),
            orphan_grace: Duration::ZERO,
        }
    }

    fn with(f: impl FnOnce(&mut Settings)) -> Settings {
        let mut s = base();
        f(&mut s);
        s
    }

    fn sends(actions: &[Action]) -> Vec<(Ticket, Request, Duration)> {
        actions
            .iter()
            .filter_map(|a| match *a {
                Action::Send {
                    ticket,
                    request,
                    timeout,
                } => Some((ticket, request, timeout)),
                _ => None,
            })
            .collect()
    }

    fn poll_ticket(actions: &[Action]) -> Ticket {
        match sends(actions).as_slice() {
            [(ticket, Request::Poll, _)] => *ticket,
            other => panic!("expected one poll, got {other:?} in {actions:?}"),
        }
    }

    fn hook_ticket(actions: &[Action]) -> Ticket {
        match sends(actions).as_slice() {
            [(ticket, Request::Hook, _)] => *ticket,
            other => panic!("expected one hook, got {other:?} in {actions:?}"),
        }
    }

    fn forwards(actions: &[Action]) -> Vec<i32> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Forward(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// A timeline stopped by TERM at t=0 with the first poll in flight.
    fn draining() -> (Timeline, Ticket) {
        let mut tl = Timeline::new(base());
        let a = tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(forwards(&a), [TERM]);
        (tl, poll_ticket(&a))
    }

    /// Draining, and the app said ready at t=100.
    fn ready() -> Timeline {
        let (mut tl, ticket) = draining();
        let a = tl.handle(t(100), polled(ticket, true));
        assert_eq!(a, [Action::Ready { left: ms(2_000) }]);
        tl
    }

    // ---- Running ----

    #[test]
    fn running_forwards_other_signals_and_sleeps() {
        let mut tl = Timeline::new(base());
        assert_eq!(tl.next_timer(), None, "idle: no wake-ups");
        assert_eq!(tl.handle(t(0), Event::Signal(HUP)), [Action::Forward(HUP)]);
        assert_eq!(tl.handle(t(5), Event::Tick), []);
        assert!(tl.is_running());
    }

    #[test]
    fn running_stop_signal_forwards_it_and_polls_at_once() {
        let mut tl = Timeline::new(base());
        let a = tl.handle(t(0), Event::Signal(INT));
        assert_eq!(a[0], Action::StopBegan(Trigger::Signal(INT)));
        assert_eq!(a[1], Action::Forward(INT));
        poll_ticket(&a);
        let stop = tl.stop().unwrap();
        assert_eq!(stop.deadline, Some(t(10_000)));
        assert!(stop.signalled);
    }

    #[test]
    fn running_child_exit_is_the_childs_code() {
        for (ended, outcome) in [
            (Ended::Exited(3), Outcome::Exited(3)),
            (Ended::Signaled(9), Outcome::Signaled(9)),
            (Ended::Signaled(15), Outcome::Signaled(15)),
        ] {
            let mut tl = Timeline::new(base());
            assert_eq!(
                tl.handle(t(0), Event::ChildExited(ended)),
                [Action::Exit(outcome)]
            );
            assert_eq!(tl.handle(t(1), Event::Signal(HUP)), [], "child gone");
        }
    }

    #[test]
    fn running_ignores_answers_it_never_asked_for() {
        let mut tl = Timeline::new(base());
        assert_eq!(tl.handle(t(0), Event::HookDone(Ticket(1))), []);
        assert_eq!(tl.handle(t(0), polled(Ticket(1), true)), []);
        assert_eq!(tl.handle(t(0), Event::OthersGone), []);
        assert_eq!(tl.handle(t(0), Event::KillFailed { pid1: true }), []);
        assert!(tl.is_running());
    }

    #[test]
    fn running_ecs_stop_forwards_the_first_stop_signal() {
        let mut tl = Timeline::new(with(|s| s.stop_signals = vec![INT, TERM]));
        let a = tl.handle(t(0), Event::PlatformStop(Trigger::Ecs));
        assert_eq!(a[0], Action::StopBegan(Trigger::Ecs));
        assert_eq!(forwards(&a), [INT]);
    }

    #[test]
    fn no_grace_never_escalates() {
        let mut tl = Timeline::new(with(|s| {
            s.grace = None;
            s.drain = false;
        }));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.next_timer(), None);
        assert_eq!(tl.handle(t(3_600_000), Event::Tick), []);
        assert_eq!(
            tl.handle(t(3_600_001), Event::ChildExited(Ended::Exited(0))),
            [Action::Exit(Outcome::Exited(0))]
        );
    }

    // ---- PreStop ----

    fn pre_stop() -> Timeline {
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(3_000)));
        let a = tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(a, [Action::StopBegan(Trigger::Signal(TERM))]);
        assert_eq!(tl.phase(), Phase::PreStop { until: t(3_000) });
        assert_eq!(tl.next_timer(), Some(t(3_000)));
        tl
    }

    #[test]
    fn pre_stop_holds_the_signal_until_the_delay_ends() {
        let mut tl = pre_stop();
        assert_eq!(tl.handle(t(2_999), Event::Tick), []);
        let a = tl.handle(t(3_000), Event::Tick);
        assert_eq!(forwards(&a), [TERM]);
        poll_ticket(&a);
    }

    #[test]
    fn pre_stop_repeated_stop_signal_is_held_not_forwarded() {
        let mut tl = pre_stop();
        assert_eq!(tl.handle(t(10), Event::Signal(TERM)), [Action::Held(TERM)]);
        assert_eq!(tl.handle(t(20), Event::Signal(INT)), [Action::Held(INT)]);
        assert_eq!(tl.phase(), Phase::PreStop { until: t(3_000) }, "no restart");
        // Other signals still pass.
        assert_eq!(tl.handle(t(30), Event::Signal(HUP)), [Action::Forward(HUP)]);
        // The app gets its stop signal once, then repeats are forwarded.
        assert_eq!(forwards(&tl.handle(t(3_000), Event::Tick)), [TERM]);
        assert_eq!(
            tl.handle(t(3_100), Event::Signal(TERM)),
            [Action::Forward(TERM)]
        );
    }

    #[test]
    fn pre_stop_ecs_stop_is_ignored() {
        let mut tl = pre_stop();
        assert_eq!(tl.handle(t(10), Event::PlatformStop(Trigger::Ecs)), []);
        assert_eq!(tl.stop().unwrap().trigger, Trigger::Signal(TERM));
    }

    #[test]
    fn pre_stop_child_exit_ends_the_run_with_its_code() {
        let mut tl = pre_stop();
        assert_eq!(
            tl.handle(t(10), Event::ChildExited(Ended::Exited(0))),
            [Action::Exit(Outcome::Exited(0))]
        );
        assert_eq!(tl.handle(t(3_000), Event::Tick), [], "no late signal");
    }

    #[test]
    fn pre_stop_late_wakeup_past_the_deadline_signals_before_killing() {
        let mut tl = pre_stop();
        let a = tl.handle(t(20_000), Event::Tick);
        assert_eq!(
            a,
            [Action::Forward(TERM), Action::Kill(Escalation::Deadline)]
        );
    }

    // ---- Hook ----

    fn hook() -> (Timeline, Ticket) {
        let mut tl = Timeline::new(with(|s| s.hook = true));
        let a = tl.handle(t(0), Event::Signal(TERM));
        assert!(forwards(&a).is_empty(), "the hook comes first");
        let ticket = hook_ticket(&a);
        (tl, ticket)
    }

    #[test]
    fn hook_answer_then_the_signal_then_the_first_poll() {
        let (mut tl, ticket) = hook();
        let a = tl.handle(t(200), Event::HookDone(ticket));
        assert_eq!(a[0], Action::Forward(TERM));
        poll_ticket(&a);
        // A second answer for the same ticket is stale.
        assert_eq!(tl.handle(t(300), Event::HookDone(ticket)), []);
    }

    #[test]
    fn hook_timeout_abandons_it_and_signals() {
        let (mut tl, ticket) = hook();
        assert_eq!(tl.next_timer(), Some(t(1_000)));
        let a = tl.handle(t(1_000), Event::Tick);
        assert_eq!(a[0], Action::HookAbandoned);
        assert_eq!(a[1], Action::Forward(TERM));
        poll_ticket(&a);
        // The abandoned hook's late answer changes nothing.
        assert_eq!(tl.handle(t(1_500), Event::HookDone(ticket)), []);
        assert!(matches!(tl.phase(), Phase::Draining { .. }));
    }

    #[test]
    fn hook_gets_at_most_half_the_time_left_after_the_delay() {
        let mut tl = Timeline::new(with(|s| {
            s.hook = true;
            s.hook_timeout = ms(60_000);
            s.pre_stop_delay = ms(4_000);
        }));
        tl.handle(t(0), Event::Signal(TERM));
        let a = tl.handle(t(4_000), Event::Tick);
        assert_eq!(sends(&a)[0].2, ms(3_000), "(10 s - 4 s) / 2");
        assert_eq!(tl.next_timer(), Some(t(7_000)));
        let a = tl.handle(t(7_000), Event::Tick);
        assert_eq!(a[..2], [Action::HookAbandoned, Action::Forward(TERM)]);
    }

    #[test]
    fn hook_repeated_stop_signal_is_held() {
        let (mut tl, ticket) = hook();
        assert_eq!(tl.handle(t(10), Event::Signal(TERM)), [Action::Held(TERM)]);
        assert_eq!(tl.handle(t(10), Event::Signal(HUP)), [Action::Forward(HUP)]);
        assert_eq!(forwards(&tl.handle(t(20), Event::HookDone(ticket))), [TERM]);
    }

    #[test]
    fn hook_child_exit_ends_the_run_and_a_late_answer_is_ignored() {
        let (mut tl, ticket) = hook();
        assert_eq!(
            tl.handle(t(10), Event::ChildExited(Ended::Exited(4))),
            [Action::Exit(Outcome::Exited(4))]
        );
        assert_eq!(tl.handle(t(20), Event::HookDone(ticket)), []);
    }

    #[test]
    fn hook_poll_answer_is_stale() {
        let (mut tl, _) = hook();
        assert_eq!(tl.handle(t(10), polled(Ticket(99), true)), []);
        assert!(matches!(tl.phase(), Phase::Hook { .. }));
    }

    // ---- Draining ----

    #[test]
    fn draining_polls_every_interval_one_at_a_time() {
        let (mut tl, first) = draining();
        assert_eq!(
            tl.next_timer(),
            Some(t(10_000)),
            "poll in flight: deadline only"
        );
        assert_eq!(
            tl.handle(t(1_500), Event::Tick),
            [],
            "one in flight at a time"
        );
        // The next poll was due at 1 s: it goes as soon as the answer is in.
        let a = tl.handle(t(1_600), polled(first, false));
        let second = poll_ticket(&a);
        assert_ne!(second, first);
        assert_eq!(tl.handle(t(1_700), polled(second, false)), []);
        assert_eq!(tl.next_timer(), Some(t(2_600)));
        poll_ticket(&tl.handle(t(2_600), Event::Tick));
    }

    #[test]
    fn draining_poll_timeout_never_passes_the_deadline() {
        // A poll sent at 9.7 s gets the 0.3 s left, not the interval.
        let mut tl2 = Timeline::new(base());
        let a = tl2.handle(t(0), Event::Signal(TERM));
        let ticket = poll_ticket(&a);
        let a = tl2.handle(t(9_700), polled(ticket, false));
        assert_eq!(sends(&a)[0].2, ms(300));
    }

    #[test]
    fn draining_ready_starts_the_ready_grace() {
        let mut tl = ready();
        assert_eq!(tl.phase(), Phase::Ready { kill_at: t(2_100) });
        assert_eq!(tl.next_timer(), Some(t(2_100)), "no more polls");
        assert_eq!(tl.handle(t(2_000), Event::Tick), []);
        assert_eq!(
            tl.handle(t(2_100), Event::Tick),
            [Action::Kill(Escalation::Ready)]
        );
        assert_eq!(
            tl.handle(t(2_150), Event::ChildExited(KILLED)),
            [Action::Exit(Outcome::Drained)]
        );
    }

    #[test]
    fn draining_not_ready_and_failed_polls_hold_on() {
        let (mut tl, mut ticket) = draining();
        for i in 1..10 {
            let a = tl.handle(t(i * 1_000), polled(ticket, false));
            ticket = poll_ticket(&a);
        }
        let a = tl.handle(t(10_000), Event::Tick);
        assert_eq!(a, [Action::Kill(Escalation::Deadline)]);
        assert_eq!(
            tl.handle(t(10_010), Event::ChildExited(KILLED)),
            [Action::Exit(Outcome::Deadline)]
        );
        // The poll that was in flight at the kill is forgotten.
        assert_eq!(tl.handle(t(10_020), polled(ticket, true)), []);
    }

    #[test]
    fn draining_repeated_stop_signal_is_forwarded() {
        let (mut tl, _) = draining();
        assert_eq!(
            tl.handle(t(10), Event::Signal(TERM)),
            [Action::Forward(TERM)]
        );
        assert_eq!(tl.handle(t(10), Event::Signal(INT)), [Action::Forward(INT)]);
        assert_eq!(tl.handle(t(10), Event::PlatformStop(Trigger::Ecs)), []);
    }

    #[test]
    fn draining_child_exit_is_the_childs_code() {
        let (mut tl, ticket) = draining();
        assert_eq!(
            tl.handle(t(10), Event::ChildExited(Ended::Signaled(TERM))),
            [Action::Exit(Outcome::Signaled(TERM))]
        );
        assert_eq!(tl.handle(t(20), polled(ticket, true)), []);
    }

    #[test]
    fn draining_without_drain_url_just_waits_for_the_deadline() {
        let mut tl = Timeline::new(with(|s| s.drain = false));
        let a = tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(sends(&a), []);
        assert_eq!(tl.next_timer(), Some(t(10_000)));
        assert_eq!(
            tl.handle(t(10_000), Event::Tick),
            [Action::Kill(Escalation::Deadline)]
        );
    }

    // ---- Ready ----

    #[test]
    fn ready_is_sticky() {
        let mut tl = ready();
        // A late poll answer (there is none in flight) changes nothing.
        assert_eq!(tl.handle(t(200), polled(Ticket(1), false)), []);
        assert!(matches!(tl.phase(), Phase::Ready { .. }));
    }

    #[test]
    fn ready_grace_is_capped_by_the_deadline_and_still_counts_as_drained() {
        let (mut tl, first) = draining();
        let a = tl.handle(t(9_000), polled(first, true));
        assert_eq!(a, [Action::Ready { left: ms(1_000) }]);
        assert_eq!(
            tl.handle(t(10_000), Event::Tick),
            [Action::Kill(Escalation::Ready)]
        );
        assert_eq!(
            tl.handle(t(10_001), Event::ChildExited(KILLED)),
            [Action::Exit(Outcome::Drained)]
        );
    }

    #[test]
    fn ready_then_the_child_exits_by_itself_with_its_own_code() {
        let mut tl = ready();
        assert_eq!(
            tl.handle(t(500), Event::ChildExited(Ended::Exited(3))),
            [Action::Exit(Outcome::Exited(3))]
        );
    }

    #[test]
    fn ready_signals_are_forwarded() {
        let mut tl = ready();
        assert_eq!(
            tl.handle(t(200), Event::Signal(TERM)),
            [Action::Forward(TERM)]
        );
        assert_eq!(
            tl.handle(t(200), Event::Signal(HUP)),
            [Action::Forward(HUP)]
        );
    }

    // ---- Killed ----

    fn killed() -> Timeline {
        let mut tl = Timeline::new(with(|s| s.drain = false));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(
            tl.handle(t(10_000), Event::Tick),
            [Action::Kill(Escalation::Deadline)]
        );
        tl
    }

    #[test]
    fn killed_waits_without_timers() {
        let mut tl = killed();
        // Only the kill watchdog remains.
        assert_eq!(tl.next_timer(), Some(t(10_000) + KILL_WATCHDOG));
        assert_eq!(tl.handle(t(12_000), Event::Tick), []);
        assert_eq!(
            tl.handle(t(12_000), Event::Signal(HUP)),
            [Action::Forward(HUP)]
        );
    }

    #[test]
    fn killed_child_that_exited_by_itself_in_the_race_keeps_its_code() {
        let mut tl = killed();
        assert_eq!(
            tl.handle(t(10_001), Event::ChildExited(Ended::Exited(0))),
            [Action::Exit(Outcome::Exited(0))]
        );
    }

    #[test]
    fn kill_failed_as_pid1_exits_at_once_with_the_deadline_outcome() {
        let mut tl = killed();
        assert_eq!(
            tl.handle(t(10_000), Event::KillFailed { pid1: true }),
            [Action::Exit(Outcome::Deadline)]
        );
    }

    #[test]
    fn kill_failed_not_pid1_waits_and_ends_with_the_deadline_outcome() {
        let mut tl = killed();
        assert_eq!(tl.handle(t(10_000), Event::KillFailed { pid1: false }), []);
        assert_eq!(
            tl.phase(),
            Phase::Killed {
                reason: Escalation::Deadline,
                failed: true
            }
        );
        assert_eq!(
            tl.handle(t(20_000), Event::ChildExited(Ended::Exited(0))),
            [Action::Exit(Outcome::Deadline)]
        );
    }

    #[test]
    fn kill_failed_after_ready_ends_with_the_deadline_code() {
        // The contract: a child drainit cannot kill ends the run with the deadline
        // code, even after the app said ready.
        let mut tl = ready();
        tl.handle(t(2_100), Event::Tick);
        assert_eq!(
            tl.handle(t(2_100), Event::KillFailed { pid1: true }),
            [Action::Exit(Outcome::Deadline)]
        );
        let mut tl = ready();
        tl.handle(t(2_100), Event::Tick);
        assert_eq!(tl.handle(t(2_100), Event::KillFailed { pid1: false }), []);
        assert_eq!(
            tl.handle(t(3_000), Event::ChildExited(KILLED)),
            [Action::Exit(Outcome::Deadline)]
        );
    }

    #[test]
    fn kill_watchdog_fires_once_when_the_child_outlives_its_sigkill() {
        let mut tl = killed();
        assert_eq!(tl.next_timer(), Some(t(10_000) + KILL_WATCHDOG));
        let late = t(10_000) + KILL_WATCHDOG;
        assert_eq!(tl.handle(late, Event::Tick), [Action::KillStuck]);
        assert_eq!(tl.next_timer(), None, "once");
        assert_eq!(tl.handle(late, Event::Tick), []);
        // The supervisor answers as for a kill it could not send.
        assert_eq!(
            tl.handle(late, Event::KillFailed { pid1: true }),
            [Action::Exit(Outcome::Deadline)]
        );
    }

    #[test]
    fn kill_watchdog_is_off_once_the_kill_failed_or_the_child_ended() {
        let mut tl = killed();
        tl.handle(t(10_000), Event::KillFailed { pid1: false });
        assert_eq!(tl.next_timer(), None);
        assert_eq!(tl.handle(t(99_000), Event::Tick), []);
        let mut tl = killed();
        tl.handle(t(10_001), Event::ChildExited(KILLED));
        assert_eq!(tl.next_timer(), None);
    }

    #[test]
    fn awaits_only_the_current_poll_and_hook() {
        let (mut tl, first) = draining();
        assert!(tl.awaits(first));
        let a = tl.handle(t(500), polled(first, false));
        assert_eq!(a, []);
        assert!(!tl.awaits(first), "answered");
        let second = poll_ticket(&tl.handle(t(1_000), Event::Tick));
        assert!(tl.awaits(second));
        tl.handle(t(10_000), Event::Tick);
        assert!(!tl.awaits(second), "abandoned by the escalation");
        let (mut tl, hook) = hook();
        assert!(tl.awaits(hook));
        tl.handle(t(1_000), Event::Tick);
        assert!(!tl.awaits(hook), "abandoned at its timeout");
    }

    #[test]
    fn a_stale_poll_answer_still_fires_the_timers_due() {
        let (mut tl, first) = draining();
        tl.handle(t(500), polled(first, false));
        // The answer of the first poll arrives again (stale) when the next
        // poll is due: the poll must start in this same turn.
        let a = tl.handle(t(1_000), polled(first, true));
        poll_ticket(&a);
        // And at the deadline, a stale answer still escalates.
        let (mut tl, first) = draining();
        tl.handle(t(500), polled(first, false));
        let a = tl.handle(t(10_000), polled(first, true));
        assert_eq!(a, [Action::Kill(Escalation::Deadline)]);
    }

    // ---- OrphanGrace and Done ----

    fn orphan_grace() -> Timeline {
        let mut tl = Timeline::new(with(|s| s.orphan_grace = ms(5_000)));
        let a = tl.handle(t(0), Event::ChildExited(Ended::Exited(7)));
        assert_eq!(a, [Action::TerminateOthers { wait: ms(5_000) }]);
        assert!(!tl.child_alive());
        assert_eq!(tl.next_timer(), Some(t(5_000)));
        tl
    }

    #[test]
    fn orphan_grace_ends_when_the_others_are_gone() {
        let mut tl = orphan_grace();
        assert_eq!(
            tl.handle(t(100), Event::Signal(TERM)),
            [],
            "nobody to forward to"
        );
        assert_eq!(tl.handle(t(100), Event::PlatformStop(Trigger::Ecs)), []);
        assert_eq!(tl.handle(t(100), Event::ChildExited(Ended::Exited(1))), []);
        assert_eq!(
            tl.handle(t(200), Event::OthersGone),
            [Action::Exit(Outcome::Exited(7))]
        );
    }

    #[test]
    fn orphan_grace_ends_at_its_timer() {
        let mut tl = orphan_grace();
        assert_eq!(tl.handle(t(4_999), Event::Tick), []);
        assert_eq!(
            tl.handle(t(5_000), Event::Tick),
            [Action::Exit(Outcome::Exited(7))]
        );
    }

    #[test]
    fn orphan_grace_keeps_the_escalation_outcome() {
        let mut tl = Timeline::new(with(|s| {
            s.orphan_grace = ms(5_000);
            s.drain = false;
        }));
        tl.handle(t(0), Event::Signal(TERM));
        tl.handle(t(10_000), Event::Tick);
        tl.handle(t(10_001), Event::ChildExited(KILLED));
        assert_eq!(
            tl.handle(t(10_002), Event::OthersGone),
            [Action::Exit(Outcome::Deadline)]
        );
    }

    #[test]
    fn done_ignores_everything() {
        let mut tl = Timeline::new(base());
        tl.handle(t(0), Event::ChildExited(Ended::Exited(0)));
        for event in [
            Event::Signal(TERM),
            Event::PlatformStop(Trigger::Ecs),
            Event::ChildExited(Ended::Exited(1)),
            Event::OthersGone,
            Event::HookDone(Ticket(1)),
            polled(Ticket(1), true),
            Event::KillFailed { pid1: true },
            Event::Tick,
        ] {
            assert_eq!(tl.handle(t(1), event), [], "{event:?}");
        }
        assert_eq!(tl.next_timer(), None);
    }

    // ---- ECS absorption ----

    #[test]
    fn ecs_stop_absorbs_only_the_platforms_signal_once() {
        let mut tl = Timeline::new(base());
        let a = tl.handle(t(0), Event::PlatformStop(Trigger::Ecs));
        assert_eq!(forwards(&a), [TERM]);
        // The operator's Ctrl-C is not swallowed.
        assert_eq!(tl.handle(t(10), Event::Signal(INT)), [Action::Forward(INT)]);
        assert_eq!(
            tl.handle(t(20), Event::Signal(TERM)),
            [Action::Absorbed(TERM)]
        );
        assert_eq!(
            tl.handle(t(30), Event::Signal(TERM)),
            [Action::Forward(TERM)]
        );
    }

    #[test]
    fn ecs_stop_during_pre_stop_absorbs_the_platform_signal_and_holds_others() {
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(3_000)));
        tl.handle(t(0), Event::PlatformStop(Trigger::Ecs));
        assert_eq!(
            tl.handle(t(10), Event::Signal(TERM)),
            [Action::Absorbed(TERM)]
        );
        assert_eq!(tl.handle(t(20), Event::Signal(INT)), [Action::Held(INT)]);
        assert_eq!(forwards(&tl.handle(t(3_000), Event::Tick)), [TERM]);
        assert_eq!(
            tl.handle(t(3_010), Event::Signal(TERM)),
            [Action::Forward(TERM)]
        );
    }

    // ---- Races ----

    #[test]
    fn race_child_exit_and_deadline_in_the_same_turn() {
        // The reaper runs before the timers: the child's code wins.
        let mut tl = Timeline::new(with(|s| s.drain = false));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(
            tl.handle(t(10_000), Event::ChildExited(Ended::Exited(0))),
            [Action::Exit(Outcome::Exited(0))]
        );
    }

    #[test]
    fn race_ready_answer_arriving_after_the_deadline() {
        let (mut tl, ticket) = draining();
        assert_eq!(
            tl.handle(t(10_000), Event::Tick),
            [Action::Kill(Escalation::Deadline)]
        );
        assert_eq!(tl.handle(t(10_001), polled(ticket, true)), []);
        assert_eq!(
            tl.handle(t(10_002), Event::ChildExited(KILLED)),
            [Action::Exit(Outcome::Deadline)]
        );
    }

    #[test]
    fn race_ready_answer_processed_late_in_the_deadline_turn() {
        // Answer and deadline in one turn: the answer is handled first, so
        // the ready grace is capped to zero and the kill counts as drained.
        let (mut tl, ticket) = draining();
        let a = tl.handle(t(10_000), polled(ticket, true));
        assert_eq!(
            a,
            [
                Action::Ready {
                    left: Duration::ZERO
                },
                Action::Kill(Escalation::Ready)
            ]
        );
    }

    #[test]
    fn race_hook_answer_and_its_timeout_in_the_same_turn() {
        let (mut tl, ticket) = hook();
        let a = tl.handle(t(1_000), Event::HookDone(ticket));
        assert_eq!(forwards(&a), [TERM], "signalled once");
        assert!(!a.contains(&Action::HookAbandoned));
        assert!(forwards(&tl.handle(t(1_000), Event::Tick)).is_empty());
    }

    #[test]
    fn race_stop_signal_and_ecs_stop() {
        let mut tl = Timeline::new(base());
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.handle(t(1), Event::PlatformStop(Trigger::Ecs)), []);
        assert_eq!(tl.stop().unwrap().absorb, None);
    }

    #[test]
    fn the_stop_signal_always_comes_before_any_kill() {
        // Every delay, hook and late wake-up: no Kill before a Forward of
        // the stop signal.
        for delay in [0, 1_000, 9_999] {
            for hook in [false, true] {
                for late in [0, 5_000, 50_000] {
                    let mut tl = Timeline::new(with(|s| {
                        s.pre_stop_delay = ms(delay);
                        s.hook = hook;
                        s.hook_timeout = ms(60_000);
                    }));
                    let mut all = tl.handle(t(0), Event::Signal(TERM));
                    let mut now = 0;
                    while let Some(at) = tl.next_timer() {
                        now = now.max(at.duration_since(t(0)).as_millis() as u64) + late;
                        all.extend(tl.handle(t(now), Event::Tick));
                        if now > 200_000 {
                            break;
                        }
                    }
                    let kill = all.iter().position(|a| matches!(a, Action::Kill(_)));
                    let fwd = all.iter().position(|a| *a == Action::Forward(TERM));
                    assert!(
                        fwd.is_some() && kill.is_some() && fwd < kill,
                        "delay {delay} hook {hook} late {late}: {all:?}"
                    );
                }
            }
        }
    }

    /// One timeline in each phase, at t = 100 ms into it.
    fn one_in_each_phase() -> Vec<(&'static str, Timeline)> {
        let running = Timeline::new(with(|s| s.hook = true));
        let mut pre = Timeline::new(with(|s| s.pre_stop_delay = ms(3_000)));
        pre.handle(t(0), Event::Signal(TERM));
        let (hooked, _) = hook();
        let (drain, _) = draining();
        let mut dead = killed();
        dead.handle(t(10_000), Event::Tick);
        let mut orphans = Timeline::new(with(|s| s.orphan_grace = ms(5_000)));
        orphans.handle(t(0), Event::ChildExited(Ended::Exited(1)));
        let mut done = Timeline::new(base());
        done.handle(t(0), Event::ChildExited(Ended::Exited(0)));
        vec![
            ("running", running),
            ("pre-stop", pre),
            ("hook", hooked),
            ("draining", drain),
            ("ready", ready()),
            ("killed", dead),
            ("orphan grace", orphans),
            ("done", done),
        ]
    }

    fn every_event() -> Vec<Event> {
        let mut events = vec![
            Event::Signal(TERM),
            Event::Signal(INT),
            Event::Signal(HUP),
            Event::PlatformStop(Trigger::Ecs),
            Event::ChildExited(Ended::Exited(0)),
            Event::ChildExited(KILLED),
            Event::OthersGone,
            Event::KillFailed { pid1: true },
            Event::KillFailed { pid1: false },
            Event::Tick,
            Event::NotifyReady { at: t(50) },
            Event::NotifyReady { at: t(100) },
            Event::Extend {
                at: t(100),
                by: ms(60_000),
            },
            Event::Extend {
                at: t(100),
                by: ms(1),
            },
        ];
        for n in 0..4 {
            events.push(Event::HookDone(Ticket(n)));
            events.push(polled(Ticket(n), true));
            events.push(polled(Ticket(n), false));
        }
        events
    }

    #[test]
    fn every_phase_against_every_event_keeps_the_invariants() {
        for (name, template) in one_in_each_phase() {
            for event in every_event() {
                let mut tl = Timeline {
                    settings: template.settings.clone(),
                    ..template
                };
                tl.set_grace_max(Some(ms(30_000)));
                let deadline_before = tl.stop().and_then(|s| s.deadline);
                let was_alive = tl.child_alive();
                let signalled = tl.stop().is_some_and(|s| s.signalled);
                let before = tl.phase();
                let a = tl.handle(t(100), event);
                let what = format!("{name} + {event:?} -> {a:?}");
                // A deadline only moves later, and never past t0 + grace-max.
                if let (Some(before), Some(stop)) = (deadline_before, tl.stop()) {
                    let after = stop.deadline.expect(&what);
                    assert!(
                        after >= before && after <= stop.since + ms(30_000),
                        "{what}"
                    );
                }
                // Nothing reaches a child that is gone; nothing after the end.
                if !was_alive {
                    assert!(
                        !a.iter().any(|x| matches!(
                            x,
                            Action::Forward(_) | Action::Send { .. } | Action::Kill(_)
                        )),
                        "{what}"
                    );
                }
                if matches!(before, Phase::Done { .. }) {
                    assert_eq!(a, [], "{what}");
                }
                // A kill only ever follows the stop signal.
                if a.iter().any(|x| matches!(x, Action::Kill(_))) {
                    assert!(signalled || a.contains(&Action::Forward(TERM)), "{what}");
                }
                // An exit is the last action and ends the phase for good.
                if let Some(i) = a.iter().position(|x| matches!(x, Action::Exit(_))) {
                    assert_eq!(i, a.len() - 1, "{what}");
                    assert!(matches!(tl.phase(), Phase::Done { .. }), "{what}");
                }
                // The child's exit is always seen: no phase loses it.
                if was_alive && matches!(event, Event::ChildExited(_)) {
                    assert!(!tl.child_alive(), "{what}");
                }
                // A stop begins once.
                let began = a
                    .iter()
                    .filter(|x| matches!(x, Action::StopBegan(_)))
                    .count();
                assert!(
                    began <= 1 && (began == 0 || before == Phase::Running),
                    "{what}"
                );
                // Whatever is waited for has a timer or an event to come.
                assert!(
                    tl.next_timer().is_some()
                        || tl.poll.is_some()
                        || matches!(
                            tl.phase(),
                            Phase::Running
                                | Phase::Killed { .. }
                                | Phase::Done { .. }
                                | Phase::Hook { .. }
                        )
                        || (matches!(tl.phase(), Phase::Draining { .. })
                            && tl.stop().is_some_and(|s| s.deadline.is_none()))
                        || matches!(tl.phase(), Phase::Draining { next_poll: None }),
                    "{what}: nothing would ever wake the loop"
                );
            }
        }
    }

    // ---- Notify: the readiness word and extensions ----

    fn extending(max_ms: u64) -> Timeline {
        let mut tl = Timeline::new(base());
        tl.set_grace_max(Some(ms(max_ms)));
        tl
    }

    #[test]
    fn notify_ready_drains_between_polls() {
        let (mut tl, ticket) = draining();
        let a = tl.handle(t(300), Event::NotifyReady { at: t(300) });
        assert_eq!(a, [Action::Ready { left: ms(2_000) }]);
        assert_eq!(tl.phase(), Phase::Ready { kill_at: t(2_300) });
        // The poll in flight says "not ready": too late, and stale.
        let a = tl.handle(t(400), polled(ticket, false));
        assert_eq!(a, []);
        assert_eq!(
            tl.handle(t(2_300), Event::Tick),
            [Action::Kill(Escalation::Ready)]
        );
    }

    #[test]
    fn notify_ready_before_the_stop_signal_is_ignored() {
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(3_000)));
        assert_eq!(
            tl.handle(t(0), Event::NotifyReady { at: t(0) }),
            [Action::NotifyIgnored],
            "outside a stop"
        );
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(
            tl.handle(t(500), Event::NotifyReady { at: t(500) }),
            [Action::NotifyIgnored],
            "during the pre-stop delay"
        );
        let a = tl.handle(t(3_000), Event::Tick);
        assert_eq!(forwards(&a), [TERM]);
        // Sent before the signal, taken after it: still does not count.
        assert_eq!(
            tl.handle(t(3_001), Event::NotifyReady { at: t(2_999) }),
            [Action::NotifyIgnored]
        );
        let a = tl.handle(t(3_100), Event::NotifyReady { at: t(3_100) });
        assert_eq!(a, [Action::Ready { left: ms(2_000) }]);
        assert_eq!(tl.handle(t(3_200), Event::NotifyReady { at: t(3_200) }), []);
    }

    #[test]
    fn notify_ready_ready_grace_never_passes_the_deadline() {
        let (mut tl, _) = draining();
        let a = tl.handle(t(9_000), Event::NotifyReady { at: t(9_000) });
        assert_eq!(a, [Action::Ready { left: ms(1_000) }]);
    }

    #[test]
    fn notify_ready_without_a_drain_source() {
        let mut tl = Timeline::new(with(|s| s.drain = false));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.phase(), Phase::Draining { next_poll: None });
        let a = tl.handle(t(50), Event::NotifyReady { at: t(50) });
        assert_eq!(a, [Action::Ready { left: ms(2_000) }]);
    }

    #[test]
    fn a_grace_max_past_what_an_instant_holds_does_not_panic() {
        let mut tl = Timeline::new(base());
        tl.set_grace_max(Some(Duration::MAX));
        tl.handle(t(0), Event::Signal(TERM));
        let a = tl.handle(
            t(1_000),
            Event::Extend {
                at: t(1_000),
                by: ms(20_000),
            },
        );
        assert_eq!(
            a,
            [Action::Extended {
                deadline: t(21_000),
                first: true
            }]
        );
        // Neither the cap nor the wish fits: the deadline stays.
        let a = tl.handle(
            t(2_000),
            Event::Extend {
                at: t(2_000),
                by: Duration::MAX,
            },
        );
        assert_eq!(a, []);
        assert_eq!(tl.stop().unwrap().deadline, Some(t(21_000)));
    }

    #[test]
    fn extension_moves_the_deadline_up_to_grace_max() {
        let mut tl = extending(30_000);
        tl.handle(t(0), Event::Signal(TERM));
        let a = tl.handle(
            t(5_000),
            Event::Extend {
                at: t(5_000),
                by: ms(8_000),
            },
        );
        assert_eq!(
            a,
            [Action::Extended {
                deadline: t(13_000),
                first: true
            }]
        );
        assert_eq!(tl.handle(t(10_000), Event::Tick), []);
        // Shorter than the current deadline: nothing moves.
        assert_eq!(
            tl.handle(
                t(11_000),
                Event::Extend {
                    at: t(11_000),
                    by: ms(1_000)
                }
            ),
            []
        );
        // Far beyond: capped at t0 + grace-max.
        let a = tl.handle(
            t(12_000),
            Event::Extend {
                at: t(12_000),
                by: Duration::from_micros(u64::MAX),
            },
        );
        assert_eq!(
            a,
            [Action::Extended {
                deadline: t(30_000),
                first: false
            }]
        );
        assert_eq!(tl.stop().unwrap().deadline, Some(t(30_000)));
        assert_eq!(tl.handle(t(29_999), Event::Tick), []);
        assert_eq!(
            tl.handle(t(30_000), Event::Tick),
            [Action::Kill(Escalation::Deadline)]
        );
    }

    #[test]
    fn a_hung_app_stops_extending_and_is_killed_at_its_last_deadline() {
        let mut tl = extending(60_000);
        tl.handle(t(0), Event::Signal(TERM));
        for at in [8_000, 16_000] {
            tl.handle(
                t(at),
                Event::Extend {
                    at: t(at),
                    by: ms(5_000),
                },
            );
        }
        assert_eq!(tl.next_timer().map(|n| n >= t(16_000)), Some(true));
        assert_eq!(tl.stop().unwrap().deadline, Some(t(21_000)));
        assert_eq!(
            tl.handle(t(21_000), Event::Tick),
            [Action::Kill(Escalation::Deadline)]
        );
    }

    #[test]
    fn extension_ignored_without_grace_max_outside_a_stop_and_after_the_kill() {
        // grace-max defaults to grace: nothing moves.
        let mut tl = extending(10_000);
        tl.handle(t(0), Event::Signal(TERM));
        let extend = Event::Extend {
            at: t(5_000),
            by: ms(20_000),
        };
        assert_eq!(tl.handle(t(5_000), extend), []);
        assert_eq!(tl.stop().unwrap().deadline, Some(t(10_000)));
        let mut tl = Timeline::new(base());
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.handle(t(5_000), extend), [], "no grace-max set");
        // Before the stop: ignored, even when taken after it began.
        let mut tl = extending(30_000);
        tl.handle(t(100), Event::Signal(TERM));
        let early = Event::Extend {
            at: t(50),
            by: ms(20_000),
        };
        assert_eq!(tl.handle(t(101), early), []);
        let mut tl = extending(30_000);
        assert_eq!(tl.handle(t(0), extend), [], "no stop");
        assert!(tl.is_running());
        // After the deadline's kill: too late.
        tl.handle(t(0), Event::Signal(TERM));
        tl.handle(t(10_000), Event::Tick);
        assert_eq!(tl.handle(t(10_001), extend), []);
        // No grace at all: no deadline to move.
        let mut tl = Timeline::new(with(|s| s.grace = None));
        tl.set_grace_max(Some(ms(30_000)));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.handle(t(5_000), extend), []);
    }

    #[test]
    fn extension_during_the_pre_stop_delay_counts() {
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(3_000)));
        tl.set_grace_max(Some(ms(20_000)));
        tl.handle(t(0), Event::Signal(TERM));
        let a = tl.handle(
            t(1_000),
            Event::Extend {
                at: t(1_000),
                by: ms(15_000),
            },
        );
        assert_eq!(
            a,
            [Action::Extended {
                deadline: t(16_000),
                first: true
            }]
        );
    }

    /// The run's owner of the deadline with a deletion learnt by a stop
    /// that began at `since` (kill at `kill_ms`, deletion period `period`).
    fn deleted(since: Instant, kill_ms: u64, period: u64) -> (Deadline, Instant) {
        let mut config = crate::core::machine::tests::config();
        config.timeline.grace = Some(ms(30_000));
        let mut d = Deadline::new(&config);
        let change = d.learn_kill(
            since,
            Some(since + ms(30_000)),
            crate::core::deadline::Learnt::Kill {
                at: t(kill_ms),
                period: Some(period),
            },
        );
        (d, change.deadline.unwrap())
    }

    #[test]
    fn a_deletion_moves_the_deadline_and_caps_extensions() {
        let mut tl = Timeline::new(with(|s| s.grace = Some(ms(27_000))));
        tl.set_grace_max(Some(ms(60_000)));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.stop().unwrap().deadline, Some(t(27_000)));
        let (d, at) = deleted(t(0), 10_000, 10);
        assert_eq!(at, t(8_000));
        tl.follow(&d);
        let mut out = Vec::new();
        tl.hold(t(500), at, &mut out);
        assert_eq!(out, []);
        assert_eq!(tl.stop().unwrap().deadline, Some(t(8_000)));
        assert_eq!(tl.timer(Timer::Deadline), Some(t(8_000)));
        // No extension past it, whatever --grace-max says.
        let a = tl.handle(
            t(1_000),
            Event::Extend {
                at: t(1_000),
                by: ms(40_000),
            },
        );
        assert_eq!(a, []);
        assert_eq!(tl.stop().unwrap().deadline, Some(t(8_000)));
        let a = tl.handle(t(8_000), Event::Tick);
        assert_eq!(a, [Action::Kill(Escalation::Deadline)]);
        // Once escalated, nothing moves.
        let mut out = Vec::new();
        tl.hold(t(8_100), t(20_000), &mut out);
        assert_eq!(tl.timer(Timer::Deadline), None);
    }

    #[test]
    fn a_deletion_cuts_a_running_pre_stop_delay() {
        let mut tl = Timeline::new(with(|s| {
            s.pre_stop_delay = ms(15_000);
            s.grace = Some(ms(54_000));
        }));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.phase(), Phase::PreStop { until: t(15_000) });
        // Answer at 1 s: kill at 12 s, deadline 10 s; the drain keeps at
        // least half of the 9 s left.
        let (d, at) = deleted(t(0), 12_000, 12);
        assert_eq!(at, t(10_000));
        tl.follow(&d);
        let mut out = Vec::new();
        tl.hold(t(1_000), at, &mut out);
        assert_eq!(tl.phase(), Phase::PreStop { until: t(5_500) });
        let a = tl.handle(t(5_500), Event::Tick);
        assert_eq!(a[0], Action::Forward(TERM));
        // A cut that leaves nothing: the stop signal goes at once.
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(15_000)));
        tl.handle(t(0), Event::Signal(TERM));
        let mut out = Vec::new();
        tl.hold(t(1_000), t(1_000), &mut out);
        assert_eq!(out[0], Action::Forward(TERM));
        assert_eq!(out[1], Action::Kill(Escalation::Deadline));
    }

    #[test]
    fn a_deletion_cuts_a_hook_still_out_and_a_ready_apps_time() {
        let mut tl = Timeline::new(with(|s| {
            s.hook = true;
            s.hook_timeout = ms(60_000);
            s.grace = Some(ms(27_000));
        }));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.timer(Timer::Hook), Some(t(13_500)));
        // The deadline moves to 5 s at 1 s: the hook gets half of the 4 s.
        let mut out = Vec::new();
        tl.hold(t(1_000), t(5_000), &mut out);
        assert_eq!(tl.timer(Timer::Hook), Some(t(3_000)));
        let a = tl.handle(t(3_000), Event::Tick);
        assert_eq!(a[..2], [Action::HookAbandoned, Action::Forward(TERM)]);
        // A ready app's time never passes the moved deadline.
        let mut tl = Timeline::new(with(|s| s.ready_grace = ms(20_000)));
        tl.handle(t(0), Event::Signal(TERM));
        tl.handle(t(100), Event::NotifyReady { at: t(100) });
        assert_eq!(tl.phase(), Phase::Ready { kill_at: t(10_000) });
        let mut out = Vec::new();
        tl.hold(t(200), t(4_000), &mut out);
        assert_eq!(tl.phase(), Phase::Ready { kill_at: t(4_000) });
    }

    #[test]
    fn a_pod_grace_inside_the_pre_stop_delay_cuts_the_delay() {
        let mut config = crate::core::machine::tests::config();
        config.timeline.grace = Some(ms(30_000));
        let mut d = Deadline::new(&config);
        d.learn(crate::core::deadline::Grace {
            grace: ms(8_000),
            grace_max: Some(ms(8_000)),
        });
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(10_000)));
        tl.follow(&d);
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.stop().unwrap().deadline, Some(t(8_000)));
        assert_eq!(tl.phase(), Phase::PreStop { until: t(4_000) });
        // A configured grace keeps the delay whole.
        let mut tl = Timeline::new(with(|s| s.pre_stop_delay = ms(6_000)));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.phase(), Phase::PreStop { until: t(6_000) });
    }

    #[test]
    fn a_platform_default_inside_the_pre_stop_delay_cuts_the_delay() {
        let settings = with(|s| {
            s.grace = Some(ms(4_000));
            s.pre_stop_delay = ms(5_000);
            s.delay_gives_way = true;
        });
        let config = crate::core::machine::tests::config();
        let mut tl = Timeline::new(settings);
        // As the machine does at start: the flag outlives `follow`.
        tl.follow(&Deadline::new(&crate::core::settings::Config {
            timeline: tl.settings.clone(),
            grace_max: Some(ms(4_000)),
            ..config
        }));
        tl.handle(t(0), Event::Signal(TERM));
        assert_eq!(tl.stop().unwrap().deadline, Some(t(4_000)));
        assert_eq!(tl.phase(), Phase::PreStop { until: t(2_000) });
    }
}
