//! `--k8s-protect` end to end: drainit as PID 1 of its own PID namespace
//! (and of a mount namespace in which a test directory is the pod's
//! service-account directory at its standard path), the app's drain
//! endpoint a real HTTP server the test controls (`support::server`), and
//! the API server the faithful fake (`tests/support/k8s_api.py`, HTTPS
//! with a CA made at start). Covered: busy, idle after the hold, busy
//! again; annotations found at start with drainit's record cleared by the
//! first idle answer; no write during a stop; the token rotated between
//! requests; the grace
//! from `terminationGracePeriodSeconds` and the warning for one at or above
//! it; a hostile API server with drainit's memory and the deadline
//! measured; both libc builds; no request and no TLS without the option;
//! the build without the `k8s` feature. The template's values kept across
//! idle, busy, idle and a restart while busy (drainit's record); the
//! `Accept` of a PATCH; a 503's `Retry-After`; `--k8s-idle-safe-to-evict`
//! under an admission policy allowing exactly drainit's keys; a crash
//! while busy clearing the keys with the app's exit code, promptly, also
//! with a silent or a refusing API server, in both libc builds.
//!
//! The idle hold is 30 s in the shipped binary and here (no test-only
//! knob): the tests that wait for it run side by side.

#![cfg(feature = "k8s")]

mod support;

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::k8s_api::FakeApi;
use support::server::{json, Server};
use support::*;

const POD: &str = "worker-7d9f-x2";
const COST: &str = "controller.kubernetes.io/pod-deletion-cost";
const EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
const DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// drainit's record of the template's values (`proto::k8s::RECORD_KEY`).
const RECORD: &str = "drainit.dev/template-annotations";
/// The record's list of busy containers (`proto::k8s_record::BUSY_KEY`).
const BUSY: &str = "drainit.dev/busy";
/// The record's list of the keys drainit set (`WROTE_KEY`).
const WROTE: &str = "drainit.dev/wrote";
/// The `Accept` of every PATCH (`proto::k8s::PATCH_ACCEPT`).
const PARTIAL: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/// The idle hold (`core::protect::k8s::IDLE_HOLD`).
const HOLD: Duration = Duration::from_secs(30);
/// The longest backoff between failed requests (`proto::k8s::backoff`).
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// An app that ignores SIGTERM (so only the deadline ends it) and says
/// when it runs.
const STUBBORN: &str =
    "trap 'echo TERM >> \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";

/// The fake API server holding this test's pod.
fn api(args: &[&str]) -> FakeApi {
    FakeApi::start(&[&["--pod", POD], args].concat())
}

/// What these tests ask of the fake API server beyond starting it.
trait Watched {
    fn patches(&self) -> Vec<Value>;

    /// Waits until the pod's annotations, as the server holds them, are
    /// `want` (the server writes its copy of the pod just after it
    /// records the request, and not atomically).
    fn wait_annotations(&self, want: &Value) {
        self.wait_annotations_within(want, PATIENCE)
    }

    fn wait_annotations_within(&self, want: &Value, timeout: Duration);

    /// A service-account directory for this server: its CA, `token-1`,
    /// namespace `jobs`.
    fn service_account(&self, scratch: &Scratch) -> PathBuf;
}

impl Watched for FakeApi {
    fn patches(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["method"] == "PATCH")
            .collect()
    }

    fn wait_annotations_within(&self, want: &Value, timeout: Duration) {
        wait_for(&format!("the pod's annotations {want}"), timeout, || {
            let text = fs::read_to_string(self.dir.file("pod.json")).ok()?;
            let pod: Value = serde_json::from_str(&text).ok()?;
            (parsed(&pod["metadata"]["annotations"]) == parsed(want)).then_some(())
        });
    }

    fn service_account(&self, scratch: &Scratch) -> PathBuf {
        let sa = scratch.file("serviceaccount");
        self.fill_service_account(&sa);
        sa
    }
}

/// The app's drain endpoint: busy (not ready) while `busy` is set.
fn drain_endpoint(busy: &Arc<AtomicBool>) -> Server {
    let busy = Arc::clone(busy);
    Server::start(move |_, _| {
        json(
            200,
            &format!(
                "{{\"readyForTermination\":{}}}",
                !busy.load(Ordering::SeqCst)
            ),
        )
    })
}

/// drainit in a pod: the service variables, `POD_NAME`, the directory
/// `sa` at the service-account path; `--k8s-protect` with the drain URL,
/// polled every second, and `flags`; the app `STUBBORN`.
fn in_pod(
    api: &FakeApi,
    sa: &std::path::Path,
    drain: &Server,
    flags: &[&str],
    s: &Scratch,
) -> Launch {
    in_pod_running(api, sa, drain, flags, s, STUBBORN)
}

/// `in_pod` with the app `app` (a shell script).
fn in_pod_running(
    api: &FakeApi,
    sa: &std::path::Path,
    drain: &Server,
    flags: &[&str],
    s: &Scratch,
    app: &str,
) -> Launch {
    let mut args = vec![
        "--k8s-protect".to_string(),
        "--drain-url".into(),
        drain.url("/drain"),
        "--protect-interval".into(),
        "1s".into(),
    ];
    args.extend(flags.iter().map(|f| f.to_string()));
    drainit(args)
        .with_args(sh(s, app))
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", &api.port.to_string())
        .env("POD_NAME", POD)
        .before_exec(service_account_at(sa))
}

/// A test's pod: the fake API server that holds it, the app's scratch
/// directory and service account, and its drain endpoint, busy while
/// `busy` is set.
struct Pod {
    api: FakeApi,
    s: Scratch,
    sa: PathBuf,
    busy: Arc<AtomicBool>,
    drain: Server,
}

