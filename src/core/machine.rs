//! The core of a run as one value: the shell hands it every `Input` with
//! the current instant (`handle`), then takes the `Action`s it asks for
//! (`poll_action`) and sleeps until `poll_timeout`. Inside, the stop
//! timeline, the drain sources, the ECS pollers and the notify state
//! decide; nothing here reads a clock or makes a syscall (log lines go
//! through the `log` facade, whose writer the app installs). The same core,
//! built with `Machine::fallback`, keeps the deadline after a panic.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};

use crate::core::counters::{Counters, RequestKind};
use crate::core::ecs::{Protection, Watch};
use crate::core::event::Answer;
use crate::core::event::{Action, Input, Lane, Token};
use crate::core::outcome::{EcsNames, Ended, InFlight, Outcome, RunSummary, Trigger};
use crate::core::rules;
use crate::core::settings::Config;
use crate::core::sources::{Board, Probe};
use crate::core::timeline::{
    self, Escalation, Event, Phase, Request, Settings, Stop, Ticket, Timeline,
};
use crate::core::timers::{Timer, Timers};
use crate::proto::http::{Failure, Response, Target};
use crate::util::signame::signal_name;
use crate::util::text::Fold;
use crate::util::time::millis;

/// What a token was issued for; its answer is routed by this.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Purpose {
    /// A `--stop-url` request or `--stop-exec` run of the hooks of a ticket.
    Hook(Ticket),
    /// Drain source `usize` in the round with this ticket.
    Source(Ticket, usize),
    EcsTask,
    EcsContainer,
    /// Drain source `usize` asked for task protection, while running.
    ProtectPoll(usize),
    ProtectPut {
        enabled: bool,
        sent_at: Instant,
    },
}

/// What the counters call a request made for `purpose`.
fn request_kind(purpose: Purpose) -> RequestKind {
    match purpose {
        Purpose::Hook(_) => RequestKind::Hook,
        Purpose::Source(..) => RequestKind::Drain,
        Purpose::EcsTask | Purpose::EcsContainer => RequestKind::EcsMetadata,
        Purpose::ProtectPoll(_) => RequestKind::ProtectPoll,
        Purpose::ProtectPut { .. } => RequestKind::ProtectUpdate,
    }
}

/// A command the core started and has not heard the end of.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) token: Token,
    pub(super) purpose: Purpose,
    pub(super) started: Instant,
    /// Killed for running too long, after this long.
    pub(super) timed_out: Option<Duration>,
}

/// What the app said over the notify socket, for the exit report.
#[derive(Debug, Clone, Default)]
pub struct NotifyState {
    pub(super) ready_after: Option<Duration>,
    pub(super) status: Option<Vec<u8>>,
    pub(super) received: u64,
    pub(super) refused: u64,
    /// Accepted messages by `notify_msg::KINDS`.
    pub(super) kinds: [u64; 6],
    pub(super) dropped: u64,
    pub(super) stop_to_ready_word_ms: Option<u64>,
    pub(super) said_extend: Option<Instant>,
    pub(super) said_extend_ignored: bool,
    pub(super) said_ignored: bool,
}

