//! `--k8s-protect`'s deadline from the pod's deletion, end to end: the
//! test plays the kubelet against the fake API server
//! (`tests/support/k8s_api.py`): it marks the pod deleted (as `kubectl
//! delete --grace-period=N` does), optionally waits out a preStop hook,
//! sends SIGTERM, and treats drainit as killed if it is not gone by the
//! real kill time. The app ignores SIGTERM and its drain endpoint always
//! says busy, so only drainit's deadline ends it: the outcome is
//! `deadline` (124) and the exit report says where the deadline came from.
//! Covered: a deletion with 10 s and a 30 s period; a 5 s preStop before
//! the SIGTERM; the API server's clock 30 s ahead and behind; a force
//! delete (404) and a pod made again under another uid; a 500 at the stop
//! (the deadline kept, one read, no write); a second, shorter delete read
//! at half of a long one; an explicit `--grace` either side of the kill;
//! the spec's grace (a probe's period, a preStop sleep) when nothing is
//! deleted; a panic of the loop just after the deletion was learnt (the
//! fallback and the last resort keep its deadline); both libc builds; a
//! second read whose Date lags, and a deletion without a readable period
//! (neither moves the deadline later).
//!
//! The deletion's times are whole seconds on the API server's clock (as
//! the real one writes them), so the kill time drainit learns is within
//! a second of the kubelet's: the margins below say so.

#![cfg(feature = "k8s")]

mod support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::k8s_api::FakeApi;
use support::server::{json, Server};
use support::*;

const POD: &str = "worker-7d9f-x2";

/// An app that ignores SIGTERM (so only the deadline ends it) and says
/// when it runs.
const STUBBORN: &str =
    "trap 'echo TERM >> \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";

/// A pod of the fake API server's, with drainit's drain endpoint busy.
struct Pod {
    api: FakeApi,
    s: Scratch,
    sa: PathBuf,
    drain: Server,
    report: PathBuf,
}

impl Pod {
    /// None (the test skips, with a line) when python3 cannot run the
    /// fake API server.
    fn new(name: &str, api_args: &[&str]) -> Option<Pod> {
        if !k8s_api::available() {
            return None;
        }
        let api = FakeApi::start(&[&["--pod", POD], api_args].concat());
        let s = Scratch::new(name);
        let sa = s.file("serviceaccount");
        api.fill_service_account(&sa);
        let busy = Arc::new(AtomicBool::new(true));
        let drain = Server::start(move |_, _| {
            json(
                200,
                &format!(
                    "{{\"readyForTermination\":{}}}",
                    !busy.load(Ordering::SeqCst)
                ),
            )
        });
        let report = s.file("report.json");
        Some(Pod {
            api,
            s,
            sa,
            drain,
            report,
        })
    }

    /// drainit with `--k8s-protect`, the drain URL polled every second,
    /// an exit report and `flags`; running, its start read answered.
    fn start(&self, flags: &[&str], binary: Option<&str>) -> Drainit {
        self.start_with(flags, binary, &[])
    }

    /// As `start`, with the variables `envs` set.
    fn start_with(&self, flags: &[&str], binary: Option<&str>, envs: &[(&str, &str)]) -> Drainit {
        let mut args = vec![
            "--k8s-protect".to_string(),
            "--drain-url".into(),
            self.drain.url("/drain"),
            "--protect-interval".into(),
            "1s".into(),
            "--exit-report".into(),
            path_str(&self.report).into(),
        ];
        args.extend(flags.iter().map(|f| f.to_string()));
        let mut launch = drainit(args)
            .with_args(sh(&self.s, STUBBORN))
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", &self.api.port.to_string())
            .env("POD_NAME", POD)
            .before_exec(service_account_at(&self.sa));
        if let Some(binary) = binary {
            launch = launch.binary(binary);
        }
        for (key, value) in envs {
            launch = launch.env(key, value);
        }
        let d = launch.start();
        self.s.wait_file("ready");
        // The start read answered and taken: busy's patch follows it.
        wait_for("busy's patch", PATIENCE, || {
            d.stderr()
                .contains("protected: the app is busy")
                .then_some(())
        });
        d
    }

