//! How drainit ends: the typed `Outcome` of a run, its one mapping to a
//! process exit code, and the JSON exit report. Nothing else in drainit
//! decides the exit status.

use serde_json::{json, Value};

use crate::util::signame::signal_name;

/// How a reaped process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signaled(i32),
}

/// Why the child could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnFailure {
    /// The program does not exist (ENOENT, ENOTDIR): 127, as shells say.
    NotFound,
    /// It exists but cannot be executed (EACCES, ENOEXEC, EISDIR...): 126.
    NotExecutable,
    /// Anything else (fork failed, out of memory...): 125.
    Other,
}

/// The final state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The child exited by itself with this code.
    Exited(i32),
    /// The child was killed by this signal, not by drainit's escalation.
    Signaled(i32),
    /// The app reported ready and drainit killed it after `--ready-grace`.
    Drained,
    /// The deadline passed and drainit killed the child.
    Deadline,
    /// The child could not be started.
    SpawnFailed(SpawnFailure),
}

/// Exit-code settings that come from the command line.
#[derive(Debug, Clone, Default)]
pub struct ExitPolicy {
    /// tini's `-e`: these codes of the child (after 128+N) become 0.
    pub remap_to_zero: Vec<u8>,
    /// `--deadline-exit-code`, 124 by default (as timeout(1)).
    pub deadline_code: u8,
}

impl Outcome {
    /// The single mapping from an outcome to drainit's exit code.
    pub fn exit_code(&self, policy: &ExitPolicy) -> u8 {
        let child_code = match *self {
            Outcome::Exited(code) => (code & 0xff) as u8,
            // Signals go up to SIGRTMAX (64), so 128+N always fits.
            Outcome::Signaled(signo) => (128 + signo.clamp(0, 127)) as u8,
            Outcome::Drained => return 0,
            Outcome::Deadline => return policy.deadline_code,
            Outcome::SpawnFailed(SpawnFailure::NotFound) => return 127,
            Outcome::SpawnFailed(SpawnFailure::NotExecutable) => return 126,
            Outcome::SpawnFailed(SpawnFailure::Other) => return 125,
        };
        if policy.remap_to_zero.contains(&child_code) {
            0
        } else {
            child_code
        }
    }
}

impl Outcome {
    /// The report's `outcome` field.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Exited(_) => "exited",
            Outcome::Signaled(_) => "signaled",
            Outcome::Drained => "drained",
            Outcome::Deadline => "deadline",
            Outcome::SpawnFailed(_) => "spawn_failed",
        }
    }
}

/// What started a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Signal(i32),
    /// ECS's task metadata said `DesiredStatus: STOPPED` (`watch::ecs`).
    Ecs,
    /// The app ran its `--max-runtime` (`core::max_runtime`).
    MaxRuntime,
}

impl Trigger {
    /// Its name in the exit report, `/status` and EMF (`stop_trigger`):
    /// the one place a trigger is named.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Signal(_) => "signal",
            Trigger::Ecs => "ecs",
            Trigger::MaxRuntime => "max_runtime",
        }
    }

    /// The platform sends its own stop signal after a stop this trigger
    /// began (ECS stops the task): the timeline absorbs it once. After
    /// `--max-runtime` a signal is the platform's own stop, met as a
    /// second signal during a stop is.
    pub fn signal_follows(self) -> bool {
        matches!(self, Trigger::Ecs)
    }

    /// Who began the stop, as the log says it: the signal, the platform,
    /// or the maximum runtime.
    pub fn said(self) -> String {
        match self {
            Trigger::Signal(signo) => signal_name(signo),
            Trigger::Ecs => "ECS".into(),
            Trigger::MaxRuntime => "max_runtime: the app has run its --max-runtime".into(),
        }
    }

    /// `stop_trigger` and `stop_signal` as the reports write them.
    pub fn fields(trigger: Option<Trigger>) -> (Value, Value) {
        let signal = match trigger {
            Some(Trigger::Signal(signo)) => Value::from(signal_name(signo)),
            _ => Value::Null,
        };
        (trigger.map(Trigger::name).into(), signal)
    }
}

