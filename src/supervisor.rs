//! The event loop and the stop timeline. One thread waits in `sigtimedwait`
//! for the signals it blocked, with the next timer (pre-stop delay, poll,
//! ready grace, deadline) as its timeout; HTTP worker threads hand their
//! results over a channel and wake it with a thread-directed SIGCHLD. Signals,
//! reaped children, poll results and expired timers are all events here, and
//! the phase enum says what each one means. Nothing here may end the process
//! while the child runs: every failure is logged and survived.

use std::io;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::config::Config;
use crate::drain::{self, Progress};
use crate::ecs::{self, Protection, Watch};
use crate::exit::{Outcome, RunSummary, Trigger};
use crate::http::{self, Failure, Response, Target};
use crate::reaper::{self, Ended};
use crate::signals::{signal_name, Handled, Inherited};
use crate::spawn;

/// Why drainit sent SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escalation {
    /// The app reported ready and `--ready-grace` ran out.
    Ready,
    /// `--grace` ran out.
    Deadline,
}

/// Where the run is. Each variant carries the moment it is waiting for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// The child runs; signals are forwarded as they come.
    Running,
    /// A stop began; the hooks and the stop signal wait for `--pre-stop-delay`.
    PreStop { fire_at: Instant },
    /// The `--stop-url` request is in flight; the stop signal follows its
    /// answer, or `give_up_at` if it never answers.
    Hook { give_up_at: Instant },
    /// The stop signal was forwarded; `--drain-url` is polled (next at
    /// `next_poll`) until the app is ready, the child exits or the deadline.
    Draining { next_poll: Option<Instant> },
    /// The app reported ready; the child may exit by itself until `kill_at`.
    Ready { kill_at: Instant },
    /// drainit sent SIGKILL and waits for the reaper to see the child go.
    Killed { reason: Escalation },
    /// The main child is gone; the remaining processes got SIGTERM and have
    /// until `until` to exit.
    OrphanGrace { until: Instant, outcome: Outcome },
    /// Nothing left to wait for.
    Done { outcome: Outcome },
}

/// The one stop of a run: never restarted once begun.
#[derive(Debug, Clone, Copy)]
struct Stop {
    trigger: Trigger,
    since: Instant,
    deadline: Option<Instant>,
}

/// What an HTTP request was for; its result comes back tagged with it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Purpose {
    DrainPoll,
    StopHook,
    EcsTask,
    EcsContainer,
    /// A drain-URL poll made for task protection, while running.
    ProtectPoll,
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

/// Something the loop reacts to.
#[derive(Debug)]
enum Event {
    Signal { signo: i32, sender: i32 },
    Http(Message),
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

struct Supervisor<'a> {
    config: &'a Config,
    signals: Handled,
    waker: Waker,
    inbox: Receiver<Message>,
    outbox: Sender<Message>,
    pid: i32,
    phase: Phase,
    stop: Option<Stop>,
    drain_in_flight: bool,
    progress: Progress,
    summary: RunSummary,
    /// The ECS metadata watch, when ECS is active.
    watch: Option<Watch>,
    /// Task scale-in protection, with `--ecs-protect`.
    protection: Option<Protection>,
    /// After an ECS-triggered stop, the platform's own stop signal follows;
    /// it is absorbed once so the app does not see the stop twice.
    absorb_platform_stop: bool,
}

/// Starts the child and supervises it until the run is over.
pub fn run(
    config: &Config,
    signals: Handled,
    inherited: &'static Inherited,
) -> (Outcome, RunSummary) {
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
        phase: Phase::Running,
        stop: None,
        drain_in_flight: false,
        progress: Progress::default(),
        summary: RunSummary {
            child_pid: Some(pid),
            ..RunSummary::default()
        },
        watch: None,
        protection: None,
        absorb_platform_stop: false,
    };
    supervisor.start_ecs(Instant::now());
    let outcome = supervisor.run_loop();
    supervisor.summary.drain_polls = supervisor.progress.polls;
    supervisor.summary.last_drain = supervisor.progress.last_summary.take();
    supervisor.summary.ecs_task_arn = supervisor.watch.and_then(|w| w.task).map(|t| t.task_arn);
    (outcome, supervisor.summary)
}

