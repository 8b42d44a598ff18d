//! The imperative shell around the stop timeline: one thread waits in
//! `sigtimedwait` for the signals it blocked, with the timeline's next timer
//! (and the ECS pollers') as its timeout; HTTP worker threads hand their
//! results over a channel and wake it with a thread-directed SIGCHLD. What
//! happened becomes a `timeline::Event`; the actions that come back are
//! performed here (kill, requests, logs). Nothing here may end the process
//! while the child runs: every failure is logged and survived, and a panic
//! of the loop itself falls back to a minimal forward-and-reap loop.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant, SystemTime};

use log::{debug, error, info, warn};

use crate::config::Config;
use crate::drain::{self, Progress};
use crate::ecs::{self, Protection, Watch};
use crate::exit::{NotifyReport, Outcome, RunSummary, SpawnFailure, Trigger};
use crate::http::{self, Failure, Response, Target};
use crate::notify;
use crate::reaper::{self, Ended};
use crate::signals::{signal_name, Handled, Inherited, Received};
use crate::sources::{self, Answer, Board, Cmd, Probe};
use crate::spawn;
use crate::timeline::{
    Action, Escalation, Event, Request, Settings, Ticket, Timeline, KILL_WATCHDOG,
};

/// What an HTTP request was for; its result comes back tagged with it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Purpose {
    /// A `--stop-url` request of the hooks fired under this ticket.
    HookUrl(Ticket),
    /// A drain-URL poll: source `usize` of the round with this ticket.
    Source(Ticket, usize),
    EcsTask,
    EcsContainer,
    /// A poll of drain source `usize` made for task protection, while running.
    ProtectPoll(usize),
    ProtectPut {
        enabled: bool,
        sent_at: Instant,
    },
}

/// A finished request, sent back by its worker thread.
#[derive(Debug)]
struct Message {
    purpose: Purpose,
    result: Result<Response, Failure>,
}

/// Wakes the loop from a worker thread: SIGCHLD sent to the loop's thread.
/// The loop already takes SIGCHLD (it only means "reap, and look at the
/// inbox"), it is never forwarded, and a pending one stays pending until the
/// loop takes it, so no wake-up is lost.
#[derive(Clone, Copy)]
struct Waker {
    pid: libc::pid_t,
    tid: libc::pid_t,
}

impl Waker {
    fn for_this_thread() -> Waker {
        // SAFETY: getpid/gettid have no preconditions.
        unsafe {
            Waker {
                pid: libc::getpid(),
                tid: libc::gettid(),
            }
        }
    }

    fn wake(&self) {
        // SAFETY: tgkill to our own loop thread, which blocks SIGCHLD.
        unsafe { libc::syscall(libc::SYS_tgkill, self.pid, self.tid, libc::SIGCHLD) };
    }
}

/// The timeline's settings from the configuration.
fn settings(config: &Config) -> Settings {
    Settings {
        stop_signals: config.stop_signals.clone(),
        grace: config.grace,
        pre_stop_delay: config.pre_stop_delay,
        hook: !config.stop_hooks.is_empty() || !config.stop_execs.is_empty(),
        hook_timeout: config.hook_timeout,
        drain: !probes(config).is_empty(),
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

/// What a running command is for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    /// A `--stop-exec` of the hooks fired under this ticket.
    Hook(Ticket),
    /// A `--drain-exec`: source `usize` of the round with this ticket.
    Drain(Ticket, usize),
    /// A `--drain-exec` asked for task protection, while running.
    Protect(usize),
}

/// A command drainit started and has not reaped yet (its pid is also its
/// process group).
#[derive(Debug)]
struct Run {
    pid: i32,
    role: Role,
    started: Instant,
    /// When it is killed for running too long (hooks: the timeline decides).
    kill_at: Option<Instant>,
    /// Killed for running too long, after this long.
    timed_out: Option<Duration>,
}

/// The least time between two debug lines of a kind the app can repeat.
const LOG_EVERY: Duration = Duration::from_secs(1);

struct Supervisor<'a> {
    config: &'a Config,
    signals: Handled,
    waker: Waker,
    inbox: Receiver<Message>,
    outbox: Sender<Message>,
    pid: i32,
    timeline: Timeline,
    /// Set by the timeline's `Exit` action.
    outcome: Option<Outcome>,
    /// The timeline's actions of the current turn.
    actions: Vec<Action>,
    progress: Progress,
    /// Each drain URL's own progress (what it logged, its numbers), by
    /// source index: workers report different numbers, and one shared
    /// record would log a "change" every round.
    url_progress: Vec<Progress>,
    summary: RunSummary,
    /// The ECS metadata watch, when ECS is active.
    watch: Option<Watch>,
    /// Task scale-in protection, with `--ecs-protect`.
    protection: Option<Protection>,
    /// A signal drainit raised itself was already reported.
    own_signal_seen: bool,
    /// The drain sources, parallel to `board.sources`.
    probes: Vec<Probe>,
    board: Board,
    /// Commands running now: at most one per hook and per drain command.
    runs: Vec<Run>,
    /// The stop's start on the wall clock (drain files are compared to it).
    stop_wall: Option<SystemTime>,
    /// The protection poll in flight: answers so far, answers still due.
    protect_round: (Vec<Answer>, usize),
    /// The signal being handled, until it was forwarded or handled: a
    /// panic of the loop leaves it to the fallback.
    in_hand: Option<Received>,
    /// After a panic of the loop: the deadline the fallback still keeps,
    /// and whether it already sent SIGKILL.
    fallback_deadline: Option<Instant>,
    fallback_killed: bool,
    /// With `--notify`: what the reader thread hands over, and its address.
    notify: Option<(notify::Inbox, std::ffi::OsString)>,
    /// The readiness now being fed came from the app's notify word.
    ready_by_word: bool,
    /// From the start of the stop to the readiness word that drained it.
    stop_to_ready_word_ms: Option<u64>,
    /// When the last "extends the deadline" line was written.
    said_extend: Option<Instant>,
    /// An early readiness word was already reported (once is enough).
    said_notify_ignored: bool,
    /// The errors of failed forwards already logged (a few errno values).
    forward_failures: Vec<i32>,
    /// The stop signal was handed to `forward` (not just decided).
    stop_signal_sent: bool,
}