/// Everything the exit report says besides the exit code.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSummary {
    pub child_pid: Option<i32>,
    pub child_status: Option<Ended>,
    pub stop_trigger: Option<Trigger>,
    pub stop_to_ready_ms: Option<u64>,
    pub stop_to_exit_ms: Option<u64>,
    /// The stop's deadline, in ms from its start (extensions included).
    pub deadline_ms: Option<u64>,
    pub drain_polls: u64,
    pub last_drain: Option<String>,
    pub orphans_reaped: u64,
    pub ecs_task_arn: Option<String>,
    /// Each drain source with its last answer (`sources::Board::report`).
    pub sources: Vec<Value>,
    /// With `--notify`: what the app said over the notify socket.
    pub notify: Option<NotifyReport>,
    /// Log lines dropped because stderr was not read fast enough.
    pub log_lines_dropped: u64,
    /// With `--drain-count-field`: the app's in-flight count.
    pub in_flight: Option<InFlight>,
    /// The ECS task's names, for the metrics' dimensions (not reported).
    pub ecs_names: Option<EcsNames>,
    /// A protection back-end's own words (`protect::Report::words`): the
    /// key and the object the report and `/status` carry.
    pub platform_words: Option<(&'static str, Value)>,
}

/// The app's in-flight count as read from drain bodies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InFlight {
    /// The first count read after the stop began.
    pub at_stop: Option<u64>,
    /// The highest read during the stop.
    pub max: Option<u64>,
    /// The latest read, running or stopping.
    pub last: Option<u64>,
}

/// What the task metadata names this task by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EcsNames {
    pub cluster: String,
    pub family: String,
    pub service: String,
}

/// The exit report's `notify` object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyReport {
    /// From drainit's start to the app's first `READY=1`.
    pub ready_ms: Option<u64>,
    /// The app's last `STATUS=`, escaped and cut.
    pub status: Option<String>,
    pub received: u64,
    /// From senders not allowed (outside the PID namespace, or not the main
    /// child under `--notify-access main`).
    pub refused: u64,
    /// Over the size bound.
    pub dropped: u64,
    /// The stop's final deadline, in ms from its start (after extensions).
    pub deadline_ms: Option<u64>,
    /// From the start of the stop to the readiness word that drained it.
    pub stop_to_ready_word_ms: Option<u64>,
}