impl Pod {
    /// None (the test skips, with a line) when python3 cannot run the
    /// fake API server.
    fn new(name: &str, api_args: &[&str], busy: bool) -> Option<Pod> {
        if !k8s_api::available() {
            return None;
        }
        let api = api(api_args);
        let s = Scratch::new(name);
        let sa = api.service_account(&s);
        let busy = Arc::new(AtomicBool::new(busy));
        let drain = drain_endpoint(&busy);
        Some(Pod {
            api,
            s,
            sa,
            busy,
            drain,
        })
    }

    /// drainit with `--k8s-protect` in this pod, `flags` added.
    fn launch(&self, flags: &[&str]) -> Launch {
        in_pod(&self.api, &self.sa, &self.drain, flags, &self.s)
    }
}

/// What a pod whose template set none of the keys holds while busy:
/// busy's values and drainit's record of the template's (none), naming
/// the pod's one container, `app`.
fn busy_annotations() -> Value {
    serde_json::json!({COST: "1000", EVICT: "false", DISRUPT: "true", RECORD: record(&[None, None, None], &["app"])})
}

/// drainit's record (parsed): the template's values of the cost,
/// safe-to-evict and do-not-disrupt, the containers holding the pod busy,
/// and the keys drainit set (the three, as the tests' drainits manage).
fn record(template: &[Option<&str>; 3], busy: &[&str]) -> Value {
    serde_json::json!({COST: template[0], EVICT: template[1], DISRUPT: template[2], BUSY: busy,
        WROTE: ["cost", "safe-to-evict", "do-not-disrupt"]})
}

/// `annotations` as the pod holds them: the record as its text.
fn planted(annotations: &Value) -> String {
    let mut a = annotations.clone();
    if a[RECORD].is_object() {
        a[RECORD] = a[RECORD].to_string().into();
    }
    a.to_string()
}

/// `annotations` with the record parsed (compared whatever the order of
/// its keys).
fn parsed(annotations: &Value) -> Value {
    let mut a = annotations.clone();
    if let Some(text) = a.get(RECORD).and_then(Value::as_str) {
        a[RECORD] = serde_json::from_str(text).unwrap();
    }
    a
}

/// The patch that gives such a pod its template's values back.
fn idle_patch() -> Value {
    serde_json::json!({"metadata": {"annotations": {COST: null, EVICT: null, DISRUPT: null, RECORD: null}}})
}

/// A patch's body, the record parsed; every patch goes under the
/// `resourceVersion` of the read it was computed from (checked, then
/// left out).
fn body_of(request: &Value) -> Value {
    let mut body: Value = serde_json::from_str(request["body"].as_str().unwrap()).unwrap();
    let metadata = body["metadata"].as_object_mut().unwrap();
    let version = metadata.remove("resourceVersion");
    assert!(
        version.as_ref().is_some_and(Value::is_string),
        "a patch without its resourceVersion: {request}"
    );
    body["metadata"]["annotations"] = parsed(&body["metadata"]["annotations"]);
    body
}

fn drain_polls(server: &Server) -> usize {
    server.seen().iter().filter(|s| s.path == "/drain").count()
}

/// Waits for the `n`th patch and returns when the test saw it.
fn wait_patches(api: &FakeApi, n: usize, timeout: Duration) -> Instant {
    wait_for(&format!("patch number {n}"), timeout, || {
        (api.patches().len() >= n).then_some(())
    });
    Instant::now()
}

#[test]
fn busy_then_idle_after_the_hold_then_busy_again() {
    let Some(pod) = Pod::new("k8s-cycle", &[], true) else {
        return;
    };
    let (api, s, busy, drain) = (&pod.api, &pod.s, &pod.busy, &pod.drain);
    let mut d = pod.launch(&[]).start();
    s.wait_file("ready");

    // Busy: one patch sets the three annotations, nothing else.
    wait_patches(api, 1, PATIENCE);
    let first = &api.patches()[0];
    assert_eq!(
        first["headers"]["content-type"],
        "application/merge-patch+json"
    );
    // Its answer is the pod's metadata only; the read takes the whole pod.
    assert_eq!(first["headers"]["accept"], PARTIAL);
    assert_eq!(api.requests()[0]["headers"]["accept"], "application/json");
    assert_eq!(
        body_of(first),
        serde_json::json!({"metadata": {"annotations": busy_annotations()}})
    );
    api.wait_annotations(&busy_annotations());
    assert_eq!(api.requests()[0]["method"], "GET", "the pod read first");

    // Busy and protected: nothing more over several polls.
    let polls = drain_polls(drain);
    wait_for("three more polls", PATIENCE, || {
        (drain_polls(drain) >= polls + 3).then_some(())
    });
    assert_eq!(api.patches().len(), 1, "a patch that changes nothing");

    // Idle: the annotations come off only after the hold.
    busy.store(false, Ordering::SeqCst);
    let idle_at = Instant::now();
    let off_at = wait_patches(api, 2, HOLD + PATIENCE);
    let held = off_at.duration_since(idle_at);
    assert!(held >= HOLD, "removed after {held:?}, before the hold");
    assert_eq!(body_of(&api.patches()[1]), idle_patch());
    api.wait_annotations(&Value::Null);

    // Busy again: at once.
    busy.store(true, Ordering::SeqCst);
    wait_patches(api, 3, PATIENCE);
    api.wait_annotations(&busy_annotations());
    assert_eq!(api.patches().len(), 3);
    d.signal(libc::SIGTERM);
    busy.store(false, Ordering::SeqCst);
    assert_eq!(d.wait_code(), 0, "drained once idle");
    assert_eq!(api.patches().len(), 3, "nothing sent during the stop");
}

#[test]
fn annotations_found_at_start_are_cleared_by_the_first_idle_answer() {
    // An earlier run (before a container restart) left them.
    let left = planted(&busy_annotations());
    let Some(pod) = Pod::new("k8s-restart", &["--annotations", &left], false) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let started = Instant::now();
    let mut d = pod.launch(&[]).start();
    s.wait_file("ready");
    let cleared_at = wait_patches(api, 1, HOLD + PATIENCE);
    assert!(cleared_at.duration_since(started) >= HOLD);
    api.wait_annotations(&Value::Null);
    assert_eq!(body_of(&api.patches()[0]), idle_patch());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "an idle app: drained");
}

