//! The core of a run as one value: the shell hands it every `Input` with
//! the current instant (`handle`), then takes the `Action`s it asks for
//! (`poll_action`) and sleeps until `poll_timeout`. `Machine` decides
//! nothing itself: it routes each input, and each answer by its token, to
//! the part that owns it (the stop timeline, the hooks, the drain sources,
//! the platform watch, the maximum runtime, protection, notify), feeds the
//! timeline what they say, in order and never re-entrantly, and routes the
//! timeline's actions back to them (`stop.rs`). Each part owns its state and its timers; the
//! next wake-up is the earliest of theirs. Nothing here reads a clock or
//! makes a syscall. The same core, built with `Machine::fallback`
//! (`takeover.rs`), keeps the deadline after a panic; what it tells the
//! shell is `report.rs`. Its fields are private to this module: the rest
//! of the core and the shell go through its methods.

mod report;
mod stop;
mod takeover;

use std::collections::VecDeque;
use std::time::Instant;

use log::{debug, warn};

use crate::core::asks::{Asks, Owner};
use crate::core::counters::Counters;
use crate::core::deadline::Deadline;
use crate::core::event::{Action, Input, Token};
use crate::core::hooks::Hooks;
use crate::core::max_runtime::MaxRuntime;
use crate::core::notify::NotifyState;
use crate::core::outcome::{Outcome, RunSummary};
use crate::core::protect::Protection;
use crate::core::settings::Config;
use crate::core::sources::{Reply, Said, Sources};
use crate::core::timeline::{Event, Settings, Timeline};
use crate::core::timers::earliest;
use crate::core::watch::Watch;
use crate::proto::http::{Failure, Response};
use crate::util::text::Fold;

pub struct Machine<'a> {
    config: &'a Config,
    /// The main child (for log lines) and whether drainit is PID 1.
    pid: i32,
    pid1: bool,
    started: Instant,
    timeline: Timeline,
    /// The grace every stop gets, as configured or learnt from the
    /// platform; the timeline follows it, a fallback inherits it.
    deadline: Deadline,
    hooks: Hooks,
    sources: Sources,
    watch: Option<Watch>,
    /// `--max-runtime`: a stop begins once the app has run this long.
    max_runtime: Option<MaxRuntime>,
    protection: Option<Protection>,
    notify: Option<NotifyState>,
    /// What the parts asked for: tokens, owners, actions in order.
    asks: Asks,
    /// Timeline events raised while handling one input, fed in order.
    events: VecDeque<(Event, bool)>,
    outcome: Option<Outcome>,
    /// The run's end, waiting for protection's crash request (at most
    /// `protect::CRASH_BOUND`).
    held_exit: Option<Outcome>,
    summary: RunSummary,
    /// Lines a flood could repeat, at most one a second each.
    held: Fold,
    /// The fallback's core: notify messages are only counted.
    fallback: bool,
    counters: Counters,
    /// Moves whenever an input may have changed what `status` says.
    version: u64,
    /// The timeline ran in this input: its due timers already fired.
    timeline_ran: bool,
}

/// The timeline's settings from the configuration: whether the stop has
/// hooks to wait for and sources to poll comes from the hooks and sources
/// configured, never from a stored flag.
fn settings(config: &Config, drain: bool) -> Settings {
    Settings {
        drain,
        hook: !config.stop_hooks.is_empty() || !config.stop_execs.is_empty(),
        ..config.timeline.clone()
    }
}

impl<'a> Machine<'a> {
    /// The core of a run that began at `now` (its notify timings count
    /// from then) and whose main child is `pid`.
    pub fn new(config: &'a Config, pid: i32, pid1: bool, now: Instant) -> Machine<'a> {
        let sources = Sources::new(config);
        let timeline = Timeline::new(settings(config, sources.any()));
        let deadline = Deadline::new(config);
        let mut machine = Machine::empty(config, pid, pid1, now, timeline, deadline);
        machine.sources = sources;
        machine.notify = config.notify.as_ref().map(|_| NotifyState::default());
        machine.watch = Watch::new(config, now, &mut machine.asks);
        machine.max_runtime = MaxRuntime::new(config.max_runtime, now);
        machine.protection = Protection::new(config, now, &mut machine.asks);
        machine
    }

    /// The grace every stop gets, as configured or learnt from the
    /// platform: what a fallback keeps.
    pub fn deadline_owner(&self) -> Deadline {
        self.deadline
    }

    /// A signal the shell's last resort forwarded (it runs without a core
    /// but reports from this one): counted as the core counts its own.
    pub fn count_forwarded(&mut self, signo: i32) {
        self.counters.forwarded(signo);
        self.version = self.version.wrapping_add(1);
    }

    /// The next action for the shell, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.asks.pop()
    }

