//! The stop timeline against real loopback endpoints: readiness rules,
//! ready grace, deadline, pre-stop delay and stop hook, the exit report, JSON
//! logs and bad drain options. drainit runs as PID 1 with a real child that
//! outlives SIGTERM unless a test says otherwise.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::server::{json, refusing_url, Reply, Server};
use support::*;

/// A child that records TERM/INT/USR1 and keeps running.
const STUBBORN: &str = "trap 'echo TERM >> \"$D/term\"' TERM; trap 'echo INT >> \"$D/int\"' INT; \
                        trap 'echo USR1 >> \"$D/usr1\"' USR1; touch \"$D/ready\"; while :; do sleep 0.05; done";

struct Run {
    code: i32,
    report: Value,
    stderr: String,
    /// From the test's kill(TERM) to drainit's exit, as the test saw it.
    elapsed: Duration,
    term_sent: Instant,
}

fn stop_run(scratch: &Scratch, flags: &[&str], child: &str) -> Run {
    let report_path = scratch.file("report.json");
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--exit-report".to_string(),
        path_str(&report_path).to_string(),
    ]);
    args.extend(sh(scratch, child));
    let mut d = drainit(args).start();
    scratch.wait_file("ready");
    let term_sent = Instant::now();
    d.signal(libc::SIGTERM);
    let code = d.wait_code();
    let elapsed = term_sent.elapsed();
    let text = std::fs::read_to_string(&report_path).unwrap_or_default();
    let report: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("report {text:?}: {e}; stderr {}", d.stderr()));
    Run {
        code,
        report,
        stderr: d.stderr(),
        elapsed,
        term_sent,
    }
}

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not a number of ms: {v}"))
}

#[test]
fn busy_then_ready_drains_and_exits_0_after_ready_grace() {
    let scratch = Scratch::new("busy-ready");
    // Busy for the first 4 polls, ready from then on.
    let server = Server::start(|_, i| {
        if i < 4 {
            json(
                503,
                &format!(
                    "{{\"readyForTermination\":false,\"activeExecutions\":{}}}",
                    4 - i
                ),
            )
        } else {
            json(200, "{\"readyForTermination\":true,\"activeExecutions\":0}")
        }
    });
    let url = server.url("/drain");
    let run = stop_run(
        &scratch,
        &[
            "--drain-url",
            &url,
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "500ms",
            "--grace",
            "30s",
        ],
        STUBBORN,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.report["outcome"], "drained");
    assert_eq!(run.report["exit_code"], 0);
    assert_eq!(run.report["stop_trigger"], "signal");
    assert_eq!(run.report["stop_signal"], "SIGTERM");
    assert_eq!(run.report["child_status"]["signaled"], "SIGKILL");
    assert!(ms(&run.report["drain_polls"]) >= 5);
    assert!(run.report["last_drain"]
        .as_str()
        .unwrap()
        .contains("activeExecutions=0"));
    // SIGKILL came neither before readiness nor long after ready grace.
    let ready_at = server.seen()[4].at;
    let since_ready = (run.term_sent + run.elapsed).saturating_duration_since(ready_at);
    assert!(
        since_ready >= Duration::from_millis(500),
        "killed {since_ready:?} after the first ready answer"
    );
    assert!(
        since_ready < Duration::from_secs(5),
        "killed {since_ready:?} after ready"
    );
    let (to_ready, to_exit) = (
        ms(&run.report["stop_to_ready_ms"]),
        ms(&run.report["stop_to_exit_ms"]),
    );
    assert!(
        to_exit >= to_ready + 500,
        "ready {to_ready} ms, exit {to_exit} ms"
    );
    assert_eq!(
        scratch.read("term").trim(),
        "TERM",
        "the app got the stop signal once"
    );
}

