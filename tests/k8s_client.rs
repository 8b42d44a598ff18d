//! The Kubernetes API client (`io::k8s` over `io::tls`) against a faithful
//! fake API server (`tests/support/k8s_api.py`, HTTPS with certificates
//! made at test time): RSA and P-256 CAs, a server capped at TLS 1.2, a
//! certificate from a wrong CA or without the IP SAN refused before
//! anything is sent, the token read again before each request, the
//! answers the API server gives, and hostile servers (an endless body, a
//! dribbled head, silence after the handshake, dropped connections)
//! bounded in time and memory. An API server named by a DNS name
//! (`KUBERNETES_SERVICE_HOST`): verified by its DNS SAN with SNI sent, an
//! IP SAN refused for a name (and a DNS SAN for an address), a name that
//! does not resolve a failure that reaches no server, a resolver that never
//! answers bounded by the request's deadline; drainit itself (both
//! libc builds) starts the app whatever the lookup does, retries, and goes
//! through once the name resolves; a host that is neither is exit 2.
//!
//! The service-account directory is the standard path, always: each test
//! runs in a mount namespace of its own (its thread unshares one, mounts a
//! tmpfs over /run, which /var/run points to, and writes the token, CA and
//! namespace there), so tests running side by side each see their own. In
//! the same namespace a test that needs names gives itself its own
//! `/etc/hosts` and a resolver that answers nothing (`names_at`); the
//! threads it starts, the lookups' among them, share that view.

#![cfg(feature = "k8s")]

mod support;

use std::ffi::CString;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use drainit::io::k8s::{self, Place, SA_DIR};
use drainit::proto::exchange::Method;
use drainit::proto::http::{Kind, Response};
use drainit::proto::k8s::{self as api, Managed, Verdict, API_BODY_LIMIT};
use drainit::proto::k8s_host::Host;
use drainit::proto::k8s_pod_read::read_pod;
use serde_json::Value;
use support::k8s_api::FakeApi;
use support::*;

/// Gives this thread a mount namespace of its own with an empty
/// service-account directory at the standard path, and returns it.
fn private_sa_dir() -> PathBuf {
    let c = |s: &str| CString::new(s).unwrap();
    // SAFETY: plain syscalls with valid C strings; they affect only this
    // thread's view of the mounts.
    unsafe {
        assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare(CLONE_NEWNS)");
        let none = std::ptr::null();
        assert_eq!(
            libc::mount(
                c("none").as_ptr(),
                c("/").as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null()
            ),
            0,
            "make / private"
        );
        assert_eq!(
            libc::mount(
                c("tmpfs").as_ptr(),
                c("/var/run").as_ptr(),
                c("tmpfs").as_ptr(),
                0,
                std::ptr::null()
            ),
            0,
            "tmpfs on /var/run"
        );
    }
    fs::create_dir_all(SA_DIR).unwrap();
    PathBuf::from(SA_DIR)
}

/// Where the client finds the fake API server.
trait At {
    /// This server's place, with the service-account directory filled
    /// (`token-1`, the server's CA, namespace `jobs`).
    fn place(&self) -> Place {
        self.place_at("127.0.0.1")
    }

    /// The same, with the server at `host` (an address where it listens,
    /// or a name for it).
    fn place_at(&self, host: &str) -> Place;
}

impl At for FakeApi {
    fn place_at(&self, host: &str) -> Place {
        self.fill_service_account(&private_sa_dir());
        Place {
            host: host.parse().unwrap(),
            port: self.port,
            namespace: "jobs".into(),
            pod: "worker-7d9f-x2".into(),
        }
    }
}

const TIMEOUT: Duration = Duration::from_secs(3);

fn verdict(answer: &Response) -> Verdict {
    api::verdict(answer)
}

fn annotations(pod: &Value) -> Value {
    pod["metadata"]
        .get("annotations")
        .cloned()
        .unwrap_or(Value::Null)
}