#[test]
fn a_patch_applied_but_never_answered_is_undone_once_idle() {
    // The API server applies every patch and the answer is lost: drainit
    // cannot know busy's annotations are on, so idle must still clear them.
    let Some(pod) = Pod::new("k8s-lost", &["--mode", "lost"], true) else {
        return;
    };
    let (api, s, busy) = (&pod.api, &pod.s, &pod.busy);
    let mut d = pod.launch(&[]).start();
    s.wait_file("ready");
    wait_patches(api, 1, PATIENCE);
    api.wait_annotations(&busy_annotations());
    busy.store(false, Ordering::SeqCst);
    // After the hold and what remains of the busy patches' backoff.
    api.wait_annotations_within(&Value::Null, HOLD + BACKOFF_MAX + PATIENCE);
    let last = api.patches().last().cloned().unwrap();
    assert_eq!(body_of(&last), idle_patch());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "an idle app: drained");
}

#[test]
fn keys_found_at_start_while_busy_are_not_sent_again() {
    let left = planted(&busy_annotations());
    let Some(pod) = Pod::new("k8s-restart-busy", &["--annotations", &left], true) else {
        return;
    };
    let (api, s, drain) = (&pod.api, &pod.s, &pod.drain);
    let mut d = pod.launch(&["--grace", "2s"]).start();
    s.wait_file("ready");
    wait_for("the pod read", PATIENCE, || {
        (!api.requests().is_empty()).then_some(())
    });
    let polls = drain_polls(drain);
    wait_for("three polls after the read", PATIENCE, || {
        (drain_polls(drain) >= polls + 3).then_some(())
    });
    assert_eq!(
        api.patches().len(),
        0,
        "the pod already holds busy's values"
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
}

#[test]
fn nothing_is_written_during_a_stop() {
    let Some(pod) = Pod::new("k8s-stop", &[], false) else {
        return;
    };
    let (api, s, busy, drain) = (&pod.api, &pod.s, &pod.busy, &pod.drain);
    // The pre-stop delay keeps the stop's first drain poll a second away
    // from the signal, so the app is busy by then however loaded the
    // machine (protection ends when the stop begins, before the delay).
    let mut d = pod
        .launch(&["--grace", "6s", "--pre-stop-delay", "1s"])
        .start();
    s.wait_file("ready");
    wait_for("the pod read", PATIENCE, || {
        (!api.requests().is_empty()).then_some(())
    });
    // Idle and clean: nothing to send. The stop begins and the app turns
    // busy: protection would patch now, but a stopping pod sends nothing.
    d.signal(libc::SIGTERM);
    busy.store(true, Ordering::SeqCst);
    s.wait_file("term");
    let polls = drain_polls(drain);
    assert_eq!(d.wait_code(), 124, "busy to the deadline");
    assert!(
        drain_polls(drain) >= polls + 2,
        "the app was asked during the stop"
    );
    assert_eq!(api.patches().len(), 0, "{:?}", api.requests());
    // Only reads: at start, and at the stop (for the pod's deletion).
    let requests = api.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[1]["query"], "resourceVersion=0", "{requests:?}");
}

#[test]
fn the_token_is_read_again_for_every_request() {
    let Some(pod) = Pod::new("k8s-token", &[], false) else {
        return;
    };
    let (api, s, busy, sa) = (&pod.api, &pod.s, &pod.busy, &pod.sa);
    let mut d = pod.launch(&["--grace", "2s"]).start();
    s.wait_file("ready");
    wait_for("the pod read", PATIENCE, || {
        (!api.requests().is_empty()).then_some(())
    });
    assert_eq!(
        api.requests()[0]["headers"]["authorization"],
        "Bearer token-1"
    );
    // The kubelet rotates the projected token: the next request carries
    // the new one.
    fs::write(sa.join("token.tmp"), "token-2\n").unwrap();
    fs::rename(sa.join("token.tmp"), sa.join("token")).unwrap();
    busy.store(true, Ordering::SeqCst);
    wait_patches(api, 1, PATIENCE);
    assert_eq!(
        api.patches()[0]["headers"]["authorization"],
        "Bearer token-2"
    );
    api.wait_annotations(&busy_annotations());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
}

/// GET /status from drainit's listener.
fn status(addr: &str) -> Option<Value> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    write!(stream, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.split("\r\n\r\n").nth(1)?).ok()
}

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn the_grace_comes_from_the_pod() {
    let Some(pod) = Pod::new("k8s-grace", &["--grace", "10"], true) else {
        return;
    };
    let s = &pod.s;
    let addr = free_addr();
    let report = s.file("report.json");
    let flags = ["--serve", &addr, "--exit-report", path_str(&report)];
    let mut d = pod.launch(&flags).start();
    s.wait_file("ready");
    let k8s = wait_for("the pod's grace in /status", PATIENCE, || {
        let k8s = status(&addr)?["kubernetes"].clone();
        (k8s["grace_from"] == "pod").then_some(k8s)
    });
    assert_eq!(k8s["pod"], POD);
    assert_eq!(k8s["namespace"], "jobs");
    assert_eq!(k8s["termination_grace_period_seconds"], 10);
    assert_eq!(k8s["grace_ms"], 8000, "10 s less 2 s");
    wait_for("protected", PATIENCE, || {
        (status(&addr)?["kubernetes"]["protected"] == true).then_some(())
    });
    let metrics = {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    };
    assert!(metrics.contains("\ndrainit_k8s_protected 1\n"), "{metrics}");
    assert!(
        metrics.contains("\ndrainit_k8s_requests_total{result=\"2xx\"} 2\n"),
        "{metrics}"
    );
    assert!(!metrics.contains("drainit_ecs_task_protected"), "{metrics}");

    let stop = Instant::now();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
    let took = stop.elapsed();
    assert!(
        took >= Duration::from_millis(7900) && took < Duration::from_secs(10),
        "the deadline of 8 s (not the 25 s default) ended it after {took:?}"
    );
    let report: Value = exit_report(&report);
    assert_eq!(report["deadline_ms"], 8000);
    assert_eq!(report["kubernetes"]["grace_from"], "pod");
    assert_eq!(report["kubernetes"]["protected"], true);
    assert_eq!(report["kubernetes"]["pod"], POD);
}