#[test]
fn never_ready_is_killed_at_the_deadline_with_124() {
    let scratch = Scratch::new("never");
    let server = Server::start(|_, _| json(503, "{\"readyForTermination\":false}"));
    let url = server.url("/drain");
    let run = stop_run(
        &scratch,
        &[
            "--drain-url",
            &url,
            "--drain-interval",
            "100ms",
            "--grace",
            "1s",
        ],
        STUBBORN,
    );
    assert_eq!(run.code, 124, "{}", run.stderr);
    assert_eq!(run.report["outcome"], "deadline");
    let to_exit = ms(&run.report["stop_to_exit_ms"]);
    assert!((1000..2000).contains(&to_exit), "stop_to_exit_ms {to_exit}");
    assert!(
        run.elapsed >= Duration::from_millis(1000),
        "{:?}",
        run.elapsed
    );
    assert!(run.report["stop_to_ready_ms"].is_null());
}

#[test]
fn deadline_exit_code_is_configurable() {
    let scratch = Scratch::new("deadline-code");
    let run = stop_run(
        &scratch,
        &[
            "--drain-url",
            &refusing_url(),
            "--grace",
            "500ms",
            "--deadline-exit-code",
            "99",
        ],
        STUBBORN,
    );
    assert_eq!(run.code, 99);
    assert_eq!(run.report["outcome"], "deadline");
}

/// Each misbehaving endpoint: not ready, and the deadline still holds. A
/// long poll interval makes the request timeout the time left to the
/// deadline, so only that bound can keep the deadline.
fn broken_endpoint_keeps_the_deadline(name: &str, reply: fn() -> Reply) {
    let scratch = Scratch::new(name);
    let server = Server::start(move |_, _| reply());
    let url = server.url("/drain");
    let run = stop_run(
        &scratch,
        &[
            "--drain-url",
            &url,
            "--drain-interval",
            "10s",
            "--grace",
            "1s",
        ],
        STUBBORN,
    );
    assert_eq!(run.code, 124, "{name}: {}", run.stderr);
    let to_exit = ms(&run.report["stop_to_exit_ms"]);
    assert!(
        (1000..2000).contains(&to_exit),
        "{name}: stop_to_exit_ms {to_exit}"
    );
    assert!(server.count() >= 1, "{name}: the endpoint was polled");
}

#[test]
fn hanging_endpoint_does_not_delay_the_deadline() {
    broken_endpoint_keeps_the_deadline("hang", || Reply::Hang);
}

#[test]
fn dribbling_endpoint_does_not_delay_the_deadline() {
    broken_endpoint_keeps_the_deadline("dribble", || Reply::Dribble(Duration::from_millis(100)));
}

#[test]
fn endless_body_is_not_ready() {
    broken_endpoint_keeps_the_deadline("endless", || Reply::Endless);
}

#[test]
fn invalid_http_is_not_ready() {
    broken_endpoint_keeps_the_deadline("garbage", || Reply::Garbage);
}

#[test]
fn absurd_chunk_sizes_and_lengths_are_not_ready() {
    broken_endpoint_keeps_the_deadline("huge-chunk", || {
        Reply::Raw("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\nffffffffffffffff\r\n{}")
    });
    broken_endpoint_keeps_the_deadline("bad-length", || {
        Reply::Raw("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 99999999999999999999999\r\n\r\nOK")
    });
}

#[test]
fn body_closed_midway_is_not_ready() {
    broken_endpoint_keeps_the_deadline("close", || Reply::CloseMidBody);
}

#[test]
fn body_over_64_kib_is_not_ready() {
    broken_endpoint_keeps_the_deadline("huge", || {
        json(
            200,
            &format!(
                "{{\"readyForTermination\":true,\"pad\":\"{}\"}}",
                "x".repeat(70 * 1024)
            ),
        )
    });
}

#[test]
fn redirect_is_not_followed_and_not_ready() {
    broken_endpoint_keeps_the_deadline("redirect", || Reply::Redirect(302, "/ready".into()));
}

#[test]
fn garbage_json_is_not_ready() {
    broken_endpoint_keeps_the_deadline("bad-json", || json(200, "{\"readyForTermination\": tru"));
}