pub struct Machine<'a> {
    pub(super) config: &'a Config,
    /// The main child (for log lines) and whether drainit is PID 1.
    pid: i32,
    pid1: bool,
    pub(super) started: Instant,
    pub(super) timeline: Timeline,
    pub(super) timers: Timers,
    actions: VecDeque<Action>,
    /// Timeline events raised while handling one input, fed in order.
    events: VecDeque<(Event, bool)>,
    outcome: Option<Outcome>,
    pub(super) summary: RunSummary,
    pub(super) probes: Vec<Probe>,
    pub(super) board: Board,
    /// What the last drain poll said, for the report and the ready line.
    pub(super) last_drain: Option<String>,
    /// Requests in flight and command runs not yet reaped.
    pub(super) requests: Vec<(Token, Purpose)>,
    pub(super) runs: Vec<Run>,
    next_token: u32,
    pub(super) watch: Option<Watch>,
    pub(super) protection: Option<Protection>,
    /// The protection poll in flight: answers so far, answers still due.
    pub(super) protect_round: (Vec<Answer>, usize),
    /// Source polls waiting for one of the `MAX_POLLS` slots of their kind.
    pub(super) queued: Vec<Purpose>,
    /// Lines a flood could repeat, at most one a second each.
    held: Fold,
    /// Each source's answer lines, at most one a second per source.
    pub(super) answers_said: Vec<Fold>,
    pub(super) notify: Option<NotifyState>,
    /// The fallback's core: notify messages are only counted.
    pub(super) fallback: bool,
    /// When each drain source last answered (for `/status`).
    pub(super) answered_at: Vec<Option<Instant>>,
    pub(super) counters: Counters,
    /// The app's in-flight count (`--drain-count-field`).
    pub(super) in_flight: InFlight,
    /// `--drain-count-field` could not be read (said once).
    pub(super) count_unreadable: bool,
    /// Moves whenever an input may have changed what `status` says.
    version: u64,
    /// The timeline ran in this input: its due timers already fired.
    timeline_ran: bool,
}

/// The timeline's settings from the configuration.
fn settings(config: &Config, drain: bool) -> Settings {
    Settings {
        stop_signals: config.stop_signals.clone(),
        grace: config.grace,
        pre_stop_delay: config.pre_stop_delay,
        hook: !config.stop_hooks.is_empty() || !config.stop_execs.is_empty(),
        hook_timeout: config.hook_timeout,
        drain,
        drain_interval: config.drain_interval,
        ready_grace: config.ready_grace,
        orphan_grace: config.orphan_grace,
    }
}

/// The drain sources of a run, in the order the report lists them.
fn probes(config: &Config) -> Vec<Probe> {
    let urls = config.drain_urls.iter().cloned().map(Probe::Url);
    let execs = config.drain_execs.iter().cloned().map(Probe::Exec);
    let files = config.drain_files.iter().cloned().map(Probe::File);
    urls.chain(execs).chain(files).collect()
}

impl<'a> Machine<'a> {
    /// The core of a run that began at `now` (its notify timings count
    /// from then) and whose main child is `pid`.
    pub fn new(config: &'a Config, pid: i32, pid1: bool, now: Instant) -> Machine<'a> {
        let probes = probes(config);
        let mut timeline = Timeline::new(settings(config, !probes.is_empty()));
        timeline.set_grace_max(config.grace_max);
        let mut machine = Machine::empty(config, pid, pid1, now, timeline);
        for probe in &probes {
            machine.board.add(probe.kind(), &probe.target());
        }
        // A source answers once a round: a few changes a second pass, a
        // flapping source at a tiny interval is folded.
        machine.answers_said = vec![Fold::with_burst(3); probes.len()];
        machine.answered_at = vec![None; probes.len()];
        machine.probes = probes;
        machine.notify = config.notify.as_ref().map(|_| NotifyState::default());
        machine.start_ecs(now);
        machine
    }

    /// After a panic of the core `old`: a fresh core with no sources, hooks,
    /// delay, ECS or notify reading, that takes over the stop `old` began
    /// (its deadline included) and what `old` recorded for the report.
    /// `signal_sent`: the shell did send the stop signal.
    pub fn fallback(
        config: &'a Config,
        old: &mut Machine<'_>,
        signal_sent: bool,
        child: Option<Ended>,
        now: Instant,
    ) -> Machine<'a> {
        let mut machine = Machine::minimal(config, old.pid, old.pid1, old.started);
        // The report's records move over; nothing asked by `old` is awaited.
        machine.summary = std::mem::take(&mut old.summary);
        machine.board = std::mem::take(&mut old.board);
        machine.answered_at = std::mem::take(&mut old.answered_at);
        machine.board.abandon_round();
        machine.board.abandon_hooks();
        machine.last_drain = old.last_drain.take();
        machine.watch = old.watch.take();
        machine.notify = old.notify.take();
        machine.next_token = old.next_token;
        machine.counters = old.counters.clone();
        machine.version = old.version.wrapping_add(1);
        machine.in_flight = old.in_flight;
        if let Some(ended) = child {
            // The child is gone: nothing may be sent to its pid any more.
            machine.handle(now, Input::ChildExited(ended));
        } else if let Some(stop) = old.timeline.stop() {
            let mut out = Vec::new();
            machine.timeline.resume(now, stop, signal_sent, &mut out);
            machine.perform_all(now, out, false);
        }
        machine
    }

