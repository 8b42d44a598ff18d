//! The platforms' own defaults, measured: with the variable each platform
//! sets, a stop of an app that ignores SIGTERM ends at the default
//! `--grace` that fits that platform's kill (Fly.io and Nomad 4 s, Cloud
//! Run 9 s, Azure Container Apps 25 s), with the exit report out before the
//! platform's kill, on the glibc and the static build; a platform default
//! inside `--pre-stop-delay` starts and cuts the delay; Kubernetes options
//! on Container Apps are one warning and reach no API server; Knative
//! (`K_SERVICE` beside `KUBERNETES_SERVICE_HOST`) is Kubernetes; `--check`
//! names the platform.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::server::{json, Server};
use support::*;

/// An app that ignores SIGTERM: only the deadline's SIGKILL ends it.
const STUBBORN: &str = "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
/// An app that exits at once on SIGTERM, saying when it came.
const QUICK: &str =
    "trap 'touch \"$D/term\"; exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";

/// What one stop did.
struct Stopped {
    code: i32,
    /// From the SIGTERM to drainit's exit, as the test saw it.
    took: Duration,
    report: Value,
    stderr: String,
}

/// `binary` as PID 1 with a drain option, no `--grace`, `args` and
/// `vars`, running `script`: SIGTERM once it is up, then its end.
fn stop(binary: &str, args: &[&str], vars: &[(&str, &str)], script: &str) -> Stopped {
    let scratch = Scratch::new("platform-default");
    let report = scratch.file("report.json");
    let never = scratch.file("never");
    let mut all = vec!["--drain-file", path_str(&never)];
    all.extend(["--exit-report", path_str(&report)]);
    all.extend(args);
    let mut launch = drainit(all).binary(binary).with_args(sh(&scratch, script));
    for (k, v) in vars {
        launch = launch.env(k, v);
    }
    let mut d = launch.start();
    scratch.wait_file("ready");
    let sent = Instant::now();
    d.signal(libc::SIGTERM);
    d.wait_status(Duration::from_secs(60));
    let code = d.wait_code();
    let took = sent.elapsed();
    let stderr = d.stderr();
    assert!(report.exists(), "no report: {stderr}");
    Stopped {
        code,
        took,
        report: exit_report(&report),
        stderr,
    }
}

/// The debug (glibc) binary and the static release build.
fn builds() -> [String; 2] {
    [DRAINIT.to_string(), built(Build::Static)]
}

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not a number of ms: {v}"))
}

/// A stubborn app under `var` on each build: the deadline comes `secs`
/// after the stop, and the report is out before the platform's kill, a
/// second later. Both builds side by side.
fn killed_at_the_platform_default(var: (&'static str, &'static str), secs: u64, says: &str) {
    let runs: Vec<_> = builds()
        .into_iter()
        .map(|binary| std::thread::spawn(move || (stop(&binary, &[], &[var], STUBBORN), binary)))
        .collect();
    for run in runs {
        let (s, binary) = run.join().unwrap();
        let r = &s.report;
        let what = format!("{binary} {var:?}: {r}\n{}", s.stderr);
        assert_eq!(s.code, 124, "the deadline's exit code: {what}");
        assert_eq!(r["outcome"], "deadline", "{what}");
        assert_eq!(ms(&r["deadline_ms"]), secs * 1_000, "{what}");
        // drainit's own count, and the test's: at the deadline, and out
        // before the platform's kill (1 s later).
        let exit = ms(&r["stop_to_exit_ms"]);
        assert!(
            (secs * 1_000..(secs + 1) * 1_000).contains(&exit),
            "exit {exit} ms after the stop: {what}"
        );
        assert!(
            s.took >= Duration::from_millis(secs * 1_000 - 50)
                && s.took < Duration::from_secs(secs + 3),
            "took {:?}: {what}",
            s.took
        );
        let line = format!("--grace {secs}s by default (");
        assert_eq!(
            s.stderr.matches(&line).count(),
            1,
            "said once at start: {what}"
        );
        assert!(s.stderr.contains(says), "{what}");
    }
}

#[test]
fn fly_kills_a_stubborn_app_at_4s() {
    killed_at_the_platform_default(
        ("FLY_MACHINE_ID", "e286065f969386"),
        4,
        "on Fly.io, seen from FLY_MACHINE_ID, whose kill_timeout defaults to 5 s; a longer kill_timeout needs a longer --grace",
    );
}

#[test]
fn nomad_kills_a_stubborn_app_at_4s() {
    killed_at_the_platform_default(
        ("NOMAD_ALLOC_ID", "5b1d4c3a-0000-4000-8000-000000000000"),
        4,
        "on Nomad, seen from NOMAD_ALLOC_ID, whose kill_timeout defaults to 5 s; a longer kill_timeout needs a longer --grace",
    );
}

