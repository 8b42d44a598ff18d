//! The stop's hooks and drain rounds, as the machine runs them: the hooks
//! fire together and the timeline hears once all are over; a round asks
//! every source not yet ready (URLs and commands answer later, files are
//! looked at by the shell) and the timeline hears once every source asked
//! has answered. Commands are started, timed and killed through actions;
//! each answer is logged when it changes.

use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::core::event::Answer;
use crate::core::event::{Action, Token};
use crate::core::machine::{Machine, Purpose, Run};
use crate::core::outcome::Ended;
use crate::core::settings::Cmd;
use crate::core::sources::{self, Probe};
use crate::core::timeline::{Event, Ticket};
use crate::core::timers::Timer;
use crate::proto::drain_body;
use crate::proto::http::{Failure, Response, Target};
use crate::util::text::escape;

/// Polls of one kind (drain rounds; task protection) in flight at once;
/// the rest wait for a slot in the same round.
pub const MAX_POLLS: usize = 8;

pub(super) fn get(url: &str) -> Target {
    Target {
        method: "GET".into(),
        url: url.to_string(),
    }
}

impl Machine<'_> {
    /// The stop hooks fire together: every `--stop-url` request and every
    /// `--stop-exec` command; the timeline hears once all are over.
    pub(super) fn fire_hooks(&mut self, now: Instant, ticket: Ticket, timeout: Duration) {
        let urls = self.config.stop_hooks.clone();
        let execs = self.config.stop_execs.clone();
        self.board.begin_hooks(ticket, urls.len() + execs.len());
        for target in urls {
            info!("stop hook: {} {}", target.method, target.url);
            self.send(target, None, timeout, Purpose::Hook(ticket));
        }
        for cmd in execs {
            info!("stop hook: running {}", cmd.text);
            self.start_run(now, cmd, Purpose::Hook(ticket), None);
        }
    }

    pub(super) fn hook_done(&mut self, now: Instant, ticket: Ticket) {
        if self.board.hook_done(ticket) {
            self.feed(now, Event::HookDone(ticket));
        }
    }

    /// One round over the drain sources not yet ready: each waits for a
    /// poll slot (`pump`); files are looked at at once.
    pub(super) fn start_round(&mut self, now: Instant, ticket: Ticket) {
        let ask = self.board.begin_round(ticket);
        if ask.is_empty() {
            let ready = self.board.all_ready();
            return self.raise(Event::Polled { ticket, ready });
        }
        for index in ask {
            let purpose = Purpose::Source(ticket, index);
            if let Probe::File(path) = &self.probes[index] {
                let path = path.clone();
                let token = self.token();
                self.requests.push((token, purpose));
                let since = self.timeline.stop().map_or(now, |s| s.since);
                self.push(Action::CheckFile { token, path, since });
            } else {
                self.queued.push(purpose);
            }
        }
        self.pump(now);
    }

    /// Polls in flight of the kind of `purpose` (drain rounds, or task
    /// protection): requests and command runs not yet answered, stale
    /// ones included, since their thread or process still exists.
    fn in_flight(&self, round: bool) -> usize {
        let counts = |p: &Purpose| match p {
            Purpose::Source(..) => round,
            Purpose::ProtectPoll(_) => !round,
            _ => false,
        };
        let requests = self.requests.iter().filter(|(_, p)| counts(p)).count();
        requests + self.runs.iter().filter(|r| counts(&r.purpose)).count()
    }

    /// Starts the queued polls that have a slot: at most `MAX_POLLS` of
    /// each kind at once, so a thousand slow sources cost eight threads,
    /// and neither kind waits behind the other.
    pub(super) fn pump(&mut self, now: Instant) {
        let mut waiting = std::mem::take(&mut self.queued);
        let (mut round, mut protect) = (self.in_flight(true), self.in_flight(false));
        waiting.retain(|purpose| {
            let slot = match purpose {
                Purpose::Source(..) => &mut round,
                _ => &mut protect,
            };
            if *slot >= MAX_POLLS {
                return true;
            }
            *slot += 1;
            self.start_poll(now, *purpose);
            false
        });
        waiting.append(&mut self.queued);
        self.queued = waiting;
    }

    fn start_poll(&mut self, now: Instant, purpose: Purpose) {
        let deadline = self.timeline.stop().and_then(|s| s.deadline);
        // A round's poll: the interval (a command: --drain-timeout), never
        // past the deadline; protection's: its interval.
        let drain_timeout = self.config.drain_timeout;
        let (index, interval, run_limit) = match purpose {
            Purpose::Source(_, index) => {
                (index, self.config.timeline.drain_interval, drain_timeout)
            }
            Purpose::ProtectPoll(index) => match &self.protection {
                Some(p) => (index, p.interval, drain_timeout.min(p.interval)),
                None => return,
            },
            _ => return,
        };
        match self.probes[index].clone() {
            Probe::Url(url) => {
                let timeout = sources::run_timeout(interval, deadline, now);
                self.send(get(&url), None, timeout, purpose);
            }
            Probe::Exec(cmd) => {
                let limit = sources::run_timeout(run_limit, deadline, now);
                self.start_run(now, cmd, purpose, Some(now + limit));
            }
            Probe::File(_) => {}
        }
    }

    /// The round in flight is dropped (escalation, the child ended, the
    /// app's word): its queued polls with it.
    pub(super) fn abandon_round(&mut self) {
        self.board.abandon_round();
        self.queued.retain(|p| !matches!(p, Purpose::Source(..)));
    }

    /// A drain URL answered: its own progress is logged, and the answer
    /// counts for the round.
    pub(super) fn on_source_response(
        &mut self,
        now: Instant,
        ticket: Ticket,
        index: usize,
        result: &Result<Response, Failure>,
    ) {
        if !self.timeline.awaits(ticket) {
            return debug!("ignoring a late answer: the stop moved on without it");
        }
        let mut reading = drain_body::evaluate(result, &self.config.drain_field);
        if let Some(n) = self.read_count(result) {
            // Said once: a top-level count is among the body's numbers.
            let pointer = self.config.drain_count_field.as_deref().unwrap_or_default();
            if !reading
                .numbers
                .contains_key(pointer.trim_start_matches('/'))
            {
                reading.summary.push_str(&format!(", in flight {n}"));
            }
        }
        self.last_drain = Some(reading.summary.clone());
        let answer = match (result, reading.ready) {
            (_, true) => Answer::Ready,
            (Err(failure), false) => Answer::NoAnswer(failure.to_string()),
            (Ok(_), false) => Answer::NotReady(reading.summary),
        };
        self.on_answer(now, ticket, index, answer);
    }

    /// The app's in-flight count in a drain body (`--drain-count-field`),
    /// recorded for the report and the listener. A field that is missing or
    /// not a whole number is said once and nothing is recorded: no count is
    /// better than a wrong one.
    pub(super) fn read_count(&mut self, result: &Result<Response, Failure>) -> Option<u64> {
        let pointer = self.config.drain_count_field.as_deref()?;
        match drain_body::count(result, pointer)? {
            Ok(n) => {
                self.in_flight.last = Some(n);
                if self.timeline.stop().is_some() {
                    self.in_flight.at_stop.get_or_insert(n);
                    self.in_flight.max = Some(self.in_flight.max.map_or(n, |m| m.max(n)));
                }
                Some(n)
            }
            Err(why) => {
                self.in_flight.last = None;
                if !std::mem::replace(&mut self.count_unreadable, true) {
                    warn!("--drain-count-field {pointer}: {why} in the drain body; no in-flight count is reported (said once)");
                }
                None
            }
        }
    }

    /// A drain source answered: logged when its answer changes (so a
    /// source stuck on one failure is logged once), and the round closes
    /// when it was the last.
    pub(super) fn on_answer(&mut self, now: Instant, ticket: Ticket, index: usize, answer: Answer) {
        let text = match &answer {
            Answer::Ready => "ready".to_string(),
            Answer::NotReady(why) => format!("not ready ({why})"),
            Answer::NoAnswer(why) => format!("no answer ({why})"),
        };
        let Some((previous, over)) = self.board.answer(ticket, index, answer.clone()) else {
            return;
        };
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
        if previous.as_ref() != Some(&answer) {
            // Ready sticks, so it is said once per source and never folded.
            let said = match answer {
                Answer::Ready => Some(String::new()),
                _ => self.answers_said.get_mut(index).and_then(|f| f.allow(now)),
            };
            if let Some(note) = said {
                let source = &self.board.sources[index];
                let (kind, target) = (source.kind.name(), escape(&source.target, 200));
                match answer {
                    Answer::NoAnswer(_) if !failing_again => {
                        warn!("drain source {kind} {target}: {text}{note}")
                    }
                    _ => info!("drain source {kind} {target}: {text}{note}"),
                }
            }
        }
        if over {
            let ready = self.board.all_ready();
            self.feed(now, Event::Polled { ticket, ready });
        }
    }

    /// Starts a command in its own group, killed at `kill_at` if given.
    pub(super) fn start_run(
        &mut self,
        now: Instant,
        cmd: Cmd,
        purpose: Purpose,
        kill_at: Option<Instant>,
    ) {
        let token = self.token();
        self.runs.push(Run {
            token,
            purpose,
            started: now,
            timed_out: None,
        });
        self.timers.set(Timer::RunKill(token), kill_at);
        self.push(Action::StartRun { token, cmd });
    }

    /// A command ended (`Ok`) or could not start (`Err`): its status answers
    /// its hook, its round or its protection poll.
    pub(super) fn on_run_end(&mut self, now: Instant, token: Token, ended: Result<Ended, ()>) {
        let Some(at) = self.runs.iter().position(|r| r.token == token) else {
            return;
        };
        let run = self.runs.swap_remove(at);
        self.timers.set(Timer::RunKill(token), None);
        let answer = match ended {
            Ok(ended) => sources::run_answer(ended, run.timed_out),
            Err(()) => Answer::NoAnswer("cannot start".into()),
        };
        match run.purpose {
            Purpose::Hook(ticket) => {
                match ended {
                    Err(()) => {}
                    Ok(Ended::Exited(0)) => info!("stop hook command finished"),
                    Ok(other) => warn!("stop hook command ended: {other:?}"),
                }
                self.hook_done(now, ticket);
            }
            Purpose::Source(ticket, _) if !self.timeline.awaits(ticket) => {
                debug!("ignoring a late drain command: the stop moved on without it");
            }
            Purpose::Source(ticket, index) => self.on_answer(now, ticket, index, answer),
            Purpose::ProtectPoll(_) => self.on_protect_answer(now, answer),
            _ => {}
        }
    }

    /// SIGKILL to the groups of the matching commands; they stay in the
    /// table until reaped, so none is taken for an orphan.
    pub(super) fn kill_runs_where(&mut self, matches: impl Fn(&Purpose) -> bool, why: &str) {
        let tokens: Vec<Token> = self
            .runs
            .iter()
            .filter(|r| matches(&r.purpose))
            .map(|r| r.token)
            .collect();
        for token in tokens {
            debug!("killing command {token:?}: {why}");
            self.timers.set(Timer::RunKill(token), None);
            self.push(Action::KillRun(token));
        }
    }
}
