//! The one redaction rule, against each output with the real binary as
//! PID 1: secrets planted in a drain URL's query, a stop URL's query, a
//! drain command's arguments and a stop command's are searched for in
//! stderr (text and JSON logs, at debug level), the exit report file,
//! `/status`, `/metrics` and the `--emf` line; user-info and bad values in
//! usage errors and `--check`'s findings likewise. None may hold a secret,
//! and each output must show the thing redacted (so a test that finds
//! nothing because nothing was printed fails).

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;
use support::server::{json, Server};
use support::*;

/// Every planted secret: each is a word no output would hold by chance.
const SECRETS: [&str; 6] = [
    "hunter2", "hunter3", "hunter4", "hunter5", "hunter6", "hunter7",
];

fn assert_hides(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} leaked in {what}: {text}");
    }
}

/// A full stop with every kind of source and hook carrying a secret, in
/// both log formats, on both libc builds: no output holds one.
#[test]
fn no_output_carries_a_planted_secret() {
    for (build, format) in [
        (Build::Static, "text"),
        (Build::Static, "json"),
        (Build::Glibc, "text"),
        (Build::Glibc, "json"),
    ] {
        let format_name = format!("{build:?} {format}");
        let format_name = format_name.as_str();
        let scratch = Scratch::new("redaction");
        let ready = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ready);
        let server = Server::start(move |seen, _| {
            if seen.path.starts_with("/stop") {
                return json(200, "{}");
            }
            let ready = flag.load(Ordering::SeqCst);
            json(
                503,
                &format!("{{\"readyForTermination\":{ready},\"activeExecutions\":7}}"),
            )
        });
        let drain_url = server.url("/drain?token=hunter3&x=1");
        let stop_url = server.url("/stop?key=hunter4");
        let report = scratch.file("report.json");
        let port = free_port();
        let mut d = drainit([
            "-vv",
            "--log-format",
            format,
            "--serve",
            &format!("127.0.0.1:{port}"),
            "--exit-report",
            path_str(&report),
            "--emf",
            "--grace",
            "30s",
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "100ms",
            "--drain-count-field",
            "/activeExecutions",
            "--drain-url",
            &drain_url,
            "--drain-exec",
            "sh -c 'exit 0' --password hunter2",
            "--stop-url",
            &stop_url,
            "--stop-exec",
            "sh -c 'exit 0' --secret hunter5",
        ])
        .binary(&built(build))
        .with_args(sh(
            &scratch,
            "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        ))
        .start();
        scratch.wait_file("ready");
        wait_for("the health listener", PATIENCE, || {
            http_get(port, "/healthz")
        });
        d.signal(libc::SIGTERM);
        // During the stop, once the count was read: /status and /metrics.
        let status = wait_for("/status with the in-flight count", PATIENCE, || {
            let (_, body) = http_get(port, "/status")?;
            let v: Value = serde_json::from_str(&body).ok()?;
            (v["in_flight"] == 7).then_some(body)
        });
        let (_, metrics) = http_get(port, "/metrics").expect("/metrics");
        ready.store(true, Ordering::SeqCst);
        assert_eq!(d.wait_code(), 0, "{format_name}: drained: {}", d.stderr());
        let stderr = d.stderr();
        let report = std::fs::read_to_string(&report).expect("the report file");

        // The secrets were sent: the rule hides them, the app got them.
        let paths: Vec<String> = server.seen().iter().map(|s| s.path.clone()).collect();
        assert!(
            paths.iter().any(|p| p.contains("token=hunter3")),
            "{paths:?}"
        );
        assert!(paths.iter().any(|p| p.contains("key=hunter4")), "{paths:?}");

        for (what, text) in [
            ("stderr", &stderr),
            ("the report", &report),
            ("/status", &status),
            ("/metrics", &metrics),
        ] {
            assert_hides(&format!("{format_name}: {what}"), text);
        }
        // Each output shows what it hid.
        let shown_url = format!("http://{}/drain?token=REDACTED&x=REDACTED", server.addr);
        let report: Value = serde_json::from_str(&report).unwrap();
        let targets: Vec<&str> = report["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["target"].as_str().unwrap())
            .collect();
        assert_eq!(targets, [shown_url.as_str(), "sh"], "{report}");
        let status: Value = serde_json::from_str(&status).unwrap();
        assert_eq!(status["sources"][0]["target"], shown_url, "{status}");
        assert_eq!(status["sources"][1]["target"], "sh", "{status}");
        assert!(metrics.contains("drainit_app_in_flight 7"), "{metrics}");
        assert!(stderr.contains(&shown_url), "{format_name}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "stop hook: POST http://{}/stop?key=REDACTED",
                server.addr
            )),
            "{format_name}: {stderr}"
        );
        assert!(
            stderr.contains("stop hook: running sh"),
            "{format_name}: {stderr}"
        );
        assert!(
            stderr.contains("drain source exec sh"),
            "{format_name}: {stderr}"
        );
        assert!(
            stderr.contains("started sh as pid"),
            "{format_name}: {stderr}"
        );
        let emf: Vec<&str> = stderr.lines().filter(|l| l.contains("\"_aws\"")).collect();
        assert_eq!(emf.len(), 1, "{format_name}: one EMF line: {stderr}");
    }
}