#[test]
fn after_a_panic_of_the_loop_the_pods_grace_is_kept() {
    // The pod's period (10 s: a grace of 8 s) was read before the loop
    // failed on TERM. The fallback's core (the loop's fault point) and the
    // last resort (the core fails on every signal, the fallback's too)
    // keep that grace, not the 25 s default.
    for fault in ["event_loop", "core"] {
        let Some(pod) = Pod::new("k8s-grace-fallback", &["--grace", "10"], true) else {
            return;
        };
        let s = &pod.s;
        let addr = free_addr();
        let report = s.file("report.json");
        let flags = ["--serve", &addr, "--exit-report", path_str(&report)];
        let mut d = pod
            .launch(&flags)
            .binary(&built(Build::StaticFaults))
            .env("DRAINIT_TEST_FAULT", fault)
            .start();
        s.wait_file("ready");
        wait_for("the pod's grace in /status", PATIENCE, || {
            (status(&addr)?["kubernetes"]["grace_from"] == "pod").then_some(())
        });
        let stop = Instant::now();
        d.signal(libc::SIGTERM);
        // (wait_status: the injected panic is in stderr on purpose.)
        let code = d.wait_status(Duration::from_secs(40)).code();
        let took = stop.elapsed();
        assert_eq!(code, Some(124), "{fault}: {}", d.stderr());
        assert!(
            took >= Duration::from_millis(7900) && took < Duration::from_secs(15),
            "{fault}: the pod's 8 s (not the 25 s default) ended it after {took:?}"
        );
        let report: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(report["outcome"], "deadline", "{fault}: {report}");
        if fault == "event_loop" {
            assert_eq!(report["deadline_ms"], 8000, "{report}");
        }
    }
}

#[test]
fn a_pod_of_300_kib_is_read_and_patched() {
    // Sidecars, many variables, a large last-applied annotation: the GET
    // and every PATCH answer with the whole pod.
    let Some(pod) = Pod::new("k8s-big-pod", &["--grace", "10", "--pad-kib", "300"], true) else {
        return;
    };
    let (api, s, busy) = (&pod.api, &pod.s, &pod.busy);
    let addr = free_addr();
    let mut d = pod.launch(&["--serve", &addr]).start();
    s.wait_file("ready");
    let k8s = wait_for("the pod's grace in /status", PATIENCE, || {
        let k8s = status(&addr)?["kubernetes"].clone();
        (k8s["grace_from"] == "pod").then_some(k8s)
    });
    assert_eq!(k8s["grace_ms"], 8000, "10 s less 2 s");
    wait_for("protected", PATIENCE, || {
        (status(&addr)?["kubernetes"]["protected"] == true).then_some(())
    });
    busy.store(false, Ordering::SeqCst);
    wait_for("unprotected", HOLD + PATIENCE, || {
        (status(&addr)?["kubernetes"]["protected"] == false).then_some(())
    });
    let patches = api.patches();
    assert_eq!(patches.len(), 2, "each applied at once: {patches:?}");
    assert!(patches.iter().all(|p| p["status"] == 200), "{patches:?}");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "an idle app: drained");
}

#[test]
fn a_pod_grace_inside_the_pre_stop_delay_is_taken_and_cuts_the_delay() {
    // 10 s less its margin is 8 s, inside a 9 s delay: the pod's grace is
    // taken all the same, and a stop cuts the delay to half of it; a
    // warning says so, and one for a --grace-max past the pod's period.
    let Some(pod) = Pod::new("k8s-delay", &["--grace", "10"], false) else {
        return;
    };
    let s = &pod.s;
    let addr = free_addr();
    let flags = [
        "--serve",
        &addr,
        "--pre-stop-delay",
        "9s",
        "--grace-max",
        "30s",
    ];
    let mut d = pod.launch(&flags).start();
    s.wait_file("ready");
    let k8s = wait_for("the pod's period in /status", PATIENCE, || {
        let k8s = status(&addr)?["kubernetes"].clone();
        (k8s["termination_grace_period_seconds"] == 10).then_some(k8s)
    });
    assert_eq!(k8s["grace_from"], "pod", "{k8s}");
    assert_eq!(k8s["grace_ms"], 8_000, "{k8s}");
    let warnings = wait_for("both warnings", PATIENCE, || {
        let stderr = d.stderr();
        let lines: Vec<String> = stderr
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("terminationGracePeriodSeconds"))
            .map(str::to_string)
            .collect();
        (lines.len() >= 2).then_some(lines)
    });
    assert!(
        warnings.iter().any(|l| l.contains("--pre-stop-delay")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|l| l.contains("--grace-max")),
        "{warnings:?}"
    );
    let stop = Instant::now();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "an idle app: drained after the delay");
    let took = stop.elapsed();
    assert!(
        took >= Duration::from_millis(3_900) && took < Duration::from_secs(7),
        "the 9 s delay cut to 4 s: {took:?}"
    );
}