/// The exit report: one JSON object, written to `--exit-report` and logged
/// as the last line after a stop.
pub fn report(outcome: &Outcome, exit_code: u8, summary: &RunSummary) -> Value {
    let child_status = match summary.child_status {
        Some(Ended::Exited(code)) => json!({"exited": code}),
        Some(Ended::Signaled(signo)) => json!({"signaled": signal_name(signo)}),
        None => Value::Null,
    };
    let (trigger, signal) = Trigger::fields(summary.stop_trigger);
    let mut report = json!({
        "outcome": outcome.name(),
        "exit_code": exit_code,
        "child_pid": summary.child_pid,
        "child_status": child_status,
        "stop_trigger": trigger,
        "stop_signal": signal,
        "stop_to_ready_ms": summary.stop_to_ready_ms,
        "stop_to_exit_ms": summary.stop_to_exit_ms,
        "deadline_ms": summary.deadline_ms,
        "drain_polls": summary.drain_polls,
        "last_drain": summary.last_drain,
        "orphans_reaped": summary.orphans_reaped,
        "ecs_task_arn": summary.ecs_task_arn,
        "sources": summary.sources,
        "log_lines_dropped": summary.log_lines_dropped,
    });
    if let Some((key, words)) = &summary.platform_words {
        report[*key] = words.clone();
    }
    if let Some(f) = &summary.in_flight {
        report["in_flight"] = json!({"at_stop": f.at_stop, "max": f.max, "last": f.last});
    }
    if let Some(n) = &summary.notify {
        report["notify"] = json!({
            "ready_ms": n.ready_ms,
            "status": n.status,
            "received": n.received,
            "refused": n.refused,
            "dropped": n.dropped,
            "deadline_ms": n.deadline_ms,
            "stop_to_ready_word_ms": n.stop_to_ready_word_ms,
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(outcome: Outcome, remap: &[u8]) -> u8 {
        outcome.exit_code(&ExitPolicy {
            remap_to_zero: remap.to_vec(),
            deadline_code: 124,
        })
    }

    #[test]
    fn drain_outcomes() {
        assert_eq!(code(Outcome::Drained, &[]), 0);
        assert_eq!(code(Outcome::Deadline, &[]), 124);
        assert_eq!(
            code(Outcome::Deadline, &[124]),
            124,
            "-e is for the child's own codes"
        );
        let policy = ExitPolicy {
            remap_to_zero: vec![],
            deadline_code: 7,
        };
        assert_eq!(Outcome::Deadline.exit_code(&policy), 7);
    }

    #[test]
    fn report_fields() {
        let summary = RunSummary {
            child_pid: Some(7),
            child_status: Some(Ended::Signaled(9)),
            stop_trigger: Some(Trigger::Signal(15)),
            stop_to_ready_ms: Some(1200),
            stop_to_exit_ms: Some(3200),
            deadline_ms: Some(8000),
            drain_polls: 4,
            last_drain: Some("HTTP 200".into()),
            orphans_reaped: 2,
            ecs_task_arn: None,
            sources: vec![json!({"kind": "file", "target": "/tmp/done", "ready": true})],
            notify: None,
            log_lines_dropped: 3,
            in_flight: None,
            ecs_names: None,
            platform_words: None,
        };
        let r = report(&Outcome::Drained, 0, &summary);
        assert_eq!(r["outcome"], "drained");
        assert_eq!(r["exit_code"], 0);
        assert_eq!(r["child_status"]["signaled"], "SIGKILL");
        assert_eq!(r["sources"][0]["kind"], "file");
        assert_eq!(r["stop_trigger"], "signal");
        assert_eq!(r["stop_signal"], "SIGTERM");
        assert_eq!(r["stop_to_ready_ms"], 1200);
        assert_eq!(r["drain_polls"], 4);
        assert_eq!(r["orphans_reaped"], 2);
        assert_eq!(r["log_lines_dropped"], 3);
        assert!(r.get("notify").is_none(), "only with --notify");
        let with_notify = RunSummary {
            notify: Some(NotifyReport {
                ready_ms: Some(40),
                status: Some("draining 3".into()),
                received: 9,
                refused: 1,
                dropped: 2,
                deadline_ms: Some(30_000),
                stop_to_ready_word_ms: None,
            }),
            ..summary.clone()
        };
        let r = report(&Outcome::Drained, 0, &with_notify);
        assert_eq!(r["notify"]["status"], "draining 3");
        assert_eq!(r["notify"]["received"], 9);
        assert_eq!(r["notify"]["refused"], 1);
        assert_eq!(r["notify"]["dropped"], 2);
        assert_eq!(r["notify"]["deadline_ms"], 30_000);
        let r = report(
            &Outcome::SpawnFailed(SpawnFailure::NotFound),
            127,
            &RunSummary::default(),
        );
        assert_eq!(r["outcome"], "spawn_failed");
        assert!(r["stop_trigger"].is_null());
        let r = report(
            &Outcome::Exited(3),
            3,
            &RunSummary {
                stop_trigger: Some(Trigger::Ecs),
                ..Default::default()
            },
        );
        assert_eq!(r["stop_trigger"], "ecs");
    }

    #[test]
    fn every_exit_code_passes_through() {
        for n in 0..=255 {
            assert_eq!(code(Outcome::Exited(n), &[]), n as u8);
        }
    }

    #[test]
    fn signals_are_128_plus_n_not_the_raw_number() {
        for signo in 1..=64 {
            assert_eq!(code(Outcome::Signaled(signo), &[]), 128 + signo as u8);
        }
        assert_eq!(code(Outcome::Signaled(libc::SIGTERM), &[]), 143);
        assert_eq!(code(Outcome::Signaled(libc::SIGKILL), &[]), 137);
    }

    #[test]
    fn remap_applies_after_128_plus_n() {
        assert_eq!(code(Outcome::Signaled(libc::SIGTERM), &[143]), 0);
        assert_eq!(code(Outcome::Signaled(libc::SIGTERM), &[15]), 143);
        assert_eq!(code(Outcome::Exited(3), &[3, 4]), 0);
        assert_eq!(code(Outcome::Exited(5), &[3, 4]), 5);
        for n in 0..=255 {
            assert_eq!(code(Outcome::Exited(n), &[n as u8]), 0);
        }
    }

    #[test]
    fn spawn_failures_are_not_remapped() {
        assert_eq!(
            code(Outcome::SpawnFailed(SpawnFailure::NotFound), &[127]),
            127
        );
        assert_eq!(
            code(Outcome::SpawnFailed(SpawnFailure::NotExecutable), &[126]),
            126
        );
        assert_eq!(code(Outcome::SpawnFailed(SpawnFailure::Other), &[125]), 125);
    }
}