/// A stop command that cannot run: its warning names the program only.
#[test]
fn a_command_that_cannot_run_is_named_by_its_program() {
    let scratch = Scratch::new("redaction-exec");
    let tool = scratch.file("tool");
    std::fs::write(&tool, "#!/bin/sh\nexit 0\n").unwrap();
    let mut perms = std::fs::metadata(&tool).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&tool, perms).unwrap();
    let command = format!("{} --password hunter2", tool.display());
    let mut d = drainit(["--grace", "5s", "--stop-exec", &command])
        .with_args(sh(
            &scratch,
            "trap 'exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        ))
        .start();
    scratch.wait_file("ready");
    // Gone after the check at start: the run fails, the stop goes on.
    std::fs::remove_file(&tool).unwrap();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let stderr = d.stderr();
    assert_hides("stderr", &stderr);
    assert!(
        stderr.contains(&format!("cannot run {}:", tool.display())),
        "{stderr}"
    );
}

/// Usage errors echo a bad value without its secrets: user-info, query
/// values (with or without a scheme), a command's arguments.
#[test]
fn usage_errors_echo_no_secret() {
    let cases: [&[&str]; 5] = [
        &[
            "--drain-url",
            "http://admin:hunter2@127.0.0.1:1/drain?token=hunter3",
        ],
        &["--stop-url", "admin:hunter4@app/x?key=hunter5"],
        &["--drain-url", "https://app/drain?token=hunter6"],
        &[
            "--drain-exec",
            "no-such-program-anywhere --password hunter7",
        ],
        &[
            "--drain-url",
            "http://a/d?t=hunter2",
            "--drain-url",
            "http://a/d?t=hunter2",
        ],
    ];
    for flags in cases {
        let mut d = drainit(flags.iter().copied().chain(["--", "true"])).start();
        assert_eq!(d.wait_code(), 2, "{flags:?}: {}", d.stderr());
        let stderr = d.stderr();
        assert_hides(&format!("{flags:?}"), &stderr);
        assert!(stderr.contains("invalid value '"), "{flags:?}: {stderr}");
    }
}

/// `--check` names each source by the rule.
#[test]
fn check_findings_carry_no_secret() {
    let server = Server::start(|_, _| json(200, "{\"readyForTermination\":true}"));
    let url = server.url("/drain?token=hunter3");
    let out = Command::new(DRAINIT)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args([
            "--check",
            "--drain-url",
            &url,
            "--drain-exec",
            "sh -c 'exit 0' --password hunter2",
            "--stop-url",
            "http://127.0.0.1:1/stop?key=hunter4",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_hides("stdout", &stdout);
    assert_hides("stderr", &stderr);
    assert!(
        stdout.contains(&format!(
            "ok: drain source url http://{}/drain?token=REDACTED: ready",
            server.addr
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok: drain source exec sh: ready"),
        "{stdout}"
    );
}