#[test]
fn a_read_refused_at_start_is_tried_again() {
    // The RoleBinding came after the pod: the read at start gets a 403.
    // The read goes again before any patch (a patch needs the template's
    // values), the pod's grace is taken, then busy's patch goes out.
    let Some(pod) = Pod::new(
        "k8s-read-again",
        &["--grace", "10", "--statuses", "403"],
        true,
    ) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let addr = free_addr();
    let mut d = pod.launch(&["--serve", &addr]).start();
    s.wait_file("ready");
    let k8s = wait_for("the pod's grace in /status", PATIENCE, || {
        let k8s = status(&addr)?["kubernetes"].clone();
        (k8s["grace_from"] == "pod").then_some(k8s)
    });
    assert_eq!(k8s["grace_ms"], 8000, "10 s less 2 s");
    wait_for("protected", PATIENCE, || {
        (status(&addr)?["kubernetes"]["protected"] == true).then_some(())
    });
    let methods: Vec<Value> = api.requests().iter().map(|r| r["method"].clone()).collect();
    assert_eq!(methods, ["GET", "GET", "PATCH"], "{:?}", api.requests());
    assert_eq!(api.requests()[0]["status"], 403);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124, "busy to the deadline");
}

#[test]
fn a_refused_token_is_read_again_and_retried_at_once() {
    let Some(pod) = Pod::new("k8s-401", &["--grace", "10", "--statuses", "401"], false) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let addr = free_addr();
    let mut d = pod.launch(&["--serve", &addr]).start();
    s.wait_file("ready");
    // The read refused, then read again at once: a read, where a later
    // poll would have sent the idle patch of a pod drainit knows nothing
    // of. The pod's grace applies.
    wait_for("the pod's grace after a 401", PATIENCE, || {
        (status(&addr)?["kubernetes"]["grace_from"] == "pod").then_some(())
    });
    let requests = api.requests();
    let seen: Vec<(&str, &Value)> = requests
        .iter()
        .map(|r| (r["method"].as_str().unwrap(), &r["status"]))
        .collect();
    assert_eq!(
        seen,
        [("GET", &Value::from(401)), ("GET", &Value::from(200))]
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "an idle app: drained");
}

#[test]
fn a_grace_at_or_above_the_pods_is_a_warning() {
    let Some(pod) = Pod::new("k8s-grace-warn", &["--grace", "10"], true) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let report = s.file("report.json");
    let flags = ["--grace", "10s", "--exit-report", path_str(&report)];
    let mut d = pod.launch(&flags).start();
    s.wait_file("ready");
    wait_for("the pod read", PATIENCE, || {
        (!api.requests().is_empty()).then_some(())
    });
    let warning = wait_for("the warning", PATIENCE, || {
        let stderr = d.stderr();
        stderr
            .lines()
            .find(|l| l.contains("terminationGracePeriodSeconds"))
            .map(str::to_string)
    });
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("kubelet will kill"), "{warning}");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
    let report: Value = exit_report(&report);
    assert_eq!(report["deadline_ms"], 10_000, "the grace given stays");
    assert_eq!(report["kubernetes"]["grace_from"], "option");
    assert_eq!(report["kubernetes"]["termination_grace_period_seconds"], 10);
}

/// drainit's peak memory (VmHWM, kB), as PID 1 of its namespace.
fn peak_kb(d: &Drainit) -> u64 {
    status_field(d.pid(), "VmHWM")
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_hostile_api_server_costs_no_memory_and_delays_nothing() {
    if !k8s_api::available() {
        return;
    }
    for mode in ["endless", "dribble", "silent"] {
        let api = api(&["--mode", mode]);
        let s = Scratch::new("k8s-hostile");
        let sa = api.service_account(&s);
        let busy = Arc::new(AtomicBool::new(true));
        let drain = drain_endpoint(&busy);
        let started = Instant::now();
        let mut d = in_pod(&api, &sa, &drain, &["--grace", "2s"], &s).start();
        // The app does not wait for the pod's read.
        s.wait_file("ready");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{mode}: the app started after {:?}",
            started.elapsed()
        );
        // Let the hostile answers run: the read, then the read again (no
        // patch before the pod is read), each cut by the client's bounds.
        wait_for(&format!("{mode}: two requests"), PATIENCE, || {
            (api.requests().len() >= 2).then_some(())
        });
        let peak = peak_kb(&d);
        assert!(peak < 16 * 1024, "{mode}: peak {peak} kB");
        let stop = Instant::now();
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), 124, "{mode}: {}", d.stderr());
        let took = stop.elapsed();
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
            "{mode}: the 2 s deadline held after {took:?}"
        );
        assert_eq!(api.patches().len(), 0, "{mode}: the pod never read");
    }
}

#[test]
fn an_api_that_refuses_never_delays_the_stop() {
    // 403 to everything: one warning naming the RBAC, the app runs, the
    // stop ends at its deadline.
    let statuses = vec!["403"; 50].join(",");
    let Some(pod) = Pod::new("k8s-403", &["--statuses", &statuses], true) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let mut d = pod.launch(&["--grace", "2s"]).start();
    s.wait_file("ready");
    wait_for("a retried read", PATIENCE, || {
        (api.requests().len() >= 2).then_some(())
    });
    assert_eq!(api.patches().len(), 0, "no patch before the pod is read");
    let stderr = d.stderr();
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("403")).collect();
    assert_eq!(said.len(), 1, "one line until it changes: {stderr}");
    assert!(said[0].contains("get and patch on pods"), "{}", said[0]);
    let stop = Instant::now();
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
    assert!(stop.elapsed() < Duration::from_secs(4));
}

#[test]
fn both_libc_builds_protect() {
    if !k8s_api::available() {
        return;
    }
    for build in [Build::Glibc, Build::Static] {
        let binary = built(build);
        let api = api(&["--ca", "p256"]);
        let s = Scratch::new("k8s-builds");
        let sa = api.service_account(&s);
        let busy = Arc::new(AtomicBool::new(true));
        let drain = drain_endpoint(&busy);
        let mut d = in_pod(&api, &sa, &drain, &["--grace", "2s"], &s)
            .binary(&binary)
            .start();
        s.wait_file("ready");
        wait_patches(&api, 1, PATIENCE);
        api.wait_annotations(&busy_annotations());
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), 124, "{build:?}");
    }
}