#[test]
fn refused_connection_is_not_ready_but_the_child_may_exit_by_itself() {
    let scratch = Scratch::new("refused");
    // This child exits 0 on its own a moment after TERM.
    let child = "trap 'sleep 0.3; exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
    let run = stop_run(
        &scratch,
        &[
            "--drain-url",
            &refusing_url(),
            "--drain-interval",
            "50ms",
            "--grace",
            "20s",
        ],
        child,
    );
    assert_eq!(run.code, 0);
    assert_eq!(run.report["outcome"], "exited");
    assert_eq!(run.report["child_status"]["exited"], 0);
    assert!(ms(&run.report["stop_to_exit_ms"]) < 10_000);
}

/// A drain URL answering 401, 403, 404 or 405 (no JSON body deciding)
/// looks wrong: one warning per source until its answer changes (404,
/// then a busy 503, then 404 again: two), none for a 404 whose JSON body
/// decides; the stop runs to the deadline either way.
#[test]
fn a_wrong_drain_url_is_one_warning_until_its_answer_changes() {
    let scratch = Scratch::new("wrong-url");
    let server = Server::start(|_, i| match i {
        4..=7 => json(503, "{\"readyForTermination\":false}"),
        _ => Reply::Send(404, "text/plain", "no such route".into()),
    });
    let url = server.url("/drian");
    let flags = [
        "--drain-url",
        &url,
        "--drain-interval",
        "100ms",
        "--grace",
        "2s",
    ];
    let run = stop_run(&scratch, &flags, STUBBORN);
    assert_eq!(run.code, 124, "{}", run.stderr);
    assert!(server.count() >= 12, "polled {} times", server.count());
    let warnings: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("the URL looks wrong"))
        .collect();
    assert_eq!(warnings.len(), 2, "{}", run.stderr);
    for line in &warnings {
        assert!(line.contains("WARN") && line.contains("HTTP 404"), "{line}");
    }

    let scratch = Scratch::new("wrong-url-json");
    let server = Server::start(|_, _| json(404, "{\"readyForTermination\":false}"));
    let url = server.url("/drain");
    let flags = [
        "--drain-url",
        &url,
        "--drain-interval",
        "100ms",
        "--grace",
        "1s",
    ];
    let run = stop_run(&scratch, &flags, STUBBORN);
    assert_eq!(run.code, 124, "{}", run.stderr);
    assert!(!run.stderr.contains("looks wrong"), "{}", run.stderr);
}

/// A stop against a drain endpoint that always gives `reply`.
fn against(name: &str, reply: fn() -> Reply, flags: &[&str], child: &str) -> Run {
    let scratch = Scratch::new(name);
    let server = Server::start(move |_, _| reply());
    let url = server.url("/drain");
    let mut all = vec!["--drain-url", &url, "--grace", "20s"];
    all.extend_from_slice(flags);
    stop_run(&scratch, &all, child)
}

#[test]
fn plain_200_text_is_ready() {
    let run = against(
        "text",
        || Reply::Send(200, "text/plain", "OK".into()),
        &["--ready-grace", "100ms"],
        STUBBORN,
    );
    assert_eq!(run.code, 0);
    assert_eq!(run.report["outcome"], "drained");
}

#[test]
fn custom_drain_field() {
    let reply = || {
        json(
            200,
            "{\"readyForTermination\":false,\"status\":{\"drained\":true}}",
        )
    };
    let run = against(
        "field",
        reply,
        &["--drain-field", "/status/drained", "--ready-grace", "100ms"],
        STUBBORN,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.report["outcome"], "drained");
}

#[test]
fn child_exiting_by_itself_after_ready_keeps_its_own_code() {
    let child = "trap 'sleep 0.2; exit 7' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
    let run = against(
        "own-code",
        || json(200, "{\"readyForTermination\":true}"),
        &["--ready-grace", "10s"],
        child,
    );
    assert_eq!(run.code, 7);
    assert_eq!(run.report["outcome"], "exited");
}

