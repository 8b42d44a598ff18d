//! `--emf`: the exit report as one CloudWatch Embedded Metric Format line.
//! The awslogs driver carries it to CloudWatch Logs, which turns it into
//! metrics with no agent. Bounded: the line stays under `LINE_MAX` whatever
//! the app sent (texts are cut; the metrics are never dropped), and a
//! metric with no value in this run is left out, never null.

use serde_json::{json, Map, Value};

use crate::core::outcome::{Outcome, RunSummary, Trigger};
use crate::util::text::escape;

/// Docker splits longer lines into several log events; CloudWatch would
/// then extract nothing.
pub const LINE_MAX: usize = 16 * 1024;
/// The longest text property (the app's STATUS, the last drain answer).
const TEXT_MAX: usize = 1024;

/// The EMF line (without its newline). `timestamp_ms`: the exit's wall
/// clock, in ms since the Unix epoch.
pub fn line(
    outcome: &Outcome,
    exit_code: u8,
    summary: &RunSummary,
    namespace: &str,
    timestamp_ms: u64,
) -> String {
    let mut root = Map::new();
    // Dimensions: the task's names when the metadata gave them, a fixed
    // set otherwise, so every line lands in a metric.
    let names = summary.ecs_names.as_ref();
    let mut dimension = Vec::new();
    for (key, value) in [
        ("ClusterName", names.map(|n| &n.cluster)),
        ("TaskFamily", names.map(|n| &n.family)),
        ("ServiceName", names.map(|n| &n.service)),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            dimension.push(key);
            root.insert(key.into(), Value::from(escape(v, 255)));
        }
    }
    if dimension.is_empty() {
        dimension.push("Service");
        root.insert("Service".into(), Value::from("drainit"));
    }
    let in_flight = summary.in_flight.and_then(|f| f.at_stop);
    let metrics: [(&str, &str, Option<u64>); 6] = [
        ("StopDuration", "Milliseconds", summary.stop_to_exit_ms),
        ("TimeToReady", "Milliseconds", summary.stop_to_ready_ms),
        ("InFlightAtStop", "Count", in_flight),
        (
            "DeadlineEscalations",
            "Count",
            Some(u64::from(*outcome == Outcome::Deadline)),
        ),
        ("OrphansReaped", "Count", Some(summary.orphans_reaped)),
        ("ExitCode", "None", Some(u64::from(exit_code))),
    ];
    let mut declared = Vec::new();
    for (name, unit, value) in metrics {
        if let Some(v) = value {
            declared.push(json!({"Name": name, "Unit": unit}));
            root.insert(name.into(), Value::from(v));
        }
    }
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [dimension],
                "Metrics": declared,
            }],
        }),
    );
    // Properties: searchable in Logs Insights, not metrics.
    let (trigger, signal) = Trigger::fields(summary.stop_trigger);
    let status = summary.notify.as_ref().and_then(|n| n.status.clone());
    let properties = [
        ("outcome", Value::from(outcome.name())),
        ("stop_trigger", trigger),
        ("stop_signal", signal),
        ("deadline_ms", Value::from(summary.deadline_ms)),
        ("drain_polls", Value::from(summary.drain_polls)),
        ("log_lines_dropped", Value::from(summary.log_lines_dropped)),
    ];
    // The free texts: what a line too long goes without.
    let texts = [
        (
            "last_drain",
            Value::from(summary.last_drain.as_deref().map(|t| escape(t, TEXT_MAX))),
        ),
        (
            "notify_status",
            Value::from(status.map(|t| escape(&t, TEXT_MAX))),
        ),
        (
            "ecs_task_arn",
            Value::from(summary.ecs_task_arn.as_deref().map(|t| escape(t, 512))),
        ),
    ];
    let present = |(key, value): (&str, Value)| (!value.is_null()).then(|| (key.into(), value));
    root.extend(properties.into_iter().filter_map(present));
    let mut full = root.clone();
    full.extend(texts.into_iter().filter_map(present));
    let text = Value::Object(full).to_string();
    if text.len() < LINE_MAX {
        return text;
    }
    // Cannot happen with the cuts above; the metrics still go out.
    Value::Object(root).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::{EcsNames, InFlight, NotifyReport};

    fn parsed(line: &str) -> Value {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn a_deadline_stop_on_ecs() {
        let summary = RunSummary {
            stop_trigger: Some(Trigger::Ecs),
            stop_to_exit_ms: Some(3004),
            orphans_reaped: 2,
            in_flight: Some(InFlight {
                at_stop: Some(7),
                max: Some(9),
                last: Some(1),
            }),
            ecs_names: Some(EcsNames {
                cluster: "default".into(),
                family: "curltest".into(),
                service: "MyService".into(),
            }),
            ..RunSummary::default()
        };
        let v = parsed(&line(
            &Outcome::Deadline,
            124,
            &summary,
            "drainit",
            1_700_000_000_000,
        ));
        let cwm = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cwm["Namespace"], "drainit");
        assert_eq!(
            cwm["Dimensions"][0],
            json!(["ClusterName", "TaskFamily", "ServiceName"])
        );
        assert_eq!(v["ServiceName"], "MyService");
        assert_eq!(v["DeadlineEscalations"], 1);
        assert_eq!(v["StopDuration"], 3004);
        assert_eq!(v["InFlightAtStop"], 7);
        assert_eq!(v["ExitCode"], 124);
        assert!(v.get("TimeToReady").is_none(), "no value: left out");
        let names: Vec<&str> = cwm["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert!(!names.contains(&"TimeToReady"));
        for name in names {
            assert!(v[name].is_number(), "{name} declared and present");
        }
    }

    #[test]
    fn without_ecs_a_fixed_dimension_and_long_status_is_cut() {
        let summary = RunSummary {
            notify: Some(NotifyReport {
                status: Some("x".repeat(100_000)),
                ..NotifyReport::default()
            }),
            last_drain: Some("y".repeat(100_000)),
            ..RunSummary::default()
        };
        let text = line(&Outcome::Exited(0), 0, &summary, "ns", 1);
        assert!(text.len() < LINE_MAX, "{}", text.len());
        assert!(!text.contains('\n'));
        let v = parsed(&text);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0],
            json!(["Service"])
        );
        assert_eq!(v["Service"], "drainit");
        assert!(v.get("StopDuration").is_none());
        assert_eq!(v["DeadlineEscalations"], 0);
    }
}
