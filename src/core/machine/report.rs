//! What the `Machine` tells the shell about the run: the published
//! `Status` (`core::status`), the exit report's summary, the outcome, the
//! stop and the deadline under way, and each part's timers.

use std::time::Instant;

use crate::core::machine::Machine;
use crate::core::outcome::{EcsNames, Outcome, RunSummary};
use crate::core::status::{SourceStatus, Stage, Status};
use crate::core::timeline::{Escalation, Phase, Stop, Timer};
use crate::core::watch::Watch;
use crate::util::time::millis;

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
            protection: self.protection.as_ref().map(|p| p.report(&self.deadline)),
            notify_kinds: self.notify.as_ref().map(|n| n.kinds),
            kill: self.deadline.kill().map(|k| k.at),
            outcome: self.outcome(),
        }
    }

    /// Everything the exit report says besides the exit code.
    pub fn summary(&self) -> RunSummary {
        let s = &self.summary;
        let task = self.watch.as_ref().and_then(Watch::ecs_task);
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
            platform_words: self
                .protection
                .as_ref()
                .and_then(|p| p.report(&self.deadline).words),
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

    /// One of the stop timeline's timers (None: not armed).
    pub fn timer(&self, timer: Timer) -> Option<Instant> {
        self.timeline.timer(timer)
    }
}
