//! Defaults that fit the platform and no silent traps: the default grace
//! per platform (from the exit report's deadline), a comma in a URL flag,
//! log levels an operator can trust (JSON logs, by level), and drainit
//! called by another init's name.

mod support;

use serde_json::Value;
use support::server::{json, refusing_url, Server};
use support::*;

/// A stop of a child that exits on TERM, with a drain option and no
/// --grace, under `vars`: the report's deadline.
fn default_deadline(vars: &[(&str, &str)]) -> (Value, String) {
    let scratch = Scratch::new("grace-default");
    let report_path = scratch.file("report.json");
    let never = scratch.file("never");
    let mut launch = drainit([
        "--drain-file",
        path_str(&never),
        "--exit-report",
        path_str(&report_path),
    ])
    .with_args(sh(
        &scratch,
        "trap 'exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
    ));
    for (k, v) in vars {
        launch = launch.env(k, v);
    }
    let mut d = launch.start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    (
        exit_report(scratch.file("report.json"))["deadline_ms"].clone(),
        d.stderr(),
    )
}

#[test]
fn the_default_grace_fits_the_platform() {
    let (deadline, stderr) = default_deadline(&[]);
    assert_eq!(deadline, 8_000, "no platform: under docker stop's 10 s");
    assert!(
        stderr.contains("--grace 8s by default"),
        "said at start: {stderr}"
    );
    let (deadline, _) = default_deadline(&[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]);
    assert_eq!(deadline, 25_000, "Kubernetes");
    // ECS: a usable metadata variable (nothing answers there: a warning).
    let ecs = format!("{}/v4/abc", refusing_url().trim_end_matches('/'));
    let (deadline, _) = default_deadline(&[("ECS_CONTAINER_METADATA_URI_V4", &ecs)]);
    assert_eq!(deadline, 25_000, "ECS");
    // A malformed ECS variable is no platform, and no reason to stop.
    let (deadline, stderr) = default_deadline(&[(
        "ECS_CONTAINER_METADATA_URI_V4",
        "https://169.254.170.2/v4/abc",
    )]);
    assert_eq!(deadline, 8_000, "{stderr}");
    assert_eq!(
        stderr
            .matches("ECS_CONTAINER_METADATA_URI_V4 is not a usable")
            .count(),
        1,
        "{stderr}"
    );
}

