//! drainit's record of the template's values on its pod, end to end
//! (`--k8s-protect`, `core::protect::record`): each drainit as PID 1 of its
//! own PID namespace, its app's drain endpoint a real HTTP server the test
//! controls, the API server the faithful fake (`tests/support/k8s_api.py`,
//! which enforces the `resourceVersion` precondition with a 409 and
//! refuses a cost that is no int32 with a 422, as the API server does).
//! Covered: two drainits of one pod (one busy, one idle; both turning busy
//! at once, then one idle) keep it protected, and the template comes back
//! once neither is busy; a changed `--k8s-annotations` across a restart
//! while busy restores every template value; a record with a value the
//! API server refuses ends unprotected, and a restore refused with a real
//! 422 falls back to removing the keys; a 6,000-character template value
//! comes back whole; two drainits named by the kubelet's mounts keep the
//! pod protected; two drainits and no `--k8s-container` (or a sidecar
//! that may run drainit, and no mount naming either) leave protection
//! off with one warning.
//!
//! The idle hold is 30 s in the shipped binary and here: the tests that
//! wait for it run side by side.

#![cfg(feature = "k8s")]

mod support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::k8s_api::FakeApi;
use support::server::{json, Server};
use support::*;

const POD: &str = "worker-7d9f-x2";
/// The fake server's pod uid.
const POD_UID: &str = "0b7e6b53-6c1d-4f4e-9d8e-5f0c7c2f9a11";
const COST: &str = "controller.kubernetes.io/pod-deletion-cost";
const EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
const DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// drainit's record (`proto::k8s_record::RECORD_KEY`) and its list of busy
/// containers (`BUSY_KEY`).
const RECORD: &str = "drainit.dev/template-annotations";
const BUSY: &str = "drainit.dev/busy";
/// The idle hold (`core::protect::k8s::IDLE_HOLD`).
const HOLD: Duration = Duration::from_secs(30);
/// A pod of two containers, each of which runs drainit.
const TWO: &str =
    r#"{"containers":[{"name":"app","image":"worker:1"},{"name":"side","image":"side:1"}]}"#;

/// A pod whose app runs drainit by its command and whose sidecar sets no
/// command (its image's entrypoint may be drainit too).
const APP_AND_SIDECAR: &str = r#"{"containers":[{"name":"app","command":["/drainit","--"],"args":["/app"]},{"name":"side","image":"side:1"}]}"#;

/// An app that ignores SIGTERM (a drained app's stop is drainit's) and
/// says when it runs, as `tests/k8s_protect.rs`'s.
const APP: &str =
    "trap 'echo TERM >> \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";

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

/// One drainit of the pod: its scratch directory, its app's busy flag and
/// drain endpoint.
struct Container {
    s: Scratch,
    busy: Arc<AtomicBool>,
    drain: Server,
}

impl Container {
    fn new(name: &str, busy: bool) -> Container {
        let busy = Arc::new(AtomicBool::new(busy));
        let drain = drain_endpoint(&busy);
        Container {
            s: Scratch::new(name),
            busy,
            drain,
        }
    }

    /// drainit with `--k8s-protect` in the pod of `api`, polling every
    /// second, `flags` added; started, its app running.
    fn launch(&self, api: &FakeApi, sa: &std::path::Path, flags: &[&str]) -> Drainit {
        self.launch_in(api, sa, flags, None)
    }

    /// As `launch`, and with `kubelet` (a container's name) the file the
    /// kubelet mounts into each container of the pod
    /// (`…/pods/<uid>/containers/<name>/<id>`) mounted in drainit's mount
    /// namespace, as on a real node.
    fn launch_in(
        &self,
        api: &FakeApi,
        sa: &std::path::Path,
        flags: &[&str],
        kubelet: Option<&str>,
    ) -> Drainit {
        let _ = std::fs::remove_file(self.s.file("ready"));
        let mut args = vec![
            "--k8s-protect".to_string(),
            "--drain-url".into(),
            self.drain.url("/drain"),
            "--protect-interval".into(),
            "1s".into(),
            "--grace".into(),
            "2s".into(),
        ];
        args.extend(flags.iter().map(|f| f.to_string()));
        let d = drainit(args)
            .with_args(sh(&self.s, APP))
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", &api.port.to_string())
            .env("POD_NAME", POD)
            .before_exec(with_kubelet_mount(
                service_account_at(sa),
                kubelet.map(|name| self.termination_log(name)),
            ))
            .start();
        self.s.wait_file("ready");
        d
    }