#[test]
fn pre_stop_delay_then_stop_hook_then_signal() {
    let scratch = Scratch::new("prestop");
    let term_file = scratch.file("term");
    // The hook handler notes whether the app had already seen TERM.
    let server = Server::start(move |seen, _| {
        if seen.path == "/shutdown" {
            let already = term_file.exists();
            return Reply::Send(
                200,
                "text/plain",
                if already { "late" } else { "first" }.into(),
            );
        }
        json(200, "{\"readyForTermination\":true}")
    });
    let (hook, drain) = (server.url("/shutdown"), server.url("/drain"));
    let run = stop_run(
        &scratch,
        &[
            "--pre-stop-delay",
            "700ms",
            "--stop-url",
            &hook,
            "--drain-url",
            &drain,
            "--ready-grace",
            "100ms",
            "--grace",
            "20s",
        ],
        STUBBORN,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let seen = server.seen();
    let hooks: Vec<_> = seen.iter().filter(|s| s.path == "/shutdown").collect();
    assert_eq!(hooks.len(), 1, "the stop hook fires once");
    assert_eq!(hooks[0].method, "POST");
    let delay = hooks[0].at.duration_since(run.term_sent);
    assert!(delay >= Duration::from_millis(700), "hook after {delay:?}");
    assert!(delay < Duration::from_secs(5), "hook after {delay:?}");
    // The app got TERM only after the hook, and it was polled after that.
    assert_eq!(scratch.read("term").trim(), "TERM");
    let first_poll = seen
        .iter()
        .find(|s| s.path == "/drain")
        .expect("a drain poll")
        .at;
    assert!(first_poll >= hooks[0].at);
}

#[test]
fn stop_method_is_used() {
    let scratch = Scratch::new("method");
    let server = Server::start(|_, _| Reply::Send(204, "text/plain", String::new()));
    let hook = server.url("/quitquitquit");
    let child = "trap 'exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
    let run = stop_run(
        &scratch,
        &[
            "--stop-url",
            &hook,
            "--stop-method",
            "put",
            "--grace",
            "20s",
        ],
        child,
    );
    assert_eq!(run.code, 0);
    assert_eq!(server.seen()[0].method, "PUT");
}

#[test]
fn a_repeated_stop_signal_is_forwarded_again_and_signals_flow_while_a_request_hangs() {
    let scratch = Scratch::new("repeat");
    let server = Server::start(|_, _| Reply::Hang);
    let url = server.url("/drain");
    let mut args: Vec<String> = [
        "--drain-url",
        &url,
        "--drain-interval",
        "30s",
        "--grace",
        "30s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(sh(&scratch, STUBBORN));
    let mut d = drainit(args).start();
    scratch.wait_file("ready");
    d.signal(libc::SIGINT);
    wait_for("first INT", PATIENCE, || {
        (scratch.read("int").lines().count() == 1).then_some(())
    });
    wait_for("the drain request to hang", PATIENCE, || {
        (server.count() == 1).then_some(())
    });
    d.signal(libc::SIGINT);
    wait_for("second INT", PATIENCE, || {
        (scratch.read("int").lines().count() == 2).then_some(())
    });
    d.signal(libc::SIGUSR1);
    scratch.wait_file("usr1");
    assert_eq!(d.try_code(), None, "still draining");
    assert!(
        scratch.read("term").is_empty(),
        "INT began the stop; TERM was never sent"
    );
    d.signal(libc::SIGKILL);
}

#[test]
fn orphan_grace_terms_the_rest_and_waits_for_them() {
    let scratch = Scratch::new("orphans");
    // The main child leaves a worker behind that needs a moment after TERM.
    let child =
        "( trap 'sleep 0.3; echo done > \"$D/worker\"; exit 0' TERM; touch \"$D/worker-up\"; \
                 while :; do sleep 0.05; done ) & \
                 while [ ! -e \"$D/worker-up\" ]; do sleep 0.02; done; exit 5";
    let start = Instant::now();
    let (code, stderr) = drainit(["--orphan-grace", "10s"])
        .with_args(sh(&scratch, child))
        .run();
    assert_eq!(code, 5, "{stderr}");
    assert_eq!(
        scratch.read("worker").trim(),
        "done",
        "the orphan got SIGTERM and finished"
    );
    assert!(
        start.elapsed() < Duration::from_secs(9),
        "drainit did not wait out the whole grace"
    );
}

/// Busy with 2, then 1 active execution, then ready; run with `flags`.
fn counting_down_run(name: &str, flags: &[&str]) -> (Scratch, Run) {
    let scratch = Scratch::new(name);
    let server = Server::start(|_, i| {
        let body = format!(
            "{{\"readyForTermination\":{},\"activeExecutions\":{}}}",
            i > 1,
            2 - i.min(2)
        );
        json(200, &body)
    });
    let url = server.url("/drain");
    let mut all = vec![
        "--drain-url",
        &url,
        "--drain-interval",
        "50ms",
        "--ready-grace",
        "100ms",
    ];
    all.extend_from_slice(flags);
    let run = stop_run(&scratch, &all, STUBBORN);
    assert_eq!(run.code, 0, "{}", run.stderr);
    (scratch, run)
}

#[test]
fn json_logs_parse_line_by_line_and_end_with_the_report() {
    let (_scratch, run) = counting_down_run("json-logs", &["--log-format", "json", "-vvv"]);
    let lines: Vec<Value> = run
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    assert!(lines.len() >= 4);
    for line in &lines {
        assert!(
            line["ts"].is_string() && line["level"].is_string() && line["msg"].is_string(),
            "{line}"
        );
    }
    let last = lines.last().unwrap();
    assert_eq!(last["report"]["outcome"], "drained");
    assert_eq!(
        last["report"], run.report,
        "the logged report is the written one"
    );
}

#[test]
fn text_logs_show_progress_and_end_with_the_report() {
    let (_scratch, run) = counting_down_run("text-logs", &[]);
    assert!(
        run.stderr.lines().all(|l| l.starts_with("[drainit] ")),
        "{}",
        run.stderr
    );
    // Each source's changes at most once a second: the first count and
    // the last (in the ready line) are always there.
    for progress in [
        "not ready (HTTP 200, /readyForTermination=false, activeExecutions=2)",
        "app reports ready (HTTP 200, /readyForTermination=true, activeExecutions=0)",
    ] {
        assert!(
            run.stderr.contains(progress),
            "no {progress} in {}",
            run.stderr
        );
    }
    let last = run.stderr.lines().last().unwrap();
    let report: Value = serde_json::from_str(last.split_once("exit report ").unwrap().1).unwrap();
    assert_eq!(report, run.report);
}

#[test]
fn without_drain_options_a_stop_is_silent_and_tini_like() {
    let scratch = Scratch::new("silent");
    let mut d = drainit(sh(&scratch, "touch \"$D/ready\"; exec sleep 600")).start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 128 + libc::SIGTERM);
    assert_eq!(d.stderr(), "", "nothing is wrong, so nothing is printed");
}

#[test]
fn bad_drain_options_exit_2_with_one_line() {
    assert_usage_error(&["--grace", "abc"], &[], "--grace");
    assert_usage_error(
        &["--drain-url", "https://127.0.0.1/drain"],
        &[],
        "--drain-url",
    );
    assert_usage_error(&["--stop-url", "ftp://x/"], &[], "--stop-url");
    assert_usage_error(
        &["--drain-field", "readyForTermination"],
        &[],
        "--drain-field",
    );
    assert_usage_error(&["--drain-interval", "0"], &[], "--drain-interval");
    assert_usage_error(&["--pre-stop-delay=-1s"], &[], "--pre-stop-delay");
    assert_usage_error(&["--stop-signals", "TERM,KILL"], &[], "--stop-signals");
    assert_usage_error(
        &["--deadline-exit-code", "300"],
        &[],
        "--deadline-exit-code",
    );
    assert_usage_error(&["--log-format", "xml"], &[], "--log-format");
    assert_usage_error(&[], &[("DRAINIT_GRACE", "abc")], "DRAINIT_GRACE");
    assert_usage_error(
        &[],
        &[("DRAINIT_DRAIN_URL", "https://x/")],
        "DRAINIT_DRAIN_URL",
    );
}