    /// The pod's reads (GET), in order.
    fn gets(&self) -> Vec<Value> {
        self.api
            .requests()
            .into_iter()
            .filter(|r| r["method"] == "GET")
            .collect()
    }

    fn report(&self) -> Value {
        exit_report(&self.report)
    }
}

/// The kubelet's part after a deletion at `deleted` with `grace` seconds:
/// SIGTERM after the preStop hook's `pre_stop` (the hook's run, inside the
/// grace), then drainit must be gone before the kill at `deleted +
/// grace`. Returns the exit code and when drainit was gone, after the
/// deletion.
fn kubelet(d: &mut Drainit, deleted: Instant, grace: u64, pre_stop: Duration) -> (i32, Duration) {
    if !pre_stop.is_zero() {
        // The preStop hook's own time, as the kubelet waits for it.
        std::thread::sleep(pre_stop);
    }
    d.signal(libc::SIGTERM);
    kubelet_after(d, deleted, grace)
}

/// The report of a stop that ended at drainit's deadline from a deletion
/// with `grace` seconds, the kill `kill_ms` after the stop began (give or
/// take the second the API server's times are rounded to).
fn assert_deletion(report: &Value, grace: u64, kill_ms: u64) {
    assert_eq!(report["outcome"], "deadline", "{report}");
    let k = &report["kubernetes"];
    assert_eq!(k["grace_from"], "deletion", "{report}");
    assert_eq!(k["deletion_grace_period_seconds"], grace, "{report}");
    let said = k["kill_ms"].as_u64().unwrap();
    assert!(
        said + 1_500 >= kill_ms && said <= kill_ms + 1_000,
        "kill_ms {said}, about {kill_ms}: {report}"
    );
}

#[test]
fn a_deletion_with_10_s_ends_before_the_kill_whatever_the_period() {
    let Some(pod) = Pod::new("k8s-deletion", &["--grace", "30"]) else {
        return;
    };
    let mut d = pod.start(&[], None);
    let deleted = Instant::now();
    pod.api.delete(10);
    let (code, gone) = kubelet(&mut d, deleted, 10, Duration::ZERO);
    assert_eq!(code, 124);
    assert!(gone < Duration::from_secs(10), "{gone:?}");
    assert!(gone >= Duration::from_secs(6), "{gone:?}");
    let report = pod.report();
    assert_deletion(&report, 10, 10_000);
    let reads = pod.gets();
    assert_eq!(reads.len(), 2, "start and stop: {reads:?}");
    assert_eq!(reads[1]["query"], "resourceVersion=0");
}

#[test]
fn a_pre_stop_hook_before_the_sigterm_is_inside_the_deletion() {
    let Some(pod) = Pod::new("k8s-prestop", &["--grace", "30"]) else {
        return;
    };
    let mut d = pod.start(&[], None);
    let deleted = Instant::now();
    pod.api.delete(10);
    let (code, gone) = kubelet(&mut d, deleted, 10, Duration::from_secs(5));
    assert_eq!(code, 124);
    assert!(gone < Duration::from_secs(10), "{gone:?}");
    // The kill 5 s after the SIGTERM: the deadline 2 s before it.
    assert_deletion(&pod.report(), 10, 5_000);
    let stop_to_exit = pod.report()["stop_to_exit_ms"].as_u64().unwrap();
    assert!(stop_to_exit < 5_000, "{stop_to_exit}");
}

#[test]
fn the_api_servers_clock_ahead_or_behind_changes_nothing() {
    for skew in ["30", "-30"] {
        let Some(pod) = Pod::new("k8s-skew", &["--grace", "30", "--skew", skew]) else {
            return;
        };
        let mut d = pod.start(&[], None);
        let deleted = Instant::now();
        pod.api.delete(10);
        let (code, gone) = kubelet(&mut d, deleted, 10, Duration::ZERO);
        assert_eq!(code, 124, "skew {skew}");
        assert!(gone < Duration::from_secs(10), "skew {skew}: {gone:?}");
        assert!(gone >= Duration::from_secs(6), "skew {skew}: {gone:?}");
        assert_deletion(&pod.report(), 10, 10_000);
    }
}