/// GET, busy, busy again (no change), idle, over the given server.
fn round_trip(server: &FakeApi, tls: &str) {
    let place = server.place();
    let got = k8s::get_pod(&place, TIMEOUT).unwrap();
    assert_eq!(verdict(&got), Verdict::Applied);
    let pod = read_pod(&got.body).unwrap();
    assert_eq!(pod.grace_seconds, Some(30));
    assert!(!pod.holds(Managed::ALL));

    let busy = api::patch_body(Managed::ALL, true, 1000);
    let answer = k8s::patch_pod(&place, &busy, TIMEOUT).unwrap();
    assert_eq!(verdict(&answer), Verdict::Applied);
    let after = server.pod();
    assert_eq!(
        annotations(&after),
        serde_json::json!({
            api::COST_KEY: "1000",
            api::SAFE_TO_EVICT_KEY: "false",
            api::DO_NOT_DISRUPT_KEY: "true"
        })
    );
    assert_eq!(after["metadata"]["resourceVersion"], "1001");
    // The same patch again changes nothing: the version stays.
    k8s::patch_pod(&place, &busy, TIMEOUT).unwrap();
    assert_eq!(server.pod()["metadata"]["resourceVersion"], "1001");

    let idle = api::patch_body(Managed::ALL, false, 1000);
    assert_eq!(
        verdict(&k8s::patch_pod(&place, &idle, TIMEOUT).unwrap()),
        Verdict::Applied
    );
    let after = server.pod();
    assert_eq!(annotations(&after), Value::Null, "{after}");
    assert_eq!(after["metadata"]["resourceVersion"], "1002");
    // The rest of the pod is untouched.
    assert_eq!(after["metadata"]["labels"]["app"], "worker");

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for r in &requests {
        assert_eq!(r["path"], "/api/v1/namespaces/jobs/pods/worker-7d9f-x2");
        assert_eq!(r["headers"]["authorization"], "Bearer token-1");
        assert_eq!(r["tls"], tls);
        // An address is never sent as SNI.
        assert_eq!(r["sni"], Value::Null);
    }
    assert_eq!(requests[0]["method"], "GET");
    assert_eq!(requests[1]["method"], "PATCH");
    assert_eq!(
        requests[1]["headers"]["content-type"],
        "application/merge-patch+json"
    );
    assert_eq!(
        requests[1]["headers"]["host"],
        format!("127.0.0.1:{}", server.port)
    );
}

#[test]
fn an_rsa_ca_over_tls_1_3() {
    if !k8s_api::available() {
        return;
    }
    round_trip(&FakeApi::start(&["--ca", "rsa"]), "TLSv1.3");
}

#[test]
fn a_p256_ca_over_tls_1_3() {
    if !k8s_api::available() {
        return;
    }
    round_trip(&FakeApi::start(&["--ca", "p256"]), "TLSv1.3");
}

#[test]
fn an_api_server_at_an_ipv6_address() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&["--host", "::1", "--ca", "p256"]);
    let place = server.place_at("::1");
    let answer = k8s::get_pod(&place, TIMEOUT).unwrap();
    assert_eq!(verdict(&answer), Verdict::Applied);
    let requests = server.requests();
    assert_eq!(
        requests[0]["headers"]["host"],
        format!("[::1]:{}", server.port)
    );
    // A certificate that does not name ::1 is refused there too.
    let v4 = FakeApi::start(&["--host", "::1", "--cert", "no-ip-san"]);
    let failure = k8s::get_pod(&v4.place_at("::1"), TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Tls, "{failure}");
}

#[test]
fn servers_capped_at_tls_1_2() {
    if !k8s_api::available() {
        return;
    }
    round_trip(&FakeApi::start(&["--ca", "rsa", "--tls12"]), "TLSv1.2");
    round_trip(&FakeApi::start(&["--ca", "p256", "--tls12"]), "TLSv1.2");
}

/// A refused certificate: a `tls` failure, and nothing reached the server.
fn refused(server: &FakeApi, why: &str) {
    refused_at(server, "127.0.0.1", why);
}