#[test]
fn without_the_option_nothing_reaches_the_api_server() {
    let Some(pod) = Pod::new("k8s-off", &[], true) else {
        return;
    };
    let (api, s, sa, drain) = (&pod.api, &pod.s, &pod.sa, &pod.drain);
    let mut d = drainit(["--drain-url", &drain.url("/drain"), "--grace", "2s"])
        .with_args(sh(s, STUBBORN))
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", &api.port.to_string())
        .env("POD_NAME", POD)
        .before_exec(service_account_at(sa))
        .start();
    s.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
    assert!(drain_polls(drain) >= 1);
    assert!(
        !api.dir.file("requests.jsonl").exists() || api.requests().is_empty(),
        "{:?}",
        api.requests()
    );
}

#[test]
fn bad_kubernetes_settings_exit_2() {
    let drain = ["--drain-url", "http://127.0.0.1:1/d"];
    let pod = [("KUBERNETES_SERVICE_HOST", "127.0.0.1"), ("POD_NAME", POD)];
    assert_usage_error(
        &["--k8s-protect", drain[0], drain[1]],
        &[],
        "KUBERNETES_SERVICE_HOST",
    );
    assert_usage_error(&["--k8s-protect"], &pod, "--drain-url");
    // No service account mounted: the error says where the token went.
    assert_usage_error(&["--k8s-protect", drain[0], drain[1]], &pod, "namespace");
    assert_usage_error(
        &["--k8s-protect", drain[0], drain[1]],
        &pod,
        "automountServiceAccountToken: false",
    );
    // Both protections off ECS: the conflict, not the missing variable.
    assert_usage_error(
        &["--k8s-protect", "--ecs-protect", drain[0], drain[1]],
        &pod,
        "cannot be used together",
    );
    assert_usage_error(
        &["--k8s-protect", "--ecs-protect", drain[0], drain[1]],
        &[("ECS_AGENT_URI", "http://127.0.0.1:1/api"), pod[0], pod[1]],
        "--ecs-protect",
    );
    assert_usage_error(&["--k8s-cost", "0"], &[], "--k8s-cost");
    assert_usage_error(&["--k8s-cost", "2147483648"], &[], "--k8s-cost");
    assert_usage_error(
        &["--k8s-annotations", "cost,evict"],
        &[],
        "--k8s-annotations",
    );
    assert_usage_error(
        &["--k8s-protect", drain[0], drain[1]],
        &[("KUBERNETES_SERVICE_HOST", "a b"), pod[1]],
        "neither an IP address nor a DNS name",
    );
}

#[test]
fn the_build_without_the_feature_refuses_the_option() {
    let root = env!("CARGO_MANIFEST_DIR");
    let target = PathBuf::from(root).join("target").join("no-k8s");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args([
            "build",
            "--bin",
            "drainit",
            "--no-default-features",
            "--target-dir",
        ])
        .arg(&target)
        .status()
        .expect("run cargo");
    assert!(status.success(), "the build without the k8s feature");
    let binary = target.join("debug").join("drainit");
    let (code, stderr) = drainit(["--k8s-protect", "--drain-url", "http://127.0.0.1:1/d"])
        .with_args(vec!["--".into(), "/bin/true".into()])
        .binary(path_str(&binary))
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("POD_NAME", POD)
        .run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.starts_with("drainit: "), "{stderr}");
    assert!(stderr.contains("feature k8s"), "{stderr}");
    // And it runs everything else.
    let (code, stderr) = drainit(["--drain-url", "http://127.0.0.1:1/d", "--grace", "1s"])
        .with_args(vec!["--".into(), "/bin/true".into()])
        .binary(path_str(&binary))
        .run();
    assert_eq!(code, 0, "{stderr}");
}

/// Without `POD_NAME` the pod is taken from `HOSTNAME`, which is another
/// name when the pod sets `spec.hostname`: one WARN at start says so and
/// how to set `POD_NAME`; protection goes on with the name it took. With
/// `POD_NAME` set, no such line (looked for once the first patch proves
/// the start's lines are all out).
#[test]
fn a_pod_taken_from_hostname_is_one_warning() {
    for pod_name in ["", POD] {
        let Some(pod) = Pod::new("k8s-hostname", &["--grace", "10"], true) else {
            return;
        };
        let d = pod
            .launch(&[])
            .env("POD_NAME", pod_name)
            .env("HOSTNAME", POD)
            .start();
        pod.s.wait_file("ready");
        // The start's notices are logged in order, the HOSTNAME one before
        // this INFO line: once it is out, so is any warning before it.
        let stderr = wait_for("the protection's INFO line", PATIENCE, || {
            let stderr = d.stderr();
            stderr
                .contains("Kubernetes pod protection for")
                .then_some(stderr)
        });
        wait_patches(&pod.api, 1, PATIENCE);
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("POD_NAME is not set"))
            .collect();
        if pod_name.is_empty() {
            assert_eq!(said.len(), 1, "{stderr}");
            assert!(
                said[0].contains("WARN") && said[0].contains("HOSTNAME"),
                "{stderr}"
            );
            assert!(said[0].contains("fieldPath: metadata.name"), "{stderr}");
        } else {
            assert!(said.is_empty(), "{stderr}");
        }
    }
}