#[test]
fn cloud_run_kills_a_stubborn_app_at_9s() {
    killed_at_the_platform_default(
        ("K_SERVICE", "web"),
        9,
        "on Cloud Run, seen from K_SERVICE, which kills 10 s after its SIGTERM",
    );
}

#[test]
fn a_cloud_run_job_gets_9s() {
    let s = stop(DRAINIT, &[], &[("CLOUD_RUN_JOB", "nightly")], QUICK);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(ms(&s.report["deadline_ms"]), 9_000, "{}", s.stderr);
    assert!(s.stderr.contains("seen from CLOUD_RUN_JOB"), "{}", s.stderr);
}

/// Container Apps' 25 s, measured once (the glibc build) against a
/// stubborn app; the static build's deadline from its report.
#[test]
fn container_apps_kill_a_stubborn_app_at_25s() {
    let vars = [
        ("CONTAINER_APP_NAME", "web"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
    ];
    let says = "on Azure Container Apps, seen from CONTAINER_APP_NAME, whose terminationGracePeriodSeconds defaults to 30 s; a longer terminationGracePeriodSeconds needs a longer --grace";
    let quick = std::thread::spawn(move || stop(&built(Build::Static), &[], &vars, QUICK));
    let s = stop(DRAINIT, &[], &vars, STUBBORN);
    let what = format!("{}\n{}", s.report, s.stderr);
    assert_eq!(
        (s.code, &s.report["outcome"]),
        (124, &Value::from("deadline")),
        "{what}"
    );
    assert_eq!(ms(&s.report["deadline_ms"]), 25_000, "{what}");
    let exit = ms(&s.report["stop_to_exit_ms"]);
    assert!((25_000..26_000).contains(&exit), "{exit}: {what}");
    assert!(s.took >= Duration::from_millis(24_950), "{:?}", s.took);
    assert!(
        s.stderr.contains(says) && !s.stderr.contains("on Kubernetes"),
        "{what}"
    );
    let s = quick.join().unwrap();
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(ms(&s.report["deadline_ms"]), 25_000, "{}", s.stderr);
    assert!(s.stderr.contains(says), "{}", s.stderr);
    let s = stop(
        DRAINIT,
        &[],
        &[("CONTAINER_APP_JOB_NAME", "nightly")],
        QUICK,
    );
    assert_eq!(ms(&s.report["deadline_ms"]), 25_000, "{}", s.stderr);
    assert!(
        s.stderr.contains("seen from CONTAINER_APP_JOB_NAME"),
        "{}",
        s.stderr
    );
}

/// Knative on Kubernetes sets K_SERVICE as Cloud Run does: with
/// KUBERNETES_SERVICE_HOST beside it, the platform is Kubernetes.
#[test]
fn k_service_beside_kubernetes_is_kubernetes() {
    let vars = [
        ("K_SERVICE", "web"),
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
    ];
    let s = stop(DRAINIT, &[], &vars, QUICK);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(ms(&s.report["deadline_ms"]), 25_000, "{}", s.stderr);
    assert!(
        s.stderr
            .contains("(on Kubernetes, whose terminationGracePeriodSeconds defaults to 30 s)")
            && !s.stderr.contains("Cloud Run"),
        "{}",
        s.stderr
    );
}

/// Fly.io's 4 s inside a 5 s `--pre-stop-delay`: not a usage error. The app
/// starts, one warning names the platform, and a stop cuts the delay to
/// half the grace: the app gets its SIGTERM 2 s after the stop, not 5 s,
/// and its exit comes before the deadline.
#[test]
fn fly_with_a_longer_pre_stop_delay_starts_and_the_delay_gives_way() {
    for binary in builds() {
        let scratch = Scratch::new("fly-delay");
        let report = scratch.file("report.json");
        let mut d = drainit(["--pre-stop-delay", "5s", "--exit-report", path_str(&report)])
            .binary(&binary)
            .env("FLY_MACHINE_ID", "e286065f969386")
            .with_args(sh(&scratch, QUICK))
            .start();
        scratch.wait_file("ready");
        let sent = Instant::now();
        d.signal(libc::SIGTERM);
        scratch.wait_file("term");
        let term = sent.elapsed();
        let code = d.wait_code();
        let stderr = d.stderr();
        assert_eq!(code, 0, "{binary}: {stderr}");
        assert!(
            term >= Duration::from_millis(1_950) && term < Duration::from_millis(3_500),
            "{binary}: SIGTERM {term:?} after the stop: {stderr}"
        );
        let warning = "the default --grace (4000 ms) on Fly.io (FLY_MACHINE_ID is set) is not longer than --pre-stop-delay (5000 ms): it is kept, and a stop cuts the delay to at most half of the grace";
        assert_eq!(stderr.matches(warning).count(), 1, "{binary}: {stderr}");
        let r = exit_report(&report);
        assert_eq!(
            (ms(&r["deadline_ms"]), &r["outcome"]),
            (4_000, &Value::from("exited")),
            "{binary}: {r}"
        );
    }
}

/// The port of an `http://127.0.0.1:PORT/…` URL.
fn port_of(url: &str) -> String {
    let rest = url.trim_start_matches("http://127.0.0.1:");
    rest[..rest.find('/').unwrap_or(rest.len())].to_string()
}

/// `--k8s-protect` (and `--k8s-cost`) on Container Apps: one warning,
/// protection off, the app starts and stops as without them, and nothing
/// asks the address in KUBERNETES_SERVICE_HOST (a build without the
/// Kubernetes client, which would refuse `--k8s-protect`, too).
#[test]
fn kubernetes_options_on_container_apps_are_one_warning() {
    let api = Server::start(|_, _| json(200, "{}"));
    let drain = Server::start(|_, _| json(200, r#"{"readyForTermination":true}"#));
    let port = port_of(&api.url("/"));
    let vars = [
        ("CONTAINER_APP_NAME", "web"),
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", &port),
        ("DRAINIT_K8S_COST", "5"),
    ];
    let drain_url = drain.url("/drain");
    for binary in builds() {
        let s = stop(
            &binary,
            &[
                "--k8s-protect",
                "--drain-url",
                &drain_url,
                "--drain-interval",
                "100ms",
            ],
            &vars,
            QUICK,
        );
        let what = format!("{binary}: {}\n{}", s.report, s.stderr);
        assert_eq!(s.code, 0, "{what}");
        let warning = "--k8s-protect, --k8s-cost ignored on Azure Container Apps (CONTAINER_APP_NAME is set): it sets KUBERNETES_* but gives the app no access to the Kubernetes API that holds its pod; Kubernetes pod protection is off";
        assert_eq!(s.stderr.matches(warning).count(), 1, "{what}");
        assert_eq!(ms(&s.report["deadline_ms"]), 25_000, "{what}");
        assert!(
            !s.stderr.contains("--k8s-protect), which then sets it"),
            "{what}"
        );
    }
    assert_eq!(api.count(), 0, "no request to the API server's address");
}

/// `drainit --check` with `args` and `vars`, not PID 1: its stdout.
fn check(args: &[&str], vars: &[(&str, &str)]) -> (i32, String) {
    let mut command = Command::new(DRAINIT);
    command.arg("--check").args(args);
    for (key, _) in std::env::vars() {
        if [
            "DRAINIT_",
            "ECS_",
            "KUBERNETES_",
            "FLY_",
            "NOMAD_",
            "K_",
            "CLOUD_RUN_",
            "CONTAINER_APP_",
        ]
        .iter()
        .any(|p| key.starts_with(p))
        {
            command.env_remove(key);
        }
    }
    let out = command.envs(vars.iter().copied()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn check_names_the_platform() {
    let drain = ["--drain-url", "http://127.0.0.1:1/d"];
    let aca = [
        ("CONTAINER_APP_NAME", "web"),
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", "1"),
    ];
    let (code, out) = check(&drain, &aca);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "info: --grace 25s by default (on Azure Container Apps, seen from CONTAINER_APP_NAME"
        ) && !out.contains("on Kubernetes"),
        "{out}"
    );
    let (code, out) = check(
        &["--k8s-protect", "--drain-url", "http://127.0.0.1:1/d"],
        &aca,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "warn: --k8s-protect ignored on Azure Container Apps (CONTAINER_APP_NAME is set)"
        ) && !out.lines().any(|l| l.contains(": pod ")),
        "no pod asked: {out}"
    );
    for (var, says) in [
        (
            ("FLY_MACHINE_ID", "e28"),
            "info: --grace 4s by default (on Fly.io, seen from FLY_MACHINE_ID",
        ),
        (
            ("NOMAD_ALLOC_ID", "5b1"),
            "info: --grace 4s by default (on Nomad, seen from NOMAD_ALLOC_ID",
        ),
        (
            ("K_SERVICE", "web"),
            "info: --grace 9s by default (on Cloud Run, seen from K_SERVICE",
        ),
    ] {
        let (code, out) = check(&drain, &[var]);
        assert!(code == 0 && out.contains(says), "{var:?}: {out}");
    }
}
