//! What the core publishes about a run: `Status`, a snapshot of the phase,
//! the stop, the drain sources and the counters, taken by the shell after
//! each turn (`Machine::status`, in `core/machine/report.rs`) and handed
//! to the health listener only when it changed. The listener renders it
//! (`core::health`, `core::metrics`) and never decides anything itself:
//! it reads this value, never the `Machine`.

use std::time::Instant;

use crate::core::counters::Counters;
use crate::core::outcome::{Outcome, RunSummary};
use crate::core::protect::Report as ProtectReport;

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
    /// What the protection back-end, if any, reports.
    pub protection: Option<ProtectReport>,
    /// With `--notify`: accepted messages by `notify_msg::KINDS`.
    pub notify_kinds: Option<[u64; 6]>,
    /// When the platform's SIGKILL comes, once learnt at the stop (the
    /// pod's deletion: `core::deadline`).
    pub kill: Option<Instant>,
    pub outcome: Option<Outcome>,
}

impl Status {
    /// The stop has begun (readiness turns at this instant).
    pub fn stopping(&self) -> bool {
        self.stop_since.is_some()
    }
}