    /// A core with no sources, hooks, delay, ECS, notify reading or orphan
    /// grace: the fallback's (and the one a panic while building the first
    /// core leaves).
    pub fn minimal(config: &'a Config, pid: i32, pid1: bool, started: Instant) -> Machine<'a> {
        let mut settings = settings(config, false);
        settings.hook = false;
        settings.pre_stop_delay = Duration::ZERO;
        settings.orphan_grace = Duration::ZERO;
        let mut timeline = Timeline::new(settings);
        timeline.set_grace_max(config.grace_max);
        let mut machine = Machine::empty(config, pid, pid1, started, timeline);
        machine.fallback = true;
        machine
    }

    fn empty(
        config: &'a Config,
        pid: i32,
        pid1: bool,
        started: Instant,
        timeline: Timeline,
    ) -> Machine<'a> {
        Machine {
            config,
            pid,
            pid1,
            started,
            timeline,
            timers: Timers::default(),
            actions: VecDeque::new(),
            events: VecDeque::new(),
            outcome: None,
            summary: RunSummary {
                child_pid: Some(pid),
                ..RunSummary::default()
            },
            probes: Vec::new(),
            board: Board::default(),
            last_drain: None,
            requests: Vec::new(),
            runs: Vec::new(),
            next_token: 0,
            watch: None,
            protection: None,
            protect_round: (Vec::new(), 0),
            queued: Vec::new(),
            fallback: false,
            held: Fold::default(),
            answers_said: Vec::new(),
            notify: None,
            answered_at: Vec::new(),
            counters: Counters::default(),
            in_flight: InFlight::default(),
            count_unreadable: false,
            version: 0,
            timeline_ran: false,
        }
    }