    /// When the shell must wake with `Input::Timeout` if nothing else comes:
    /// the earliest timer of any part.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let watch = self.watch.as_ref().and_then(Watch::next_timer);
        let protection = self.protection.as_ref().and_then(Protection::next_timer);
        let max_runtime = self.max_runtime.as_ref().and_then(MaxRuntime::next_timer);
        let parts = earliest(self.timeline.next_timer(), self.sources.next_timer());
        let platform = earliest(watch, protection);
        earliest(parts, earliest(platform, max_runtime))
    }

    /// Handles one input at `now`; the actions it leads to wait in
    /// `poll_action`.
    pub fn handle(&mut self, now: Instant, input: Input) {
        // Only time passing with no timer due changes nothing.
        let idle = input == Input::Timeout && self.poll_timeout().map_or(true, |at| at > now);
        if !idle {
            self.version = self.version.wrapping_add(1);
        }
        // Once the run is over only the report's counters move: what the
        // app sent and the orphans reaped just before the end count.
        let counts = matches!(input, Input::Notify(_) | Input::OrphanReaped { .. });
        if self.outcome.is_some() && !counts {
            return;
        }
        match input {
            Input::Signal(signo) => {
                crate::util::fault::point("core");
                self.feed(now, Event::Signal(signo));
            }
            Input::ChildExited(ended) => self.on_child_exit(now, ended),
            Input::RunEnded { token, ended } => self.on_run(now, token, Ok(ended)),
            Input::RunFailed { token } => self.on_run(now, token, Err(())),
            Input::OrphanReaped { pid } => {
                // Counted and said, nothing else: an orphan costs the core
                // no timer pass (a timer due now fires at the turn's end).
                self.summary.orphans_reaped += 1;
                if self.config.warn_on_reap {
                    warn!("Reaped zombie process with pid={pid}");
                } else {
                    debug!("Reaped zombie process with pid={pid}");
                }
                return;
            }
            Input::NoneLeft => self.on_none_left(now),
            Input::Http { token, result } => self.on_http(now, token, result),
            Input::File { token, seen } => {
                if let Some((Owner::Sources, _)) = self.asks.answered(token) {
                    let stopping = self.timeline.stop().is_some();
                    let said = self
                        .sources
                        .on_reply(now, token, Reply::File(&seen), stopping);
                    self.on_said(now, said);
                }
            }
            Input::KillFailed => self.feed(now, Event::KillFailed { pid1: self.pid1 }),
            Input::OthersGone => self.feed(now, Event::OthersGone),
            Input::Notify(note) => self.on_note(now, note),
            Input::NotifyFlushed | Input::Timeout => {}
        }
        self.on_time(now);
    }

    /// Fires what is due at `now`: the maximum runtime, the timeline's
    /// timers (once per input: only when no event ran it already), the
    /// runs' kill times, the watch's and protection's polls.
    fn on_time(&mut self, now: Instant) {
        if self.outcome.is_some() {
            return;
        }
        // First: the stop it begins runs the timeline, whose due timers
        // then fire with it.
        let running = self.timeline.is_running();
        if let Some(trigger) = self
            .max_runtime
            .as_mut()
            .and_then(|m| m.on_time(now, running))
        {
            self.feed(now, Event::PlatformStop(trigger));
        }
        if !std::mem::replace(&mut self.timeline_ran, false) && self.timeline.due(now) {
            self.feed(now, Event::Tick);
        }
        self.timeline_ran = false;
        let (stop, running) = (self.stopping(), self.timeline.is_running());
        self.sources.on_time(now, stop, &mut self.asks);
        if let Some(watch) = &mut self.watch {
            watch.on_time(now, running, &mut self.asks);
        }
        if let Some(protection) = &mut self.protection {
            protection.crash_due(now);
            if !running {
                protection.end();
            } else if let Some(interval) = protection.due(now) {
                let n = self
                    .sources
                    .ask_protect(now, interval, stop, &mut self.asks);
                protection.asked(n);
            }
            // After the turn's other actions: the stop signal goes first.
            let deadline = self.timeline.stop().and_then(|s| s.deadline);
            protection.stop_read(now, deadline, &mut self.asks);
        }
        self.release_exit();
    }

    /// The run's end goes out once protection's crash request no longer
    /// holds it (answered, or its bound passed).
    fn release_exit(&mut self) {
        let held = self.protection.as_ref().is_some_and(Protection::holds_exit);
        if held {
            return;
        }
        if let Some(outcome) = self.held_exit.take() {
            self.outcome = Some(outcome);
            self.asks.push(Action::Exit);
        }
    }

    /// A request came back: counted, then to its owner.
    fn on_http(&mut self, now: Instant, token: Token, result: Result<Response, Failure>) {
        let Some((owner, kind)) = self.asks.answered(token) else {
            return;
        };
        if let Some(kind) = kind {
            self.counters.answered(kind, &result);
        }
        let running = self.timeline.is_running();
        match owner {
            Owner::Hooks => {
                let timeline = &self.timeline;
                if let Some(ticket) = self.hooks.on_http(token, &result, |t| timeline.awaits(t)) {
                    self.feed(now, Event::HookDone(ticket));
                }
            }
            Owner::Sources => {
                let stopping = self.timeline.stop().is_some();
                let said = self
                    .sources
                    .on_reply(now, token, Reply::Http(&result), stopping);
                self.on_said(now, said);
            }
            Owner::Watch => {
                let trigger = self
                    .watch
                    .as_mut()
                    .and_then(|w| w.on_http(token, result, running));
                if let Some(trigger) = trigger {
                    self.feed(now, Event::PlatformStop(trigger));
                }
            }
            Owner::Protect => {
                let stopping = self.timeline.stop().is_some();
                let Some(protection) = &mut self.protection else {
                    return;
                };
                if protection.is_stop_read(token) {
                    if let Some(learnt) = protection.on_stop_read(now, result) {
                        self.on_learnt(now, learnt);
                    }
                    return;
                }
                // The platform may set the deadline (the pod's own grace
                // period), never that of a stop already under way.
                if let Some(grace) =
                    protection.on_http(now, token, result, stopping, &mut self.asks)
                {
                    self.deadline.learn(grace);
                    self.timeline.follow(&self.deadline);
                }
            }
        }
    }

    /// A command ended (`Ok`) or could not start (`Err`): to its owner.
    fn on_run(
        &mut self,
        now: Instant,
        token: Token,
        ended: Result<crate::core::outcome::Ended, ()>,
    ) {
        match self.asks.answered(token) {
            Some((Owner::Hooks, _)) => {
                if let Some(ticket) = self.hooks.on_run_end(token, ended) {
                    self.feed(now, Event::HookDone(ticket));
                }
            }
            Some((Owner::Sources, _)) => {
                let stopping = self.timeline.stop().is_some();
                let said = self
                    .sources
                    .on_reply(now, token, Reply::Run(ended, None), stopping);
                self.on_said(now, said);
            }
            _ => {}
        }
    }

    /// What the sources said: a round over goes to the timeline, an answer
    /// to protection's poll to protection.
    fn on_said(&mut self, now: Instant, said: Option<Said>) {
        match said {
            Some(Said::Round { ticket, ready }) => self.feed(now, Event::Polled { ticket, ready }),
            Some(Said::Protect { answer, complaint }) => {
                if let Some(protection) = &mut self.protection {
                    protection.on_answer(now, answer, complaint, &mut self.asks);
                }
            }
            None => {}
        }
    }

    /// Feeds the timeline, and whatever its actions raise in turn, in order:
    /// never re-entrant.
    fn feed(&mut self, now: Instant, event: Event) {
        self.events.push_back((event, false));
        self.run_events(now);
    }

    fn run_events(&mut self, now: Instant) {
        let mut out = Vec::with_capacity(4);
        while let Some((event, by_word)) = self.events.pop_front() {
            self.timeline.handle_into(now, event, &mut out);
            self.timeline_ran = true;
            self.perform_all(now, std::mem::take(&mut out), by_word);
        }
    }

    /// Raises a timeline event while performing (`by_word`: the app's
    /// readiness word): fed after the current ones.
    fn raise(&mut self, event: Event, by_word: bool) {
        self.events.push_back((event, by_word));
    }
}

#[cfg(test)]
pub(crate) mod tests;
