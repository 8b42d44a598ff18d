//! `--max-runtime` end to end, drainit as PID 1 with a real child: once the
//! app has run D, the stop begins as a stop signal's would (the stop
//! signal forwarded, the drain sources asked, the deadline `--grace` from
//! then), with trigger `max_runtime` in the exit report, `/status` and the
//! stop's log line. Covered: an app that exits on SIGTERM (exit 0, the
//! stop ~3 s after the start, `/status` during it); an app that drains by
//! its endpoint, with the variable (`DRAINIT_MAX_RUNTIME`); a stubborn app
//! (the deadline's 124 at 3 s + grace); the platform's SIGTERM during that
//! stop (forwarded as a second signal is, the stop not restarted); a stop
//! signal before the maximum (the maximum then does nothing); bad values
//! (exit 2, the child never started); both libc builds. Needs no
//! Kubernetes client: it runs without default features too.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::server::{json, Server};
use support::*;

/// Records each TERM in `$D/term`, then exits 0 after a moment.
const EXITS_ON_TERM: &str = "trap 'echo TERM >> \"$D/term\"; sleep 1; exit 0' TERM; \
                             touch \"$D/ready\"; while :; do sleep 0.05; done";

/// Records each TERM in `$D/term` and keeps running.
const STUBBORN: &str = "trap 'echo TERM >> \"$D/term\"' TERM; touch \"$D/ready\"; \
                        while :; do sleep 0.05; done";

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not a number of ms: {v}"))
}

/// drainit with `flags` and `--exit-report` running `child`, started now.
fn launch(scratch: &Scratch, flags: &[&str], child: &str) -> Launch {
    let report = scratch.file("report.json");
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(["--exit-report".into(), path_str(&report).into()]);
    args.extend(sh(scratch, child));
    drainit(args)
}

/// The TERMs the app has recorded.
fn terms(scratch: &Scratch) -> usize {
    scratch.read("term").lines().count()
}

/// Waits until the app has recorded `n` TERMs; when, as the test saw it.
fn wait_terms(scratch: &Scratch, n: usize) -> Instant {
    wait_for(&format!("{n} TERM recorded"), PATIENCE, || {
        (terms(scratch) >= n).then(Instant::now)
    })
}

/// The stop came at the maximum: no earlier than `max` after drainit was
/// launched (`launched`, before the child could start), and within an
/// honest margin of `max` after the child was seen running.
fn assert_at(what: &str, at: Instant, launched: Instant, running: Instant, max: Duration) {
    let from_launch = at - launched;
    assert!(
        from_launch >= max,
        "{what} {from_launch:?} after the launch"
    );
    let from_running = at.saturating_duration_since(running);
    assert!(
        from_running < max + Duration::from_millis(1_500),
        "{what} {from_running:?} after the app was seen running"
    );
}

#[test]
fn an_app_that_exits_on_its_signal_is_stopped_at_the_max_runtime_with_exit_0() {
    let scratch = Scratch::new("max-exits");
    let port = free_port();
    let serve = format!("127.0.0.1:{port}");
    let launched = Instant::now();
    let mut d = launch(
        &scratch,
        &["--max-runtime", "3s", "--serve", &serve],
        EXITS_ON_TERM,
    )
    .start();
    scratch.wait_file("ready");
    let running = Instant::now();
    let before = wait_for("/status", PATIENCE, || http_get(port, "/status"));
    let before: Value = serde_json::from_str(&before.1).unwrap();
    assert_eq!(before["phase"], "running", "{before}");
    assert!(before["stop_trigger"].is_null());
    let term = wait_terms(&scratch, 1);
    assert_at("SIGTERM", term, launched, running, Duration::from_secs(3));
    // The app takes a second to exit: /status shows the stop meanwhile.
    let (_, status) = http_get(port, "/status").expect("/status during the stop");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["stopping"], true, "{status}");
    assert_eq!(status["stop_trigger"], "max_runtime", "{status}");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let report = exit_report(scratch.file("report.json"));
    assert_eq!(report["stop_trigger"], "max_runtime", "{report}");
    assert!(report["stop_signal"].is_null(), "as after ECS: {report}");
    assert_eq!(report["outcome"], "exited");
    assert_eq!(
        report["deadline_ms"], 8_000,
        "the default --grace: {report}"
    );
    let stderr = d.stderr();
    assert!(
        stderr.contains("stop begins (max_runtime"),
        "the stop's line names its trigger: {stderr}"
    );
    assert!(
        stderr.contains("--max-runtime 3s: a stop begins 3000 ms after the app started"),
        "a drain option: info logs on: {stderr}"
    );
    assert_eq!(terms(&scratch), 1, "one stop signal");
}

#[test]
fn with_the_variable_an_app_drains_by_its_endpoint_after_the_max_runtime() {
    let scratch = Scratch::new("max-drains");
    // Busy twice, then ready.
    let server = Server::start(|_, i| match i {
        0 | 1 => json(200, "{\"readyForTermination\":false}"),
        _ => json(200, "{\"readyForTermination\":true}"),
    });
    let url = server.url("/drain");
    let launched = Instant::now();
    let mut d = launch(
        &scratch,
        &[
            "--drain-url",
            &url,
            "--drain-interval",
            "200ms",
            "--ready-grace",
            "300ms",
            "--grace",
            "20s",
        ],
        STUBBORN,
    )
    .env("DRAINIT_MAX_RUNTIME", "3s")
    .start();
    scratch.wait_file("ready");
    let running = Instant::now();
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let seen = server.seen();
    assert!(seen.len() >= 3, "{seen:?}");
    // The drain endpoint is asked only once the stop began.
    assert_at(
        "the first poll",
        seen[0].at,
        launched,
        running,
        Duration::from_secs(3),
    );
    let report = exit_report(scratch.file("report.json"));
    assert_eq!(report["stop_trigger"], "max_runtime", "{report}");
    assert_eq!(report["outcome"], "drained", "{report}");
    assert_eq!(report["deadline_ms"], 20_000);
    assert!(ms(&report["drain_polls"]) >= 3, "{report}");
    assert_eq!(terms(&scratch), 1, "the stop signal, once");
}