#[test]
fn a_force_delete_leaves_one_second() {
    for how in ["404", "uid"] {
        let Some(pod) = Pod::new("k8s-force", &["--grace", "30"]) else {
            return;
        };
        let mut d = pod.start(&[], None);
        let deleted = Instant::now();
        match how {
            "404" => pod.api.force_delete(),
            _ => pod.api.recreate(),
        }
        // The kubelet kills within 2 s of a force delete.
        let (code, gone) = kubelet(&mut d, deleted, 2, Duration::ZERO);
        assert_eq!(code, 124, "{how}");
        assert!(gone < Duration::from_secs(2), "{how}: {gone:?}");
        let report = pod.report();
        assert_eq!(report["kubernetes"]["grace_from"], "deletion", "{how}");
        assert_eq!(report["kubernetes"]["deletion_grace_period_seconds"], 0);
        assert_eq!(report["deadline_ms"], 1_000, "{how}: {report}");
    }
}

#[test]
fn a_failed_read_at_the_stop_keeps_the_deadline() {
    // The start read, busy's patch, then a 500 for the read at the stop.
    let Some(pod) = Pod::new(
        "k8s-stop-500",
        &["--grace", "30", "--statuses", "200,200,500"],
    ) else {
        return;
    };
    let mut d = pod.start(&["--grace", "3s"], None);
    let before = pod.api.requests().len();
    let stop = Instant::now();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
    let took = stop.elapsed();
    assert!(
        took >= Duration::from_millis(2_900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let report = pod.report();
    assert_eq!(report["deadline_ms"], 3_000, "{report}");
    assert_eq!(report["kubernetes"]["grace_from"], "option");
    assert_eq!(report["kubernetes"]["kill_ms"], Value::Null);
    let after: Vec<Value> = pod.api.requests().into_iter().skip(before).collect();
    assert_eq!(after.len(), 1, "one read, no write: {after:?}");
    assert_eq!(after[0]["method"], "GET");
    assert_eq!(after[0]["status"], 500);
    let failed = d
        .stderr()
        .lines()
        .filter(|l| l.contains("read at the stop failed"))
        .count();
    assert_eq!(failed, 1, "{}", d.stderr());
}

#[test]
fn a_second_shorter_delete_is_read_at_half_of_a_long_one() {
    let Some(pod) = Pod::new("k8s-second-delete", &["--grace", "120"]) else {
        return;
    };
    let mut d = pod.start(&[], None);
    let deleted = Instant::now();
    pod.api.delete(62);
    d.signal(libc::SIGTERM);
    wait_for("the read at the stop", PATIENCE, || {
        (pod.gets().len() == 2).then_some(())
    });
    // A shorter delete sends no new SIGTERM: only the read at half of
    // the time left (about 31 s) finds it.
    let second = Instant::now();
    pod.api.delete(40);
    let kill = second + Duration::from_secs(40);
    let status = d.wait_status(kill.saturating_duration_since(Instant::now()));
    assert_eq!(status.code(), Some(124));
    let gone = deleted.elapsed();
    assert!(gone > Duration::from_secs(28), "{gone:?}");
    assert_eq!(pod.gets().len(), 3, "one more read");
    let report = pod.report();
    assert_eq!(report["kubernetes"]["deletion_grace_period_seconds"], 40);
    assert_eq!(report["outcome"], "deadline");
}

#[test]
fn an_explicit_grace_before_the_kill_is_kept_one_after_it_replaced() {
    let Some(pod) = Pod::new("k8s-grace-kept", &["--grace", "30"]) else {
        return;
    };
    let mut d = pod.start(&["--grace", "5s"], None);
    let deleted = Instant::now();
    pod.api.delete(10);
    let (code, gone) = kubelet(&mut d, deleted, 10, Duration::ZERO);
    assert_eq!(code, 124);
    assert!(
        gone >= Duration::from_millis(4_900) && gone < Duration::from_secs(7),
        "{gone:?}"
    );
    let report = pod.report();
    assert_eq!(report["deadline_ms"], 5_000, "{report}");
    assert_eq!(report["kubernetes"]["grace_from"], "option");
    assert_eq!(report["kubernetes"]["deletion_grace_period_seconds"], 10);

    let Some(pod) = Pod::new("k8s-grace-replaced", &["--grace", "30"]) else {
        return;
    };
    let mut d = pod.start(&["--grace", "20s"], None);
    let deleted = Instant::now();
    pod.api.delete(10);
    let (code, gone) = kubelet(&mut d, deleted, 10, Duration::ZERO);
    assert_eq!(code, 124);
    assert!(gone < Duration::from_secs(10), "{gone:?}");
    assert_deletion(&pod.report(), 10, 10_000);
    let warned: Vec<String> = d
        .stderr()
        .lines()
        .filter(|l| l.contains("ends after the pod's deletion"))
        .map(str::to_string)
        .collect();
    assert_eq!(warned.len(), 1, "{}", d.stderr());
    assert!(warned[0].contains("WARN"), "{}", warned[0]);
}

#[test]
fn probe_and_pre_stop_sleep_shorten_the_grace_when_nothing_is_deleted() {
    // drainit's container (the only one): a liveness probe's 12 s, a
    // native preStop sleep of 3 s, in a 30 s pod: 12 - 3 - 2 = 7 s.
    let spec = r#"{"containers":[{"name":"app","image":"worker:1",
        "livenessProbe":{"httpGet":{"path":"/healthz","port":9090},"terminationGracePeriodSeconds":12},
        "lifecycle":{"preStop":{"sleep":{"seconds":3}}}}]}"#;
    let Some(pod) = Pod::new("k8s-spec-grace", &["--grace", "30", "--spec", spec]) else {
        return;
    };
    let mut d = pod.start(&[], None);
    assert!(
        d.stderr().contains("7000 ms from the pod's spec"),
        "{}",
        d.stderr()
    );
    // The kubelet stops the container itself (a failed probe): no deletion.
    let stop = Instant::now();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
    let took = stop.elapsed();
    assert!(
        took >= Duration::from_millis(6_900) && took < Duration::from_secs(9),
        "{took:?}"
    );
    let report = pod.report();
    assert_eq!(report["deadline_ms"], 7_000, "{report}");
    assert_eq!(report["kubernetes"]["grace_from"], "pod");
    assert_eq!(report["kubernetes"]["kill_ms"], Value::Null);
    assert!(
        d.stderr().contains("the pod is not being deleted"),
        "{}",
        d.stderr()
    );
    assert_eq!(pod.gets().len(), 2, "start and stop");
}