/// Starts the child and supervises it until the run is over.
pub fn run(
    config: &Config,
    signals: Handled,
    inherited: &'static Inherited,
) -> (Outcome, RunSummary) {
    let started = Instant::now();
    // The notify socket exists before the child, which finds it in
    // NOTIFY_SOCKET; a socket that cannot be bound ends drainit here.
    let socket = match &config.notify {
        None => None,
        Some(n) => match notify::bind(n.socket.as_deref()) {
            Ok(socket) => Some(socket),
            Err(e) => {
                let at = n.socket.as_deref().map(|p| p.display().to_string());
                error!(
                    "cannot bind the notify socket{}: {e}",
                    at.map(|p| format!(" at {p}")).unwrap_or_default()
                );
                return (
                    Outcome::SpawnFailed(SpawnFailure::Other),
                    RunSummary::default(),
                );
            }
        },
    };
    let outer = socket
        .as_ref()
        .and_then(|_| std::env::var_os("NOTIFY_SOCKET"))
        .filter(|v| !v.is_empty());
    if let Some(socket) = &socket {
        // Still one thread: no other reads the environment now.
        std::env::set_var("NOTIFY_SOCKET", &socket.address);
        debug!("notify socket: {}", socket.address.to_string_lossy());
    }
    let pid = match spawn::spawn(&config.program, &config.args, inherited) {
        Ok(pid) => pid,
        Err(e) => {
            log::error!("cannot run {:?}: {}", config.program, e.source);
            return (Outcome::SpawnFailed(e.failure), RunSummary::default());
        }
    };
    debug!("started {:?} as pid {pid}", config.program);
    let (outbox, inbox) = channel();
    let mut supervisor = Supervisor {
        config,
        signals,
        waker: Waker::for_this_thread(),
        inbox,
        outbox,
        pid,
        timeline: {
            let mut timeline = Timeline::new(settings(config));
            timeline.set_grace_max(config.grace_max);
            timeline
        },
        outcome: None,
        actions: Vec::with_capacity(8),
        progress: Progress::default(),
        url_progress: Vec::new(),
        summary: RunSummary {
            child_pid: Some(pid),
            ..RunSummary::default()
        },
        watch: None,
        protection: None,
        own_signal_seen: false,
        probes: probes(config),
        board: Board::default(),
        runs: Vec::new(),
        stop_wall: None,
        protect_round: (Vec::new(), 0),
        in_hand: None,
        fallback_deadline: None,
        fallback_killed: false,
        notify: None,
        ready_by_word: false,
        stop_to_ready_word_ms: None,
        said_extend: None,
        said_notify_ignored: false,
        forward_failures: Vec::new(),
        stop_signal_sent: false,
    };
    if let (Some(socket), Some(n)) = (socket, &config.notify) {
        let inbox = notify::Inbox::default();
        let address = socket.address.clone();
        let waker = supervisor.waker;
        let reader = notify::Reader {
            socket,
            inbox: inbox.clone(),
            access: n.access,
            child: pid,
            started,
            outer,
        };
        match notify::start(reader, move || waker.wake()) {
            Ok(()) => supervisor.notify = Some((inbox, address)),
            // The child runs already: said, and survived.
            Err(e) => error!("cannot start the notify reader: {e}; notify messages are not read"),
        }
    }
    for probe in &supervisor.probes {
        supervisor.board.add(probe.kind(), &probe.target());
        supervisor.url_progress.push(Progress::default());
    }
    // PID 1 must not die of its own bug: a panic in the loop (the release
    // profile unwinds) leaves the child to a loop that only forwards and
    // reaps.
    let looped = catch_unwind(AssertUnwindSafe(|| {
        supervisor.start_ecs(Instant::now());
        supervisor.run_loop()
    }));
    let outcome = match looped {
        Ok(outcome) => outcome,
        Err(_) => {
            error!(
                "the event loop failed; only forwarding signals and reaping until the child exits"
            );
            supervisor.fallback_loop()
        }
    };
    // No command outlives drainit, whatever ended the run.
    supervisor.kill_runs("drainit is exiting");
    supervisor.summary.notify = supervisor.notify_report();
    if let Some(path) = config.notify.as_ref().and_then(|n| n.socket.as_ref()) {
        let _ = std::fs::remove_file(path);
    }
    supervisor.summary.drain_polls = supervisor.board.rounds;
    supervisor.summary.sources = supervisor.board.report();
    supervisor.summary.last_drain = supervisor.progress.last_summary.take();
    supervisor.summary.ecs_task_arn = supervisor
        .watch
        .take()
        .and_then(|w| w.task)
        .map(|t| t.task_arn);
    (outcome, supervisor.summary)
}

