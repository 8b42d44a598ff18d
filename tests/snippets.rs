//! Every snippet a user copies from README.md and docs/ works with the real
//! tool it is written for:
//!
//! - every ```` ```dockerfile ```` block is built by `docker build` (no
//!   registry, no pulls; see [`dockerfile_for_build`] for the few, explicit
//!   substitutions);
//! - every ECS task definition (`examples/ecs/`, and the JSON blocks of the
//!   docs that hold container-definition fields) is valid input for the ECS
//!   API's `RegisterTaskDefinition`, by botocore's own service model and
//!   validator (offline);
//! - every Prometheus configuration block passes `promtool check config`;
//! - a real Prometheus server scrapes a real drainit (`--serve`, PID 1 of a
//!   PID namespace): the target is up, and `drainit_stopping` turns 1
//!   through Prometheus' query API once the stop begins.
//!
//! Each tool is a test prerequisite that a fresh machine lacks (`.ci/run`
//! installs them): without it the check is skipped with a line saying so,
//! unless its variable asks for it: `DRAINIT_REQUIRE_DOCKER`,
//! `DRAINIT_REQUIRE_BOTOCORE`, `DRAINIT_REQUIRE_PROMETHEUS` (`=1` turns a
//! missing tool into a failure).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{built, drainit, free_port, wait_for, Build, Scratch};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The names under which docs copy drainit's release binaries into images:
/// these COPY sources are the static test build.
const RELEASE_BINARIES: &[&str] = &["drainit-x86_64-linux-musl", "drainit-aarch64-linux-musl"];

/// Top-level fields that make a JSON snippet part of an ECS container
/// definition (it is then validated inside a minimal one).
const CONTAINER_FIELDS: &[&str] = &[
    "entryPoint",
    "stopTimeout",
    "healthCheck",
    "logConfiguration",
];

// ---- the docs and their fenced blocks ----------------------------------

/// README.md and every markdown page under docs/, as (name, text).
fn docs() -> Vec<(String, String)> {
    let root = Path::new(ROOT);
    let mut paths = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root).unwrap().display().to_string();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect()
}

/// A fenced block: where it is (page:line) and its text.
struct Snippet {
    place: String,
    text: String,
}

/// The ```` ```LANG ```` blocks of every page.
fn snippets(lang: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    for (name, text) in docs() {
        let mut open: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            match &mut open {
                None => {
                    if trimmed.strip_prefix("```") == Some(lang) {
                        open = Some((i + 1, String::new()));
                    }
                }
                Some((start, body)) => {
                    if trimmed == "```" {
                        out.push(Snippet {
                            place: format!("{name}:{start}"),
                            text: std::mem::take(body),
                        });
                        open = None;
                    } else {
                        body.push_str(line);
                        body.push('\n');
                    }
                }
            }
        }
    }
    out
}

/// True when `program` runs; otherwise one loud line (or a failure when
/// `require` is set to 1).
fn have(program: &str, args: &[&str], require: &str, install: &str) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var(require).as_deref() != Ok("1"),
            "{require}=1 but `{program} {}` fails ({install})",
            args.join(" ")
        );
        let _ = writeln!(
            std::io::stderr(),
            "\n*** snippet check SKIPPED: `{program} {}` fails ({install}; set {require}=1 to make this a failure) ***\n",
            args.join(" ")
        );
    }
    ok
}

// ---- Dockerfile blocks --------------------------------------------------

fn docker(args: &[&str]) -> std::process::Output {
    Command::new("docker")
        .args(args)
        .output()
        .expect("run docker")
}

/// Images this test built, removed when it ends (also when it fails).
struct Images(Vec<String>);

impl Drop for Images {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            let mut args = vec!["rmi", "-f"];
            args.extend(self.0.iter().map(String::as_str));
            let _ = docker(&args);
        }
    }
}

fn unique_tag(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("drainit-test-snippet-{what}:{}-{nanos}", std::process::id())
}