impl Supervisor<'_> {
    fn run_loop(&mut self) -> Outcome {
        loop {
            if let Some(event) = self.wait() {
                self.handle(event);
            }
            // Finished requests: their wake-up was a SIGCHLD, maybe this one.
            while let (None, Ok(message)) = (self.done(), self.inbox.try_recv()) {
                self.handle(Event::Http(message));
            }
            if self.done().is_none() {
                self.on_time(Instant::now());
            }
            if let Some(outcome) = self.done() {
                return outcome;
            }
        }
    }

    fn done(&self) -> Option<Outcome> {
        match self.phase {
            Phase::Done { outcome } => Some(outcome),
            _ => None,
        }
    }

    /// The next moment the loop must wake without an event. None while no
    /// timer is armed: then drainit sleeps until a signal or a result
    /// arrives and makes no wake-ups at all.
    fn next_wakeup(&self) -> Option<Instant> {
        let phase_timer = match self.phase {
            Phase::PreStop { fire_at } => Some(fire_at),
            Phase::Hook { give_up_at } => Some(give_up_at),
            Phase::Draining { next_poll } if !self.drain_in_flight => next_poll,
            Phase::Ready { kill_at } => Some(kill_at),
            Phase::OrphanGrace { until, .. } => Some(until),
            Phase::Running => {
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
                [watch, protect].into_iter().flatten().min()
            }
            _ => None,
        };
        let deadline = if self.deadline_armed() {
            self.stop.and_then(|s| s.deadline)
        } else {
            None
        };
        [phase_timer, deadline].into_iter().flatten().min()
    }

    /// The deadline matters until drainit has escalated or the child is gone.
    fn deadline_armed(&self) -> bool {
        matches!(
            self.phase,
            Phase::PreStop { .. }
                | Phase::Hook { .. }
                | Phase::Draining { .. }
                | Phase::Ready { .. }
        )
    }

    /// Blocks until a signal arrives or the next timer is due; one signal
    /// per turn (the next turn takes the next), nothing allocated.
    fn wait(&mut self) -> Option<Event> {
        let timeout = self
            .next_wakeup()
            .map(|at| at.saturating_duration_since(Instant::now()));
        if timeout == Some(Duration::ZERO) {
            return None;
        }
        let (signo, sender) = self.signals.wait(timeout)?;
        Some(Event::Signal { signo, sender })
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Signal { signo, .. } if signo == libc::SIGCHLD => self.reap(),
            Event::Signal { signo, sender } => {
                debug!("received {} from pid {sender}", signal_name(signo));
                self.on_signal(signo);
            }
            Event::Http(Message { purpose, result }) => match purpose {
                Purpose::DrainPoll => self.on_drain_poll(result),
                Purpose::StopHook => self.on_stop_hook(result),
                Purpose::EcsTask => self.on_ecs_task(result),
                Purpose::EcsContainer => {
                    if let Some(watch) = &mut self.watch {
                        watch.on_container(result);
                    }
                }
                Purpose::ProtectPoll => self.on_protect_poll(result),
                Purpose::ProtectPut { enabled, sent_at } => {
                    if let Some(protection) = &mut self.protection {
                        protection.on_put(enabled, result, sent_at);
                    }
                }
            },
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
        if watch.on_task(result) && self.phase == Phase::Running {
            info!("ECS says this task is stopping (DesiredStatus STOPPED): draining before the platform's signal");
            self.absorb_platform_stop = true;
            self.begin_stop(Trigger::Ecs, Instant::now());
        }
    }

    fn poll_for_protection(&mut self, now: Instant) {
        let (Some(protection), Some(url)) = (&mut self.protection, &self.config.drain_url) else {
            return;
        };
        protection.poll_in_flight = true;
        protection.next_poll = Some(now + protection.interval);
        let timeout = protection.interval;
        self.send_request(get(url), None, timeout, Purpose::ProtectPoll);
    }

    fn on_protect_poll(&mut self, result: Result<Response, Failure>) {
        let Some(protection) = &mut self.protection else {
            return;
        };
        protection.poll_in_flight = false;
        if let Err(failure) = &result {
            // No answer is neither busy nor idle: leave protection as it is
            // (an unrenewed protection simply expires).
            return protection.complain(
                &format!("drain_{}", failure.kind()),
                &format!("drain endpoint: {failure}"),
            );
        }
        if self.phase != Phase::Running {
            return;
        }
        let busy = !drain::evaluate(&result, &self.config.drain_field).ready;
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

    fn on_signal(&mut self, signo: i32) {
        if !self.child_alive() {
            return;
        }
        let is_stop_signal = self.config.stop_signals.contains(&signo);
        if is_stop_signal && self.stop.is_none() {
            self.begin_stop(Trigger::Signal(signo), Instant::now());
        } else if is_stop_signal && self.absorb_platform_stop {
            info!(
                "absorbing {}: the stop already began from ECS",
                signal_name(signo)
            );
            self.absorb_platform_stop = false;
        } else {
            // Other signals, and a repeated stop signal (a second Ctrl-C
            // must still reach the app), are simply forwarded.
            self.forward(signo);
        }
    }

    fn child_alive(&self) -> bool {
        !matches!(self.phase, Phase::OrphanGrace { .. } | Phase::Done { .. })
    }

    /// t0 of the stop timeline.
    fn begin_stop(&mut self, trigger: Trigger, now: Instant) {
        let stop = Stop {
            trigger,
            since: now,
            deadline: self.config.grace.map(|g| now + g),
        };
        self.stop = Some(stop);
        self.summary.stop_trigger = Some(trigger);
        let by = match trigger {
            Trigger::Signal(signo) => signal_name(signo),
            Trigger::Ecs => "ECS".into(),
        };
        match self.config.grace {
            Some(grace) => info!("stop begins ({by}); deadline in {} ms", grace.as_millis()),
            None => info!("stop begins ({by}); no deadline"),
        }
        if self.config.pre_stop_delay.is_zero() {
            self.fire_hooks(now);
        } else {
            self.phase = Phase::PreStop {
                fire_at: now + self.config.pre_stop_delay,
            };
        }
    }

    /// Time allowed for one request: the poll interval, and never past the
    /// deadline (so no endpoint can hold a request open beyond it).
    fn request_timeout(&self, now: Instant) -> Duration {
        let interval = self.config.drain_interval;
        match self.stop.and_then(|s| s.deadline) {
            Some(deadline) => interval.min(deadline.saturating_duration_since(now)),
            None => interval,
        }
        .max(Duration::from_millis(1))
    }

    fn fire_hooks(&mut self, now: Instant) {
        match self.config.stop_hook.clone() {
            Some(target) => {
                let timeout = self.request_timeout(now);
                info!("stop hook: {} {}", target.method, target.url);
                self.send_request(target, None, timeout, Purpose::StopHook);
                self.phase = Phase::Hook {
                    give_up_at: now + timeout,
                };
            }
            None => self.send_stop_signal(now),
        }
    }

    fn on_stop_hook(&mut self, result: Result<Response, Failure>) {
        match &result {
            Ok(response) => info!("stop hook answered HTTP {}", response.status),
            Err(failure) => warn!("stop hook failed: {failure}"),
        }
        if matches!(self.phase, Phase::Hook { .. }) {
            self.send_stop_signal(Instant::now());
        }
    }

    /// Forwards the stop signal (after `--rewrite`) and starts polling.
    fn send_stop_signal(&mut self, now: Instant) {
        let signo = match self.stop.map(|s| s.trigger) {
            Some(Trigger::Signal(signo)) => signo,
            _ => self
                .config
                .stop_signals
                .first()
                .copied()
                .unwrap_or(libc::SIGTERM),
        };
        self.forward(signo);
        self.phase = Phase::Draining {
            next_poll: self.config.drain_url.as_ref().map(|_| now),
        };
    }

    fn start_drain_poll(&mut self, now: Instant) {
        let Some(url) = self.config.drain_url.clone() else {
            return;
        };
        let timeout = self.request_timeout(now);
        self.drain_in_flight = true;
        self.send_request(get(&url), None, timeout, Purpose::DrainPoll);
        if let Phase::Draining { next_poll } = &mut self.phase {
            *next_poll = Some(now + self.config.drain_interval);
        }
    }

    fn on_drain_poll(&mut self, result: Result<Response, Failure>) {
        self.drain_in_flight = false;
        let reading = drain::evaluate(&result, &self.config.drain_field);
        self.progress.observe(&reading);
        if !reading.ready || !matches!(self.phase, Phase::Draining { .. }) {
            return;
        }
        let now = Instant::now();
        let mut kill_at = now + self.config.ready_grace;
        if let Some(deadline) = self.stop.and_then(|s| s.deadline) {
            kill_at = kill_at.min(deadline);
        }
        if let Some(stop) = self.stop {
            self.summary.stop_to_ready_ms = Some(millis(now - stop.since));
        }
        info!(
            "app reports ready ({}); it has {} ms to exit by itself",
            reading.summary,
            kill_at.saturating_duration_since(now).as_millis()
        );
        self.phase = Phase::Ready { kill_at };
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
        let spawned = std::thread::Builder::new()
            .name("drainit-http".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let result = http::send(&target, body.as_deref(), timeout);
                let _ = outbox.send(Message { purpose, result });
                waker.wake();
            });
        if let Err(e) = spawned {
            // Reported like any failed request, so every in-flight flag clears.
            let result = Err(Failure::Broken(format!(
                "cannot start a request thread: {e}"
            )));
            let _ = self.outbox.send(Message { purpose, result });
            self.waker.wake();
        }
    }

    /// Timers that are due.
    fn on_time(&mut self, now: Instant) {
        if let Phase::Ready { kill_at } = self.phase {
            if now >= kill_at {
                return self.escalate(Escalation::Ready);
            }
        }
        if self.deadline_armed() && self.stop.and_then(|s| s.deadline).is_some_and(|d| now >= d) {
            return self.escalate(Escalation::Deadline);
        }
        match self.phase {
            Phase::PreStop { fire_at } if now >= fire_at => self.fire_hooks(now),
            Phase::Hook { give_up_at } if now >= give_up_at => {
                warn!("stop hook did not answer in time; sending the stop signal");
                self.send_stop_signal(now);
            }
            Phase::Draining {
                next_poll: Some(at),
            } if now >= at && !self.drain_in_flight => self.start_drain_poll(now),
            Phase::Running => {
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
            Phase::OrphanGrace { until, outcome } if now >= until => {
                info!("orphan grace over; exiting");
                self.phase = Phase::Done { outcome };
            }
            _ => {}
        }
    }

    /// SIGKILL to the child's process group (and to the child itself, in
    /// case it left the group).
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
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
        self.phase = Phase::Killed { reason };
    }

    fn reap(&mut self) {
        let reaped = reaper::reap_all();
        for (pid, ended) in reaped.ended {
            if pid == self.pid && self.child_alive() {
                self.on_child_exit(ended);
            } else {
                self.summary.orphans_reaped += 1;
                if self.config.warn_on_reap {
                    warn!("Reaped zombie process with pid={pid}");
                } else {
                    debug!("Reaped zombie process with pid={pid}");
                }
            }
        }
        if let Phase::OrphanGrace { outcome, .. } = self.phase {
            if reaped.none_left {
                info!("every remaining process has exited");
                self.phase = Phase::Done { outcome };
            }
        }
    }

    fn on_child_exit(&mut self, ended: Ended) {
        let now = Instant::now();
        match ended {
            Ended::Exited(code) => info!("main child exited with status {code}"),
            Ended::Signaled(signo) => info!("main child was killed by {}", signal_name(signo)),
        }
        self.summary.child_status = Some(ended);
        if let Some(stop) = self.stop {
            self.summary.stop_to_exit_ms = Some(millis(now - stop.since));
        }
        let outcome = match (self.phase, ended) {
            (
                Phase::Killed {
                    reason: Escalation::Ready,
                },
                Ended::Signaled(libc::SIGKILL),
            ) => Outcome::Drained,
            (
                Phase::Killed {
                    reason: Escalation::Deadline,
                },
                Ended::Signaled(libc::SIGKILL),
            ) => Outcome::Deadline,
            (_, Ended::Exited(code)) => Outcome::Exited(code),
            (_, Ended::Signaled(signo)) => Outcome::Signaled(signo),
        };
        let grace = self.config.orphan_grace;
        if grace.is_zero() || !self.terminate_remaining() {
            self.phase = Phase::Done { outcome };
        } else {
            info!(
                "waiting up to {} ms for the remaining processes",
                grace.as_millis()
            );
            self.phase = Phase::OrphanGrace {
                until: now + grace,
                outcome,
            };
        }
    }

    /// SIGTERM to every process left behind; false when there is none.
    fn terminate_remaining(&self) -> bool {
        let children = own_children();
        if children.is_empty() {
            return false;
        }
        if std::process::id() == 1 {
            // As PID 1, kill(-1) reaches every process in the namespace
            // (but not us), descendants of orphans included.
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(-1, libc::SIGTERM) };
        } else {
            // Not PID 1, kill(-1) would reach the whole host: signal our own
            // children only. They are not reaped yet, so their PIDs are ours.
            for pid in children {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        true
    }

    /// Forwards a received signal (after `-r`) to the child or its group.
    fn forward(&self, signo: i32) {
        if !self.child_alive() {
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
            // period; a failed forward is only worth a warning.
            warn!(
                "forwarding {} to {} {}: {}",
                signal_name(sent),
                if target < 0 { "process group" } else { "pid" },
                pid,
                io::Error::last_os_error()
            );
        }
    }
}

fn get(url: &str) -> Target {
    Target {
        method: "GET".into(),
        url: url.to_string(),
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// drainit's live children, from /proc (orphans re-parented to it included).
fn own_children() -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
    }
    out
}
