//! Metrics against the real binary as PID 1: `/metrics` parsed by the real
//! Prometheus text parser (the `prometheus_client` Python package) before a
//! stop, during a drain and after a thousand paced signals; the app's
//! in-flight count (`--drain-count-field`), and a field that is missing or
//! not a number; `--emf` lines validated against the EMF JSON schema
//! (tests/fixtures/emf), for a drained stop, a deadline stop, a stop with
//! ECS metadata and one without, and with the longest STATUS text.
//!
//! The two Python packages are test prerequisites (`.ci/run` installs
//! them): without them every test here is skipped with a line saying so,
//! unless `DRAINIT_REQUIRE_PYTHON=1` makes that a failure.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::server::{json, Server};
use support::*;

const TASK: &str = include_str!("fixtures/ecs/task-v4.json");
const CONTAINER: &str = include_str!("fixtures/ecs/container-v4.json");

/// An app that ignores SIGTERM and says when it runs.
const STUBBORN: &str = "trap '' TERM; touch $D/up; while :; do sleep 1; done";

/// drainit with `flags` in front of `sh -c SCRIPT` (`$D`: the scratch dir).
fn with_child(flags: &[&str], scratch: &Scratch, script: &str) -> Launch {
    drainit(
        flags
            .iter()
            .map(|s| s.to_string())
            .chain(sh(scratch, script))
            .collect::<Vec<_>>(),
    )
}

/// True when `prometheus_client` and `jsonschema` import; otherwise a
/// skip line, or a failure under `DRAINIT_REQUIRE_PYTHON=1`.
fn python_packages() -> bool {
    or_skip(
        python_imports("prometheus_client, jsonschema"),
        "metrics tests",
        "python3 cannot import prometheus_client and jsonschema (pip install prometheus_client jsonschema)",
        "DRAINIT_REQUIRE_PYTHON",
    )
}

/// The page's samples, parsed by `prometheus_client`'s parser.
fn scrape(port: u16, scratch: &Scratch) -> Vec<Value> {
    let (status, body) = http_get(port, "/metrics").expect("/metrics answers");
    assert_eq!(status, 200);
    let file = scratch.file("metrics.txt");
    std::fs::write(&file, &body).unwrap();
    let out = check("prom", &file);
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check(kind: &str, file: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/emf/check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(kind)
        .arg(file)
        .output()
        .expect("python3 runs (pip install prometheus_client jsonschema)");
    assert!(
        out.status.success(),
        "{kind} check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn sample(samples: &[Value], name: &str, label: Option<(&str, &str)>) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s["name"] == name && label.map_or(true, |(k, v)| s["labels"][k].as_str() == Some(v))
        })
        .and_then(|s| s["value"].as_f64())
}

