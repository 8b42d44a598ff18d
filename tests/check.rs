//! The preflight, `drainit --check` and `DRAINIT_CHECK=1`: a client run
//! that checks a configuration against real HTTP servers and commands
//! (`support::server`) and, with `--k8s-protect`, the fake API server
//! (`support::k8s_api`). stdout holds one line per finding, then one
//! summary line, last, whose counts agree with the lines and whose word
//! agrees with the exit code (every run here checks that). Covered: each
//! source asked once; silent URLs asked side by side within the stated
//! bound; SIGINT and SIGTERM ending the check at once as PID 1 (both libc
//! builds); `DRAINIT_CHECK=1` never starting the program, as PID 1 too;
//! the pod's read and the busy patch as a dry run (403, 404, a wrong CA, a
//! refusing admission policy, a good pod with nothing written).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::server::{json, refusing_url, Reply, Server};
use support::*;

/// The check's stated bound (`app::check::BOUND`) and one ask's time
/// (`app::check::ASK_TIMEOUT`).
const BOUND: Duration = Duration::from_secs(15);
const ASK: Duration = Duration::from_secs(5);

/// What one check said.
struct Checked {
    code: i32,
    lines: Vec<String>,
    took: Duration,
}

/// drainit with `args` and `vars`, none of the test's own DRAINIT_, ECS_
/// or KUBERNETES_ variables.
fn command(args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(DRAINIT);
    command.args(args);
    for (key, _) in std::env::vars() {
        if ["DRAINIT_", "ECS_", "KUBERNETES_", "POD_NAME"]
            .iter()
            .any(|p| key.starts_with(p))
        {
            command.env_remove(key);
        }
    }
    command.envs(vars.iter().copied());
    command
}

/// Runs `command` to its end; the summary line is checked against the
/// findings and the exit code.
fn run(mut command: Command) -> Checked {
    let started = Instant::now();
    let out = command.output().unwrap();
    let took = started.elapsed();
    let code = out.status.code().unwrap_or(-1);
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    summary_agrees(code, &lines);
    Checked { code, lines, took }
}

/// `drainit --check` with `args` and `vars` (not PID 1: it starts nothing).
fn check(args: &[&str], vars: &[(&str, &str)]) -> Checked {
    run(command(&[&["--check"], args].concat(), vars))
}

/// The last line counts the `error:` and `warn:` lines before it, and its
/// word (`ok`, `error`) agrees with the exit code.
fn summary_agrees(code: i32, lines: &[String]) {
    let (last, findings) = lines.split_last().expect("a summary line");
    let count = |level: &str| {
        findings
            .iter()
            .filter(|l| l.starts_with(&format!("{level}: ")))
            .count()
    };
    let (errors, warnings) = (count("error"), count("warn"));
    let plural = |n: usize, word: &str| match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    };
    let word = if errors > 0 { "error" } else { "ok" };
    let want = format!(
        "{word}: {}, {}",
        plural(errors, "error"),
        plural(warnings, "warning")
    );
    assert!(last.starts_with(&want), "{want:?} last in {lines:#?}");
    assert_eq!(code, i32::from(errors > 0), "the exit code of {lines:#?}");
}

/// The one line of `lines` that starts with `level` and contains `what`.
fn finding<'a>(lines: &'a [String], level: &str, what: &str) -> &'a str {
    let found: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with(&format!("{level}: ")) && l.contains(what))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {level} line with {what:?} in {lines:#?}"
    );
    found[0]
}