    /// The termination-message file of container `name`, where the kubelet
    /// keeps it.
    fn termination_log(&self, name: &str) -> PathBuf {
        let dir = self
            .s
            .file(&format!("kubelet/pods/{POD_UID}/containers/{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("4f1c2b7a");
        std::fs::write(&file, "").unwrap();
        file
    }

    fn polls(&self) -> usize {
        self.drain
            .seen()
            .iter()
            .filter(|s| s.path == "/drain")
            .count()
    }

    /// Waits until this drainit's protection has polled `n` more times.
    fn wait_polls(&self, n: usize, timeout: Duration) {
        let from = self.polls();
        wait_for(&format!("{n} more polls"), timeout, || {
            (self.polls() >= from + n).then_some(())
        });
    }
}

/// `sa` (the service account's mount), then, with `log`, `log` bound on
/// `/var/run/termination-log` (the kubelet's is `/dev/termination-log`;
/// drainit reads only the mount's source), in the same mount namespace.
fn with_kubelet_mount(
    mut sa: impl FnMut() -> std::io::Result<()> + Send + Sync,
    log: Option<PathBuf>,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    use std::ffi::CString;
    let c = |p: &std::path::Path| CString::new(p.to_str().unwrap()).unwrap();
    let paths = log.map(|l| (c(&l), c(std::path::Path::new("/var/run/termination-log"))));
    move || {
        sa()?;
        let Some((source, target)) = &paths else {
            return Ok(());
        };
        // SAFETY: plain syscalls with C strings made before the fork, in
        // the mount namespace `sa` made (/var/run is its tmpfs).
        unsafe {
            let fd = libc::open(target.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fd);
            let (bind, none) = (libc::MS_BIND, std::ptr::null());
            if libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                none,
                bind,
                std::ptr::null(),
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The fake API server holding the pod (`args` added), and a
/// service-account directory for it; None (the test skips) without the
/// server's python modules.
fn pod(name: &str, args: &[&str]) -> Option<(FakeApi, Scratch, PathBuf)> {
    if !k8s_api::available() {
        return None;
    }
    let api = FakeApi::start(&[&["--pod", POD], args].concat());
    let s = Scratch::new(name);
    let sa = s.file("serviceaccount");
    api.fill_service_account(&sa);
    Some((api, s, sa))
}

/// The pod's annotations now, the record parsed (Null: none, or no
/// request yet). The fake server writes the file whole (a rename), so
/// what is there always parses.
fn annotations(api: &FakeApi) -> Value {
    let Ok(text) = std::fs::read_to_string(api.dir.file("pod.json")) else {
        return Value::Null;
    };
    let pod: Value = serde_json::from_str(&text).expect("the pod's JSON, whole");
    let mut a = pod["metadata"]["annotations"].clone();
    if let Some(record) = a.get(RECORD).and_then(Value::as_str) {
        a[RECORD] = serde_json::from_str(record).unwrap_or(Value::Null);
    }
    a
}

/// Waits until the pod's annotations (the record parsed) pass `check`.
fn wait_pod(api: &FakeApi, what: &str, timeout: Duration, check: impl Fn(&Value) -> bool) {
    wait_for(what, timeout, || check(&annotations(api)).then_some(()));
}

/// The keys hold busy's values (the cost at least `cost`).
fn protected(a: &Value, cost: i64) -> bool {
    a[EVICT] == "false"
        && a[DISRUPT] == "true"
        && a[COST]
            .as_str()
            .and_then(|c| c.parse::<i64>().ok())
            .is_some_and(|c| c >= cost)
}

fn patches(api: &FakeApi) -> Vec<Value> {
    api.requests()
        .into_iter()
        .filter(|r| r["method"] == "PATCH")
        .collect()
}

/// `annotations` as the fake server takes them at start, the record as its
/// text.
fn planted(annotations: Value) -> String {
    let mut a = annotations;
    if a[RECORD].is_object() {
        a[RECORD] = a[RECORD].to_string().into();
    }
    a.to_string()
}

#[test]
fn two_drainits_one_busy_one_idle_keep_the_pod_protected() {
    let Some((api, _s, sa)) = pod("k8s-two-idle", &["--spec", TWO]) else {
        return;
    };
    let (app, side) = (
        Container::new("k8s-two-app", true),
        Container::new("k8s-two-side", false),
    );
    let mut a = app.launch(&api, &sa, &["--k8s-container", "app"]);
    wait_pod(&api, "the app's drainit protects the pod", PATIENCE, |a| {
        protected(a, 1000)
    });
    // The sidecar's drainit starts with an idle app: past its hold, the
    // pod stays protected, and it sent nothing.
    let mut b = side.launch(&api, &sa, &["--k8s-container", "side"]);
    side.wait_polls(HOLD.as_secs() as usize + 5, HOLD + PATIENCE * 2);
    let now = annotations(&api);
    assert!(protected(&now, 1000), "{now}");
    assert_eq!(now[RECORD][BUSY], serde_json::json!(["app"]), "{now}");
    assert_eq!(patches(&api).len(), 1, "{:?}", patches(&api));
    // The app idle too: the template (none of the keys) comes back.
    app.busy.store(false, Ordering::SeqCst);
    wait_pod(&api, "the template's values back", HOLD + PATIENCE, |a| {
        a.is_null()
    });
    a.signal(libc::SIGTERM);
    b.signal(libc::SIGTERM);
    assert_eq!(a.wait_code(), 0);
    assert_eq!(b.wait_code(), 0);
}

#[test]
fn two_drainits_turning_busy_at_once_then_one_idle_keep_the_pod_protected() {
    let template = serde_json::json!({COST: "-100"});
    let Some((api, _s, sa)) = pod(
        "k8s-two-busy",
        &["--spec", TWO, "--annotations", &template.to_string()],
    ) else {
        return;
    };
    let (app, side) = (
        Container::new("k8s-race-app", false),
        Container::new("k8s-race-side", false),
    );
    let mut a = app.launch(&api, &sa, &["--k8s-container", "app", "--k8s-cost", "1000"]);
    let mut b = side.launch(
        &api,
        &sa,
        &["--k8s-container", "side", "--k8s-cost", "5000"],
    );
    // Both have read the pod (and polled since): idle and clean.
    app.wait_polls(2, PATIENCE);
    side.wait_polls(2, PATIENCE);
    assert_eq!(patches(&api).len(), 0);
    // Busy within 100 ms of each other (the same instant): the second
    // patch meets the first one's resourceVersion, reads again, and adds
    // its name; the cost is the higher one.
    app.busy.store(true, Ordering::SeqCst);
    side.busy.store(true, Ordering::SeqCst);
    wait_pod(&api, "busy", PATIENCE, |a| protected(a, 1000));
    // Each has polled busy since (and sent its patch, and read again and
    // sent again after a 409).
    app.wait_polls(3, PATIENCE);
    side.wait_polls(3, PATIENCE);
    // The sidecar idle: past its hold, the pod stays protected for the
    // app, with the higher cost, and only the app is listed.
    side.busy.store(false, Ordering::SeqCst);
    side.wait_polls(HOLD.as_secs() as usize + 5, HOLD + PATIENCE * 2);
    let now = annotations(&api);
    assert!(protected(&now, 1000), "{now}");
    assert!(protected(&now, 5000), "the highest cost: {now}");
    assert!(
        patches(&api).iter().any(|p| p["status"] == 409),
        "the second patch was computed from an older read: {:?}",
        patches(&api)
    );
    assert_eq!(now[RECORD][BUSY], serde_json::json!(["app"]), "{now}");
    assert_eq!(now[RECORD][COST], "-100", "the template's cost kept: {now}");
    // Both idle: the template's values back, the record gone.
    app.busy.store(false, Ordering::SeqCst);
    wait_pod(&api, "the template's values back", HOLD + PATIENCE, |a| {
        *a == template
    });
    a.signal(libc::SIGTERM);
    b.signal(libc::SIGTERM);
    assert_eq!(a.wait_code(), 0);
    assert_eq!(b.wait_code(), 0);
}

#[test]
fn a_changed_key_set_across_a_restart_while_busy_restores_every_template_value() {
    let template = serde_json::json!({EVICT: "true", DISRUPT: "false"});
    let Some((api, _s, sa)) = pod("k8s-keyset", &["--annotations", &template.to_string()]) else {
        return;
    };
    let app = Container::new("k8s-keyset-app", true);
    let mut d = app.launch(&api, &sa, &[]);
    wait_pod(&api, "busy", PATIENCE, |a| protected(a, 1000));
    // The container dies while busy (an OOM kill), and its next run takes
    // a smaller set (a ConfigMap changed): its app idle.
    d.signal(libc::SIGKILL);
    d.wait_code();
    app.busy.store(false, Ordering::SeqCst);
    let mut cost_only = app.launch(&api, &sa, &["--k8s-annotations", "cost"]);
    wait_pod(&api, "every template value back", HOLD + PATIENCE, |a| {
        *a == template
    });
    cost_only.signal(libc::SIGTERM);
    assert_eq!(cost_only.wait_code(), 0);
}

#[test]
fn a_record_with_a_refused_value_ends_unprotected() {
    // A record whose cost the API server refuses (written by hand, or by
    // a broken release): taken as not set, so idle removes the cost.
    let record = serde_json::json!({COST: "abc", EVICT: null, DISRUPT: "false", BUSY: ["app"]});
    let left = serde_json::json!({COST: "1000", EVICT: "false", DISRUPT: "true", RECORD: record});
    let Some((api, _s, sa)) = pod("k8s-refused", &["--annotations", &planted(left)]) else {
        return;
    };
    let app = Container::new("k8s-refused-app", false);
    let mut d = app.launch(&api, &sa, &[]);
    wait_pod(&api, "unprotected", HOLD + PATIENCE, |a| {
        *a == serde_json::json!({DISRUPT: "false"})
    });
    assert!(
        patches(&api).iter().all(|p| p["status"] == 200),
        "{:?}",
        patches(&api)
    );
    let stderr = d.stderr();
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("\"abc\"")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("WARN") && said[0].contains(COST),
        "{stderr}"
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn a_6000_character_template_value_comes_back_whole() {
    // Past every shorter bound drainit ever had (256, 4,096), within the
    // 8 KiB it keeps whole.
    let long = format!("{}-end", "v".repeat(5_996));
    assert_eq!(long.len(), 6_000);
    let template = serde_json::json!({DISRUPT: long});
    let Some((api, _s, sa)) = pod("k8s-long", &["--annotations", &template.to_string()]) else {
        return;
    };
    let app = Container::new("k8s-long-app", true);
    let mut d = app.launch(&api, &sa, &[]);
    wait_pod(&api, "busy", PATIENCE, |a| protected(a, 1000));
    assert_eq!(annotations(&api)[RECORD][DISRUPT], long.as_str());
    app.busy.store(false, Ordering::SeqCst);
    wait_pod(
        &api,
        "the template's value back whole",
        HOLD + PATIENCE,
        |a| *a == template,
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn a_restore_the_api_server_refuses_falls_back_to_removing_the_keys() {
    // An admission policy refuses the template's own do-not-disrupt value
    // (a value drainit cannot know is refused): the restore gets a real
    // 422, and drainit removes the keys instead, once.
    let template = serde_json::json!({DISRUPT: "false", EVICT: "true"});
    let refuse = serde_json::json!({DISRUPT: "false"});
    let Some((api, _s, sa)) = pod(
        "k8s-refuse-restore",
        &[
            "--annotations",
            &template.to_string(),
            "--refuse-values",
            &refuse.to_string(),
        ],
    ) else {
        return;
    };
    let app = Container::new("k8s-refuse-restore-app", true);
    let mut d = app.launch(&api, &sa, &[]);
    wait_pod(&api, "busy", PATIENCE, |a| protected(a, 1000));
    app.busy.store(false, Ordering::SeqCst);
    wait_pod(&api, "the keys removed", HOLD + PATIENCE, |a| a.is_null());
    wait_for("the removal's answer recorded", PATIENCE, || {
        (patches(&api).len() >= 3).then_some(())
    });
    let statuses: Vec<Value> = patches(&api).iter().map(|p| p["status"].clone()).collect();
    assert_eq!(
        statuses,
        [200, 422, 200],
        "busy, the refused restore, the removal"
    );
    // And nothing more: the pod stays as it is.
    app.wait_polls(3, PATIENCE);
    assert_eq!(patches(&api).len(), 3);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn two_drainits_named_by_the_kubelets_mounts_keep_the_pod_protected() {
    // The app's command runs drainit; the sidecar sets no command, and its
    // image's entrypoint is drainit too. Neither names its container: the
    // kubelet's mounts do.
    let spec = APP_AND_SIDECAR;
    let Some((api, _s, sa)) = pod("k8s-mounts", &["--spec", spec]) else {
        return;
    };
    let (app, side) = (
        Container::new("k8s-mounts-app", true),
        Container::new("k8s-mounts-side", false),
    );
    let mut a = app.launch_in(&api, &sa, &[], Some("app"));
    wait_pod(&api, "the app's drainit protects the pod", PATIENCE, |a| {
        protected(a, 1000) && a[RECORD][BUSY] == serde_json::json!(["app"])
    });
    // The sidecar's drainit, idle past its hold, leaves the app's name.
    let mut b = side.launch_in(&api, &sa, &[], Some("side"));
    side.wait_polls(HOLD.as_secs() as usize + 5, HOLD + PATIENCE * 2);
    let now = annotations(&api);
    assert!(protected(&now, 1000), "{now}");
    assert_eq!(now[RECORD][BUSY], serde_json::json!(["app"]), "{now}");
    // Busy, it adds its own.
    side.busy.store(true, Ordering::SeqCst);
    wait_pod(&api, "both listed", PATIENCE, |a| {
        a[RECORD][BUSY] == serde_json::json!(["app", "side"])
    });
    a.signal(libc::SIGTERM);
    b.signal(libc::SIGTERM);
    assert_eq!(a.wait_code(), 124, "busy to the deadline");
    assert_eq!(b.wait_code(), 124, "busy to the deadline");
}

/// drainit with a busy app in a pod of `spec`, no name given and no
/// mount naming it: nothing is sent, one warning naming the option, and
/// the stop runs to the deadline.
fn protection_stays_off(name: &str, spec: &str) {
    let Some((api, _s, sa)) = pod(name, &["--spec", spec]) else {
        return;
    };
    let app = Container::new(&format!("{name}-app"), true);
    let mut d = app.launch(&api, &sa, &[]);
    wait_for("the pod read", PATIENCE, || {
        (!api.requests().is_empty()).then_some(())
    });
    app.wait_polls(3, PATIENCE);
    assert_eq!(patches(&api).len(), 0, "busy, and nothing sent");
    let stderr = d.stderr();
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("protection stays off"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("WARN") && said[0].contains("--k8s-container"),
        "{stderr}"
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124, "busy to the deadline");
}

#[test]
fn a_sidecar_that_may_run_drainit_and_no_mount_leave_protection_off() {
    // As above without the kubelet's mounts: the sidecar's drainit could
    // take the app's name, so neither protects (one warning each).
    protection_stays_off("k8s-no-mounts", APP_AND_SIDECAR);
}

#[test]
fn two_drainits_and_no_container_named_leave_protection_off_with_one_warning() {
    protection_stays_off(
        "k8s-unnamed",
        r#"{"containers":[{"name":"app","command":["/drainit"]},{"name":"side","command":["/usr/bin/drainit"]}]}"#,
    );
}