/// A `terminationGracePeriodSeconds` that is not a whole number of seconds
/// (a string, an object) is one true WARN: the grace stays the default,
/// the pod is read once and never again (no "retried" promise), and
/// protection goes on.
#[test]
fn an_unreadable_pod_grace_is_one_true_warning() {
    for odd in [r#""30""#, r#"{"seconds":30}"#] {
        let Some(pod) = Pod::new("k8s-odd-grace", &["--grace-json", odd], true) else {
            return;
        };
        let addr = free_addr();
        let d = pod.launch(&["--serve", &addr]).start();
        pod.s.wait_file("ready");
        wait_patches(&pod.api, 1, PATIENCE);
        let k8s = wait_for("/status", PATIENCE, || status(&addr)).clone();
        assert_eq!(k8s["kubernetes"]["grace_from"], "default", "{odd}: {k8s}");
        assert_eq!(k8s["kubernetes"]["grace_ms"], 25_000, "{odd}: {k8s}");
        // Three more rounds of protection (one a second), in each of which
        // a read still owed would have been sent.
        let polled = drain_polls(&pod.drain);
        wait_for("three more protection rounds", PATIENCE, || {
            (drain_polls(&pod.drain) >= polled + 3).then_some(())
        });
        let reads = pod
            .api
            .requests()
            .iter()
            .filter(|r| r["method"] == "GET")
            .count();
        assert_eq!(reads, 1, "{odd}: read once");
        let stderr = wait_for("the warning", PATIENCE, || {
            let stderr = d.stderr();
            stderr.contains("not a whole number").then_some(stderr)
        });
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("terminationGracePeriodSeconds"))
            .collect();
        assert_eq!(said.len(), 1, "{odd}: {stderr}");
        assert!(said[0].contains("not a whole number"), "{stderr}");
        assert!(!stderr.contains("retried"), "{odd}: {stderr}");
        // The start's grace line says the pod sets it, not that 25 s is
        // the default for good.
        assert!(
            stderr.contains("until the pod's terminationGracePeriodSeconds is read"),
            "{stderr}"
        );
    }
}

/// An app that runs until the test touches `$D/crash`, then exits 3 by
/// itself (a crash: no stop under way).
const CRASHES: &str =
    "touch \"$D/ready\"; while [ ! -e \"$D/crash\" ]; do sleep 0.02; done; exit 3";

/// The longest drainit waits for the crash's patch (`protect::CRASH_BOUND`).
const CRASH_BOUND: Duration = Duration::from_millis(1500);

impl Pod {
    /// drainit with `--k8s-protect` in this pod, running `CRASHES`.
    fn launch_crashing(&self, flags: &[&str]) -> Launch {
        in_pod_running(&self.api, &self.sa, &self.drain, flags, &self.s, CRASHES)
    }
}

/// The app crashes now; drainit's exit code and how long after the crash
/// it came.
fn crash(d: &mut Drainit, s: &Scratch) -> (i32, Duration) {
    let at = Instant::now();
    s.touch("crash");
    let code = d.wait_code();
    (code, at.elapsed())
}

#[test]
fn a_crash_while_busy_clears_the_keys_and_exits_with_the_apps_code() {
    // The template gives the pod its own cost: a crash puts it back.
    let template = serde_json::json!({COST: "-100"}).to_string();
    let Some(pod) = Pod::new("k8s-crash", &["--annotations", &template], true) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let mut d = pod.launch_crashing(&["--grace", "10s"]).start();
    s.wait_file("ready");
    let record = record(&[Some("-100"), None, None], &["app"]);
    api.wait_annotations(
        &serde_json::json!({COST: "1000", EVICT: "false", DISRUPT: "true", RECORD: record}),
    );
    let (code, took) = crash(&mut d, s);
    assert_eq!(code, 3, "the app's own code");
    assert!(took < CRASH_BOUND + Duration::from_secs(2), "{took:?}");
    api.wait_annotations(&serde_json::json!({COST: "-100"}));
    let last = api.patches().last().cloned().unwrap();
    assert_eq!(last["status"], 200);
    assert_eq!(last["headers"]["accept"], PARTIAL);
    assert!(d
        .stderr()
        .contains("unprotected: the app ended while protected"));
}

#[test]
fn a_crash_with_a_silent_api_server_exits_within_the_bound() {
    let Some(pod) = Pod::new("k8s-crash-silent", &[], true) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let mut d = pod.launch_crashing(&["--grace", "10s"]).start();
    s.wait_file("ready");
    api.wait_annotations(&busy_annotations());
    let patches = api.patches().len();
    api.go_silent();
    let (code, took) = crash(&mut d, s);
    assert_eq!(code, 3, "the app's own code");
    // It waited for the answer (the bound, less the app's own poll of its
    // file), and no longer than the bound and the exit's own steps.
    assert!(took >= CRASH_BOUND - Duration::from_millis(100), "{took:?}");
    assert!(took < CRASH_BOUND + Duration::from_secs(2), "{took:?}");
    let all = api.patches();
    assert_eq!(all.len(), patches + 1, "one idle patch: {all:?}");
    assert_eq!(all[patches]["status"], "silent");
    assert_eq!(body_of(&all[patches]), idle_patch());
}

#[test]
fn a_crash_with_a_refusing_api_server_exits_at_once() {
    // The read and busy's patch are answered; the crash's patch gets a 500.
    let Some(pod) = Pod::new("k8s-crash-500", &["--statuses", "200,200,500"], true) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let mut d = pod.launch_crashing(&["--grace", "10s"]).start();
    s.wait_file("ready");
    api.wait_annotations(&busy_annotations());
    let (code, took) = crash(&mut d, s);
    assert_eq!(code, 3);
    assert!(took < CRASH_BOUND, "{took:?}");
    assert_eq!(api.patches().last().unwrap()["status"], 500);
    assert!(
        d.stderr().contains("the idle patch failed"),
        "{}",
        d.stderr()
    );
}