impl Supervisor<'_> {
    fn run_loop(&mut self) -> Outcome {
        loop {
            if let Some(received) = self.wait() {
                self.on_received(received);
            }
            // Finished requests: their wake-up was a SIGCHLD, maybe this one.
            while let (None, Ok(message)) = (self.outcome, self.inbox.try_recv()) {
                self.on_message(message);
            }
            if self.outcome.is_none() {
                self.take_notify();
            }
            if self.outcome.is_none() {
                self.feed(Event::Tick);
                self.ecs_timers(Instant::now());
                self.run_timers(Instant::now());
            }
            if let Some(outcome) = self.outcome {
                return outcome;
            }
        }
    }

    /// The words of the notify reader that change the stop; its wake-up
    /// was a SIGCHLD, maybe this one. A flood leaves at most one of each.
    fn take_notify(&mut self) {
        let Some((inbox, _)) = &self.notify else {
            return;
        };
        let (drained, extend) = {
            let mut shared = notify::lock(inbox);
            (shared.drained_at.take(), shared.extend.take())
        };
        if let Some((at, by)) = extend {
            self.feed(Event::Extend { at, by });
        }
        if let Some(at) = drained {
            self.ready_by_word = true;
            self.feed(Event::NotifyReady { at });
            self.ready_by_word = false;
        }
    }

    /// The exit report's `notify` object.
    fn notify_report(&self) -> Option<NotifyReport> {
        let (inbox, address) = self.notify.as_ref()?;
        // What the app sent just before it ended still counts.
        notify::flush(inbox, address, Duration::from_millis(200));
        let shared = notify::lock(inbox);
        let deadline_ms = self
            .timeline
            .stop()
            .and_then(|s| Some(millis(s.deadline? - s.since)));
        Some(NotifyReport {
            ready_ms: shared.ready_after.map(millis),
            status: shared.status(),
            received: shared.received,
            refused: shared.refused,
            dropped: shared.dropped,
            deadline_ms,
            stop_to_ready_word_ms: self.stop_to_ready_word_ms,
        })
    }

    /// After a panic of the loop: forward what others send, reap, keep the
    /// deadline, and end with the child's status. One timer (the deadline),
    /// no requests, nothing that could fail the same way again.
    fn fallback_loop(&mut self) -> Outcome {
        if let Some(outcome) = self.outcome {
            return outcome;
        }
        self.catch_up_after_panic();
        // The fallback may fail too (a log line, a fault hook): each panic
        // restarts it, it never escapes while the child may still run.
        loop {
            match catch_unwind(AssertUnwindSafe(|| self.fallback_turns())) {
                Ok(outcome) => return outcome,
                Err(_) => continue,
            }
        }
    }

    /// What the failed turn left undone: the app still waiting for its stop
    /// signal (the stop began, the delay or the hook was running), and the
    /// signal from outside that was being handled.
    fn catch_up_after_panic(&mut self) {
        // Nobody reads a hook's or a drain command's result any more: end
        // them now (a hook first, so the app's signal does not wait on it).
        self.kill_runs("the event loop failed");
        let mut sent = None;
        if let Some(stop) = self.timeline.stop() {
            // The stop's deadline (extensions included) still holds.
            self.fallback_deadline = stop.deadline;
            if !self.stop_signal_sent {
                self.forward(stop.signal);
                sent = Some(stop.signal);
            }
        }
        if let Some(received) = self.in_hand.take() {
            if received.from_outside() && sent != Some(received.signo) {
                self.fallback_forward(received);
            }
        }
    }

    /// Forwards a signal in the fallback; a stop signal with no stop under
    /// way starts the deadline (`--grace`), as the timeline would have.
    fn fallback_forward(&mut self, received: Received) {
        if self.fallback_deadline.is_none() && self.config.stop_signals.contains(&received.signo) {
            self.fallback_deadline = self.config.grace.map(|g| Instant::now() + g);
            // The exit report says what stopped the run.
            self.summary
                .stop_trigger
                .get_or_insert(Trigger::Signal(received.signo));
        }
        self.forward(received.signo);
    }

    /// The fallback's deadline passed: SIGKILL to the child's group and to
    /// the child, once. None to go on waiting for the child; an outcome
    /// when, as PID 1, the kill failed (exiting ends the namespace).
    fn fallback_kill(&mut self) -> Option<Outcome> {
        // The kill first, the log line last: should logging panic, the
        // restarted fallback finds the kill done, not skipped.
        // SAFETY: kill has no memory effects; the child is not reaped yet
        // (this loop reaps, and checks the child's status first).
        let failed = unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL) != 0
        };
        self.fallback_killed = true;
        error!("deadline reached after the event loop failed; sent SIGKILL to the child's process group");
        (failed && std::process::id() == 1).then_some(Outcome::Deadline)
    }

    /// The fallback's turns: forward, reap, end with the child's status.
    fn fallback_turns(&mut self) -> Outcome {
        loop {
            if let Some(ended) = self.summary.child_status {
                error!("main child ended ({ended:?}) after the event loop failed; exiting");
                if self.fallback_killed {
                    return Outcome::Deadline;
                }
                return child_outcome(ended);
            }
            let reaped = reaper::reap_all();
            for (pid, ended) in reaped.ended {
                if pid == self.pid {
                    self.summary.child_status = Some(ended);
                } else if let Some(at) = self.runs.iter().position(|r| r.pid == pid) {
                    // A command drainit started is never an orphan.
                    self.runs.swap_remove(at);
                } else {
                    self.summary.orphans_reaped += 1;
                }
            }
            if self.summary.child_status.is_some() {
                continue;
            }
            if reaped.none_left {
                // The child is gone and its status was lost in the failed
                // turn: forwarding to its pid could reach a stranger.
                error!("the main child is gone and its status is lost; exiting");
                return Outcome::Signaled(libc::SIGKILL);
            }
            let deadline = self.fallback_deadline.filter(|_| !self.fallback_killed);
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                if let Some(outcome) = self.fallback_kill() {
                    return outcome;
                }
                continue;
            }
            let timeout = deadline.map(|d| d.saturating_duration_since(now));
            let Some(received) = self.signals.wait(timeout) else {
                continue;
            };
            if received.signo != libc::SIGCHLD {
                crate::fault::point("fallback");
                if received.from_outside() {
                    self.fallback_forward(received);
                }
            }
        }
    }

    /// The next moment the loop must wake without an event. None while no
    /// timer is armed: then drainit sleeps until a signal or a result
    /// arrives and makes no wake-ups at all.
    fn next_wakeup(&self) -> Option<Instant> {
        let mut ecs = None;
        if self.timeline.is_running() {
            let watch = self
                .watch
                .as_ref()
                .filter(|w| !w.in_flight)
                .and_then(|w| w.next_poll);
            let protect = self
                .protection
                .as_ref()
                .filter(|p| !p.poll_in_flight)
                .and_then(|p| p.next_poll);
            ecs = [watch, protect].into_iter().flatten().min();
        }
        let runs = self.runs.iter().filter_map(|r| r.kill_at).min();
        [ecs, self.timeline.next_timer(), runs]
            .into_iter()
            .flatten()
            .min()
    }

    /// Blocks until a signal arrives or the next timer is due; one signal
    /// per turn (the next turn takes the next), nothing allocated.
    fn wait(&mut self) -> Option<Received> {
        let timeout = self
            .next_wakeup()
            .map(|at| at.saturating_duration_since(Instant::now()));
        if timeout == Some(Duration::ZERO) {
            return None;
        }
        self.signals.wait(timeout)
    }

    fn on_received(&mut self, received: Received) {
        if received.signo == libc::SIGCHLD {
            return self.reap();
        }
        self.in_hand = Some(received);
        crate::fault::point("event_loop");
        if !received.from_outside() {
            // drainit's own SIGPIPE (a log reader that went away) and the
            // like: never the app's business. Said once: with a dead log
            // reader, each line would raise the next SIGPIPE, forever.
            if !self.own_signal_seen {
                self.own_signal_seen = true;
                debug!(
                    "not forwarding {}: drainit raised it itself (said once)",
                    signal_name(received.signo)
                );
            }
            return;
        }
        debug!(
            "received {} from pid {}",
            signal_name(received.signo),
            received.sender
        );
        self.feed(Event::Signal(received.signo));
        self.in_hand = None;
    }

    fn on_message(&mut self, Message { purpose, result }: Message) {
        match purpose {
            Purpose::HookUrl(ticket) | Purpose::Source(ticket, _)
                if !self.timeline.awaits(ticket) =>
            {
                debug!("ignoring a late answer: the stop moved on without it");
            }
            Purpose::HookUrl(ticket) => {
                match &result {
                    Ok(response) => info!("stop hook answered HTTP {}", response.status),
                    Err(failure) => warn!("stop hook failed: {failure}"),
                }
                self.hook_done(ticket);
            }
            Purpose::Source(ticket, index) => {
                let reading = drain::evaluate(&result, &self.config.drain_field);
                if let Some(progress) = self.url_progress.get_mut(index) {
                    progress.observe(&reading);
                }
                self.progress.last_summary = Some(reading.summary.clone());
                let answer = match (&result, reading.ready) {
                    (_, true) => Answer::Ready,
                    (Err(failure), false) => Answer::NoAnswer(failure.kind().to_string()),
                    (Ok(_), false) => Answer::NotReady(reading.summary),
                };
                self.on_answer(ticket, index, answer);
            }
            Purpose::EcsTask => self.on_ecs_task(result),
            Purpose::EcsContainer => {
                if let Some(watch) = &mut self.watch {
                    watch.on_container(result);
                }
            }
            Purpose::ProtectPoll(index) => self.on_protect_poll(index, result),
            Purpose::ProtectPut { enabled, sent_at } => {
                if let Some(protection) = &mut self.protection {
                    protection.on_put(enabled, result, sent_at);
                }
            }
        }
    }

    /// Feeds the timeline and performs what it asks, in order.
    fn feed(&mut self, event: Event) {
        let now = Instant::now();
        // One buffer, reused turn after turn; a nested feed (an action that
        // reports back, like a failed kill) finds it taken and uses its own.
        let mut actions = std::mem::take(&mut self.actions);
        self.timeline.handle_into(now, event, &mut actions);
        for action in actions.drain(..) {
            self.perform(now, action);
        }
        self.actions = actions;
    }

    fn perform(&mut self, now: Instant, action: Action) {
        match action {
            Action::StopBegan(trigger) => {
                self.summary.stop_trigger = Some(trigger);
                self.stop_wall = Some(SystemTime::now());
                if let Some((inbox, _)) = &self.notify {
                    notify::lock(inbox).stopping = true;
                }
                // Protection is over (its polls stop with the stop): a
                // command still asked for it ends now, so the drain round
                // never runs the same command beside it.
                self.kill_runs_where(|r| matches!(r.role, Role::Protect(_)), "the stop began");
                self.protect_round = (Vec::new(), 0);
                if let Some(protection) = &mut self.protection {
                    protection.poll_in_flight = false;
                }
                let by = match trigger {
                    Trigger::Signal(signo) => signal_name(signo),
                    Trigger::Ecs => "ECS".into(),
                };
                match self.config.grace {
                    Some(grace) => {
                        info!("stop begins ({by}); deadline in {} ms", millis(grace))
                    }
                    None => info!("stop begins ({by}); no deadline"),
                }
            }
            Action::Forward(signo) => self.forward(signo),
            Action::Held(signo) => info!(
                "holding {}: the app gets its stop signal after the pre-stop delay and the hook",
                signal_name(signo)
            ),
            Action::Absorbed(signo) => info!(
                "absorbing {}: the stop already began from ECS",
                signal_name(signo)
            ),
            Action::Send {
                ticket,
                request,
                timeout,
            } => match request {
                Request::Hook => self.fire_hooks(now, ticket, timeout),
                Request::Poll => self.start_round(now, ticket, timeout),
            },
            Action::HookAbandoned => {
                warn!("stop hook did not answer in time; sending the stop signal");
                self.board.abandon_hooks();
                let hooks = |r: &Run| matches!(r.role, Role::Hook(_));
                self.kill_runs_where(hooks, "the hook timeout ran out");
            }
            Action::Ready { left } => {
                if let Some(stop) = self.timeline.stop() {
                    self.summary.stop_to_ready_ms = Some(millis(now - stop.since));
                }
                if self.ready_by_word {
                    self.stop_to_ready_word_ms = self.summary.stop_to_ready_ms;
                    // The word is authoritative: the round in flight is
                    // dropped (the timeline dropped its ticket), and a drain
                    // command still running has nothing left to answer.
                    self.board.abandon_round();
                    let drains = |r: &Run| matches!(r.role, Role::Drain(..));
                    self.kill_runs_where(drains, "the app said it has drained");
                    return info!(
                        "app says it has drained (X_DRAINIT_READY_FOR_TERMINATION=1); it has {} ms to exit by itself",
                        millis(left)
                    );
                }
                info!(
                    "app reports ready ({}); it has {} ms to exit by itself",
                    self.progress
                        .last_summary
                        .as_deref()
                        .unwrap_or("every drain source was ready"),
                    millis(left)
                );
            }
            Action::Kill(reason) => {
                self.board.abandon_round();
                self.kill_runs("drainit escalates");
                self.escalate(reason)
            }
            Action::TerminateOthers { wait } => {
                if self.terminate_remaining() {
                    info!(
                        "waiting up to {} ms for the remaining processes",
                        millis(wait)
                    );
                } else {
                    self.feed(Event::OthersGone);
                }
            }
            Action::Exit(outcome) => self.outcome = Some(outcome),
            Action::KillStuck => self.kill_stuck(),
            Action::Extended { deadline, first } => {
                let since = self.timeline.stop().map_or(now, |s| s.since);
                let at = millis(deadline.saturating_duration_since(since));
                if first {
                    info!("app extends the deadline (EXTEND_TIMEOUT_USEC): now {at} ms after the stop began");
                } else if self.said_extend.map_or(true, |t| now >= t + LOG_EVERY) {
                    // A flood of extensions moves the deadline every turn:
                    // at most one line a second says so.
                    self.said_extend = Some(now);
                    debug!("app extends the deadline: now {at} ms after the stop began");
                }
            }
            Action::NotifyIgnored => {
                if !std::mem::replace(&mut self.said_notify_ignored, true) {
                    debug!(
                        "X_DRAINIT_READY_FOR_TERMINATION ignored: it counts only after the stop signal was forwarded"
                    )
                }
            }
        }
    }

    /// Arms the ECS pollers. The metadata watch asks at once: its first
    /// answer is logged as the task's identity and already counts as a poll.
    fn start_ecs(&mut self, now: Instant) {
        let Some(ecs) = &self.config.ecs else {
            return;
        };
        if let Some(uri) = &ecs.metadata_uri {
            let watch = Watch::new(uri, ecs.interval);
            self.send_request(
                get(&watch.container_url),
                None,
                ecs.interval,
                Purpose::EcsContainer,
            );
            self.watch = Some(watch);
            self.poll_ecs_task(now);
        }
        if let Some(p) = &ecs.protect {
            let mut protection = Protection::new(&p.agent_uri, p.interval, p.minutes);
            protection.next_poll = Some(now);
            self.protection = Some(protection);
        }
    }

    /// The ECS pollers that are due; they work only while no stop began.
    fn ecs_timers(&mut self, now: Instant) {
        if !self.timeline.is_running() {
            return;
        }
        let due = |next: Option<Instant>| next.is_some_and(|at| now >= at);
        if self
            .watch
            .as_ref()
            .is_some_and(|w| !w.in_flight && due(w.next_poll))
        {
            self.poll_ecs_task(now);
        }
        if self
            .protection
            .as_ref()
            .is_some_and(|p| !p.poll_in_flight && due(p.next_poll))
        {
            self.poll_for_protection(now);
        }
    }

    fn poll_ecs_task(&mut self, now: Instant) {
        let Some(watch) = &mut self.watch else {
            return;
        };
        watch.in_flight = true;
        watch.next_poll = Some(now + watch.interval);
        let (target, timeout) = (get(&watch.task_url), watch.interval);
        self.send_request(target, None, timeout, Purpose::EcsTask);
    }

    fn on_ecs_task(&mut self, result: Result<Response, Failure>) {
        let Some(watch) = &mut self.watch else {
            return;
        };
        if watch.on_task(result) && self.timeline.is_running() {
            info!("ECS says this task is stopping (DesiredStatus STOPPED): draining before the platform's signal");
            self.feed(Event::EcsStop);
        }
    }

    /// Task protection asks every URL and command source (files never
    /// drive protection) once per `--protect-interval`.
    fn poll_for_protection(&mut self, now: Instant) {
        let Some(protection) = &mut self.protection else {
            return;
        };
        protection.poll_in_flight = true;
        protection.next_poll = Some(now + protection.interval);
        let interval = protection.interval;
        let asked: Vec<(usize, Probe)> = self
            .probes
            .iter()
            .cloned()
            .enumerate()
            .filter(|(_, p)| !matches!(p, Probe::File(_)))
            .collect();
        self.protect_round = (Vec::new(), asked.len());
        for (index, probe) in asked {
            match probe {
                Probe::Url(url) => {
                    self.send_request(get(&url), None, interval, Purpose::ProtectPoll(index))
                }
                Probe::Exec(cmd) => {
                    let kill_at = now + self.config.drain_timeout.min(interval);
                    if !self.start_run(now, &cmd, Role::Protect(index), Some(kill_at)) {
                        self.on_protect_answer(Answer::NoAnswer("cannot start".into()));
                    }
                }
                Probe::File(_) => {}
            }
        }
    }

    fn on_protect_poll(&mut self, index: usize, result: Result<Response, Failure>) {
        let Some(protection) = &mut self.protection else {
            return;
        };
        let answer = match &result {
            Err(failure) => {
                let target = escape_short(&self.board.sources[index].target);
                protection.complain(
                    &format!("drain_{}_{index}", failure.kind()),
                    &format!("drain endpoint {target}: {failure}"),
                );
                Answer::NoAnswer(failure.kind().to_string())
            }
            Ok(_) if drain::evaluate(&result, &self.config.drain_field).ready => Answer::Ready,
            Ok(_) => Answer::NotReady("busy".into()),
        };
        self.on_protect_answer(answer);
    }

    /// One source answered the protection poll; when all have, protection
    /// follows: busy while any source is busy, idle when all are idle; no
    /// answer is neither (an unrenewed protection simply expires).
    fn on_protect_answer(&mut self, answer: Answer) {
        let (answers, due) = &mut self.protect_round;
        if *due == 0 {
            return; // no protection poll in flight: nothing to answer
        }
        answers.push(answer);
        *due = due.saturating_sub(1);
        if *due > 0 {
            return;
        }
        let busy = sources::protect_busy(answers);
        let Some(protection) = &mut self.protection else {
            return;
        };
        protection.poll_in_flight = false;
        if !self.timeline.is_running() {
            return;
        }
        let Some(busy) = busy else {
            return;
        };
        let now = Instant::now();
        if let Some(enabled) = protection.wanted(busy, now) {
            protection.put_in_flight = true;
            let body = ecs::protection_body(enabled, protection.minutes)
                .to_string()
                .into_bytes();
            let target = Target {
                method: "PUT".into(),
                url: protection.state_url.clone(),
            };
            let timeout = protection.interval;
            self.send_request(
                target,
                Some(body),
                timeout,
                Purpose::ProtectPut {
                    enabled,
                    sent_at: now,
                },
            );
        }
    }

    /// Runs a request on a worker thread; its result comes back as an event.
    fn send_request(
        &self,
        target: Target,
        body: Option<Vec<u8>>,
        timeout: Duration,
        purpose: Purpose,
    ) {
        let outbox = self.outbox.clone();
        let waker = self.waker;
        let spawned = crate::spawn_thread(
            http::REQUEST_THREAD,
            256 * 1024,
            Box::new(move || {
                http::run_and_report(&target, body.as_deref(), timeout, |result| {
                    let _ = outbox.send(Message { purpose, result });
                    waker.wake();
                })
            }),
        );
        if let Err(e) = spawned {
            // Reported like any failed request, so every in-flight flag clears.
            let result = Err(Failure::new(
                http::Kind::Internal,
                &format!("cannot start a request thread: {e}"),
            ));
            let _ = self.outbox.send(Message { purpose, result });
            self.waker.wake();
        }
    }

    /// SIGKILL to the child's process group, and to the child itself in
    /// case it left the group. If neither can be sent (EPERM: a setuid
    /// child, drainit not root), that is said loudly and the timeline
    /// decides: never a silent hang.
    fn escalate(&mut self, reason: Escalation) {
        match reason {
            Escalation::Ready => {
                info!("ready grace over; sending SIGKILL to the child's process group")
            }
            Escalation::Deadline => {
                warn!("deadline reached; sending SIGKILL to the child's process group")
            }
        }
        // SAFETY: kill has no memory effects; the child is not reaped yet
        // (the reaper runs on this thread and ends the phase first).
        if unsafe { libc::kill(-self.pid, libc::SIGKILL) } != 0 {
            // Only the rest of the group: the child itself decides below.
            debug!(
                "SIGKILL to process group {}: {}",
                self.pid,
                io::Error::last_os_error()
            );
        }
        // A group kill succeeds when any member was signalled, so the child
        // (not reaped yet, its pid is ours) is judged on its own kill.
        // SAFETY: as above.
        if unsafe { libc::kill(self.pid, libc::SIGKILL) } != 0 {
            let pid1 = std::process::id() == 1;
            error!(
                "cannot kill the child (pid {}): {}; {}",
                self.pid,
                io::Error::last_os_error(),
                if pid1 {
                    "exiting now, which ends the namespace"
                } else {
                    "waiting for it to exit"
                }
            );
            self.feed(Event::KillFailed { pid1 });
        }
    }

    /// The child outlived its SIGKILL by `KILL_WATCHDOG`: said at error
    /// level, then handled as a kill that could not be sent.
    fn kill_stuck(&mut self) {
        let pid1 = std::process::id() == 1;
        error!(
            "the child (pid {}) is still not gone {} s after SIGKILL (stuck in the kernel?); {}",
            self.pid,
            KILL_WATCHDOG.as_secs(),
            if pid1 {
                "exiting now, which ends the namespace"
            } else {
                "waiting for it to exit"
            }
        );
        self.feed(Event::KillFailed { pid1 });
    }

    fn reap(&mut self) {
        let reaped = reaper::reap_all();
        for (pid, ended) in reaped.ended {
            if pid == self.pid && self.timeline.child_alive() {
                // Recorded before anything that could fail: the fallback
                // ends with it.
                self.summary.child_status = Some(ended);
                self.on_child_exit(ended);
            } else if let Some(at) = self.runs.iter().position(|r| r.pid == pid) {
                let run = self.runs.swap_remove(at);
                self.on_run_end(run, ended);
            } else {
                self.summary.orphans_reaped += 1;
                if self.config.warn_on_reap {
                    warn!("Reaped zombie process with pid={pid}");
                } else {
                    debug!("Reaped zombie process with pid={pid}");
                }
            }
        }
        if reaped.none_left && !self.timeline.child_alive() && self.outcome.is_none() {
            info!("every remaining process has exited");
            self.feed(Event::OthersGone);
        }
    }

    fn on_child_exit(&mut self, ended: Ended) {
        match ended {
            Ended::Exited(code) => info!("main child exited with status {code}"),
            Ended::Signaled(signo) => info!("main child was killed by {}", signal_name(signo)),
        }
        self.summary.child_status = Some(ended);
        // Nothing waits for a hook or a drain command any more.
        self.board.abandon_round();
        self.board.abandon_hooks();
        self.kill_runs("the main child ended");
        if let Some(stop) = self.timeline.stop() {
            self.summary.stop_to_exit_ms = Some(millis(Instant::now() - stop.since));
        }
        self.feed(Event::ChildExited(ended));
    }

    /// The stop hooks fire together: every `--stop-url` request and every
    /// `--stop-exec` command; the timeline hears once all are over.
    fn fire_hooks(&mut self, now: Instant, ticket: Ticket, timeout: Duration) {
        let urls = self.config.stop_hooks.clone();
        let execs = self.config.stop_execs.clone();
        self.board.begin_hooks(ticket, urls.len() + execs.len());
        for target in urls {
            info!("stop hook: {} {}", target.method, target.url);
            self.send_request(target, None, timeout, Purpose::HookUrl(ticket));
        }
        for cmd in &execs {
            info!("stop hook: running {}", cmd.text);
            if !self.start_run(now, cmd, Role::Hook(ticket), None) {
                self.hook_done(ticket);
            }
        }
    }

    fn hook_done(&mut self, ticket: Ticket) {
        if self.board.hook_done(ticket) {
            self.feed(Event::HookDone(ticket));
        }
    }

    /// One round over the drain sources not yet ready: files are looked at
    /// now, URLs and commands answer later. The timeline hears once every
    /// source asked has answered.
    fn start_round(&mut self, now: Instant, ticket: Ticket, timeout: Duration) {
        let ask = self.board.begin_round(ticket);
        if ask.is_empty() {
            let ready = self.board.all_ready();
            return self.feed(Event::Polled { ticket, ready });
        }
        let deadline = self.timeline.stop().and_then(|s| s.deadline);
        for index in ask {
            match self.probes[index].clone() {
                Probe::Url(url) => {
                    self.send_request(get(&url), None, timeout, Purpose::Source(ticket, index))
                }
                Probe::Exec(cmd) => {
                    let limit = sources::run_timeout(self.config.drain_timeout, deadline, now);
                    let role = Role::Drain(ticket, index);
                    if !self.start_run(now, &cmd, role, Some(now + limit)) {
                        let answer = Answer::NoAnswer("cannot start".into());
                        self.on_answer(ticket, index, answer);
                    }
                }
                Probe::File(path) => {
                    let began = self.stop_wall.unwrap_or_else(SystemTime::now);
                    self.on_answer(ticket, index, sources::check_file(&path, began));
                }
            }
        }
    }

    /// A drain source answered: logged when its answer changes (so a
    /// source stuck on one failure is logged once), and the round closes
    /// when it was the last.
    fn on_answer(&mut self, ticket: Ticket, index: usize, answer: Answer) {
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
            let (kind, target) = (source.kind.name(), escape_short(&source.target));
            match answer {
                Answer::NoAnswer(_) => warn!("drain source {kind} {target}: {text}"),
                _ => info!("drain source {kind} {target}: {text}"),
            }
        }
        if over {
            let ready = self.board.all_ready();
            self.feed(Event::Polled { ticket, ready });
        }
    }

    /// Starts a command in its own group; false (logged) when it cannot.
    fn start_run(&mut self, now: Instant, cmd: &Cmd, role: Role, kill_at: Option<Instant>) -> bool {
        crate::fault::point("start_run");
        match sources::start(cmd) {
            Ok(pid) => {
                debug!("started {} as pid {pid}", cmd.text);
                self.runs.push(Run {
                    pid,
                    role,
                    started: now,
                    kill_at,
                    timed_out: None,
                });
                true
            }
            Err(e) => {
                warn!("cannot run {}: {e}", cmd.text);
                false
            }
        }
    }

    /// Commands that ran past their time are killed with their group; the
    /// reaper then reports them as not answered.
    fn run_timers(&mut self, now: Instant) {
        for run in &mut self.runs {
            if let Some(at) = run.kill_at.filter(|at| now >= *at) {
                run.kill_at = None;
                // The time it was given, not when the loop woke: the same
                // answer each time, so a source stuck hanging is logged once.
                run.timed_out = Some(at - run.started);
                sources::kill_group(run.pid);
            }
        }
    }

    /// A command ended: whatever it left in its group goes with it, and its
    /// status answers its hook or its round.
    fn on_run_end(&mut self, run: Run, ended: Ended) {
        sources::kill_group(run.pid);
        match run.role {
            Role::Hook(ticket) => {
                match (run.timed_out, ended) {
                    (_, Ended::Exited(0)) => info!("stop hook command finished"),
                    (_, other) => warn!("stop hook command ended: {other:?}"),
                }
                self.hook_done(ticket);
            }
            Role::Drain(ticket, _) if !self.timeline.awaits(ticket) => {
                debug!("ignoring a late drain command: the stop moved on without it");
            }
            Role::Drain(ticket, index) => {
                let answer = sources::run_answer(ended, run.timed_out);
                self.on_answer(ticket, index, answer);
            }
            Role::Protect(_) => self.on_protect_answer(sources::run_answer(ended, run.timed_out)),
        }
    }

    fn kill_runs(&mut self, why: &str) {
        self.kill_runs_where(|_| true, why);
    }

    /// SIGKILL to the groups of the matching commands; they stay in the
    /// table until reaped, so none is taken for an orphan.
    fn kill_runs_where(&mut self, matches: impl Fn(&Run) -> bool, why: &str) {
        for run in self.runs.iter_mut().filter(|r| matches(r)) {
            debug!("killing command pid {}: {why}", run.pid);
            run.kill_at = None;
            sources::kill_group(run.pid);
        }
    }

    /// SIGTERM to every process left behind; false when there is none.
    fn terminate_remaining(&self) -> bool {
        if std::process::id() == 1 {
            // As PID 1, kill(-1) reaches every process in the namespace
            // (but not us), descendants of orphans included; ESRCH says
            // there is none. No /proc file needed.
            // SAFETY: kill has no memory effects.
            return unsafe { libc::kill(-1, libc::SIGTERM) } == 0;
        }
        // Not PID 1, kill(-1) would reach the whole host: signal our own
        // children only. They are not reaped yet, so their PIDs are ours.
        let children = own_children();
        for &pid in &children {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        !children.is_empty()
    }

    /// Forwards a received signal (after `-r`) to the child or its group.
    fn forward(&mut self, signo: i32) {
        if self.in_hand.is_some_and(|r| r.signo == signo) {
            self.in_hand = None;
        }
        // What the fallback goes by: the stop signal really went out (the
        // timeline marks it signalled before this action runs).
        if self.timeline.stop().is_some_and(|s| s.signal == signo) {
            self.stop_signal_sent = true;
        }
        if !self.timeline.child_alive() {
            return;
        }
        let Some(sent) = self.config.rewritten(signo) else {
            debug!("dropping {} as --rewrite asks", signal_name(signo));
            return;
        };
        let pid = self.pid;
        let target = if self.config.kill_process_group {
            -pid
        } else {
            pid
        };
        // SAFETY: kill has no memory effects; the PID has not been reaped
        // (the reaper runs on this same thread and updates the phase).
        if unsafe { libc::kill(target, sent) } != 0 {
            // tini exits on EPERM here, throwing away the platform's grace
            // period; a failed forward is only worth a warning, once per
            // kind of failure: a storm of signals must not become a storm
            // of log lines.
            let error = io::Error::last_os_error();
            let errno = error.raw_os_error().unwrap_or(0);
            if !self.forward_failures.contains(&errno) {
                self.forward_failures.push(errno);
                warn!(
                    "forwarding {} to {} {}: {error} (said once for this error)",
                    signal_name(sent),
                    if target < 0 { "process group" } else { "pid" },
                    pid,
                );
            }
        }
    }
}