/// The same, with the server named `host`.
fn refused_at(server: &FakeApi, host: &str, why: &str) {
    let place = server.place_at(host);
    let failure = k8s::get_pod(&place, TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Tls, "{failure}");
    assert!(failure.detail.contains(why), "{failure}");
    let busy = api::patch_body(Managed::ALL, true, 1000);
    let failure = k8s::patch_pod(&place, &busy, TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Tls, "{failure}");
    // The server saw both handshakes fail and no request.
    wait_for("two failed handshakes", PATIENCE, || {
        (server.dir.read("requests.jsonl").lines().count() >= 2).then_some(())
    });
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn a_certificate_from_another_ca_is_refused_before_anything_is_sent() {
    if !k8s_api::available() {
        return;
    }
    let why = "not signed by the service-account CA";
    refused(&FakeApi::start(&["--cert", "wrong-ca"]), why);
    let p256 = ["--cert", "wrong-ca", "--ca", "p256", "--tls12"];
    refused(&FakeApi::start(&p256), why);
}

#[test]
fn a_certificate_without_the_ip_san_is_refused() {
    if !k8s_api::available() {
        return;
    }
    let why = "does not name its IP address";
    refused(&FakeApi::start(&["--cert", "no-ip-san"]), why);
    refused(&FakeApi::start(&["--cert", "no-ip-san", "--tls12"]), why);
}

#[test]
fn the_token_and_ca_are_read_again_before_each_request() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&[]);
    let place = server.place();
    k8s::get_pod(&place, TIMEOUT).unwrap();
    fs::write(PathBuf::from(SA_DIR).join("token"), "token-2").unwrap();
    k8s::get_pod(&place, TIMEOUT).unwrap();
    // An expired token: 401, and the next request reads the file again.
    fs::write(PathBuf::from(SA_DIR).join("token"), "expired").unwrap();
    let answer = k8s::get_pod(&place, TIMEOUT).unwrap();
    assert_eq!(verdict(&answer), Verdict::Unauthenticated);
    fs::write(PathBuf::from(SA_DIR).join("token"), "token-1").unwrap();
    assert_eq!(
        verdict(&k8s::get_pod(&place, TIMEOUT).unwrap()),
        Verdict::Applied
    );
    let sent: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r["headers"]["authorization"].clone())
        .collect();
    assert_eq!(
        sent,
        [
            "Bearer token-1",
            "Bearer token-2",
            "Bearer expired",
            "Bearer token-1"
        ]
    );
    // The CA too: another server's CA in the file, and this one is refused.
    let other = FakeApi::start(&[]);
    fs::copy(
        other.dir.file("ca.crt"),
        PathBuf::from(SA_DIR).join("ca.crt"),
    )
    .unwrap();
    assert_eq!(k8s::get_pod(&place, TIMEOUT).unwrap_err().kind, Kind::Tls);
    // A token file that would inject a header is refused before sending.
    fs::write(PathBuf::from(SA_DIR).join("token"), "a\r\nX-Evil: 1").unwrap();
    assert_eq!(k8s::get_pod(&place, TIMEOUT).unwrap_err().kind, Kind::Io);
}

#[test]
fn the_answers_of_the_api_server() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&[
        "--statuses",
        "403,404,409,429,500",
        "--retry-after",
        "7",
        "--annotations",
        r#"{"karpenter.sh/do-not-disrupt":"true","other":"x"}"#,
    ]);
    let place = server.place();
    let get = || verdict(&k8s::get_pod(&place, TIMEOUT).unwrap());
    assert!(matches!(get(), Verdict::Forbidden(m) if m.contains("scripted 403")));
    assert_eq!(get(), Verdict::NoSuchPod);
    assert_eq!(get(), Verdict::Retry { after: None });
    assert_eq!(
        get(),
        Verdict::Retry {
            after: Some(Duration::from_secs(7))
        }
    );
    assert_eq!(get(), Verdict::Retry { after: None });
    // Then the pod, with drainit's earlier state on it.
    let answer = k8s::get_pod(&place, TIMEOUT).unwrap();
    let pod = read_pod(&answer.body).unwrap();
    assert!(pod.holds(Managed::ALL));
    assert!(!pod.holds(Managed::parse("cost").unwrap()));
    // A cost that is no int32 is the API's 422, with its message.
    let bad = br#"{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"2147483648"}}}"#;
    match verdict(&k8s::patch_pod(&place, bad, TIMEOUT).unwrap()) {
        Verdict::Refused(422, message) => assert!(message.contains("32bit"), "{message}"),
        other => panic!("{other:?}"),
    }
    // Annotation values are strings: a number is the API's 400.
    let number = br#"{"metadata":{"annotations":{"karpenter.sh/do-not-disrupt":true}}}"#;
    assert!(matches!(
        verdict(&k8s::patch_pod(&place, number, TIMEOUT).unwrap()),
        Verdict::Refused(400, _)
    ));
    // Nothing else of the pod may change through this patch.
    let image = br#"{"spec":{"containers":[{"name":"app","image":"evil:1"}]}}"#;
    assert!(matches!(
        verdict(&k8s::patch_pod(&place, image, TIMEOUT).unwrap()),
        Verdict::Refused(422, _)
    ));
    assert_eq!(server.pod()["metadata"]["resourceVersion"], "1000");
    // Idle clears only drainit's keys.
    let idle = api::patch_body(Managed::ALL, false, 1);
    k8s::patch_pod(&place, &idle, TIMEOUT).unwrap();
    assert_eq!(
        annotations(&server.pod()),
        serde_json::json!({"other": "x"})
    );
    // A wrong pod name: 404.
    let wrong = Place {
        pod: "worker-0".into(),
        ..place
    };
    assert_eq!(
        verdict(&k8s::get_pod(&wrong, TIMEOUT).unwrap()),
        Verdict::NoSuchPod
    );
}

