//! The platform examples in `examples/` and `Dockerfile.example` stay true:
//! they parse, their drainit flags are accepted by the real binary, each
//! grace period ends before the platform's own SIGKILL, and the health
//! checks they set up point at paths a running drainit with the recipe's
//! flags answers (on a free 127.0.0.1 port instead of the recipe's, with a
//! `sleep` instead of the app): 200 while it runs, and during a stop 503 on
//! `/readyz` but still 200 on `/healthz`.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::Value;
use support::*;

fn seconds(text: &str) -> u64 {
    text.trim_end_matches('s')
        .parse()
        .unwrap_or_else(|_| panic!("seconds in {text:?}"))
}

/// The value after `--grace` in an argument list.
fn grace_of(args: &[String]) -> u64 {
    let i = args
        .iter()
        .position(|a| a == "--grace")
        .expect("--grace is set");
    seconds(&args[i + 1])
}

/// The value after `flag` in an argument list, if any.
fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).map(String::as_str)
}

/// The port of an `ADDR:PORT` (or `:PORT`) as `--serve` takes it.
fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr:?}"))
}

/// A 127.0.0.1 address nothing listens on now.
fn free_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// The example's drainit flags, made safe to run here: report files in a
/// scratch directory, `--serve` on a free 127.0.0.1 port (returned).
fn runnable_flags(entrypoint: &[String], scratch: &Scratch) -> (Vec<String>, Option<String>) {
    assert_eq!(entrypoint[0], "/drainit");
    let serve = free_addr();
    let mut serving = None;
    let mut flags = Vec::new();
    for (i, a) in entrypoint[1..].iter().enumerate() {
        let a = if i > 0 && entrypoint[i] == "--serve" {
            serving = Some(serve.clone());
            serve.clone()
        } else {
            a.replace("/dev/termination-log", path_str(&scratch.file("report")))
                .replace(
                    "/tmp/drainit-report.json",
                    path_str(&scratch.file("report")),
                )
        };
        flags.push(a);
    }
    (flags, serving)
}

/// Runs drainit with the example's flags and `/bin/true` instead of the app:
/// exit 0 means every flag was accepted.
fn flags_are_accepted(entrypoint: &[String], vars: &[(&str, &str)]) {
    let scratch = Scratch::new("example-flags");
    let (flags, _) = runnable_flags(entrypoint, &scratch);
    let mut launch = drainit(flags)
        .with_args(vec!["/bin/true".into()])
        .not_pid1();
    for (k, v) in vars {
        // The listener's address: a free port, never the recipe's.
        let v = if *k == "DRAINIT_SERVE" {
            free_addr()
        } else {
            v.to_string()
        };
        launch = launch.env(k, &v);
    }
    let (code, stderr) = launch.run();
    assert_eq!(code, 0, "{entrypoint:?}: {stderr}");
}

/// One GET to drainit's listener: the status code and the body.
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(PATIENCE)).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let code = answer.split(' ').nth(1)?.parse().ok()?;
    let body = answer.split_once("\r\n\r\n")?.1.trim().to_string();
    Some((code, body))
}

/// A drainit started with the example's flags, its listener on a free
/// 127.0.0.1 port, and a child that ignores SIGTERM (so a stop lasts until
/// the test ends it).
struct Serving {
    d: Drainit,
    addr: String,
    _scratch: Scratch,
}

impl Serving {
    /// `serve_var`: the recipe sets the listener with `DRAINIT_SERVE`
    /// rather than `--serve`.
    fn start(entrypoint: &[String], vars: &[(&str, &str)], serve_var: bool) -> Serving {
        let scratch = Scratch::new("example-serve");
        let (flags, serving) = runnable_flags(entrypoint, &scratch);
        let mut launch = drainit(flags)
            .with_args(vec![
                "sh".into(),
                "-c".into(),
                "trap '' TERM; exec sleep 60".into(),
            ])
            .not_pid1();
        for (k, v) in vars {
            // The recipe's address is replaced below.
            if *k != "DRAINIT_SERVE" {
                launch = launch.env(k, v);
            }
        }
        let addr = if serve_var {
            assert!(serving.is_none(), "the listener is set once");
            let addr = free_addr();
            launch = launch.env("DRAINIT_SERVE", &addr);
            addr
        } else {
            serving.expect("the recipe passes --serve")
        };
        let d = launch.start();
        let s = Serving {
            d,
            addr,
            _scratch: scratch,
        };
        wait_for("drainit's listener", PATIENCE, || {
            get(&s.addr, "/healthz").filter(|(code, _)| *code == 200)
        });
        // The child has replaced the shell (and ignores SIGTERM) by now.
        wait_for("the sleep child", PATIENCE, || {
            let child = s.d.wait_child();
            std::fs::read_to_string(format!("/proc/{child}/comm"))
                .ok()
                .filter(|c| c.trim() == "sleep")
        });
        s
    }