/// The outcome of a child that ended with no escalation involved.
fn child_outcome(ended: Ended) -> Outcome {
    match ended {
        Ended::Exited(code) => Outcome::Exited(code),
        Ended::Signaled(signo) => Outcome::Signaled(signo),
    }
}

fn get(url: &str) -> Target {
    Target {
        method: "GET".into(),
        url: url.to_string(),
    }
}

/// A source's name for the log: escaped and cut short.
fn escape_short(text: &str) -> String {
    crate::logging::escape(text, 200)
}

/// Whole milliseconds as u64: every duration drainit logs or reports goes
/// through here, so the binary carries no u128 formatting.
pub fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// drainit's live children, from /proc (orphans re-parented to it included):
/// the per-thread `children` files, or, where the kernel has none
/// (no CONFIG_PROC_CHILDREN), every process's parent in `/proc/PID/stat`.
fn own_children() -> Vec<i32> {
    let mut out = Vec::new();
    let mut found_file = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                found_file = true;
                out.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
    }
    if !found_file {
        let me = std::process::id() as i32;
        // Not even drainit's own entry: no procfs there (a sandbox).
        if std::fs::metadata("/proc/self/stat").is_err() {
            // Called once per run (when the child ends): one warning.
            warn!("--orphan-grace: no /proc here; cannot find the remaining processes to signal");
        }
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<i32>().ok())
                else {
                    continue;
                };
                let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                if parent_in_stat(&stat) == Some(me) {
                    out.push(pid);
                }
            }
        }
    }
    out
}

/// The parent PID from a `/proc/PID/stat` line; the command name in
/// parentheses may itself contain spaces and parentheses.
fn parent_in_stat(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_from_stat_lines() {
        assert_eq!(parent_in_stat("42 (sleep) S 7 42 1 0"), Some(7));
        assert_eq!(parent_in_stat("42 (a) b) (c) R 9 42"), Some(9));
        assert_eq!(parent_in_stat("garbage"), None);
        assert_eq!(parent_in_stat(""), None);
    }
}
