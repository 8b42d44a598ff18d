//! What the core publishes about a run: `Status`, a snapshot of the phase,
//! the stop, the drain sources and the counters, taken by the shell after
//! each turn and handed to the health listener only when it changed. The
//! listener renders it (`core::health`, `core::metrics`) and never decides
//! anything itself.

use std::time::Instant;

use crate::core::timeline::Stop;
use crate::core::timers::Timer;

use crate::core::counters::Counters;
use crate::core::machine::Machine;
use crate::core::outcome::{EcsNames, Outcome, RunSummary};
use crate::core::timeline::{Escalation, Phase};
use crate::util::time::millis;

/// The run's phase as the listener names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Running,
    /// A stop began; the app has not got its stop signal yet (the pre-stop
    /// delay, the hooks).
    PreStop,
    /// The app got its stop signal; drain sources are asked.
    Draining,
    /// The app reported ready; it may exit by itself.
    Ready,
    /// The app reported ready and drainit ended it after `--ready-grace`
    /// (SIGKILL, the designed end of a drained stop).
    Released,
    /// drainit sent SIGKILL.
    Killed,
    /// The main child is gone; drainit is finishing (orphan grace, report).
    Exited,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Running => "running",
            Stage::PreStop => "pre_stop",
            Stage::Draining => "draining",
            Stage::Ready => "ready",
            Stage::Released => "released",
            Stage::Killed => "killed",
            Stage::Exited => "exited",
        }
    }
}

/// One drain source as published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStatus {
    pub kind: &'static str,
    pub target: String,
    pub ready: bool,
    pub last: Option<String>,
    pub at: Option<Instant>,
}

/// The snapshot the listener answers from.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub stage: Stage,
    /// The program the child runs (its file name only).
    pub program: String,
    /// With `--notify`: whether the app said `READY=1`; None without it.
    pub app_ready: Option<bool>,
    /// When the stop began and the deadline that holds.
    pub stop_since: Option<Instant>,
    pub deadline: Option<Instant>,
    pub sources: Vec<SourceStatus>,
    /// What the exit report would say now.
    pub summary: RunSummary,
    pub counters: Counters,
    /// The app's in-flight count (`--drain-count-field`): the latest.
    pub in_flight: Option<u64>,
    /// Task protection is on (as the agent last accepted), with ECS
    /// protection configured.
    pub protected: Option<bool>,
    /// With `--notify`: accepted messages by `notify_msg::KINDS`.
    pub notify_kinds: Option<[u64; 6]>,
    pub outcome: Option<Outcome>,
}

impl Status {
    /// The stop has begun (readiness turns at this instant).
    pub fn stopping(&self) -> bool {
        self.stop_since.is_some()
    }
}

impl Machine<'_> {
    /// What the core publishes now; the shell compares it with the last
    /// one and publishes it when it changed.
    pub fn status(&self) -> Status {
        let stage = match self.timeline.phase() {
            _ if !self.timeline.child_alive() => Stage::Exited,
            Phase::Running => Stage::Running,
            Phase::PreStop { .. } | Phase::Hook { .. } => Stage::PreStop,
            Phase::Draining { .. } => Stage::Draining,
            Phase::Ready { .. } => Stage::Ready,
            Phase::Killed {
                reason: Escalation::Ready,
                ..
            } => Stage::Released,
            Phase::Killed { .. } => Stage::Killed,
            Phase::OrphanGrace { .. } | Phase::Done { .. } => Stage::Exited,
        };
        let program = std::path::Path::new(&self.config.program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let sources = self
            .sources
            .board
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| SourceStatus {
                kind: s.kind,
                target: s.public.clone(),
                ready: s.ready,
                last: s.last.as_ref().map(|a| a.summary()),
                at: self.sources.answered_at.get(i).copied().flatten(),
            })
            .collect();
        let stop = self.timeline.stop();
        Status {
            stage,
            program,
            app_ready: self.notify.as_ref().map(|n| n.ready_after.is_some()),
            stop_since: stop.map(|s| s.since),
            deadline: self.deadline(),
            sources,
            summary: self.summary(),
            counters: self.counters.clone(),
            in_flight: self.sources.in_flight.last,
            // ECS's; the pod's protection is in the summary's `k8s`.
            protected: self
                .protection
                .as_ref()
                .filter(|p| p.k8s_report(&self.deadline).is_none())
                .map(|p| p.is_on()),
            notify_kinds: self.notify.as_ref().map(|n| n.kinds),
            outcome: self.outcome(),
        }
    }

    /// Everything the exit report says besides the exit code.
    pub fn summary(&self) -> RunSummary {
        let s = &self.summary;
        let task = self.watch.as_ref().and_then(|w| w.ecs.task.as_ref());
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
            drain_polls: self.sources.board.rounds,
            last_drain: self.sources.last_drain.clone(),
            orphans_reaped: s.orphans_reaped,
            ecs_task_arn: task.map(|t| t.task_arn.clone()),
            sources: self.sources.report(),
            notify: self.notify.as_ref().map(|n| n.report(self.timeline.stop())),
            log_lines_dropped: 0,
            in_flight: self
                .config
                .drain_count_field
                .as_ref()
                .map(|_| self.sources.in_flight),
            ecs_names: task.map(|t| EcsNames {
                cluster: t.cluster.clone(),
                family: t.family.clone(),
                service: t.service_name.clone(),
            }),
            k8s: self
                .protection
                .as_ref()
                .and_then(|p| p.k8s_report(&self.deadline)),
        }
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
        self.timeline.timer(Timer::Deadline)
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

    /// One timer, from the part that owns it (None: not armed).
    pub fn timer(&self, timer: Timer) -> Option<Instant> {
        match timer {
            Timer::EcsPoll => self.watch.as_ref()?.timer(timer),
            Timer::ProtectPoll => self.protection.as_ref()?.timer(timer),
            Timer::RunKill(_) => None,
            _ => self.timeline.timer(timer),
        }
    }
}
