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

    /// One round over the drain sources not yet ready.
    pub(super) fn start_round(&mut self, now: Instant, ticket: Ticket, timeout: Duration) {
        let ask = self.board.begin_round(ticket);
        if ask.is_empty() {
            let ready = self.board.all_ready();
            return self.raise(Event::Polled { ticket, ready });
        }
        let stop = self.timeline.stop();
        let deadline = stop.and_then(|s| s.deadline);
        for index in ask {
            let purpose = Purpose::Source(ticket, index);
            match self.probes[index].clone() {
                Probe::Url(url) => self.send(get(&url), None, timeout, purpose),
                Probe::Exec(cmd) => {
                    let limit = sources::run_timeout(self.config.drain_timeout, deadline, now);
                    self.start_run(now, cmd, purpose, Some(now + limit));
                }
                Probe::File(path) => {
                    let token = self.token();
                    self.requests.push((token, purpose));
                    let since = stop.map_or(now, |s| s.since);
                    self.push(Action::CheckFile { token, path, since });
                }
            }
        }
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
        let reading = drain_body::evaluate(result, &self.config.drain_field);
        if let Some(progress) = self.url_progress.get_mut(index) {
            progress.observe(&reading);
        }
        self.progress.last_summary = Some(reading.summary.clone());
        let answer = match (result, reading.ready) {
            (_, true) => Answer::Ready,
            (Err(failure), false) => Answer::NoAnswer(failure.kind().to_string()),
            (Ok(_), false) => Answer::NotReady(reading.summary),
        };
        self.on_answer(now, ticket, index, answer);
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
        if previous.as_ref() != Some(&answer) {
            let source = &self.board.sources[index];
            let (kind, target) = (source.kind.name(), escape(&source.target, 200));
            match answer {
                Answer::NoAnswer(_) => warn!("drain source {kind} {target}: {text}"),
                _ => info!("drain source {kind} {target}: {text}"),
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