    /// The next action for the shell, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When the shell must wake with `Input::Timeout` if nothing else comes.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timeline = self.timeline.next_timer();
        timeline.into_iter().chain(self.timers.next()).min()
    }

    /// Set once the run is over (with `Action::Exit`).
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// The stop under way, if any (the fallback takes it over).
    pub fn stop(&self) -> Option<Stop> {
        self.timeline.stop()
    }

    /// The deadline that still holds: the stop's, until drainit escalated
    /// or the child is gone.
    pub fn deadline(&self) -> Option<Instant> {
        self.timeline.deadline()
    }

    /// Changes whenever an input may have changed `status()`: the shell
    /// builds a new status only then.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The main child has not been seen to end.
    pub fn child_alive(&self) -> bool {
        self.timeline.child_alive()
    }

    pub(super) fn token(&mut self) -> Token {
        self.next_token = self.next_token.wrapping_add(1);
        Token(self.next_token)
    }

    pub(super) fn push(&mut self, action: Action) {
        self.actions.push_back(action);
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
            Input::RunEnded { token, ended } => self.on_run_end(now, token, Ok(ended)),
            Input::RunFailed { token } => self.on_run_end(now, token, Err(())),
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
            Input::File { token, answer } => {
                if let Some(Purpose::Source(ticket, index)) = self.take_request(token) {
                    self.on_answer(now, ticket, index, answer);
                }
            }
            Input::KillFailed => self.feed(now, Event::KillFailed { pid1: self.pid1 }),
            Input::OthersGone => self.feed(now, Event::OthersGone),
            Input::Notify(note) => self.on_note(now, note),
            Input::NotifyFlushed | Input::Timeout => {}
        }
        self.on_time(now);
    }

    /// Fires what is due at `now`: the timeline's timers (once per input:
    /// only when no event ran it already), the ECS pollers and the command
    /// runs' kill times.
    fn on_time(&mut self, now: Instant) {
        if self.outcome.is_some() {
            return;
        }
        if !std::mem::replace(&mut self.timeline_ran, false) && self.timeline.due(now) {
            self.feed(now, Event::Tick);
        }
        self.timeline_ran = false;
        for token in self.timers.runs_due(now) {
            let at = self.timers.get(Timer::RunKill(token)).unwrap_or(now);
            self.timers.set(Timer::RunKill(token), None);
            if let Some(run) = self.runs.iter_mut().find(|r| r.token == token) {
                // The time it was given, not when the loop woke: the same
                // answer each time, so a source stuck hanging is logged once.
                run.timed_out = Some(at.saturating_duration_since(run.started));
                self.push(Action::KillRun(token));
            }
        }
        self.ecs_timers(now);
        self.pump(now);
    }

    /// Feeds the timeline, and whatever its actions raise in turn, in order:
    /// never re-entrant.
    pub(super) fn feed(&mut self, now: Instant, event: Event) {
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

    /// Feeds the app's readiness word: the actions it leads to know it.
    pub(super) fn feed_word(&mut self, now: Instant, event: Event) {
        self.events.push_back((event, true));
        self.run_events(now);
    }

    /// Raises a timeline event while performing: fed after the current ones.
    pub(super) fn raise(&mut self, event: Event) {
        self.events.push_back((event, false));
    }

    fn perform_all(&mut self, now: Instant, actions: Vec<timeline::Action>, by_word: bool) {
        for action in actions {
            self.perform(now, action, by_word);
        }
    }

    /// One timeline action. `by_word`: it answers the app's own readiness
    /// word over the notify socket.
    fn perform(&mut self, now: Instant, action: timeline::Action, by_word: bool) {
        use timeline::Action as A;
        match action {
            A::StopBegan(trigger) => self.on_stop_began(now, trigger),
            A::Forward(signo) => self.forward(signo),
            A::Held(signo) => {
                if let Some(note) = self.held.allow(now) {
                    info!(
                        "holding {}: the app gets its stop signal after the pre-stop delay and the hook{note}",
                        signal_name(signo)
                    )
                }
            }
            A::Absorbed(signo) => info!(
                "absorbing {}: the stop already began from ECS",
                signal_name(signo)
            ),
            A::Send {
                ticket,
                request,
                timeout,
            } => match request {
                Request::Hook => self.fire_hooks(now, ticket, timeout),
                Request::Poll => self.start_round(now, ticket),
            },
            A::HookAbandoned => {
                warn!("stop hook did not answer in time; sending the stop signal");
                self.board.abandon_hooks();
                self.kill_runs_where(
                    |p| matches!(p, Purpose::Hook(_)),
                    "the hook timeout ran out",
                );
            }
            A::Ready { left } => self.on_ready(now, left, by_word),
            A::Kill(reason) => {
                self.abandon_round();
                self.kill_runs_where(|_| true, "drainit escalates");
                match reason {
                    // The designed end of a drained stop, not a failure.
                    Escalation::Ready => info!("drained; releasing the app"),
                    Escalation::Deadline => {
                        warn!("deadline reached; sending SIGKILL to the child's process group")
                    }
                }
                self.push(Action::KillChild);
            }
            A::TerminateOthers { .. } => self.push(Action::TerminateOthers),
            A::Exit(outcome) => {
                self.outcome = Some(outcome);
                self.push(Action::Exit);
            }
            A::KillStuck => {
                error!(
                    "the child (pid {}) is still not gone {} s after SIGKILL (stuck in the kernel?); {}",
                    self.pid,
                    timeline::KILL_WATCHDOG.as_secs(),
                    if self.pid1 {
                        "exiting now, which ends the namespace"
                    } else {
                        "waiting for it to exit"
                    }
                );
                self.raise(Event::KillFailed { pid1: self.pid1 });
            }
            A::Extended { deadline, first } => self.on_extended(now, deadline, first),
            A::NotifyIgnored => self.notify_ignored(),
        }
    }

    fn on_stop_began(&mut self, now: Instant, trigger: Trigger) {
        self.summary.stop_trigger = Some(trigger);
        self.end_protection();
        let by = match trigger {
            Trigger::Signal(signo) => signal_name(signo),
            Trigger::Ecs => "ECS".into(),
        };
        match self.timeline.stop().and_then(|s| s.deadline) {
            Some(deadline) => info!(
                "stop begins ({by}); deadline in {} ms",
                millis(deadline.saturating_duration_since(now))
            ),
            None => info!("stop begins ({by}); no deadline"),
        }
    }

    /// Forwards a received signal (after `--rewrite`) to the child or its
    /// group, while the child is there.
    fn forward(&mut self, signo: i32) {
        if !self.timeline.child_alive() {
            return;
        }
        let stop = self.timeline.stop().is_some_and(|s| s.signal == signo);
        let Some((sent, group)) = rules::forwarded(self.config, signo) else {
            return debug!("dropping {} as --rewrite asks", signal_name(signo));
        };
        self.counters.forwarded(sent);
        self.push(Action::Forward {
            signo: sent,
            group,
            stop,
        });
    }

    fn on_ready(&mut self, now: Instant, left: Duration, by_word: bool) {
        if let Some(stop) = self.timeline.stop() {
            self.summary.stop_to_ready_ms = Some(millis(now - stop.since));
        }
        if by_word {
            if let Some(n) = &mut self.notify {
                n.stop_to_ready_word_ms = self.summary.stop_to_ready_ms;
            }
            // The word is authoritative: the round in flight is dropped (the
            // timeline dropped its ticket), and a drain command still
            // running has nothing left to answer.
            self.abandon_round();
            self.kill_runs_where(
                |p| matches!(p, Purpose::Source(..)),
                "the app said it has drained",
            );
            return info!(
                "app says it has drained (X_DRAINIT_READY_FOR_TERMINATION=1); it has {} ms to exit by itself",
                millis(left)
            );
        }
        info!(
            "app reports ready ({}); it has {} ms to exit by itself",
            self.last_drain
                .as_deref()
                .unwrap_or("every drain source was ready"),
            millis(left)
        );
    }

    fn on_child_exit(&mut self, now: Instant, ended: Ended) {
        if !self.timeline.child_alive() {
            return;
        }
        let released = matches!(
            self.timeline.phase(),
            Phase::Killed {
                reason: Escalation::Ready,
                ..
            }
        );
        match ended {
            Ended::Exited(code) => info!("main child exited with status {code}"),
            Ended::Signaled(libc::SIGKILL) if released => info!("main child released"),
            Ended::Signaled(signo) => info!("main child was killed by {}", signal_name(signo)),
        }
        self.summary.child_status = Some(ended);
        // Nothing waits for a hook or a drain command any more.
        self.abandon_round();
        self.board.abandon_hooks();
        self.kill_runs_where(|_| true, "the main child ended");
        if let Some(stop) = self.timeline.stop() {
            self.summary.stop_to_exit_ms = Some(millis(now - stop.since));
        }
        self.feed(now, Event::ChildExited(ended));
    }

    /// The reaper found no child left. After the main child ended, that
    /// ends the orphan grace; before, the child's status was lost (only a
    /// panic of the loop can do that): forwarding to its pid could now
    /// reach a stranger, so the run ends.
    fn on_none_left(&mut self, now: Instant) {
        if self.timeline.child_alive() {
            error!("the main child is gone and its status is lost; exiting");
            self.outcome = Some(rules::lost_status());
            return self.push(Action::Exit);
        }
        info!("every remaining process has exited");
        self.feed(now, Event::OthersGone);
    }

    fn on_http(&mut self, now: Instant, token: Token, result: Result<Response, Failure>) {
        let Some(purpose) = self.take_request(token) else {
            return;
        };
        self.counters.answered(request_kind(purpose), &result);
        match purpose {
            Purpose::Hook(ticket) if !self.timeline.awaits(ticket) => {
                debug!("ignoring a late answer: the stop moved on without it");
            }
            Purpose::Hook(ticket) => {
                match &result {
                    Ok(response) => info!("stop hook answered HTTP {}", response.status),
                    Err(failure) => warn!("stop hook failed: {failure}"),
                }
                self.hook_done(now, ticket);
            }
            Purpose::Source(ticket, index) => self.on_source_response(now, ticket, index, &result),
            Purpose::EcsTask => self.on_ecs_task(now, result),
            Purpose::EcsContainer => {
                if let Some(watch) = &mut self.watch {
                    watch.on_container(result);
                }
            }
            Purpose::ProtectPoll(index) => self.on_protect_poll(now, index, result),
            Purpose::ProtectPut { enabled, sent_at } => {
                if let Some(protection) = &mut self.protection {
                    protection.on_put(enabled, result, sent_at);
                }
            }
        }
    }

    /// The request with this token is answered: what it was for.
    fn take_request(&mut self, token: Token) -> Option<Purpose> {
        let at = self.requests.iter().position(|(t, _)| *t == token)?;
        Some(self.requests.swap_remove(at).1)
    }

    /// Runs a request; its result comes back as `Input::Http`.
    pub(super) fn send(
        &mut self,
        target: Target,
        body: Option<Vec<u8>>,
        timeout: Duration,
        purpose: Purpose,
    ) {
        let token = self.token();
        self.requests.push((token, purpose));
        let lane = match purpose {
            Purpose::Hook(_) => Lane::Hook,
            Purpose::Source(..) => Lane::Poll,
            Purpose::EcsTask | Purpose::EcsContainer => Lane::Ecs,
            Purpose::ProtectPoll(_) | Purpose::ProtectPut { .. } => Lane::Protect,
        };
        self.push(Action::Send {
            token,
            lane,
            target,
            body,
            timeout,
        });
    }

    /// Everything the exit report says besides the exit code.
    pub fn summary(&self) -> RunSummary {
        let s = &self.summary;
        RunSummary {
            child_pid: s.child_pid,
            child_status: s.child_status,
            stop_trigger: s.stop_trigger,
            stop_to_ready_ms: s.stop_to_ready_ms,
            stop_to_exit_ms: s.stop_to_exit_ms,
            deadline_ms: self
                .timeline
                .stop()
                .and_then(|s| Some(millis(s.deadline?.saturating_duration_since(s.since)))),
            drain_polls: self.board.rounds,
            last_drain: self.last_drain.clone(),
            orphans_reaped: s.orphans_reaped,
            ecs_task_arn: self
                .watch
                .as_ref()
                .and_then(|w| w.task.as_ref())
                .map(|t| t.task_arn.clone()),
            sources: self.board.report(),
            notify: self.notify_report(),
            log_lines_dropped: 0,
            in_flight: self
                .config
                .drain_count_field
                .as_ref()
                .map(|_| self.in_flight),
            ecs_names: self
                .watch
                .as_ref()
                .and_then(|w| w.task.as_ref())
                .map(|t| EcsNames {
                    cluster: t.cluster.clone(),
                    family: t.family.clone(),
                    service: t.service_name.clone(),
                }),
        }
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