#[test]
fn after_a_panic_of_the_loop_the_deletions_deadline_is_kept() {
    // The loop fails just after it learnt the deletion: its fallback keeps
    // the deadline; when the fallback fails too (on the next signal), the
    // last resort keeps it.
    if !k8s_api::available() {
        return;
    }
    let binary = built(Build::StaticFaults);
    for fault in ["deletion_learnt", "deletion_learnt,fallback"] {
        let Some(pod) = Pod::new("k8s-deletion-fallback", &["--grace", "30"]) else {
            return;
        };
        let fault_env = [("DRAINIT_TEST_FAULT", fault)];
        let mut d = pod.start_with(&[], Some(&binary), &fault_env);
        let deleted = Instant::now();
        pod.api.delete(10);
        d.signal(libc::SIGTERM);
        wait_for("the fallback", PATIENCE, || {
            d.stderr().contains("the event loop failed").then_some(())
        });
        if fault.ends_with("fallback") {
            // The app ignores it: the fallback's loop fails on it.
            d.signal(libc::SIGTERM);
            wait_for("the last resort", PATIENCE, || {
                d.stderr().contains("the fallback failed too").then_some(())
            });
        }
        let kill = deleted + Duration::from_secs(10);
        // (wait_status: the injected panic is in stderr on purpose.)
        let status = d.wait_status(kill.saturating_duration_since(Instant::now()));
        assert_eq!(status.code(), Some(124), "{fault}: {}", d.stderr());
        let gone = deleted.elapsed();
        assert!(gone < Duration::from_secs(10), "{fault}: {gone:?}");
        assert!(gone >= Duration::from_secs(6), "{fault}: {gone:?}");
        assert_eq!(pod.report()["outcome"], "deadline", "{fault}");
    }
}