#[test]
fn metrics_parse_before_and_during_a_drain_and_follow_the_in_flight_count() {
    if !python_packages() {
        return;
    }
    let scratch = Scratch::new("metrics-drain");
    let in_flight = Arc::new(AtomicU64::new(5));
    let n = Arc::clone(&in_flight);
    let app = Server::start(move |_, _| {
        let left = n.load(Ordering::SeqCst);
        json(
            200,
            &format!(
                r#"{{"readyForTermination":{},"activeExecutions":{left}}}"#,
                left == 0
            ),
        )
    });
    let port = free_port();
    let serve = format!("127.0.0.1:{port}");
    let mut d = with_child(
        &[
            "--serve",
            &serve,
            "--grace",
            "30s",
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "100ms",
            "--drain-url",
            &app.url("/drain"),
            "--drain-count-field",
            "/activeExecutions",
            "--exit-report",
            path_str(&scratch.file("report.json")),
        ],
        &scratch,
        STUBBORN,
    )
    .start();
    scratch.wait_file("up");
    wait_for("the listener", Duration::from_secs(10), || {
        http_get(port, "/healthz").filter(|(code, _)| *code == 200)
    });
    let before = scrape(port, &scratch);
    assert_eq!(sample(&before, "drainit_stopping", None), Some(0.0));
    assert_eq!(sample(&before, "drainit_drain_sources", None), Some(1.0));
    assert!(sample(&before, "drainit_build_info", None).is_some());
    d.signal(libc::SIGTERM);
    let during = wait_for(
        "the drain with 5 in flight",
        Duration::from_secs(10),
        || {
            let s = scrape(port, &scratch);
            (sample(&s, "drainit_app_in_flight", None) == Some(5.0)).then_some(s)
        },
    );
    assert_eq!(sample(&during, "drainit_stopping", None), Some(1.0));
    let left = sample(&during, "drainit_deadline_remaining_seconds", None).unwrap();
    assert!(left > 0.0 && left <= 30.0, "{left}");
    assert!(sample(&during, "drainit_stop_start_time_seconds", None).unwrap() > 1.0e9);
    assert_eq!(
        sample(
            &during,
            "drainit_signals_forwarded_total",
            Some(("signal", "SIGTERM"))
        ),
        Some(1.0)
    );
    // Requests by purpose and result: the drain polls answered 2xx.
    let polls = during
        .iter()
        .find(|x| {
            x["name"] == "drainit_requests_total"
                && x["labels"]["purpose"] == "drain"
                && x["labels"]["result"] == "2xx"
        })
        .and_then(|x| x["value"].as_f64());
    assert!(polls.is_some_and(|n| n >= 1.0), "{polls:?}");
    let hooks: f64 = during
        .iter()
        .filter(|x| x["name"] == "drainit_requests_total" && x["labels"]["purpose"] == "stop_hook")
        .map(|x| x["value"].as_f64().unwrap())
        .sum();
    assert_eq!(hooks, 0.0, "no hook was asked");
    in_flight.store(3, Ordering::SeqCst);
    wait_for(
        "the gauge to follow the body",
        Duration::from_secs(10),
        || {
            (sample(&scrape(port, &scratch), "drainit_app_in_flight", None) == Some(3.0))
                .then_some(())
        },
    );
    in_flight.store(0, Ordering::SeqCst);
    assert_eq!(d.wait_code(), 0, "drained");
    let report: Value = exit_report(scratch.file("report.json"));
    assert_eq!(report["in_flight"]["at_stop"], 5, "{report}");
    assert_eq!(report["in_flight"]["max"], 5, "{report}");
    assert_eq!(report["in_flight"]["last"], 0, "{report}");
    assert!(report.to_string().len() < 4096);
}

#[test]
fn a_thousand_paced_signals_are_counted_as_the_app_received_them() {
    if !python_packages() {
        return;
    }
    let scratch = Scratch::new("metrics-signals");
    let port = free_port();
    let serve = format!("127.0.0.1:{port}");
    let d = with_child(
        &["--serve", &serve],
        &scratch,
        "n=0; trap 'n=$((n+1)); echo $n > $D/count.tmp; mv $D/count.tmp $D/count' USR1; \
                 sleep 1000 & touch $D/up; while :; do wait; done",
    )
    .start();
    scratch.wait_file("up");
    for i in 1..=1000u32 {
        d.signal(libc::SIGUSR1);
        // Standard signals coalesce: the next goes only once the app
        // counted this one.
        wait_for(
            "the app to count the signal",
            Duration::from_secs(10),
            || {
                (std::fs::read_to_string(scratch.file("count"))
                    .ok()?
                    .trim()
                    .parse::<u32>()
                    .ok()?
                    == i)
                    .then_some(())
            },
        );
    }
    // The app got the last one before the loop published its count.
    let samples = wait_for("the count published", Duration::from_secs(10), || {
        let s = scrape(port, &scratch);
        let n = sample(
            &s,
            "drainit_signals_forwarded_total",
            Some(("signal", "SIGUSR1")),
        );
        (n == Some(1000.0)).then_some(s)
    });
    assert_eq!(sample(&samples, "drainit_stopping", None), Some(0.0));
    d.signal(libc::SIGKILL);
}