#[test]
fn a_pod_larger_than_the_http_clients_body_bound_is_read_and_patched() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&["--grace", "60", "--pad-kib", "300"]);
    let place = server.place();
    let got = k8s::get_pod(&place, TIMEOUT).unwrap();
    assert!(got.body.len() > 300 * 1024);
    assert!(got.body.len() > drainit::proto::http::BODY_LIMIT);
    assert_eq!(verdict(&got), Verdict::Applied);
    assert_eq!(read_pod(&got.body).unwrap().grace_seconds, Some(60));
    for busy in [true, false] {
        let body = api::patch_body(Managed::ALL, busy, 1000);
        let answer = k8s::patch_pod(&place, &body, TIMEOUT).unwrap();
        assert!(answer.body.len() > 300 * 1024);
        assert_eq!(verdict(&answer), Verdict::Applied, "busy {busy}");
    }
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_request_thread_reports_once() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&[]);
    let place = server.place();
    let mut results = Vec::new();
    let busy = api::patch_body(Managed::ALL, true, 7);
    let patch = k8s::pod_request(Method::Patch, Some(&busy));
    k8s::run_and_report(&place, &patch, TIMEOUT, |r| results.push(r));
    assert_eq!(results.len(), 1);
    assert_eq!(verdict(results[0].as_ref().unwrap()), Verdict::Applied);
    assert_eq!(annotations(&server.pod())[api::COST_KEY], "7");
    // A panic in the request (a fault point, in test builds) is reported
    // as an internal failure, once; nothing reaches the server. Only this
    // test runs requests through `run_and_report`.
    #[cfg(feature = "fault-injection")]
    {
        std::env::set_var("DRAINIT_TEST_FAULT", "k8s_worker");
        let mut results = Vec::new();
        let get = k8s::pod_request(Method::Get, None);
        k8s::run_and_report(&place, &get, TIMEOUT, |r| results.push(r));
        std::env::remove_var("DRAINIT_TEST_FAULT");
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].as_ref().unwrap_err().kind, Kind::Internal);
        assert_eq!(server.requests().len(), 1);
    }
}

/// What the core adds to a request reaches the API server: its headers
/// (an `Accept` of its own replaces the default one) and its query.
#[test]
fn a_requests_headers_and_query_are_sent() {
    if !k8s_api::available() {
        return;
    }
    const PARTIAL: &str =
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let server = FakeApi::start(&[]);
    let place = server.place();
    let mut get = k8s::pod_request(Method::Get, None);
    get.query = vec![("resourceVersion", "0".into())];
    let busy = api::patch_body(Managed::ALL, true, 7);
    let mut patch = k8s::pod_request(Method::Patch, Some(&busy));
    patch.headers = vec![("Accept", PARTIAL.into())];
    let mut answers = Vec::new();
    for request in [&get, &patch] {
        k8s::run_and_report(&place, request, TIMEOUT, |r| answers.push(r.unwrap()));
    }
    let body = |i: usize| serde_json::from_slice::<Value>(&answers[i].body).unwrap();
    assert_eq!(body(0)["kind"], "Pod");
    assert_eq!(body(1)["kind"], "PartialObjectMetadata");
    let requests = server.requests();
    assert_eq!(requests[0]["query"], "resourceVersion=0");
    assert_eq!(requests[0]["headers"]["accept"], "application/json");
    assert_eq!(requests[1]["query"], "");
    assert_eq!(requests[1]["headers"]["accept"], PARTIAL);
}

#[test]
fn a_dropped_connection_is_a_failure_at_once() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&["--mode", "drop"]);
    let place = server.place();
    let started = Instant::now();
    let failure = k8s::get_pod(&place, TIMEOUT).unwrap_err();
    assert!(
        matches!(failure.kind, Kind::Closed | Kind::Reset | Kind::Io),
        "{failure:?}"
    );
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
}