/// `docker build` of `dockerfile` in `context`: Ok(()) or the builder's
/// message.
fn build(
    images: &mut Images,
    what: &str,
    context: &Path,
    dockerfile: &str,
) -> Result<String, String> {
    std::fs::write(context.join("Dockerfile"), dockerfile).unwrap();
    let tag = unique_tag(what);
    images.0.push(tag.clone());
    let out = docker(&[
        "build",
        "-q",
        "--no-cache",
        "-t",
        &tag,
        context.to_str().unwrap(),
    ]);
    if out.status.success() {
        Ok(tag)
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A Dockerfile block made buildable on a machine with no registry. The
/// substitutions, and nothing else:
///
/// 1. A block with no `FROM` (a fragment: an `ENTRYPOINT`, a `HEALTHCHECK`)
///    gets `FROM scratch` in front.
/// 2. In `FROM IMAGE`, only the image word changes: the release image
///    (`drainit:…`, `ghcr.io/OWNER/drainit:…`) becomes the one built from the static test binary,
///    an earlier stage's name stays, and any other image becomes `scratch`.
///    The rest of the line stays as written (so a stray comment after the
///    image still fails, as it does for users).
/// 3. A `COPY`/`ADD` source (no `--from`) named like a release binary
///    (`drainit-x86_64-linux-musl`) is the static test build; any other
///    source is a stub file in the context.
/// 4. Without BuildKit (this engine's legacy builder), `--chmod=MODE` is
///    dropped and the mode set on the context file instead, as the
///    README's "or `chmod +x` the file before copying it" says.
///
/// Returns the Dockerfile and the context files to create as
/// (name, is the drainit binary, mode).
fn dockerfile_for_build(
    block: &str,
    release_image: &str,
    buildkit: bool,
) -> (String, Vec<(String, bool, u32)>) {
    let mut lines: Vec<String> = Vec::new();
    let mut files: Vec<(String, bool, u32)> = Vec::new();
    let mut stages: Vec<String> = Vec::new();
    let has_from = block
        .lines()
        .any(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM "));
    if !has_from {
        lines.push("FROM scratch".into());
    }
    for line in block.lines() {
        let trimmed = line.trim_start();
        let upper = trimmed.to_ascii_uppercase();
        if upper.starts_with("FROM ") {
            let words: Vec<&str> = trimmed.split_whitespace().collect();
            let image = words.get(1).copied().unwrap_or("");
            let replaced = if image == "scratch" || stages.iter().any(|s| s == image) {
                image.to_string()
            } else if is_release_image(image) {
                release_image.to_string()
            } else {
                "scratch".to_string()
            };
            if let (Some(as_word), Some(name)) = (words.get(2), words.get(3)) {
                if as_word.eq_ignore_ascii_case("as") {
                    stages.push(name.to_string());
                }
            }
            let at = line.find(image).unwrap();
            lines.push(format!(
                "{}{replaced}{}",
                &line[..at],
                &line[at + image.len()..]
            ));
        } else if (upper.starts_with("COPY ") || upper.starts_with("ADD "))
            && !trimmed.contains("--from=")
        {
            let mut words: Vec<String> = trimmed.split_whitespace().map(String::from).collect();
            let mut mode = 0o644;
            if !buildkit {
                words.retain(|w| match w.strip_prefix("--chmod=") {
                    Some(m) => {
                        mode = u32::from_str_radix(m, 8).expect("octal --chmod");
                        false
                    }
                    None => true,
                });
            }
            let first_source = 1 + words[1..]
                .iter()
                .take_while(|w| w.starts_with("--"))
                .count();
            for source in &words[first_source..words.len() - 1] {
                let is_drainit = RELEASE_BINARIES.contains(&source.as_str());
                files.push((source.clone(), is_drainit, mode));
            }
            lines.push(words.join(" "));
        } else {
            lines.push(line.to_string());
        }
    }
    (lines.join("\n") + "\n", files)
}

/// `drainit:TAG` or `REGISTRY/.../drainit:TAG`: the release image.
fn is_release_image(image: &str) -> bool {
    image
        .rsplit('/')
        .next()
        .is_some_and(|last| last.split([':', '@']).next() == Some("drainit") && last.contains(':'))
}

#[test]
fn every_dockerfile_block_builds() {
    if !have(
        "docker",
        &["info", "--format", "{{.ServerVersion}}"],
        "DRAINIT_REQUIRE_DOCKER",
        "no Docker engine answers",
    ) {
        return;
    }
    let blocks = snippets("dockerfile");
    assert!(blocks.len() >= 3, "expected Dockerfile blocks in the docs");
    let buildkit = docker(&["buildx", "version"]).status.success();
    let binary = PathBuf::from(built(Build::Static));
    let mut images = Images(Vec::new());

    // The release image, as scripts/release.sh builds it.
    let context = Scratch::new("snippet-release");
    std::fs::copy(&binary, context.file("drainit")).unwrap();
    let scratch_dockerfile =
        std::fs::read_to_string(Path::new(ROOT).join("scripts/scratch.Dockerfile")).unwrap();
    let release = build(&mut images, "release", &context.path, &scratch_dockerfile)
        .unwrap_or_else(|e| panic!("the release image does not build: {e}"));

    let mut failures = Vec::new();
    for block in &blocks {
        let (dockerfile, files) = dockerfile_for_build(&block.text, &release, buildkit);
        let context = Scratch::new("snippet");
        for (name, is_drainit, mode) in &files {
            let path = context.file(name.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if *is_drainit {
                std::fs::copy(&binary, &path).unwrap();
            } else {
                std::fs::write(&path, "a stub for the snippet test\n").unwrap();
            }
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
        }
        match build(&mut images, "block", &context.path, &dockerfile) {
            Ok(tag) => {
                // What the image says it runs is what the block says.
                if let Some(line) = block
                    .text
                    .lines()
                    .find(|l| l.trim_start().starts_with("ENTRYPOINT ["))
                {
                    let want: Value =
                        serde_json::from_str(line.trim_start()["ENTRYPOINT".len()..].trim())
                            .unwrap_or_else(|e| {
                                panic!("{}: ENTRYPOINT is not JSON: {e}", block.place)
                            });
                    let out = docker(&[
                        "image",
                        "inspect",
                        "-f",
                        "{{json .Config.Entrypoint}}",
                        &tag,
                    ]);
                    let got: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
                    if got != want {
                        failures.push(format!(
                            "{}: the image's entrypoint is {got}, the block says {want}",
                            block.place
                        ));
                    }
                }
            }
            Err(e) => failures.push(format!(
                "{}: docker build failed:\n{dockerfile}---\n{}",
                block.place,
                e.trim()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} Dockerfile blocks fail:\n\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_substitutions_are_the_documented_ones() {
    let (file, files) = dockerfile_for_build(
        "FROM gcr.io/distroless/static-debian12   # or FROM scratch\n\
         COPY --chmod=0755 drainit-x86_64-linux-musl /drainit\nCOPY app /app\n",
        "rel",
        false,
    );
    // The comment stays, so the builder refuses the line as users' would.
    assert!(
        file.starts_with("FROM scratch   # or FROM scratch\n"),
        "{file}"
    );
    assert!(
        file.contains("\nCOPY drainit-x86_64-linux-musl /drainit\n"),
        "{file}"
    );
    assert_eq!(
        files,
        vec![
            ("drainit-x86_64-linux-musl".to_string(), true, 0o755),
            ("app".to_string(), false, 0o644)
        ]
    );
    let (file, _) = dockerfile_for_build(
        "FROM drainit:0.1.0-amd64 AS drainit\nFROM debian:bookworm-slim\nCOPY --from=drainit /drainit /drainit\n",
        "rel",
        true,
    );
    assert_eq!(
        file,
        "FROM rel AS drainit\nFROM scratch\nCOPY --from=drainit /drainit /drainit\n"
    );
    assert!(is_release_image("ghcr.io/OWNER/drainit:0.1.0"));
    assert!(!is_release_image("drainit-builder:1"));
    let (file, _) = dockerfile_for_build("ENTRYPOINT [\"/drainit\", \"--\"]\n", "rel", true);
    assert_eq!(file, "FROM scratch\nENTRYPOINT [\"/drainit\", \"--\"]\n");
}

// ---- ECS task definitions -------------------------------------------------

/// Validates each `(place, RegisterTaskDefinition input)` with botocore's
/// own ECS model and parameter validator; prints one line per problem.
const VALIDATE_ECS: &str = r#"
import json, sys
import botocore.session
from botocore.validate import ParamValidator
shape = botocore.session.get_session().get_service_model("ecs").operation_model("RegisterTaskDefinition").input_shape
for place, params in json.load(sys.stdin):
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        print(place + ": " + report.generate_report().replace("\n", " | "))
"#;

/// Every ECS task definition the docs and examples show, as
/// RegisterTaskDefinition input: whole ones as they are, container
/// fragments inside a minimal task definition (family, one container with
/// a name and an image, when the fragment has none).
fn task_definitions() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let examples = Path::new(ROOT).join("examples/ecs");
    let mut candidates: Vec<(String, String)> = std::fs::read_dir(&examples)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.strip_prefix(ROOT).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    candidates.extend(snippets("json").into_iter().map(|s| (s.place, s.text)));
    for (place, text) in candidates {
        let Some(value) = serde_json::from_str::<Value>(&text)
            .ok()
            .or_else(|| serde_json::from_str(&format!("{{{text}}}")).ok())
        else {
            continue;
        };
        let Some(object) = value.as_object() else {
            continue;
        };
        if object.contains_key("containerDefinitions") {
            out.push((place, value));
        } else if CONTAINER_FIELDS.iter().any(|f| object.contains_key(*f)) {
            let mut container = object.clone();
            container.entry("name").or_insert("app".into());
            container.entry("image").or_insert("app:latest".into());
            out.push((
                place,
                serde_json::json!({"family": "snippet", "containerDefinitions": [container]}),
            ));
        }
    }
    out
}

#[test]
fn every_ecs_task_definition_is_valid_register_task_definition_input() {
    let definitions = task_definitions();
    let places: Vec<&str> = definitions.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        places.contains(&"examples/ecs/task-definition.json")
            && places.iter().any(|p| p.starts_with("README.md:")),
        "the example task definition and the README's fragment must be found: {places:?}"
    );
    if !have(
        "python3",
        &["-c", "import botocore.session, botocore.validate"],
        "DRAINIT_REQUIRE_BOTOCORE",
        "pip install botocore",
    ) {
        return;
    }
    let mut child = Command::new("python3")
        .args(["-c", VALIDATE_ECS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let input = serde_json::to_vec(&definitions).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the validator failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let problems = String::from_utf8_lossy(&out.stdout);
    assert!(
        problems.trim().is_empty(),
        "task definitions the ECS API would refuse:\n{problems}"
    );
}

#[test]
fn botocore_refuses_what_ecs_refuses() {
    // The check can fail: a wrong type and an unknown field are caught.
    if !have(
        "python3",
        &["-c", "import botocore.session, botocore.validate"],
        "DRAINIT_REQUIRE_BOTOCORE",
        "pip install botocore",
    ) {
        return;
    }
    let bad = serde_json::json!([["bad", {"family": "f", "containerDefinitions": [
        {"name": "a", "image": "a", "stopTimeout": "110", "entrypoint": ["/drainit"]}]}]]);
    let mut child = Command::new("python3")
        .args(["-c", VALIDATE_ECS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(bad.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("stopTimeout"), "{report}");
    assert!(report.contains("entrypoint"), "{report}");
}

// ---- Prometheus -----------------------------------------------------------

#[test]
fn every_prometheus_config_passes_promtool() {
    let configs: Vec<Snippet> = snippets("yaml")
        .into_iter()
        .filter(|s| s.text.lines().any(|l| l.starts_with("scrape_configs:")))
        .collect();
    assert!(
        configs.iter().any(|s| s.place.starts_with("README.md:")),
        "the README's scrape config must be found"
    );
    if !have(
        "promtool",
        &["--version"],
        "DRAINIT_REQUIRE_PROMETHEUS",
        "apt-get install prometheus",
    ) {
        return;
    }
    let scratch = Scratch::new("promtool");
    let mut failures = Vec::new();
    for config in &configs {
        let path = scratch.file("prometheus.yml");
        std::fs::write(&path, &config.text).unwrap();
        let out = Command::new("promtool")
            .args(["check", "config"])
            .arg(&path)
            .output()
            .expect("run promtool");
        if !out.status.success() {
            failures.push(format!(
                "{}: {}{}",
                config.place,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The body of a GET on 127.0.0.1 (HTTP/1.0: the server closes).
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer.split_once("\r\n\r\n")?.1.to_string())
}

/// One instant query through Prometheus' HTTP API: the value of the only
/// series, if there is one.
fn query(port: u16, expr: &str) -> Option<String> {
    let encoded: String = expr
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = http_get(port, &format!("/api/v1/query?query={encoded}"))?;
    let answer: Value = serde_json::from_str(&body).ok()?;
    let result = answer["data"]["result"].as_array()?;
    (result.len() == 1).then(|| result[0]["value"][1].as_str().unwrap_or("").to_string())
}

/// Prometheus, killed when the test ends.
struct Prometheus(std::process::Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn prometheus_scrapes_drainit_and_sees_the_stop_begin() {
    if !have(
        "prometheus",
        &["--version"],
        "DRAINIT_REQUIRE_PROMETHEUS",
        "apt-get install prometheus",
    ) {
        return;
    }
    // The child is the app: its own drain endpoint, not ready for as long
    // as the test runs, and deaf to SIGTERM, so the stop lasts until the
    // test ends it.
    let app_port = free_port();
    let app = format!(
        "import http.server, signal\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         class H(http.server.BaseHTTPRequestHandler):\n\
         \x20   def do_GET(self):\n\
         \x20       body = b'{{\"readyForTermination\":false}}'\n\
         \x20       self.send_response(200)\n\
         \x20       self.send_header('Content-Type', 'application/json')\n\
         \x20       self.send_header('Content-Length', str(len(body)))\n\
         \x20       self.end_headers()\n\
         \x20       self.wfile.write(body)\n\
         \x20   def log_message(self, *args):\n\
         \x20       pass\n\
         http.server.HTTPServer(('127.0.0.1', {app_port}), H).serve_forever()\n"
    );
    let serve = free_port();
    let mut d = drainit([
        "--grace",
        "120s",
        "--drain-url",
        &format!("http://127.0.0.1:{app_port}/drain"),
        "--serve",
        &format!("127.0.0.1:{serve}"),
        "--",
        "python3",
        "-c",
        &app,
    ])
    .start();
    wait_for("drainit's listener", Duration::from_secs(20), || {
        http_get(serve, "/healthz")
    });
    wait_for("the app's drain endpoint", Duration::from_secs(20), || {
        http_get(app_port, "/drain")
    });

    let scratch = Scratch::new("prometheus");
    let config = scratch.file("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: drainit\n    static_configs:\n      - targets: [\"127.0.0.1:{serve}\"]\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let _prometheus = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                scratch.file("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(scratch.file("prometheus.log")).unwrap())
            .spawn()
            .expect("run prometheus"),
    );
    let patience = Duration::from_secs(60);
    let log = || scratch.read("prometheus.log");
    wait_for("Prometheus to see the target up", patience, || {
        (query(web, "up{job=\"drainit\"}").as_deref() == Some("1")).then_some(())
    });
    let before = wait_for("drainit_stopping before the stop", patience, || {
        query(web, "drainit_stopping")
    });
    assert_eq!(before, "0", "no stop yet; Prometheus log:\n{}", log());

    let stop = Instant::now();
    d.signal(libc::SIGTERM);
    wait_for("drainit_stopping to turn 1 in Prometheus", patience, || {
        (query(web, "drainit_stopping").as_deref() == Some("1")).then_some(())
    });
    // Seen within a few scrape intervals, while the app is still draining.
    assert!(stop.elapsed() < Duration::from_secs(30));
    assert_eq!(
        query(web, "up{job=\"drainit\"}").as_deref(),
        Some("1"),
        "the target stays up during the stop"
    );
    assert!(
        d.try_code().is_none(),
        "drainit is still draining: {}",
        d.stderr()
    );
}