    fn get(&self, path: &str) -> (u16, String) {
        get(&self.addr, path).unwrap_or_else(|| {
            panic!(
                "GET {path} from {}: no answer\n{}",
                self.addr,
                self.d.stderr()
            )
        })
    }

    /// The health checks the recipe points at `paths` while the app runs
    /// (200), then during a stop: `/readyz` 503 from the stop signal on,
    /// `/healthz` still 200. Then the app is ended.
    fn check(mut self, paths: &[&str]) {
        for path in paths {
            let (code, body) = self.get(path);
            assert_eq!(code, 200, "GET {path} while running: {body}");
        }
        self.d.signal(libc::SIGTERM);
        // The stop is seen by the very next request.
        assert_eq!(self.get("/readyz"), (503, "stopping".into()));
        assert_eq!(self.get("/healthz"), (200, "alive (stopping)".into()));
        let child = self.d.wait_child();
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(child, libc::SIGKILL) };
        self.d.wait_status(PATIENCE);
        let stderr = self.d.stderr();
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `drainit --probe ARGS` as the platform's health check runs it: its exit
/// code and its line on stdout.
fn probe(args: &[String], vars: &[(&str, &str)]) -> (i32, String) {
    assert_eq!(args[0], "/drainit");
    let out = std::process::Command::new(DRAINIT)
        .args(&args[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(vars.iter().copied())
        .output()
        .expect("run drainit --probe");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

/// The container's `environment` and an ECS agent on a closed port (for
/// `--ecs-protect`).
fn ecs_vars(container: &Value) -> Vec<(&str, &str)> {
    let mut vars = vec![("ECS_AGENT_URI", "http://127.0.0.1:1/api/x")];
    for var in container["environment"].as_array().into_iter().flatten() {
        vars.push((
            var["name"].as_str().unwrap(),
            var["value"].as_str().unwrap(),
        ));
    }
    vars
}

/// The default `--probe-timeout`, which a platform's health-check timeout
/// must exceed.
const PROBE_TIMEOUT: u64 = 3;

#[test]
fn ecs_task_definition() {
    let text = std::fs::read_to_string("examples/ecs/task-definition.json").unwrap();
    let task: Value = serde_json::from_str(&text).unwrap();
    let container = &task["containerDefinitions"][0];
    let entrypoint: Vec<String> = serde_json::from_value(container["entryPoint"].clone()).unwrap();
    let stop_timeout = container["stopTimeout"].as_u64().unwrap();
    assert!(stop_timeout <= 120, "Fargate allows at most 120 s");
    assert!(
        grace_of(&entrypoint) < stop_timeout,
        "--grace must end before stopTimeout"
    );
    flags_are_accepted(&entrypoint, &ecs_vars(container));

    let policy: Value = serde_json::from_str(
        &std::fs::read_to_string("examples/ecs/task-role-policy.json").unwrap(),
    )
    .unwrap();
    // drainit only ever sets the protection: the least it needs, no more.
    assert_eq!(
        policy["Statement"][0]["Action"],
        serde_json::json!(["ecs:UpdateTaskProtection"])
    );
}

#[test]
fn kubernetes_deployment() {
    let text = std::fs::read_to_string("examples/kubernetes/deployment.yaml").unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name}"))
            .trim()
            .to_string()
    };
    let period: u64 = field("terminationGracePeriodSeconds:").parse().unwrap();
    // The command is a YAML flow sequence written as a JSON array.
    let command: Vec<String> = serde_json::from_str(&field("command:")).unwrap();
    assert!(
        grace_of(&command) < period,
        "--grace must end before terminationGracePeriodSeconds"
    );
    assert!(command.contains(&"/dev/termination-log".to_string()));
    flags_are_accepted(&command, &[]);
}

#[test]
#[cfg(feature = "k8s")]
fn kubernetes_protect() {
    let text = std::fs::read_to_string("examples/kubernetes/protect.yaml").unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("command:"))
        .expect("a container command");
    let command: Vec<String> = serde_json::from_str(line.trim()).unwrap();
    assert!(command.contains(&"--k8s-protect".to_string()));
    let period: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("terminationGracePeriodSeconds:"))
        .expect("terminationGracePeriodSeconds")
        .trim()
        .parse()
        .unwrap();
    assert!(
        command.iter().all(|a| a != "--grace") || grace_of(&command) < period,
        "--grace must end before terminationGracePeriodSeconds"
    );
    // In a pod: the service variables, POD_NAME from the Downward API and
    // the service-account directory (no API server answers: the flags are
    // what is checked).
    let scratch = Scratch::new("example-k8s");
    let sa = scratch.file("serviceaccount");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::write(sa.join("namespace"), "jobs").unwrap();
    let (flags, _) = runnable_flags(&command, &scratch);
    let (code, stderr) = drainit(flags)
        .with_args(vec!["/bin/true".into()])
        .not_pid1()
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", "9")
        .env("POD_NAME", "worker-7d9f-x2")
        .before_exec(service_account_at(&sa))
        .run();
    assert_eq!(code, 0, "{command:?}: {stderr}");
}

