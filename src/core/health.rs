//! What the health listener answers, from the status the core published:
//! `/readyz` (ready for work: running, no stop begun, the app ready),
//! `/healthz` (alive: the main child has not exited, draining or not) and
//! `/status` (one bounded JSON object). Pure: the listener passes `now`
//! and the app's own readiness answer; nothing here changes any state.

use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::core::status::Status;
use crate::util::signame::signal_name;
use crate::util::text::escape;
use crate::util::time::millis;

/// The paths the listener knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Readyz,
    Healthz,
    Status,
    Metrics,
    NotFound,
}

impl Route {
    pub fn of(path: &str) -> Route {
        match path {
            "/readyz" => Route::Readyz,
            "/healthz" => Route::Healthz,
            "/status" => Route::Status,
            "/metrics" => Route::Metrics,
            _ => Route::NotFound,
        }
    }
}

/// The longest text from the app or the operator `/status` shows.
pub const TEXT_MAX: usize = 256;

/// An answer: status code and a short plain-text (or JSON) body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    pub fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{body}\n"),
        }
    }
}

/// `/readyz` as far as drainit knows: `Ok` means ready unless the app's
/// own readiness URL says otherwise (then it is asked); `Err` is the reason
/// it is not, and the app is not asked.
pub fn readiness(status: Option<&Status>) -> Result<(), &'static str> {
    let Some(status) = status else {
        return Err("starting");
    };
    if status.stopping() {
        return Err("stopping");
    }
    if status.outcome.is_some() || !matches!(status.stage, crate::core::status::Stage::Running) {
        return Err("exited");
    }
    if status.app_ready == Some(false) {
        return Err("starting");
    }
    Ok(())
}

/// The `/readyz` answer; `app`: the app's readiness URL's answer, when it
/// was asked (`Err` says why it is not ready).
pub fn readyz(status: Option<&Status>, app: Option<Result<(), String>>) -> Reply {
    match (readiness(status), app) {
        (Err(why), _) => Reply::text(503, why),
        (Ok(()), Some(Err(why))) => Reply::text(503, &format!("app not ready: {why}")),
        (Ok(()), _) => Reply::text(200, "ready"),
    }
}

/// `/healthz`: 200 while the main child has not exited, stopping or not.
pub fn healthz(status: Option<&Status>) -> Reply {
    match status {
        None => Reply::text(503, "starting"),
        Some(s) if s.summary.child_status.is_some() || s.outcome.is_some() => {
            Reply::text(503, "exited")
        }
        Some(s) if s.stopping() => Reply::text(200, "alive (stopping)"),
        Some(_) => Reply::text(200, "alive"),
    }
}

fn cut(text: &str) -> String {
    escape(text, TEXT_MAX)
}

/// `/status`: the phase, the stop, each source, the app's notify status and
/// the report's counters so far. Field names are the exit report's where
/// they mean the same. Bounded: at most 64 sources, each text cut to
/// `TEXT_MAX`. No environment, no credentials, no URL user-info or query,
/// and of the command line only the program name.
pub fn status_json(status: Option<&Status>, now: Instant, log_lines_dropped: u64) -> Reply {
    let Some(s) = status else {
        return Reply {
            status: 200,
            content_type: "application/json",
            body: "{\"phase\":\"starting\"}\n".into(),
        };
    };
    let ago = |at: Instant| millis(now.saturating_duration_since(at));
    let sum = &s.summary;
    let (trigger, signal) = crate::core::outcome::Trigger::fields(sum.stop_trigger);
    let sources: Vec<Value> = s
        .sources
        .iter()
        .take(64)
        .map(|src| {
            json!({
                "kind": src.kind,
                "target": cut(&src.target),
                "ready": src.ready,
                "last": src.last.as_deref().map(cut),
                "last_ms_ago": src.at.map(ago),
            })
        })
        .collect();
    let mut forwarded = Map::new();
    for (signo, n) in s.counters.forwarded.iter().enumerate() {
        if *n > 0 {
            forwarded.insert(signal_name(signo as i32), Value::from(*n));
        }
    }
    let mut body = json!({
        "phase": s.stage.name(),
        "stopping": s.stopping(),
        "program": cut(&s.program),
        "child_pid": sum.child_pid,
        "stop_trigger": trigger,
        "stop_signal": signal,
        "stop_elapsed_ms": s.stop_since.map(ago),
        "deadline_left_ms": s.deadline.map(|d| millis(d.saturating_duration_since(now))),
        "deadline_ms": sum.deadline_ms,
        "stop_to_ready_ms": sum.stop_to_ready_ms,
        "stop_to_exit_ms": sum.stop_to_exit_ms,
        "sources": sources,
        "drain_polls": sum.drain_polls,
        "last_drain": sum.last_drain.as_deref().map(cut),
        "in_flight": s.in_flight,
        "orphans_reaped": sum.orphans_reaped,
        "signals_forwarded": forwarded,
        "ecs_task_arn": sum.ecs_task_arn.as_deref().map(cut),
        "protected": s.protection.as_ref().filter(|p| p.top_level).map(|p| p.protected),
        "log_lines_dropped": log_lines_dropped,
        "outcome": s.outcome.map(|o| o.name()),
    });
    if let Some((key, words)) = &sum.platform_words {
        body[*key] = words.clone();
    }
    if let Some(n) = &sum.notify {
        body["notify"] = json!({
            "ready": s.app_ready,
            "status": n.status.as_deref().map(cut),
            "received": n.received,
            "refused": n.refused,
            "dropped": n.dropped,
        });
    }
    Reply {
        status: 200,
        content_type: "application/json",
        body: format!("{body}\n"),
    }
}