#[test]
fn a_count_field_that_is_missing_or_not_a_number_reports_nothing() {
    if !python_packages() {
        return;
    }
    for body in [
        r#"{"readyForTermination":false,"activeExecutions":"three"}"#,
        r#"{"readyForTermination":false}"#,
        r#"{"readyForTermination":false,"activeExecutions":-2}"#,
    ] {
        let scratch = Scratch::new("metrics-bad-count");
        let app = Server::start(move |_, _| json(200, body));
        let port = free_port();
        let serve = format!("127.0.0.1:{port}");
        let mut d = with_child(
            &[
                "--serve",
                &serve,
                "--grace",
                "2s",
                "--drain-interval",
                "100ms",
                "--drain-url",
                &app.url("/drain"),
                "--drain-count-field",
                "/activeExecutions",
                "--exit-report",
                path_str(&scratch.file("report.json")),
            ],
            &scratch,
            STUBBORN,
        )
        .start();
        scratch.wait_file("up");
        wait_for("the listener", Duration::from_secs(10), || {
            http_get(port, "/healthz").filter(|(code, _)| *code == 200)
        });
        d.signal(libc::SIGTERM);
        wait_for("a few drain polls", Duration::from_secs(10), || {
            (app.count() >= 3).then_some(())
        });
        let samples = scrape(port, &scratch);
        assert_eq!(sample(&samples, "drainit_stopping", None), Some(1.0));
        assert_eq!(
            sample(&samples, "drainit_app_in_flight", None),
            None,
            "{body}"
        );
        assert_eq!(d.wait_code(), 124);
        let report: Value = exit_report(scratch.file("report.json"));
        assert!(report["in_flight"]["last"].is_null(), "{body}: {report}");
        assert!(report["in_flight"]["max"].is_null(), "{body}: {report}");
        let said = d
            .stderr()
            .lines()
            .filter(|l| l.contains("--drain-count-field"))
            .count();
        assert_eq!(said, 1, "said once: {}", d.stderr());
    }
}

/// The EMF lines on drainit's stderr: JSON objects with `_aws`.
fn emf_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with('{') && l.contains("\"_aws\""))
        .map(str::to_string)
        .collect()
}

fn one_valid_emf_line(d: &Drainit, scratch: &Scratch) -> Value {
    let lines = emf_lines(&d.stderr());
    assert_eq!(lines.len(), 1, "one EMF line: {}", d.stderr());
    assert!(lines[0].len() < 16 * 1024, "{}", lines[0].len());
    let file = scratch.file("emf.json");
    std::fs::write(&file, &lines[0]).unwrap();
    assert_eq!(check("emf", &file).trim(), "valid");
    serde_json::from_str(&lines[0]).unwrap()
}

#[test]
fn emf_for_a_drained_stop_and_a_deadline_stop_in_both_log_formats() {
    if !python_packages() {
        return;
    }
    for (format, ready, code) in [("text", true, 0), ("json", false, 124)] {
        let scratch = Scratch::new("emf-stop");
        let app = Server::start(move |_, _| {
            json(
                200,
                &format!(r#"{{"readyForTermination":{ready},"activeExecutions":2}}"#),
            )
        });
        let mut d = with_child(
            &[
                "--emf",
                "--emf-namespace",
                "drainit-test",
                "--log-format",
                format,
                "--grace",
                "2s",
                "--drain-interval",
                "100ms",
                "--ready-grace",
                "100ms",
                "--drain-url",
                &app.url("/drain"),
                "--drain-count-field",
                "/activeExecutions",
            ],
            &scratch,
            STUBBORN,
        )
        .start();
        scratch.wait_file("up");
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), code);
        let v = one_valid_emf_line(&d, &scratch);
        let cwm = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cwm["Namespace"], "drainit-test");
        assert_eq!(cwm["Dimensions"][0], serde_json::json!(["Service"]));
        assert_eq!(v["Service"], "drainit");
        assert_eq!(v["ExitCode"], code);
        assert_eq!(v["DeadlineEscalations"], u64::from(!ready));
        assert_eq!(v["InFlightAtStop"], 2);
        assert!(v["StopDuration"].as_u64().is_some());
        // No value in this stop: left out, never null.
        assert_eq!(v.get("TimeToReady").is_some(), ready, "{v}");
        for m in cwm["Metrics"].as_array().unwrap() {
            assert!(v[m["Name"].as_str().unwrap()].is_number(), "{v}");
        }
    }
}

