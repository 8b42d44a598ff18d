//! `/metrics`: the published status in the Prometheus text exposition
//! format (version 0.0.4). Names follow Prometheus' conventions: the
//! `drainit_` prefix, base units, `_total` for counters. Every label value
//! comes from a fixed set (signal names, request purposes and results,
//! outcomes), so the page's size is bounded whatever the app does.

use std::fmt::{Display, Write as _};
use std::time::{Duration, Instant};

use crate::core::counters::{RequestKind, RESULTS};
use crate::core::health::Reply;
use crate::core::status::Status;
use crate::proto::notify_msg::KINDS;
use crate::util::signame::signal_name;
use crate::util::time::Secs;

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Outcomes `drainit_exit_outcome` can name.
const OUTCOMES: [&str; 5] = ["exited", "signaled", "drained", "deadline", "spawn_failed"];

struct Page(String);

impl Page {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// A count or `Secs`: integers only, no float formatting.
    fn sample(&mut self, name: &str, labels: &str, value: &dyn Display) {
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {value}");
        } else {
            let _ = writeln!(self.0, "{name}{{{labels}}} {value}");
        }
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, value: Option<&dyn Display>) {
        self.family(name, kind, help);
        if let Some(value) = value {
            self.sample(name, "", value);
        }
    }
}

/// Seconds since the epoch given as a float, to whole microseconds (what
/// a float of today's time holds), without formatting or parsing a float.
fn epoch(unix: f64) -> Duration {
    let secs = unix.max(0.0) as u64;
    let micros = ((unix - secs as f64) * 1e6) as u64;
    Duration::from_secs(secs) + Duration::from_micros(micros.min(999_999))
}

/// The page. `now`: the listener's instant; `unix_now`: the same instant
/// as seconds since the epoch (for the stop's start time).
pub fn render(status: Option<&Status>, now: Instant, unix_now: f64) -> Reply {
    let mut p = Page(String::with_capacity(4096));
    p.family(
        "drainit_build_info",
        "gauge",
        "Always 1; the version label says which drainit runs.",
    );
    p.sample(
        "drainit_build_info",
        &format!("version=\"{}\"", env!("CARGO_PKG_VERSION")),
        &1,
    );
    let stopping = status.is_some_and(|s| s.stopping());
    p.one(
        "drainit_stopping",
        "gauge",
        "1 once a stop has begun (signal, ECS or other trigger), else 0.",
        Some(&u8::from(stopping)),
    );
    let Some(s) = status else {
        return reply(p);
    };
    p.one(
        "drainit_stop_start_time_seconds",
        "gauge",
        "When the stop began, in seconds since the Unix epoch.",
        s.stop_since
            .map(|since| {
                let ago = now.saturating_duration_since(since);
                Secs(epoch(unix_now).saturating_sub(ago))
            })
            .as_ref()
            .map(|v| v as &dyn Display),
    );
    p.one(
        "drainit_deadline_remaining_seconds",
        "gauge",
        "Seconds left until drainit sends SIGKILL, while a deadline holds.",
        s.deadline
            .map(|d| Secs(d.saturating_duration_since(now)))
            .as_ref()
            .map(|v| v as &dyn Display),
    );
    p.one(
        "drainit_kill_remaining_seconds",
        "gauge",
        "Seconds left until the platform's SIGKILL, once the pod's deletion said when it comes.",
        s.kill
            .map(|k| Secs(k.saturating_duration_since(now)))
            .as_ref()
            .map(|v| v as &dyn Display),
    );
    p.one(
        "drainit_drain_sources",
        "gauge",
        "Drain sources configured.",
        Some(&s.sources.len()),
    );
    p.one(
        "drainit_drain_sources_ready",
        "gauge",
        "Drain sources that have reported ready during this stop.",
        Some(&s.sources.iter().filter(|x| x.ready).count()),
    );
    p.one(
        "drainit_drain_polls_total",
        "counter",
        "Drain rounds completed (every source asked once).",
        Some(&s.summary.drain_polls),
    );
    p.one(
        "drainit_app_in_flight",
        "gauge",
        "The app's in-flight count from its drain body (--drain-count-field), latest.",
        s.in_flight.as_ref().map(|n| n as &dyn Display),
    );
    p.family(
        "drainit_signals_forwarded_total",
        "counter",
        "Signals drainit forwarded to the app, by signal.",
    );
    for (signo, n) in s.counters.forwarded.iter().enumerate() {
        if *n > 0 {
            let name = signal_name(signo as i32);
            p.sample(
                "drainit_signals_forwarded_total",
                &format!("signal=\"{name}\""),
                n,
            );
        }
    }
    p.one(
        "drainit_orphans_reaped_total",
        "counter",
        "Processes other than the main child that drainit reaped.",
        Some(&s.summary.orphans_reaped),
    );
    p.family(
        "drainit_requests_total",
        "counter",
        "HTTP requests drainit made and that ended, by purpose and result.",
    );
    for (i, kind) in RequestKind::ALL.iter().enumerate() {
        for (j, result) in RESULTS.iter().enumerate() {
            p.sample(
                "drainit_requests_total",
                &format!("purpose=\"{}\",result=\"{result}\"", kind.name()),
                &s.counters.requests[i][j],
            );
        }
    }
    // One platform protects at a time: its gauge and its requests by
    // result, under the names its back-end gives.
    if let Some(r) = &s.protection {
        protection(&mut p, s, r.protected, r.gauge, r.requests);
    }
    if let (Some(n), Some(kinds)) = (&s.summary.notify, s.notify_kinds) {
        p.family(
            "drainit_notify_messages_total",
            "counter",
            "sd_notify messages accepted, by what they carry (one message may count under several kinds).",
        );
        for (kind, count) in KINDS.iter().zip(kinds) {
            p.sample(
                "drainit_notify_messages_total",
                &format!("kind=\"{kind}\""),
                &count,
            );
        }
        p.one(
            "drainit_notify_dropped_total",
            "counter",
            "sd_notify datagrams dropped for their size.",
            Some(&n.dropped),
        );
        p.one(
            "drainit_notify_refused_total",
            "counter",
            "sd_notify datagrams refused for their sender (--notify-access).",
            Some(&n.refused),
        );
    }
    p.family(
        "drainit_exit_outcome",
        "gauge",
        "1 for the run's outcome once it is known (drained, deadline, exited, signaled).",
    );
    if let Some(outcome) = s.outcome {
        for name in OUTCOMES {
            let v = u8::from(name == outcome.name());
            p.sample("drainit_exit_outcome", &format!("outcome=\"{name}\""), &v);
        }
    }
    reply(p)
}

/// A protection platform's gauge (`on`) and its requests by result.
fn protection(p: &mut Page, s: &Status, on: bool, gauge: (&str, &str), requests: (&str, &str)) {
    p.one(gauge.0, "gauge", gauge.1, Some(&u8::from(on)));
    p.family(requests.0, "counter", requests.1);
    let at = RequestKind::ALL
        .iter()
        .position(|k| *k == RequestKind::ProtectUpdate)
        .unwrap_or(0);
    for (j, result) in RESULTS.iter().enumerate() {
        p.sample(
            requests.0,
            &format!("result=\"{result}\""),
            &s.counters.requests[at][j],
        );
    }
}

fn reply(p: Page) -> Reply {
    Reply {
        status: 200,
        content_type: CONTENT_TYPE,
        body: p.0,
    }
}