#[test]
fn a_server_without_tls_gets_no_token() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&["--mode", "plaintext"]);
    let place = server.place();
    let failure = k8s::get_pod(&place, TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Tls, "{failure}");
    // What it received was a TLS ClientHello (a handshake record), and
    // no token in it.
    let seen = wait_for("the server's record", PATIENCE, || {
        let text = server.dir.read("requests.jsonl");
        text.lines().next().map(str::to_string)
    });
    let hex = serde_json::from_str::<Value>(&seen).unwrap()["plaintext"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hex.starts_with("16030"), "{hex}");
    assert!(!hex.contains(&hex_of("token-1")), "{hex}");
}

fn hex_of(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Runs one hostile exchange in a process of its own (this test binary,
/// one ignored test), so that its peak memory is its own: returns the
/// failure's kind, the time it took and the process's peak RSS in KiB.
fn hostile(mode: &str) -> (String, Duration, u64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hostile_exchange", "--ignored", "--nocapture"])
        .env("DRAINIT_K8S_HOSTILE", mode)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("hostile: "))
        .unwrap_or_else(|| panic!("{text}\n{}", String::from_utf8_lossy(&out.stderr)));
    let parts: Vec<&str> = line.split(' ').collect();
    (
        parts[0].to_string(),
        Duration::from_millis(parts[1].parse().unwrap()),
        parts[2].parse().unwrap(),
    )
}

#[test]
#[ignore = "run by hostile_servers_are_bounded_in_time_and_memory"]
fn hostile_exchange() {
    if !k8s_api::available() {
        return;
    }
    let Ok(mode) = std::env::var("DRAINIT_K8S_HOSTILE") else {
        return;
    };
    let server = FakeApi::start(&["--mode", &mode]);
    let place = server.place();
    let started = Instant::now();
    let result = k8s::get_pod(&place, TIMEOUT);
    let took = started.elapsed();
    let kind = match result {
        Ok(a) => format!("status-{}", a.status),
        Err(f) => f.kind().to_string(),
    };
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .to_string();
    println!("hostile: {kind} {} {hwm}", took.as_millis());
}

#[test]
fn hostile_servers_are_bounded_in_time_and_memory() {
    if !k8s_api::available() {
        return;
    }
    let (_, _, baseline) = hostile("normal");
    // An endless body: refused at the API server's body bound, long
    // before the deadline, having held no more than that bound.
    let (kind, took, peak) = hostile("endless");
    assert!(
        matches!(kind.as_str(), "too_large" | "exchange_too_large"),
        "{kind}"
    );
    assert!(took < TIMEOUT, "{took:?}");
    let bound_kib = (API_BODY_LIMIT / 1024) as u64;
    assert!(
        peak < baseline + bound_kib + 2048,
        "peak {peak} KiB, baseline {baseline} KiB"
    );
    // A head dribbled byte by byte, and silence after the handshake: the
    // deadline ends both, not much later than it falls.
    for mode in ["dribble", "silent"] {
        let (kind, took, peak) = hostile(mode);
        assert_eq!(kind, "timeout", "{mode}");
        assert!(
            took >= TIMEOUT - Duration::from_millis(50) && took < TIMEOUT + Duration::from_secs(1),
            "{mode}: {took:?}"
        );
        assert!(
            peak < baseline + 2048,
            "{mode}: peak {peak} KiB, baseline {baseline} KiB"
        );
    }
}

#[test]
fn the_place_comes_from_the_environment() {
    // Only this test sets these variables; nothing else in this binary
    // reads them.
    let _sa = private_sa_dir();
    fs::write(PathBuf::from(SA_DIR).join("namespace"), "jobs\n").unwrap();
    std::env::set_var("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
    std::env::set_var("KUBERNETES_SERVICE_PORT", "6443");
    std::env::set_var("POD_NAME", "worker-1");
    let place = Place::from_environment().unwrap();
    assert_eq!(
        place,
        Place {
            host: "fd00:10:96::1".parse().unwrap(),
            port: 6443,
            namespace: "jobs".into(),
            pod: "worker-1".into()
        }
    );
    // A name, as AKS sets for some pods; garbage is refused.
    std::env::set_var("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc");
    let named = Place::from_environment().unwrap();
    assert_eq!(named.host, Host::Name("kubernetes.default.svc".into()));
    std::env::set_var("KUBERNETES_SERVICE_HOST", "a b");
    let err = Place::from_environment().unwrap_err();
    assert!(
        err.contains("neither an IP address nor a DNS name"),
        "{err}"
    );
    std::env::set_var("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
    fs::write(PathBuf::from(SA_DIR).join("namespace"), "a/b").unwrap();
    assert!(Place::from_environment().is_err());
    fs::remove_file(PathBuf::from(SA_DIR).join("namespace")).unwrap();
    let err = Place::from_environment().unwrap_err();
    assert!(err.contains(SA_DIR), "{err}");
}

/// The name the fake API server goes by in the tests that look one up.
const NAME: &str = "api.drainit.test";

/// A directory with a test's `hosts` (`localhost`, then `lines`) and a
/// `resolv.conf` whose resolver is 127.0.0.1, where nothing answers, with
/// no time to wait (`timeout:0`: musl, which hears no ICMP refusal on its
/// unconnected socket, would otherwise wait its whole timeout; glibc
/// hears it), so a name not in `hosts` fails at once in both C libraries.
fn names_dir(s: &Scratch, lines: &str) -> PathBuf {
    let dir = s.file("etc");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("hosts"), format!("127.0.0.1 localhost\n{lines}")).unwrap();
    fs::write(
        dir.join("resolv.conf"),
        "nameserver 127.0.0.1\noptions timeout:0 attempts:1\n",
    )
    .unwrap();
    dir
}

/// Binds `dir`'s `hosts` and `resolv.conf` (`names_dir`) over /etc's, in
/// a mount namespace the caller already has of its own: code for
/// `Launch::before_exec`, or run at once by a test thread after
/// `private_sa_dir` (its lookup threads share its view).
fn names_at(dir: &std::path::Path) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    let c = |p: &std::path::Path| CString::new(path_str(p)).unwrap();
    let binds = [
        (c(&dir.join("hosts")), c("/etc/hosts".as_ref())),
        (c(&dir.join("resolv.conf")), c("/etc/resolv.conf".as_ref())),
    ];
    move || {
        for (source, target) in &binds {
            // SAFETY: a plain syscall with C strings made before any fork;
            // it changes only this namespace's view of the mounts.
            let rc = unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// What the server recorded of the handshakes that failed.
fn failed_handshakes(server: &FakeApi) -> Vec<Value> {
    let text = fs::read_to_string(server.dir.file("requests.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("handshake_failed").is_some())
        .collect()
}

#[test]
fn an_api_server_named_by_a_dns_name() {
    if !k8s_api::available() {
        return;
    }
    // A name looked up (in /etc/hosts), a certificate with only its DNS SAN.
    let server = FakeApi::start(&["--cert", "dns-san", "--dns-name", NAME]);
    let place = server.place_at(NAME);
    let s = Scratch::new("k8s-named");
    names_at(&names_dir(&s, &format!("127.0.0.1 {NAME}\n")))().unwrap();
    let got = k8s::get_pod(&place, TIMEOUT).unwrap();
    assert_eq!(verdict(&got), Verdict::Applied);
    assert_eq!(read_pod(&got.body).unwrap().grace_seconds, Some(30));
    let busy = api::patch_body(Managed::ALL, true, 1000);
    let answer = k8s::patch_pod(&place, &busy, TIMEOUT).unwrap();
    assert_eq!(verdict(&answer), Verdict::Applied);
    assert_eq!(annotations(&server.pod())[api::COST_KEY], "1000");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r["sni"], NAME, "{r}");
        assert_eq!(r["headers"]["host"], format!("{NAME}:{}", server.port));
    }
    // `localhost` is a name too (found without a lookup): its DNS SAN,
    // with a P-256 CA over TLS 1.2.
    let local = FakeApi::start(&["--cert", "dns-san", "--ca", "p256", "--tls12"]);
    let answer = k8s::get_pod(&local.place_at("localhost"), TIMEOUT).unwrap();
    assert_eq!(verdict(&answer), Verdict::Applied);
    let requests = local.requests();
    assert_eq!(requests[0]["sni"], "localhost");
    assert_eq!(requests[0]["tls"], "TLSv1.2");
}

#[test]
fn a_name_is_verified_by_its_dns_san_never_by_the_address() {
    if !k8s_api::available() {
        return;
    }
    // The certificate names 127.0.0.1 (an IP SAN), where `localhost` goes:
    // refused for the name, and nothing sent.
    let ip_only = FakeApi::start(&[]);
    refused_at(&ip_only, "localhost", "no matching DNS SAN");
    let failed = failed_handshakes(&ip_only);
    assert_eq!(failed.len(), 2, "{failed:?}");
    for f in &failed {
        assert_eq!(f["sni"], "localhost", "{f}");
    }
    // The same with TLS 1.2 and a name looked up.
    let server = FakeApi::start(&["--tls12"]);
    let place = server.place_at(NAME);
    let s = Scratch::new("k8s-ip-san");
    names_at(&names_dir(&s, &format!("127.0.0.1 {NAME}\n")))().unwrap();
    let failure = k8s::get_pod(&place, TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Tls, "{failure}");
    assert!(failure.detail.contains("DNS SAN"), "{failure}");
    wait_for("the failed handshake", PATIENCE, || {
        (!failed_handshakes(&server).is_empty()).then_some(())
    });
    assert!(server.requests().is_empty());
}

#[test]
fn a_name_that_does_not_resolve_reaches_no_server() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&[]);
    let place = server.place_at("no-such-host.invalid");
    let s = Scratch::new("k8s-nxdomain");
    names_at(&names_dir(&s, ""))().unwrap();
    let started = Instant::now();
    let failure = k8s::get_pod(&place, TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Resolve, "{failure}");
    assert!(failure.detail.contains("no-such-host.invalid"), "{failure}");
    let busy = api::patch_body(Managed::ALL, true, 1000);
    let failure = k8s::patch_pod(&place, &busy, TIMEOUT).unwrap_err();
    assert_eq!(failure.kind, Kind::Resolve, "{failure}");
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    let seen = fs::read_to_string(server.dir.file("requests.jsonl")).unwrap_or_default();
    assert!(seen.is_empty(), "{seen}");
}

/// A resolver that takes every query and never answers: the lookup costs
/// a request its own deadline and no more, the next request finds the
/// name's lookup still running and fails at once (`resolver_busy`, no
/// second lookup thread), and once the resolver gives up (resolv.conf's
/// 2 s) a request fails as a name that does not resolve. Nothing reaches
/// the API server.
#[test]
fn a_resolver_that_never_answers_costs_a_request_its_deadline_only() {
    if !k8s_api::available() {
        return;
    }
    let server = FakeApi::start(&[]);
    let place = server.place_at("silent.drainit.test");
    // A loopback address of this test's own (all of 127/8 is loopback),
    // so that tests running side by side never share the socket.
    let pid = std::process::id();
    let at = format!("127.53.{}.{}", (pid >> 8) & 0xff, (pid & 0xff).max(1));
    let _silent = std::net::UdpSocket::bind(format!("{at}:53")).unwrap();
    let s = Scratch::new("k8s-silent-dns");
    let dir = names_dir(&s, "");
    fs::write(
        dir.join("resolv.conf"),
        format!("nameserver {at}\noptions timeout:2 attempts:1\n"),
    )
    .unwrap();
    names_at(&dir)().unwrap();
    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let failure = k8s::get_pod(&place, deadline).unwrap_err();
    let took = started.elapsed();
    assert_eq!(failure.kind, Kind::Timeout, "{failure}");
    assert!(failure.detail.contains("silent.drainit.test"), "{failure}");
    assert!(
        took >= deadline && took < deadline + Duration::from_secs(1),
        "{took:?}"
    );
    let busy = k8s::get_pod(&place, deadline).unwrap_err();
    assert_eq!(busy.kind, Kind::ResolverBusy, "{busy}");
    let failure = wait_for("the resolver to give up", PATIENCE, || {
        let failure = k8s::get_pod(&place, TIMEOUT).unwrap_err();
        (failure.kind != Kind::ResolverBusy).then_some(failure)
    });
    assert_eq!(failure.kind, Kind::Resolve, "{failure}");
    let seen = fs::read_to_string(server.dir.file("requests.jsonl")).unwrap_or_default();
    assert!(seen.is_empty(), "{seen}");
}

/// GET `path` from drainit's listener at `addr`: the body.
fn listener_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// The requests to the API server that failed, from `/metrics`.
fn failed_requests(addr: &str) -> Option<u64> {
    listener_get(addr, "/metrics")?
        .lines()
        .find_map(|l| l.strip_prefix("drainit_k8s_requests_total{result=\"failed\"} "))?
        .parse()
        .ok()
}

/// drainit (both libc builds) with `--k8s-protect` and an API server named
/// by a name nothing resolves: the app starts and runs all the same, the
/// failed lookups are failed requests retried with the back-end's backoff
/// (counted, said in a line that names the host), nothing reaches the API
/// server; once the name resolves the next try goes through by name (SNI,
/// the DNS SAN); the app's exit code is drainit's.
#[test]
fn drainit_runs_the_app_whatever_the_lookup_and_retries_it() {
    if !k8s_api::available() {
        return;
    }
    const POD: &str = "worker-7d9f-x2";
    for build in [Build::Glibc, Build::Static] {
        let binary = built(build);
        let server = FakeApi::start(&["--cert", "dns-san", "--dns-name", NAME]);
        let s = Scratch::new("k8s-lookup");
        let sa = s.file("serviceaccount");
        server.fill_service_account(&sa);
        let etc = names_dir(&s, "");
        let drain = support::server::Server::start(|_, _| {
            support::server::json(200, r#"{"readyForTermination":false}"#)
        });
        let addr = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().to_string()
        };
        let (mut mount_sa, mut mount_names) = (service_account_at(&sa), names_at(&etc));
        let app = r#"touch "$D/ready"; while [ ! -e "$D/exit" ]; do sleep 0.05; done; exit 7"#;
        let mut d = drainit([
            "--k8s-protect",
            "--drain-url",
            &drain.url("/drain"),
            "--protect-interval",
            "1s",
            "--serve",
            &addr,
        ])
        .with_args(sh(&s, app))
        .binary(&binary)
        .env("KUBERNETES_SERVICE_HOST", NAME)
        .env("KUBERNETES_SERVICE_PORT", &server.port.to_string())
        .env("POD_NAME", POD)
        .before_exec(move || {
            mount_sa()?;
            mount_names()
        })
        .start();
        s.wait_file("ready");
        wait_for("two failed requests", PATIENCE, || {
            (failed_requests(&addr)? >= 2).then_some(())
        });
        let stderr = d.stderr();
        let said: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("Kubernetes pod protection:") && l.contains(NAME))
            .collect();
        assert!(!said.is_empty(), "{build:?}: {stderr}");
        // "cannot resolve", or "timed out resolving" on a machine slow enough.
        assert!(said[0].contains("resolv"), "{build:?}: {}", said[0]);
        assert!(d.try_code().is_none(), "{build:?}: {stderr}");
        let seen = fs::read_to_string(server.dir.file("requests.jsonl")).unwrap_or_default();
        assert!(seen.is_empty(), "{build:?}: {seen}");

        // The name appears (the file is the one mounted: appended in place).
        let mut hosts = fs::OpenOptions::new()
            .append(true)
            .open(etc.join("hosts"))
            .unwrap();
        std::io::Write::write_all(&mut hosts, format!("127.0.0.1 {NAME}\n").as_bytes()).unwrap();
        let patch = wait_for("the busy patch, by name", PATIENCE, || {
            server
                .requests()
                .into_iter()
                .find(|r| r["method"] == "PATCH")
        });
        assert_eq!(patch["sni"], NAME, "{build:?}");
        assert_eq!(
            patch["headers"]["host"],
            format!("{NAME}:{}", server.port),
            "{build:?}"
        );
        s.touch("exit");
        assert_eq!(d.wait_code(), 7, "{build:?}: {}", d.stderr());
    }
}

/// A host that is neither an address nor a name: exit 2, one line, before
/// the app starts (both libc builds).
#[test]
fn a_host_that_is_neither_an_address_nor_a_name_is_exit_2() {
    for build in [Build::Glibc, Build::Static] {
        let binary = built(build);
        for host in ["a b", "10.0.0.256", "https://kubernetes", "[kubernetes]"] {
            let s = Scratch::new("k8s-garbage");
            let marker = s.file("started");
            let (code, stderr) = drainit([
                "--k8s-protect",
                "--drain-url",
                "http://127.0.0.1:1/d",
                "/bin/touch",
                path_str(&marker),
            ])
            .binary(&binary)
            .not_pid1()
            .env("KUBERNETES_SERVICE_HOST", host)
            .env("POD_NAME", "worker-1")
            .run();
            assert_eq!(code, 2, "{build:?} {host:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains("neither an IP address nor a DNS name"),
                "{stderr}"
            );
            assert!(!marker.exists(), "{build:?} {host:?}: the app started");
        }
    }
}