#[test]
fn emf_with_ecs_metadata_has_the_tasks_dimensions() {
    if !python_packages() {
        return;
    }
    let scratch = Scratch::new("emf-ecs");
    let agent = Server::start(|seen, _| match seen.path.as_str() {
        "/v4/abc" => json(200, CONTAINER),
        "/v4/abc/task" => json(200, TASK),
        _ => json(404, "{}"),
    });
    let port = free_port();
    let serve = format!("127.0.0.1:{port}");
    let mut d = with_child(
        &["--emf", "--serve", &serve],
        &scratch,
        "touch $D/up; while :; do sleep 1; done",
    )
    .env("ECS_CONTAINER_METADATA_URI_V4", &agent.url("/v4/abc"))
    .start();
    scratch.wait_file("up");
    wait_for(
        "the task metadata in the status",
        Duration::from_secs(10),
        || {
            let (_, body) = http_get(port, "/status")?;
            let status: Value = serde_json::from_str(&body).ok()?;
            status["ecs_task_arn"].as_str().map(drop)
        },
    );
    assert!(agent.count() > 0);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 143);
    let v = one_valid_emf_line(&d, &scratch);
    assert_eq!(
        v["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0],
        serde_json::json!(["ClusterName", "TaskFamily", "ServiceName"])
    );
    assert_eq!(v["ClusterName"], "default");
    assert_eq!(v["TaskFamily"], "curltest");
    assert_eq!(v["ServiceName"], "MyService");
    assert_eq!(v["ExitCode"], 143);
}

#[test]
fn emf_stays_under_16_kib_with_the_longest_status_text() {
    if !python_packages() {
        return;
    }
    let scratch = Scratch::new("emf-status");
    // The longest datagram the notify socket takes, all of it STATUS text
    // of characters the report escapes.
    let status: String = "\u{1}\"\\".repeat(1300);
    let script = format!(
        "python3 -c 'import os,socket; a=os.environ[\"NOTIFY_SOCKET\"]; a=\"\\0\"+a[1:] if a[0]==\"@\" else a; \
         s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendto(open(\"{}\",\"rb\").read(), a)'; \
         touch $D/up; while :; do sleep 1; done",
        path_str(&scratch.file("msg"))
    );
    std::fs::write(scratch.file("msg"), format!("STATUS={status}")).unwrap();
    let mut d = with_child(&["--emf", "--notify", "--grace", "2s"], &scratch, &script).start();
    scratch.wait_file("up");
    d.signal(libc::SIGTERM);
    d.wait_code();
    let v = one_valid_emf_line(&d, &scratch);
    let said = v["notify_status"].as_str().unwrap_or_default();
    assert!(!said.is_empty(), "the STATUS text is carried: {v}");
}

#[test]
fn notify_messages_are_counted_by_kind_and_status_follows_the_app() {
    if !python_packages() {
        return;
    }
    let scratch = Scratch::new("metrics-notify");
    let port = free_port();
    let serve = format!("127.0.0.1:{port}");
    // READY=1, then five STATUS messages and one the parser cannot name.
    let send = "import os,socket,sys; a=os.environ['NOTIFY_SOCKET']; \
                a='\\0'+a[1:] if a[0]=='@' else a; \
                s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); \
                [s.sendto(m.encode(), a) for m in sys.argv[1:]]";
    let script = format!(
        "python3 -c \"{send}\" READY=1 STATUS=one STATUS=two STATUS=three STATUS=four 'STATUS=five' MAINPID=1; \
         touch $D/up; while :; do sleep 1; done"
    );
    let d = with_child(&["--notify", "--serve", &serve], &scratch, &script).start();
    scratch.wait_file("up");
    // No stop and nothing the stop waits for after READY=1: the counts
    // still arrive, within the reader's once-a-second hand-over.
    let samples = wait_for(
        "the status messages counted",
        Duration::from_secs(10),
        || {
            let s = scrape(port, &scratch);
            (sample(
                &s,
                "drainit_notify_messages_total",
                Some(("kind", "status")),
            ) == Some(5.0))
            .then_some(s)
        },
    );
    let kind = |k| sample(&samples, "drainit_notify_messages_total", Some(("kind", k)));
    assert_eq!(kind("ready"), Some(1.0));
    assert_eq!(kind("other"), Some(1.0));
    assert_eq!(kind("stopping"), Some(0.0));
    assert_eq!(
        sample(&samples, "drainit_notify_refused_total", None),
        Some(0.0)
    );
    let (_, body) = http_get(port, "/status").unwrap();
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["notify"]["status"], "five", "{status}");
    assert_eq!(status["notify"]["ready"], true, "{status}");
    assert_eq!(status["notify"]["received"], 7, "{status}");
    d.signal(libc::SIGKILL);
}