#[test]
fn ecs_health_checks() {
    let text = std::fs::read_to_string("examples/ecs/task-definition.json").unwrap();
    let task: Value = serde_json::from_str(&text).unwrap();
    let container = &task["containerDefinitions"][0];
    let entrypoint: Vec<String> = serde_json::from_value(container["entryPoint"].clone()).unwrap();
    let vars = ecs_vars(container);
    let serve = vars
        .iter()
        .find(|(k, _)| *k == "DRAINIT_SERVE")
        .map(|(_, v)| *v)
        .expect("the task sets DRAINIT_SERVE (for the listener and --probe)");
    let port = port_of(serve);
    let mapped = container["portMappings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["containerPort"].as_u64() == Some(port.into()));
    assert!(mapped, "the listener's port {port} is in portMappings");

    // The container health check: drainit itself, exec form (a scratch
    // image has no shell for CMD-SHELL), asking /healthz.
    let check = &container["healthCheck"];
    let command: Vec<String> = serde_json::from_value(check["command"].clone()).unwrap();
    assert_eq!(command[0], "CMD", "exec form: no shell in a scratch image");
    assert_eq!(command[1..3], ["/drainit", "--probe"]);
    let timeout = check["timeout"].as_u64().unwrap_or(5);
    assert!(
        PROBE_TIMEOUT < timeout,
        "--probe gives up before ECS's health-check timeout"
    );

    // The load balancer's health check: /readyz on the listener's port.
    let group: Value =
        serde_json::from_str(&std::fs::read_to_string("examples/ecs/target-group.json").unwrap())
            .unwrap();
    assert_eq!(group["HealthCheckPath"], "/readyz");
    assert_eq!(group["HealthCheckPort"], port.to_string().as_str());
    assert_eq!(group["Matcher"]["HttpCode"], "200");
    assert!(group["HealthCheckTimeoutSeconds"].as_u64().unwrap() >= 1);

    let running = Serving::start(&entrypoint, &vars, true);
    let probe_vars = [("DRAINIT_SERVE", running.addr.as_str())];
    let (code, line) = probe(&command[1..], &probe_vars);
    assert_eq!(code, 0, "{line}");
    assert!(
        line.starts_with(&format!(
            "healthy: HTTP 200 from http://{}/healthz",
            running.addr
        )),
        "{line}"
    );
    let path = group["HealthCheckPath"].as_str().unwrap();
    running.check(&[path, "/healthz"]);
}

/// The lines indented under the line `key` (a YAML block), trimmed.
fn yaml_block<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut lines = text.lines();
    let start = lines
        .by_ref()
        .find(|l| l.trim() == key)
        .unwrap_or_else(|| panic!("no {key}"));
    lines
        .take_while(|l| l.trim().is_empty() || indent(l) > indent(start))
        .map(str::trim)
        .collect()
}