#[test]
fn both_libc_builds_take_the_deadline_from_the_deletion() {
    if !k8s_api::available() {
        return;
    }
    for build in [Build::Glibc, Build::Static] {
        let binary = built(build);
        let Some(pod) = Pod::new("k8s-deletion-builds", &["--grace", "30", "--ca", "p256"]) else {
            return;
        };
        let mut d = pod.start(&[], Some(&binary));
        let deleted = Instant::now();
        pod.api.delete(10);
        let (code, gone) = kubelet(&mut d, deleted, 10, Duration::ZERO);
        assert_eq!(code, 124, "{build:?}");
        assert!(gone < Duration::from_secs(10), "{build:?}: {gone:?}");
        assert_deletion(&pod.report(), 10, 10_000);
    }
}

#[test]
fn a_container_name_that_cannot_be_one_is_a_usage_error() {
    assert_usage_error(&["--k8s-container", "App_1"], &[], "--k8s-container");
    assert_usage_error(
        &[],
        &[("DRAINIT_K8S_CONTAINER", "-x")],
        "DRAINIT_K8S_CONTAINER",
    );
}

#[test]
fn a_second_read_with_a_lagging_date_never_moves_the_kill_later() {
    let Some(pod) = Pod::new("k8s-lagging-date", &["--grace", "120"]) else {
        return;
    };
    let mut d = pod.start(&[], None);
    let deleted = Instant::now();
    pod.api.delete(62);
    d.signal(libc::SIGTERM);
    wait_for("the read at the stop", PATIENCE, || {
        (pod.gets().len() == 2).then_some(())
    });
    // The read at half of the time left (about 31 s) meets a Date 30 s
    // behind (another replica, a hostile server): its kill is 30 s later
    // than the real one, and must not move the deadline.
    pod.api.skew(-30.0);
    let (code, gone) = kubelet_after(&mut d, deleted, 62);
    assert_eq!(
        code,
        124,
        "gone {gone:?} after the deletion: {}",
        d.stderr()
    );
    assert_eq!(pod.gets().len(), 3, "the second read was made");
    assert_deletion(&pod.report(), 62, 62_000);
}

#[test]
fn a_deletion_without_a_readable_period_never_moves_the_deadline_later() {
    for (how, period) in [
        ("a string", serde_json::json!("30")),
        ("a negative number", serde_json::json!(-5)),
        ("absent", Value::Null),
    ] {
        let Some(pod) = Pod::new("k8s-no-period", &["--grace", "6"]) else {
            return;
        };
        let mut d = pod.start(&[], None);
        let deleted = Instant::now();
        // The kill 30 s out, by a timestamp nothing bounds.
        pod.api.delete_with_period(30, period);
        d.signal(libc::SIGTERM);
        // The stop began with the pod's 6 s: drainit is gone well before
        // the 28 s an unbounded timestamp would give.
        let (code, gone) = kubelet_after(&mut d, deleted, 12);
        assert_eq!(code, 124, "{how}: gone {gone:?}: {}", d.stderr());
        let report = pod.report();
        let said = report["deadline_ms"].as_u64().unwrap();
        assert!(said <= 6_000, "{how}: deadline_ms {said}: {report}");
    }
}

/// The kubelet's kill `grace` seconds after `deleted`, the SIGTERM
/// already sent: the exit code (128 + signal when killed by one, and -1
/// when drainit outlived the kill) and when it was gone.
fn kubelet_after(d: &mut Drainit, deleted: Instant, grace: u64) -> (i32, Duration) {
    let kill = deleted + Duration::from_secs(grace);
    let left = kill.saturating_duration_since(Instant::now());
    let status = d.wait_status(left);
    let gone = deleted.elapsed();
    let code = std::os::unix::process::ExitStatusExt::signal(&status)
        .map_or_else(|| status.code().unwrap_or(-1), |s| 128 + s);
    (code, gone)
}