#[test]
fn a_stubborn_app_ends_as_at_a_deadline_after_the_max_runtime_and_the_grace() {
    let scratch = Scratch::new("max-stubborn");
    let launched = Instant::now();
    let mut d = launch(
        &scratch,
        &["--max-runtime", "3s", "--grace", "2s"],
        STUBBORN,
    )
    .start();
    scratch.wait_file("ready");
    let running = Instant::now();
    let term = wait_terms(&scratch, 1);
    assert_at("SIGTERM", term, launched, running, Duration::from_secs(3));
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    let ended = Instant::now();
    assert!(
        ended - launched >= Duration::from_secs(5),
        "{:?}",
        ended - launched
    );
    let report = exit_report(scratch.file("report.json"));
    assert_eq!(report["outcome"], "deadline", "{report}");
    assert_eq!(report["stop_trigger"], "max_runtime");
    assert_eq!(report["deadline_ms"], 2_000);
    let to_exit = ms(&report["stop_to_exit_ms"]);
    assert!(
        (2_000..3_500).contains(&to_exit),
        "stop_to_exit_ms {to_exit}"
    );
}

#[test]
fn the_platforms_sigterm_during_that_stop_is_a_second_signal_and_restarts_nothing() {
    let scratch = Scratch::new("max-then-term");
    // Stubborn, and says when 1.5 s of its stop have passed: the test's
    // SIGTERM comes then, half-way to the deadline.
    let app = "trap 'echo TERM >> \"$D/term\"; (sleep 1.5; touch \"$D/mid\") &' TERM; \
               touch \"$D/ready\"; while :; do sleep 0.05; done";
    let mut d = launch(&scratch, &["--max-runtime", "1s", "--grace", "3s"], app).start();
    scratch.wait_file("ready");
    wait_terms(&scratch, 1);
    scratch.wait_file("mid");
    let sent = Instant::now();
    d.signal(libc::SIGTERM);
    // Not absorbed (as after an ECS stop): the app has its stop signal, so
    // a second one reaches it, as during any stop.
    wait_terms(&scratch, 2);
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    // About 1.5 s after it; a stop begun again would have waited 3 s.
    assert!(
        sent.elapsed() < Duration::from_millis(2_500),
        "the deadline stays where the max runtime's stop put it: {:?}",
        sent.elapsed()
    );
    let report = exit_report(scratch.file("report.json"));
    assert_eq!(report["stop_trigger"], "max_runtime", "{report}");
    assert_eq!(report["deadline_ms"], 3_000);
    let to_exit = ms(&report["stop_to_exit_ms"]);
    assert!(
        (3_000..4_500).contains(&to_exit),
        "stop_to_exit_ms {to_exit}"
    );
    assert_eq!(terms(&scratch), 2);
}

#[test]
fn a_stop_signal_before_the_max_runtime_is_the_only_stop() {
    let scratch = Scratch::new("max-after-signal");
    // The app takes 8 s after its SIGTERM: past the 6 s maximum (6 s
    // leaves the signal room to come first on a loaded machine).
    let app = "trap 'echo TERM >> \"$D/term\"; sleep 8; exit 0' TERM; \
               touch \"$D/ready\"; while :; do sleep 0.05; done";
    let mut d = launch(&scratch, &["--max-runtime", "6s", "--grace", "12s"], app).start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let report = exit_report(scratch.file("report.json"));
    assert_eq!(report["stop_trigger"], "signal", "{report}");
    assert_eq!(report["stop_signal"], "SIGTERM");
    assert_eq!(report["deadline_ms"], 12_000, "not restarted at 6 s");
    assert!(ms(&report["stop_to_exit_ms"]) >= 8_000, "{report}");
    assert_eq!(terms(&scratch), 1, "no second stop signal at 6 s");
    assert!(!d.stderr().contains("max_runtime"), "{}", d.stderr());
}

#[test]
fn bad_values_exit_2_before_the_child_starts() {
    for bad in [
        "0",
        "0s",
        "0ms",
        "0.0001",
        "none",
        "NONE",
        "abc",
        "3h",
        "400d",
        "31536001s",
    ] {
        assert_usage_error(&["--max-runtime", bad], &[], "--max-runtime");
    }
    assert_usage_error(&["--max-runtime=-1s"], &[], "--max-runtime");
    for bad in ["0", "none", "soon"] {
        assert_usage_error(&[], &[("DRAINIT_MAX_RUNTIME", bad)], "DRAINIT_MAX_RUNTIME");
    }
}

#[test]
fn both_libc_builds_stop_at_the_max_runtime() {
    for build in [Build::Glibc, Build::Static] {
        let binary = built(build);
        let scratch = Scratch::new("max-builds");
        let launched = Instant::now();
        let mut d = launch(&scratch, &["--max-runtime", "1s"], EXITS_ON_TERM)
            .binary(&binary)
            .start();
        scratch.wait_file("ready");
        let running = Instant::now();
        let term = wait_terms(&scratch, 1);
        assert_at("SIGTERM", term, launched, running, Duration::from_secs(1));
        assert_eq!(d.wait_code(), 0, "{build:?}: {}", d.stderr());
        let report = exit_report(scratch.file("report.json"));
        assert_eq!(report["stop_trigger"], "max_runtime", "{build:?}: {report}");
    }
}