#[test]
fn the_templates_values_are_kept_across_idle_busy_idle_and_a_restart() {
    // A pod with local storage whose template says safe-to-evict "true"
    // and a cost of its own.
    let template = serde_json::json!({EVICT: "true", COST: "-100"});
    let record = record(&[Some("-100"), Some("true"), None], &["app"]);
    let busy = serde_json::json!({COST: "1000", EVICT: "false", DISRUPT: "true", RECORD: record});
    let Some(pod) = Pod::new(
        "k8s-template",
        &["--annotations", &template.to_string()],
        false,
    ) else {
        return;
    };
    let (api, s, app_busy, drain) = (&pod.api, &pod.s, &pod.busy, &pod.drain);
    let mut d = pod.launch(&["--grace", "2s"]).start();
    s.wait_file("ready");
    // Idle from the start: the template's values are what idle wants.
    wait_for("the pod read", PATIENCE, || {
        (!api.requests().is_empty()).then_some(())
    });
    let polls = drain_polls(drain);
    wait_for("three polls after the read", PATIENCE, || {
        (drain_polls(drain) >= polls + 3).then_some(())
    });
    assert_eq!(api.patches().len(), 0, "the template's values kept");
    // Busy: overwritten, and recorded in the same patch.
    app_busy.store(true, Ordering::SeqCst);
    wait_patches(api, 1, PATIENCE);
    assert_eq!(
        body_of(&api.patches()[0]),
        serde_json::json!({"metadata": {"annotations": {COST: "1000", EVICT: "false", DISRUPT: "true", RECORD: record}}})
    );
    api.wait_annotations(&busy);
    // Idle: the template's values back, the record gone.
    app_busy.store(false, Ordering::SeqCst);
    wait_patches(api, 2, HOLD + PATIENCE);
    api.wait_annotations(&template);
    // Busy again, then the container dies at once (an OOM kill): no
    // patch on the way out.
    app_busy.store(true, Ordering::SeqCst);
    wait_patches(api, 3, PATIENCE);
    api.wait_annotations(&busy);
    d.signal(libc::SIGKILL);
    d.wait_code();
    assert_eq!(api.patches().len(), 3);
    // The container's next run knows the template's values from the
    // record, and puts them back once idle.
    app_busy.store(false, Ordering::SeqCst);
    std::fs::remove_file(s.file("ready")).unwrap();
    let mut again = pod.launch(&["--grace", "2s"]).start();
    s.wait_file("ready");
    wait_patches(api, 4, HOLD + PATIENCE);
    api.wait_annotations(&template);
    assert!(again
        .stderr()
        .contains("holds drainit's annotations from an earlier run"));
    again.signal(libc::SIGTERM);
    assert_eq!(again.wait_code(), 0, "an idle app: drained");
}

#[test]
fn idle_safe_to_evict_says_true_once_idle() {
    // Asked by its variable; the policy allows exactly drainit's keys.
    let allowed = [COST, EVICT, DISRUPT, RECORD].join(",");
    let Some(pod) = Pod::new("k8s-idle-evict", &["--allowed-keys", &allowed], false) else {
        return;
    };
    let (api, s, busy) = (&pod.api, &pod.s, &pod.busy);
    let started = Instant::now();
    let mut d = pod
        .launch(&["--grace", "2s"])
        .env("DRAINIT_K8S_IDLE_SAFE_TO_EVICT", "1")
        .start();
    s.wait_file("ready");
    // Idle from the start: after the hold, "true" and the record (the
    // template set none of the keys; the idle "true" is drainit's).
    let at = wait_patches(api, 1, HOLD + PATIENCE);
    assert!(at.duration_since(started) >= HOLD);
    let mut idle = record(&[None, None, None], &[]);
    idle[WROTE] = serde_json::json!(["safe-to-evict"]);
    api.wait_annotations(&serde_json::json!({EVICT: "true", RECORD: idle}));
    busy.store(true, Ordering::SeqCst);
    wait_patches(api, 2, PATIENCE);
    api.wait_annotations(&busy_annotations());
    assert!(api.patches().iter().all(|p| p["status"] == 200));
    d.signal(libc::SIGTERM);
    busy.store(false, Ordering::SeqCst);
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn a_503_waits_its_retry_after() {
    // The read answered; busy's patch gets a 503 with Retry-After: 4,
    // where the backoff alone would wait 1 s.
    let Some(pod) = Pod::new(
        "k8s-503",
        &["--statuses", "200,503", "--retry-after", "4"],
        true,
    ) else {
        return;
    };
    let (api, s) = (&pod.api, &pod.s);
    let mut d = pod.launch(&["--grace", "2s"]).start();
    s.wait_file("ready");
    let refused = wait_patches(api, 1, PATIENCE);
    assert_eq!(api.patches()[0]["status"], 503);
    let again = wait_patches(api, 2, PATIENCE);
    // The test sees each patch a few ms after it came: 3 s is an honest
    // floor for a 4 s wait, and far above the 1 s backoff.
    assert!(again.duration_since(refused) >= Duration::from_secs(3));
    api.wait_annotations(&busy_annotations());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124);
}

#[test]
fn both_libc_builds_clear_the_keys_on_a_crash() {
    if !k8s_api::available() {
        return;
    }
    for build in [Build::Glibc, Build::Static] {
        let binary = built(build);
        let template = serde_json::json!({EVICT: "true"});
        let api = api(&["--annotations", &template.to_string()]);
        let s = Scratch::new("k8s-builds-crash");
        let sa = api.service_account(&s);
        let busy = Arc::new(AtomicBool::new(true));
        let drain = drain_endpoint(&busy);
        let mut d = in_pod_running(&api, &sa, &drain, &["--grace", "2s"], &s, CRASHES)
            .binary(&binary)
            .start();
        s.wait_file("ready");
        let record = record(&[None, Some("true"), None], &["app"]);
        api.wait_annotations(&serde_json::json!({
            COST: "1000", EVICT: "false", DISRUPT: "true", RECORD: record}));
        let (code, took) = crash(&mut d, &s);
        assert_eq!(code, 3, "{build:?}");
        assert!(
            took < CRASH_BOUND + Duration::from_secs(2),
            "{build:?}: {took:?}"
        );
        api.wait_annotations(&template);
    }
}