/// A grace given is said at start, once, as the default is: the deadline
/// it sets, and that the platform's kill must come after it.
#[test]
fn a_grace_given_is_said_at_start_as_the_default_is() {
    let (deadline, stderr) = default_deadline(&[("DRAINIT_GRACE", "12s")]);
    assert_eq!(deadline, 12_000, "{stderr}");
    let said = "DRAINIT_GRACE 12s: the deadline is 12000 ms after a stop begins; the platform's own kill must come later";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    assert!(!stderr.contains("by default"), "{stderr}");
    let (deadline, stderr) = default_deadline(&[("DRAINIT_GRACE", "none")]);
    assert_eq!(deadline, Value::Null, "{stderr}");
    assert_eq!(
        stderr
            .matches("DRAINIT_GRACE none: no deadline; the app has until the platform's own kill")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn a_malformed_ecs_variable_is_fatal_only_with_ecs_on() {
    let scratch = Scratch::new("ecs-bad-var");
    for bad in ["garbage", "http://[fe80::1%eth0]/v4"] {
        let (code, stderr) = drainit(Vec::<String>::new())
            .env("ECS_CONTAINER_METADATA_URI_V4", bad)
            .with_args(sh(&scratch, "exit 6"))
            .run();
        assert_eq!(code, 6, "auto: the child runs: {stderr}");
        let (code, stderr) = drainit(["--ecs", "on"])
            .env("ECS_CONTAINER_METADATA_URI_V4", bad)
            .with_args(sh(&scratch, "exit 6"))
            .run();
        assert_eq!(code, 2, "on: a usage error: {stderr}");
    }
}

#[test]
fn a_comma_in_a_drain_url_flag_makes_two_sources() {
    let scratch = Scratch::new("comma-flag");
    let (a, b) = (
        Server::start(|_, _| json(200, r#"{"readyForTermination":true}"#)),
        Server::start(|_, _| json(200, r#"{"readyForTermination":true}"#)),
    );
    let both = format!("{},{}", a.url("/drain"), b.url("/drain"));
    let report_path = scratch.file("report.json");
    let mut d = drainit([
        "--drain-url",
        &both,
        "--grace",
        "10s",
        "--ready-grace",
        "100ms",
        "--exit-report",
        path_str(&report_path),
    ])
    .with_args(sh(
        &scratch,
        "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
    ))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["sources"].as_array().unwrap().len(), 2, "{r}");
    assert!(a.count() >= 1 && b.count() >= 1, "both workers were polled");
}

/// The levels of drainit's JSON log lines.
fn levels(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| {
            (
                v["level"].as_str().unwrap_or("").to_string(),
                v["msg"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_drained_stop_logs_no_warning_and_a_refused_endpoint_one() {
    let scratch = Scratch::new("levels");
    // 503 while busy (three polls), then ready. (A 404 would be a warning:
    // the URL looks wrong.)
    let server = Server::start(|_, n| {
        if n < 3 {
            support::server::Reply::Send(503, "text/plain", "busy".into())
        } else {
            json(200, r#"{"readyForTermination":true}"#)
        }
    });
    let mut d = drainit([
        "--log-format",
        "json",
        "--drain-url",
        &server.url("/drain"),
        "--drain-interval",
        "100ms",
        "--ready-grace",
        "100ms",
        "--grace",
        "20s",
    ])
    .with_args(sh(
        &scratch,
        "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
    ))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let lines = levels(&d.stderr());
    assert!(lines.len() >= 4, "{lines:?}");
    let bad: Vec<_> = lines
        .iter()
        .filter(|(level, _)| level == "warn" || level == "error")
        .collect();
    assert!(bad.is_empty(), "a healthy drained stop: {bad:?}");
    // The drained app that did not exit is ended with SIGKILL: said, at
    // info, as the end of a drained stop rather than a failure.
    let said = |text: &str| {
        lines
            .iter()
            .filter(|(_, m)| m.contains(text))
            .map(|(level, _)| level.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        said("did not exit within --ready-grace: ending it with SIGKILL (the stop still counts as drained)"),
        ["info"],
        "{lines:?}"
    );
    assert_eq!(
        said("main child ended by that SIGKILL after draining"),
        ["info"],
        "{lines:?}"
    );

    // An endpoint that refuses: one warning, however many polls.
    let scratch = Scratch::new("levels-refused");
    let mut d = drainit([
        "--log-format",
        "json",
        "--drain-url",
        &refusing_url(),
        "--drain-interval",
        "100ms",
        "--grace",
        "2s",
    ])
    .with_args(sh(
        &scratch,
        "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
    ))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    let warnings: Vec<_> = levels(&d.stderr())
        .into_iter()
        .filter(|(level, m)| level == "warn" && m.contains("drain source"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

/// A copy of drainit under another init's name, in the scratch dir.
fn named(scratch: &Scratch, name: &str) -> String {
    let path = scratch.file(name);
    std::os::unix::fs::symlink(DRAINIT, &path).unwrap();
    path_str(&path).to_string()
}

#[test]
fn called_dumb_init_it_signals_the_group_unless_setsid_is_0() {
    for (setsid, group) in [
        (None, true),
        (Some(""), true),
        (Some("1"), true),
        (Some("0"), false),
    ] {
        let scratch = Scratch::new("as-dumb-init");
        let mut launch = drainit(Vec::<String>::new())
            .binary(&named(&scratch, "dumb-init"))
            .with_args(sh(&scratch, GROUP_CHILD));
        if let Some(v) = setsid {
            launch = launch.env("DUMB_INIT_SETSID", v);
        }
        let reached = usr1_reached_the_grandchild(launch.start(), &scratch);
        assert_eq!(reached, group, "DUMB_INIT_SETSID={setsid:?}");
    }
    // Under its own name, drainit signals the child alone.
    let scratch = Scratch::new("as-drainit");
    let d = drainit(Vec::<String>::new())
        .with_args(sh(&scratch, GROUP_CHILD))
        .start();
    assert!(!usr1_reached_the_grandchild(d, &scratch));
}

#[test]
fn usage_errors_exit_as_the_named_init_would() {
    let scratch = Scratch::new("names");
    for (name, code) in [
        ("tini", 1),
        ("tini-static", 1),
        ("dumb-init", 1),
        ("docker-init", 2),
        ("drainit", 2),
    ] {
        let binary = named(&scratch, name);
        let out = std::process::Command::new(&binary)
            .args(["-z", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{name}: {out:?}");
    }
    // dumb-init prints its version on stderr.
    let dumb = scratch.file("dumb-init");
    let out = std::process::Command::new(&dumb)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("drainit"),
        "{out:?}"
    );
}

#[test]
fn a_drain_host_that_does_not_resolve_is_one_warning_and_the_child_runs() {
    let scratch = Scratch::new("no-such-host");
    let mut d = drainit([
        "--drain-url",
        "http://no-such-host.invalid:8080/drain",
        "--stop-url",
        "http://no-such-host.invalid:8080/stop",
        "--grace",
        "5s",
    ])
    .with_args(sh(
        &scratch,
        "touch \"$D/ready\"; while [ ! -e \"$D/go\" ]; do sleep 0.05; done; exit 3",
    ))
    .start();
    scratch.wait_file("ready");
    wait_for("the warning about the host", PATIENCE, || {
        d.stderr().contains("no-such-host.invalid").then_some(())
    });
    scratch.touch("go");
    assert_eq!(d.wait_code(), 3, "{}", d.stderr());
    let stderr = d.stderr();
    let warnings: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("host no-such-host.invalid"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning for the name: {stderr}");
}