#[test]
fn each_drain_source_is_asked_once_and_a_good_configuration_passes() {
    let app = Server::start(|_, _| json(200, r#"{"readyForTermination": false}"#));
    let scratch = Scratch::new("check-good");
    let report = scratch.file("out/report.json");
    let marker = scratch.file("ran");
    let touch = format!("touch {}", path_str(&marker));
    let c = check(
        &[
            "--drain-url",
            &app.url("/drain"),
            "--drain-exec",
            "true",
            "--stop-exec",
            &touch,
            "--exit-report",
            path_str(&report),
            "--",
            "sh",
            "-c",
            "exit 0",
        ],
        &[],
    );
    assert_eq!(c.code, 0, "{:#?}", c.lines);
    assert_eq!(app.count(), 1, "the drain URL asked once");
    let url = finding(&c.lines, "ok", "drain source url");
    assert!(url.contains("not ready (HTTP 200"), "{url}");
    finding(&c.lines, "ok", "drain source exec true: ready");
    finding(&c.lines, "ok", "program sh");
    assert!(c
        .lines
        .last()
        .unwrap()
        .starts_with("ok: 0 errors, 0 warnings"));
    // A check runs no program and no stop hook.
    assert!(!marker.exists(), "a stop command ran");
}

#[test]
fn a_drain_url_that_looks_wrong_or_can_never_say_ready_is_an_error() {
    let app = Server::start(|_, _| Reply::Send(404, "text/plain", "no".into()));
    let c = check(&["--drain-url", &app.url("/drian"), "--", "true"], &[]);
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    assert!(finding(&c.lines, "error", "/drian").contains("looks wrong"));
    // JSON without the boolean: drainit would never see it ready.
    let app = Server::start(|_, _| json(200, r#"{"ready": true}"#));
    let c = check(&["--drain-url", &app.url("/drain"), "--", "true"], &[]);
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    assert!(finding(&c.lines, "error", "/readyForTermination").contains("never"));
}

#[test]
fn what_cannot_be_told_yet_is_noted_and_mistakes_are_said() {
    // Nothing listens (the app is not running under --check): noted only.
    let c = check(&["--drain-url", &refusing_url(), "--", "true"], &[]);
    assert_eq!(c.code, 0, "{:#?}", c.lines);
    finding(&c.lines, "info", "nothing listens");
    // A program that is not there is an error; a host that does not
    // resolve and an unknown variable are warnings.
    let c = check(
        &[
            "--stop-url",
            "http://no-such-host.invalid:8080/stop",
            "--",
            "no-such-program-drainit",
        ],
        &[("DRAINIT_GRAC", "3s")],
    );
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    finding(&c.lines, "error", "no-such-program-drainit");
    finding(&c.lines, "warn", "no-such-host.invalid");
    finding(&c.lines, "warn", "DRAINIT_GRACE");
    assert!(c
        .lines
        .last()
        .unwrap()
        .starts_with("error: 1 error, 2 warnings"));
}

#[test]
fn a_bad_option_is_one_error_and_the_summary_never_exit_2() {
    let c = check(&["--grace", "5x"], &[]);
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    assert_eq!(c.lines.len(), 2, "{:#?}", c.lines);
    assert!(c.lines[0].starts_with("error: ") && c.lines[0].contains("--grace"));
    let c = check(&["--grace-period", "5s"], &[]);
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    assert!(
        c.lines[0].contains("did you mean --grace?"),
        "{:#?}",
        c.lines
    );
    // No program is fine: there is nothing to run.
    let c = check(&[], &[]);
    assert_eq!(c.code, 0, "{:#?}", c.lines);
}

#[test]
fn a_drain_command_that_outruns_its_timeout_is_killed_and_a_warning() {
    let c = check(
        &["--drain-exec", "sleep 60", "--drain-timeout", "200ms"],
        &[],
    );
    assert_eq!(c.code, 0, "{:#?}", c.lines);
    assert!(finding(&c.lines, "warn", "drain source exec sleep").contains("killed after 200 ms"));
    // Killed, not waited for: well under the command's own 60 s.
    assert!(c.took < Duration::from_secs(30), "{:?}", c.took);
}

/// A server that accepts, reads the request and never answers.
fn silent() -> Server {
    Server::start(|_, _| Reply::Hang)
}

#[test]
fn silent_drain_urls_are_asked_side_by_side_within_the_bound() {
    let app = silent();
    let urls: Vec<String> = (0..12).map(|i| app.url(&format!("/drain{i}"))).collect();
    let mut args: Vec<&str> = Vec::new();
    for url in &urls {
        args.extend(["--drain-url", url.as_str()]);
    }
    let c = check(&args, &[]);
    assert_eq!(app.count(), 12, "each asked once: {:#?}", c.lines);
    // Eight at once, as a run asks, then the other four: two asks' time,
    // far less than twelve, and within the stated bound.
    assert!(c.took < BOUND + Duration::from_secs(2), "{:?}", c.took);
    assert!(c.took < ASK * 4, "{:?}", c.took);
    let seen = app.seen();
    let first = seen.iter().map(|s| s.at).min().unwrap();
    let together = seen
        .iter()
        .filter(|s| s.at.duration_since(first) < ASK / 2)
        .count();
    assert_eq!(together, 8, "eight asked side by side");
    for url in &urls {
        let path = url.rsplit_once('/').unwrap().1;
        assert!(finding(&c.lines, "warn", &format!("/{path}:")).contains("timed out"));
    }
    assert_eq!(c.code, 0, "no answer is a warning: {:#?}", c.lines);
}

/// `--check` as PID 1 of its own namespace, asking a silent URL: `signo`
/// once the request is in ends it at once, exit 1.
fn stopped_as_pid1(binary: &str, signo: i32) {
    let app = silent();
    let mut d = drainit(["--check", "--drain-url", &app.url("/drain"), "--", "true"])
        .binary(binary)
        .start();
    wait_for("the drain URL asked", PATIENCE, || {
        (app.count() == 1).then_some(())
    });
    let sent = Instant::now();
    d.signal(signo);
    assert_eq!(d.wait_code(), 1, "{binary} {signo}");
    // At once: well before the ask's own time would end it.
    assert!(sent.elapsed() < ASK / 2, "{:?}", sent.elapsed());
}

#[test]
fn sigterm_and_sigint_end_the_check_at_once_as_pid1() {
    for signo in [libc::SIGTERM, libc::SIGINT] {
        stopped_as_pid1(DRAINIT, signo);
    }
}

#[test]
fn the_static_build_is_stopped_as_pid1_too() {
    let binary = built(Build::Static);
    for signo in [libc::SIGTERM, libc::SIGINT] {
        stopped_as_pid1(&binary, signo);
    }
}

#[test]
fn drainit_check_in_the_environment_checks_and_never_starts_the_program() {
    let scratch = Scratch::new("check-env");
    let marker = scratch.file("started");
    let args = ["--", "touch", path_str(&marker)];
    let c = run(command(&args, &[("DRAINIT_CHECK", "1")]));
    assert_eq!(c.code, 0, "{:#?}", c.lines);
    finding(&c.lines, "ok", "program touch");
    let last = c.lines.last().unwrap();
    assert!(
        last.contains("the program was not started because DRAINIT_CHECK is set"),
        "{last}"
    );
    assert!(!marker.exists(), "the program ran");
    // An error: exit 1, and the summary says both.
    let c = run(command(
        &["--", "no-such-program-drainit"],
        &[("DRAINIT_CHECK", "yes")],
    ));
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    let last = c.lines.last().unwrap();
    assert!(last.starts_with("error: 1 error") && last.contains("DRAINIT_CHECK"));
    // A usage error under the variable: a finding and the summary, exit 1.
    let c = run(command(
        &["--grace", "5x", "--", "true"],
        &[("DRAINIT_CHECK", "on")],
    ));
    assert_eq!(c.code, 1, "{:#?}", c.lines);
    assert!(c.lines.last().unwrap().contains("DRAINIT_CHECK"));
    // As PID 1, as `docker run -e DRAINIT_CHECK=1 IMAGE` runs it.
    let mut d = drainit(args).env("DRAINIT_CHECK", "1").start();
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert!(!marker.exists(), "the program ran as PID 1");
    // Off is a run.
    let (code, stderr) = drainit(args).env("DRAINIT_CHECK", "0").run();
    assert_eq!(code, 0, "{stderr}");
    assert!(marker.exists(), "DRAINIT_CHECK=0 runs the program");
}

/// `--check --k8s-protect` against the fake API server.
#[cfg(feature = "k8s")]
mod k8s {
    use std::os::unix::process::CommandExt;

    use super::support::k8s_api::{self, FakeApi};
    use super::*;

    const POD: &str = "worker-7d9f-x2";

    /// The fake API server started with `args` and the check run in its
    /// pod (`pod` as POD_NAME, the service account mounted at its path);
    /// None when python3 cannot run the server.
    fn in_pod(args: &[&str], pod: &str) -> Option<(FakeApi, Checked)> {
        if !k8s_api::available() {
            return None;
        }
        let api = FakeApi::start(&[&["--pod", POD], args].concat());
        let scratch = Scratch::new("check-k8s");
        let sa = scratch.file("serviceaccount");
        api.fill_service_account(&sa);
        let port = api.port.to_string();
        let drain = refusing_url();
        let mut command = command(
            &[
                "--check",
                "--k8s-protect",
                "--drain-url",
                &drain,
                "--",
                "true",
            ],
            &[
                ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
                ("KUBERNETES_SERVICE_PORT", &port),
                ("POD_NAME", pod),
            ],
        );
        // SAFETY: test-only; plain syscalls between fork and exec.
        unsafe { command.pre_exec(service_account_at(&sa)) };
        let checked = run(command);
        Some((api, checked))
    }

    fn methods(api: &FakeApi) -> Vec<String> {
        api.requests()
            .iter()
            .map(|r| r["method"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn a_good_pod_is_read_and_the_busy_patch_proven_without_writing() {
        let Some((api, c)) = in_pod(&[], POD) else {
            return;
        };
        assert_eq!(c.code, 0, "{:#?}", c.lines);
        assert_eq!(methods(&api), ["GET", "PATCH"], "{:#?}", c.lines);
        let patch = &api.requests()[1];
        assert_eq!(patch["query"], "dryRun=All");
        let body: serde_json::Value =
            serde_json::from_str(patch["body"].as_str().unwrap()).unwrap();
        let annotations = &body["metadata"]["annotations"];
        assert_eq!(
            annotations["controller.kubernetes.io/pod-deletion-cost"],
            "1000"
        );
        assert_eq!(api.pod()["metadata"].get("annotations"), None, "written");
        finding(&c.lines, "ok", "dry run");
        // The pod's 30 s, less its margin, as a run would take it.
        let deadline = finding(&c.lines, "ok", "the deadline would be");
        assert!(deadline.contains("27 s (from the pod)"), "{deadline}");
    }

    #[test]
    fn a_pod_busy_already_gets_the_busy_patch_as_a_dry_run_too() {
        let busy = r#"{"controller.kubernetes.io/pod-deletion-cost":"1000","cluster-autoscaler.kubernetes.io/safe-to-evict":"false","karpenter.sh/do-not-disrupt":"true"}"#;
        let Some((api, c)) = in_pod(&["--annotations", busy], POD) else {
            return;
        };
        assert_eq!(c.code, 0, "{:#?}", c.lines);
        assert_eq!(methods(&api), ["GET", "PATCH"], "{:#?}", c.lines);
        assert_eq!(api.requests()[1]["query"], "dryRun=All");
        let held: serde_json::Value = serde_json::from_str(busy).unwrap();
        assert_eq!(api.pod()["metadata"]["annotations"], held);
    }

    #[test]
    fn missing_rbac_is_an_error_and_nothing_is_patched() {
        let Some((api, c)) = in_pod(&["--statuses", "403"], POD) else {
            return;
        };
        assert_eq!(c.code, 1, "{:#?}", c.lines);
        assert!(finding(&c.lines, "error", "403").contains("RoleBinding"));
        assert_eq!(methods(&api), ["GET"]);
    }

    #[test]
    fn a_wrong_pod_name_is_an_error() {
        let Some((api, c)) = in_pod(&[], "no-such-pod") else {
            return;
        };
        assert_eq!(c.code, 1, "{:#?}", c.lines);
        assert!(finding(&c.lines, "error", "404").contains("POD_NAME"));
        assert_eq!(methods(&api), ["GET"]);
    }

    #[test]
    fn a_wrong_ca_is_an_error() {
        let Some((api, c)) = in_pod(&["--cert", "wrong-ca"], POD) else {
            return;
        };
        assert_eq!(c.code, 1, "{:#?}", c.lines);
        finding(&c.lines, "error", "ca.crt");
        assert!(methods(&api).is_empty(), "no request past the handshake");
    }

    #[test]
    fn an_admission_policy_that_refuses_the_patch_is_an_error() {
        let allowed = "--allowed-keys=controller.kubernetes.io/pod-deletion-cost";
        let Some((api, c)) = in_pod(&[allowed], POD) else {
            return;
        };
        assert_eq!(c.code, 1, "{:#?}", c.lines);
        let refused = finding(&c.lines, "error", "dry run");
        assert!(refused.contains("422") && refused.contains("ValidatingAdmissionPolicy"));
        assert_eq!(methods(&api), ["GET", "PATCH"]);
        assert_eq!(api.pod()["metadata"].get("annotations"), None, "written");
    }
}