fn yaml_field<'a>(block: &[&'a str], name: &str) -> &'a str {
    block
        .iter()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in {block:?}"))
        .trim()
        .trim_matches('"')
}

#[test]
fn kubernetes_probes() {
    let text = std::fs::read_to_string("examples/kubernetes/deployment.yaml").unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("command:"))
        .expect("a command");
    let command: Vec<String> = serde_json::from_str(line.trim()).unwrap();
    let serve = value_of(&command, "--serve").expect("the command passes --serve");
    // The kubelet probes from the node: the listener takes every address.
    assert!(
        serve.starts_with("0.0.0.0:") || serve.starts_with(':'),
        "{serve}"
    );
    let port = port_of(serve).to_string();
    let mut paths = Vec::new();
    for key in ["readinessProbe:", "livenessProbe:"] {
        let block = yaml_block(&text, key);
        assert_eq!(yaml_field(&block, "port:"), port, "{key}");
        // The kubelet's default timeout is 1 s; /readyz answers within it.
        let timeout: u64 = yaml_field(&block, "timeoutSeconds:").parse().unwrap();
        assert!(timeout >= 1);
        paths.push(yaml_field(&block, "path:"));
    }
    assert_eq!(paths, ["/readyz", "/healthz"]);
    let annotations = yaml_block(&text, "annotations:");
    assert_eq!(yaml_field(&annotations, "prometheus.io/scrape:"), "true");
    assert_eq!(yaml_field(&annotations, "prometheus.io/port:"), port);
    let metrics = yaml_field(&annotations, "prometheus.io/path:");
    assert_eq!(metrics, "/metrics");

    let running = Serving::start(&command, &[], false);
    let (code, body) = running.get(metrics);
    assert_eq!(code, 200);
    assert!(body.contains("\ndrainit_stopping 0\n"), "{body}");
    running.check(&paths);
}

/// The exec-form JSON array of the Dockerfile line starting with
/// `instruction` (after the word `CMD` for HEALTHCHECK), and the words
/// before it (HEALTHCHECK's options).
fn dockerfile_array(text: &str, instruction: &str) -> (Vec<String>, String) {
    let line = text
        .lines()
        .find(|l| l.starts_with(instruction))
        .unwrap_or_else(|| panic!("no {instruction} line"));
    let rest = line[instruction.len()..].trim();
    let (before, array) = match rest.split_once(" CMD ") {
        Some((options, array)) => (options, array),
        None => ("", rest.strip_prefix("CMD ").unwrap_or(rest)),
    };
    let array = serde_json::from_str(array)
        .unwrap_or_else(|e| panic!("{instruction} is not in exec form: {line}: {e}"));
    (array, before.to_string())
}

#[test]
fn dockerfile_health_check() {
    let text = std::fs::read_to_string("Dockerfile.example").unwrap();
    let (entrypoint, _) = dockerfile_array(&text, "ENTRYPOINT ");
    let (check, options) = dockerfile_array(&text, "HEALTHCHECK ");
    assert_eq!(check[..2], ["/drainit", "--probe"]);
    let timeout = options
        .split_whitespace()
        .find_map(|o| o.strip_prefix("--timeout="))
        .map_or(30, seconds);
    assert!(
        PROBE_TIMEOUT < timeout,
        "--probe gives up before Docker's --timeout"
    );
    // The probe asks /healthz on the address --serve listens on.
    let serve = value_of(&entrypoint, "--serve").expect("the ENTRYPOINT passes --serve");
    let url = check.get(2).expect("--probe's URL");
    let expected = format!("http://{serve}/healthz");
    assert_eq!(url, &expected);
    flags_are_accepted(&entrypoint, &[]);

    let running = Serving::start(&entrypoint, &[], false);
    let here = vec![
        check[0].clone(),
        check[1].clone(),
        format!("http://{}/healthz", running.addr),
    ];
    let (code, line) = probe(&here, &[]);
    assert_eq!(code, 0, "{line}");
    assert!(line.starts_with("healthy: HTTP 200"), "{line}");
    running.check(&["/healthz"]);
}
