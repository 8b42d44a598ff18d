//! drainit as the real ENTRYPOINT under a real container runtime: the
//! release image (`FROM scratch`, only /drainit, scripts/scratch.Dockerfile)
//! built from the static (musl) drainit, and a test image that takes drainit
//! from it with `COPY --from=` next to the static drain_demo example and
//! Debian's static busybox, driven with `docker stop`, `docker kill` and
//! `docker exec`, results read from `docker inspect`. Also drainit as
//! Docker's `--init` binary, mounted the way dockerd mounts it. Every image
//! and container gets a name unique to this run and is removed at the end,
//! also when a test fails. Skipped (loudly) when no Docker engine answers,
//! unless `DRAINIT_REQUIRE_DOCKER=1`, which turns a missing engine into a
//! failure.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use support::{wait_for, Scratch};

const TARGET: &str = "x86_64-unknown-linux-musl";

fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .expect("run docker")
}

fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// True when the container tests can run; says so loudly when they cannot.
fn engine_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let answers = Command::new("docker")
            .args(["info", "--format", "{{.ServerVersion}}"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !answers {
            assert!(
                std::env::var("DRAINIT_REQUIRE_DOCKER").as_deref() != Ok("1"),
                "DRAINIT_REQUIRE_DOCKER=1 but no Docker engine answers `docker info`"
            );
            // Straight to the terminal: the test harness captures eprintln!.
            let _ = writeln!(
                std::io::stderr(),
                "\n*** container tests SKIPPED: no Docker engine answers (set DRAINIT_REQUIRE_DOCKER=1 to make this a failure) ***\n"
            );
        }
        answers
    })
}

/// The PID namespace this run lives in (its inode number): a PID means
/// something only there. Runs in other containers that share the engine
/// have other namespaces, and their leftovers are not ours to judge.
fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// What names this run's images and containers: `<pid>.<namespace>`.
fn run_id() -> String {
    format!("{}.{}", std::process::id(), pid_namespace())
}

/// A tag no other run (on this engine, now or later) uses.
fn unique_tag(repository: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{repository}:{}-{nanos}", run_id())
}

/// Images this run built: removed when the test binary exits. Statics are
/// never dropped, so the removal is an `atexit` handler; libtest ends with
/// `exit` whether tests passed or failed (a panicking test included).
static IMAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

extern "C" fn remove_images() {
    let images = std::mem::take(&mut *IMAGES.lock().unwrap_or_else(|e| e.into_inner()));
    if !images.is_empty() {
        let mut args = vec!["rmi", "-f"];
        args.extend(images.iter().map(String::as_str));
        let _ = docker(&args);
    }
}

fn build_image(tag: &str, context: &Path, dockerfile: Option<&Path>) {
    {
        let mut images = IMAGES.lock().unwrap();
        if images.is_empty() {
            // SAFETY: registers a plain extern "C" function.
            unsafe { libc::atexit(remove_images) };
        }
        // Registered before the build: a half-failed build is removed too.
        images.push(tag.to_string());
    }
    // --no-cache: see scripts/release.sh (cached steps cross platforms).
    let mut args = vec!["build", "-q", "--no-cache", "-t", tag];
    if let Some(file) = dockerfile {
        args.extend(["-f", file.to_str().unwrap()]);
    }
    args.push(context.to_str().unwrap());
    docker_ok(&args);
}

/// Removes what earlier runs left behind when they were killed before their
/// clean-up ran: images and containers named after a test process of this
/// PID namespace that no longer exists (names carry `<pid>.<namespace>`).
fn sweep_leftovers_of_dead_runs() {
    let ours = pid_namespace();
    let dead = |name: &str, prefix: &str| {
        let id = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|id| id.split_once('.'))
            .and_then(|(pid, ns)| Some((pid.parse::<u32>().ok()?, ns.parse::<u64>().ok()?)));
        id.is_some_and(|(pid, ns)| ns == ours && !Path::new(&format!("/proc/{pid}")).exists())
    };
    let images = docker_ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    for image in images.lines() {
        if dead(image, "drainit-test:") || dead(image, "drainit-test-release:") {
            let _ = docker(&["rmi", "-f", image]);
        }
    }
    let containers = docker_ok(&["ps", "-a", "--format", "{{.Names}}"]);
    for name in containers.lines() {
        if dead(name, "drainit-test-") {
            let _ = docker(&["rm", "-f", name]);
        }
    }
}

struct Built {
    /// The static drainit as built (what `--init` mounts).
    drainit: PathBuf,
    /// The release image: only /drainit.
    release: String,
    /// The test image: drainit, drain_demo, busybox.
    test: String,
}

/// Builds the static binaries and the two images once per test run.
fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        sweep_leftovers_of_dead_runs();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        // A separate target dir: the outer `cargo test` owns the default one.
        let target_dir = root.join("target").join("container");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(root)
            .args([
                "build",
                "--release",
                "--target",
                TARGET,
                "--bins",
                "--examples",
                "--target-dir",
            ])
            .arg(&target_dir)
            .status()
            .expect("run cargo");
        assert!(
            status.success(),
            "static build failed: is the {TARGET} target installed (rustup target add {TARGET})?"
        );
        let busybox = PathBuf::from("/bin/busybox");
        assert!(
            busybox.exists(),
            "/bin/busybox missing: install Debian's busybox-static"
        );
        let release_dir = target_dir.join(TARGET).join("release");
        let drainit = release_dir.join("drainit");

        // The release image, exactly as scripts/release.sh builds it.
        let release = unique_tag("drainit-test-release");
        let context = Scratch::new("release-image");
        std::fs::copy(&drainit, context.file("drainit")).unwrap();
        build_image(
            &release,
            &context.path,
            Some(&root.join("scripts").join("scratch.Dockerfile")),
        );

        let test = unique_tag("drainit-test");
        let context = Scratch::new("image");
        for (from, to) in [
            (
                release_dir.join("examples").join("drain_demo"),
                "drain_demo",
            ),
            (busybox, "busybox"),
        ] {
            std::fs::copy(&from, context.file(to))
                .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
        // drainit comes from the release image, as a user's image takes it.
        std::fs::write(
            context.file("Dockerfile"),
            format!(
                "FROM {release} AS drainit\n\
                 FROM scratch\n\
                 COPY busybox /bin/busybox\n\
                 RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
                 RUN [\"/bin/busybox\", \"mkdir\", \"-m\", \"1777\", \"/tmp\"]\n\
                 COPY --from=drainit /drainit /drainit\n\
                 COPY drain_demo /drain_demo\n\
                 ENV PATH=/bin\n\
                 ENTRYPOINT [\"/drainit\"]\n"
            ),
        )
        .unwrap();
        build_image(&test, &context.path, None);
        Built {
            drainit,
            release,
            test,
        }
    })
}

fn image() -> &'static str {
    &built().test
}

/// A container, removed on drop: also when `docker run` itself failed
/// after creating it (a `Created` container is left behind otherwise).
struct Container {
    name: String,
}

impl Container {
    fn run(test: &str, args: &[&str]) -> Container {
        Container::run_with(test, &[], image(), args)
    }

    /// `docker run -d [options] IMAGE args...`
    fn run_with(test: &str, options: &[&str], image: &str, args: &[&str]) -> Container {
        let c = Container {
            name: format!("drainit-test-{}-{test}", run_id()),
        };
        let _ = docker(&["rm", "-f", &c.name]);
        let mut all = vec!["run", "-d", "--name", &c.name];
        all.extend_from_slice(options);
        all.push(image);
        all.extend_from_slice(args);
        docker_ok(&all);
        c
    }

    fn exec_ok(&self, command: &str) -> bool {
        docker(&["exec", &self.name, "/bin/sh", "-c", command])
            .status
            .success()
    }

    fn exec(&self, command: &str) -> String {
        String::from_utf8_lossy(&docker(&["exec", &self.name, "/bin/sh", "-c", command]).stdout)
            .trim()
            .to_string()
    }

    fn wait_until(&self, what: &str, command: &str) {
        wait_for(what, Duration::from_secs(60), || {
            self.exec_ok(command).then_some(())
        });
    }

    /// `docker stop -t T` and how long it took.
    fn stop(&self, timeout_secs: u32) -> Duration {
        let start = Instant::now();
        docker_ok(&["stop", "-t", &timeout_secs.to_string(), &self.name]);
        start.elapsed()
    }

    fn exit_code(&self) -> i32 {
        docker_ok(&["inspect", "-f", "{{.State.ExitCode}}", &self.name])
            .parse()
            .unwrap()
    }

    fn logs(&self) -> String {
        let out = docker(&["logs", &self.name]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.name]);
    }
}

#[test]
fn docker_stop_of_a_draining_app_exits_0() {
    if !engine_available() {
        return;
    }
    let c = Container::run(
        "drain",
        &[
            "--grace",
            "20s",
            "--drain-url",
            "http://127.0.0.1:8080/drain",
            "--",
            "/drain_demo",
        ],
    );
    // wget fails on the 503 "busy" answer, but it has to get one.
    c.wait_until(
        "the demo app to answer",
        "wget -qO- http://127.0.0.1:8080/drain 2>&1 | grep -q 503",
    );
    let took = c.stop(30);
    assert_eq!(c.exit_code(), 0, "{}", c.logs());
    // Three one-second jobs plus the 2 s ready grace, well before -t 30.
    assert!(took >= Duration::from_secs(3), "docker stop took {took:?}");
    assert!(took < Duration::from_secs(25), "docker stop took {took:?}");
    assert!(c.logs().contains("\"outcome\":\"drained\""), "{}", c.logs());
    let _ = writeln!(
        std::io::stderr(),
        "container: docker stop of a draining app took {} ms",
        took.as_millis()
    );
}

#[test]
fn never_ready_app_is_killed_at_grace_with_124_before_the_runtime_timeout() {
    if !engine_available() {
        return;
    }
    let script = "trap '' TERM; touch /tmp/up; while :; do sleep 1; done";
    let c = Container::run(
        "deadline",
        &[
            "--grace",
            "2s",
            "--drain-url",
            "http://127.0.0.1:9/drain",
            "--",
            "/bin/sh",
            "-c",
            script,
        ],
    );
    c.wait_until("the app to start", "test -e /tmp/up");
    let took = c.stop(20);
    assert_eq!(c.exit_code(), 124, "{}", c.logs());
    assert!(took >= Duration::from_secs(2), "docker stop took {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "killed at --grace, not by the runtime at -t 20: {took:?}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "container: deadline stop took {} ms (grace 2 s)",
        took.as_millis()
    );
}

#[test]
fn a_drain_file_drains_a_from_scratch_container() {
    if !engine_available() {
        return;
    }
    // The image is FROM scratch: no HTTP server, no curl, only a file the
    // app writes when it has finished (busybox is there for the app itself).
    let script = "trap 'sleep 1; touch /tmp/drained' TERM; touch /tmp/up; \
                  while :; do sleep 1; done";
    let c = Container::run(
        "drain-file",
        &[
            "--grace",
            "20s",
            "--drain-file",
            "/tmp/drained",
            "--drain-interval",
            "200ms",
            "--ready-grace",
            "200ms",
            "--",
            "/bin/sh",
            "-c",
            script,
        ],
    );
    c.wait_until("the app to start", "test -e /tmp/up");
    let took = c.stop(30);
    assert_eq!(c.exit_code(), 0, "{}", c.logs());
    let logs = c.logs();
    assert!(logs.contains("\"outcome\":\"drained\""), "{logs}");
    assert!(logs.contains("\"kind\":\"file\""), "{logs}");
    assert!(took < Duration::from_secs(20), "docker stop took {took:?}");
    let _ = writeln!(
        std::io::stderr(),
        "container: docker stop with a drain file took {} ms",
        took.as_millis()
    );
}

#[test]
fn zombies_made_inside_the_container_are_reaped() {
    if !engine_available() {
        return;
    }
    let script =
        "i=0; while [ $i -lt 200 ]; do (true &); i=$((i+1)); done; touch /tmp/done; exec sleep 600";
    let c = Container::run("zombies", &["--", "/bin/sh", "-c", script]);
    c.wait_until("the orphans to be made", "test -e /tmp/done");
    wait_for(
        "no zombie in the container",
        Duration::from_secs(60),
        || {
            let zombies = c.exec("grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l");
            (zombies == "0").then_some(())
        },
    );
    c.stop(10);
    assert_eq!(
        c.exit_code(),
        128 + libc::SIGTERM,
        "sleep got the forwarded SIGTERM"
    );
}

#[test]
fn docker_kill_hup_reaches_the_app() {
    if !engine_available() {
        return;
    }
    let script =
        "trap 'touch /tmp/hup' HUP; trap 'exit 0' TERM; touch /tmp/up; while :; do sleep 0.1; done";
    let c = Container::run("hup", &["--", "/bin/sh", "-c", script]);
    c.wait_until("the app to start", "test -e /tmp/up");
    docker_ok(&["kill", "-s", "HUP", &c.name]);
    c.wait_until("the app to see HUP", "test -e /tmp/hup");
    c.stop(10);
    assert_eq!(c.exit_code(), 0);
}

/// `docker run --init` as dockerd does it: the init binary bind-mounted
/// read-only at /sbin/docker-init and run as `/sbin/docker-init -- CMD...`
/// (this reproduces it without reconfiguring the machine's daemon). Drain
/// options can only come from `DRAINIT_*` variables there.
fn run_as_docker_init(test: &str, env: &[&str], cmd: &[&str]) -> Container {
    let mount = format!("{}:/sbin/docker-init:ro", built().drainit.display());
    let mut options = vec!["--entrypoint", "/sbin/docker-init", "-v", &mount];
    for var in env {
        options.extend(["-e", var]);
    }
    let mut args = vec!["--"];
    args.extend_from_slice(cmd);
    Container::run_with(test, &options, image(), &args)
}

#[test]
fn as_docker_init_a_draining_app_stops_with_0() {
    if !engine_available() {
        return;
    }
    let c = run_as_docker_init(
        "init-drain",
        &[
            "DRAINIT_GRACE=20s",
            "DRAINIT_DRAIN_URL=http://127.0.0.1:8080/drain",
        ],
        &["/drain_demo"],
    );
    c.wait_until(
        "the demo app to answer",
        "wget -qO- http://127.0.0.1:8080/drain 2>&1 | grep -q 503",
    );
    // PID 1 is the mounted init, as with `docker run --init`.
    assert_eq!(c.exec("readlink /proc/1/exe"), "/sbin/docker-init");
    let took = c.stop(30);
    assert_eq!(c.exit_code(), 0, "{}", c.logs());
    assert!(c.logs().contains("\"outcome\":\"drained\""), "{}", c.logs());
    assert!(took >= Duration::from_secs(3), "docker stop took {took:?}");
    assert!(took < Duration::from_secs(25), "docker stop took {took:?}");
}

#[test]
fn as_docker_init_a_stuck_app_stops_with_124_at_the_grace() {
    if !engine_available() {
        return;
    }
    let c = run_as_docker_init(
        "init-stuck",
        &[
            "DRAINIT_GRACE=2s",
            "DRAINIT_DRAIN_URL=http://127.0.0.1:9/drain",
        ],
        &[
            "/bin/sh",
            "-c",
            "trap '' TERM; touch /tmp/up; while :; do sleep 1; done",
        ],
    );
    c.wait_until("the app to start", "test -e /tmp/up");
    let took = c.stop(20);
    assert_eq!(c.exit_code(), 124, "{}", c.logs());
    // The grace, not the runtime's -t 20; >= 1 s of tolerance either side.
    assert!(took >= Duration::from_secs(1), "docker stop took {took:?}");
    assert!(took < Duration::from_secs(10), "docker stop took {took:?}");
    let _ = writeln!(
        std::io::stderr(),
        "container: as docker-init, deadline stop took {} ms (DRAINIT_GRACE=2s)",
        took.as_millis()
    );
}

#[test]
fn the_release_image_holds_only_drainit() {
    if !engine_available() {
        return;
    }
    let b = built();
    let binary = std::fs::metadata(&b.drainit).unwrap().len();
    let size: u64 = docker_ok(&["image", "inspect", "-f", "{{.Size}}", &b.release])
        .parse()
        .unwrap();
    assert!(size <= 2_097_152, "release image {size} bytes, over 2 MiB");
    assert!(size >= binary, "{size} < the binary's {binary}");
    // One layer with one file: nothing but /drainit (plus tar framing).
    assert!(size < binary + 8192, "image {size} bytes, binary {binary}");
    let layers = docker_ok(&[
        "image",
        "inspect",
        "-f",
        "{{len .RootFS.Layers}}",
        &b.release,
    ]);
    assert_eq!(layers, "1");
    let out = docker_ok(&["run", "--rm", &b.release, "--version"]);
    assert!(out.starts_with("drainit "), "{out}");
    assert!(out.contains(" - git."), "{out}");
    let _ = writeln!(
        std::io::stderr(),
        "container: release image {size} bytes (binary {binary})"
    );
}

#[test]
fn a_container_that_fails_to_start_is_removed() {
    if !engine_available() {
        return;
    }
    let image = image(); // a failed build must fail the test, not pass it
    let name = format!("drainit-test-{}-nostart", run_id());
    // The runtime creates the container, then fails to start it.
    let result = std::panic::catch_unwind(|| {
        Container::run_with("nostart", &["--entrypoint", "/no/such/init"], image, &[])
    });
    assert!(result.is_err(), "the container should not start");
    let left = docker_ok(&["ps", "-a", "-q", "--filter", &format!("name=^{name}$")]);
    assert_eq!(left, "", "a Created container was left behind");
}

#[test]
fn leftovers_of_a_killed_run_are_swept() {
    if !engine_available() {
        return;
    }
    let image = image();
    // A PID that belonged to a process that has exited: a "killed run".
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let ns = pid_namespace();
    let name = format!("drainit-test-{pid}.{ns}-leftover");
    let tag = format!("drainit-test:{pid}.{ns}-1");
    // The same dead PID from another PID namespace is another run's.
    let foreign = format!("drainit-test:{pid}.{}-1", ns + 1);
    docker_ok(&["create", "--name", &name, image]);
    docker_ok(&["tag", image, &tag]);
    docker_ok(&["tag", image, &foreign]);
    sweep_leftovers_of_dead_runs();
    let left = docker_ok(&["ps", "-a", "-q", "--filter", &format!("name=^{name}$")]);
    let tags = docker_ok(&["images", "-q", &tag]);
    let foreign_kept = docker_ok(&["images", "-q", &foreign]);
    // Clean up even if the sweep missed them, then judge.
    let _ = docker(&["rm", "-f", &name]);
    let _ = docker(&["rmi", &tag]);
    let _ = docker(&["rmi", &foreign]);
    assert_eq!(left, "", "the leftover container was not removed");
    assert_eq!(tags, "", "the leftover image tag was not removed");
    assert_ne!(foreign_kept, "", "another namespace's image was removed");
    // This run's own image is alive and untouched.
    docker_ok(&["image", "inspect", "-f", "{{.Id}}", image]);
}

/// An image FROM the test image (itself FROM scratch: drainit, busybox,
/// drain_demo) whose HEALTHCHECK is `drainit --probe` of `path` on
/// drainit's own listener at 127.0.0.1:8080; built once per path.
fn health_image(path: &'static str) -> String {
    static HEALTH_IMAGES: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());
    let mut built_images = HEALTH_IMAGES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, tag)) = built_images.iter().find(|(p, _)| *p == path) {
        return tag.clone();
    }
    let tag = unique_tag("drainit-test");
    let context = Scratch::new("health-image");
    std::fs::write(
        context.file("Dockerfile"),
        format!(
            "FROM {}\n\
             HEALTHCHECK --interval=1s --timeout=3s --retries=2 \
             CMD [\"/drainit\", \"--probe\", \"http://127.0.0.1:8080{path}\"]\n",
            image()
        ),
    )
    .unwrap();
    build_image(&tag, &context.path, None);
    built_images.push((path, tag.clone()));
    tag
}

impl Container {
    fn health(&self) -> String {
        docker_ok(&["inspect", "-f", "{{.State.Health.Status}}", &self.name])
    }

    /// The exit codes of the health checks run so far.
    fn health_codes(&self) -> Vec<i32> {
        docker_ok(&[
            "inspect",
            "-f",
            "{{range .State.Health.Log}}{{.ExitCode}} {{end}}",
            &self.name,
        ])
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
    }

    fn wait_health(&self, want: &str) -> Duration {
        let start = Instant::now();
        wait_for(&format!("health {want}"), Duration::from_secs(90), || {
            let now = self.health();
            assert!(
                now == want || now == "starting",
                "health {now}, waiting for {want}: {}",
                self.logs()
            );
            (now == want).then(|| start.elapsed())
        });
        start.elapsed()
    }
}

/// The image's HEALTHCHECK runs `drainit --probe` of drainit's own
/// /healthz (`--serve 127.0.0.1:8080`): the container becomes `healthy`;
/// every check exited 0; `docker stop` still ends with 0.
#[test]
fn a_probe_healthcheck_of_healthz_makes_the_container_healthy() {
    if !engine_available() {
        return;
    }
    let script = "trap 'exit 0' TERM; touch /tmp/up; while :; do sleep 0.1; done";
    let c = Container::run_with(
        "health-ok",
        &[],
        &health_image("/healthz"),
        &["--serve", "127.0.0.1:8080", "--", "/bin/sh", "-c", script],
    );
    c.wait_until("the app to start", "test -e /tmp/up");
    let took = c.wait_health("healthy");
    let codes = c.health_codes();
    assert!(
        !codes.is_empty() && codes.iter().all(|&c| c == 0),
        "{codes:?}"
    );
    let out = docker_ok(&[
        "inspect",
        "-f",
        "{{range .State.Health.Log}}{{.Output}}{{end}}",
        &c.name,
    ]);
    assert!(out.contains("healthy: HTTP 200"), "{out}");
    c.stop(10);
    assert_eq!(c.exit_code(), 0, "{}", c.logs());
    let _ = writeln!(
        std::io::stderr(),
        "container: healthy {} ms after the app started (interval 1 s)",
        took.as_millis()
    );
}

/// The same check against /readyz of a `--notify` drainit whose app never
/// sends READY=1 (503 "starting"): the container becomes `unhealthy`, and
/// every failed check exited 1, never 2.
#[test]
fn a_probe_healthcheck_of_a_503_makes_the_container_unhealthy() {
    if !engine_available() {
        return;
    }
    let script = "trap 'exit 0' TERM; touch /tmp/up; while :; do sleep 0.1; done";
    let c = Container::run_with(
        "health-503",
        &[],
        &health_image("/readyz"),
        &[
            "--serve",
            "127.0.0.1:8080",
            "--notify",
            "--",
            "/bin/sh",
            "-c",
            script,
        ],
    );
    c.wait_until("the app to start", "test -e /tmp/up");
    let took = c.wait_health("unhealthy");
    let codes = c.health_codes();
    assert!(codes.len() >= 2, "{codes:?}");
    assert!(codes.iter().all(|&c| c == 1), "{codes:?}");
    let out = docker_ok(&[
        "inspect",
        "-f",
        "{{range .State.Health.Log}}{{.Output}}{{end}}",
        &c.name,
    ]);
    assert!(out.contains("unhealthy: HTTP 503"), "{out}");
    // The check is the app's readiness, not drainit's: it still runs.
    assert!(c.exec_ok("test -e /tmp/up"));
    c.stop(10);
    assert_eq!(c.exit_code(), 0, "{}", c.logs());
    let _ = writeln!(
        std::io::stderr(),
        "container: unhealthy {} ms after the app started (interval 1 s, retries 2)",
        took.as_millis()
    );
}

/// Dockerfile.example's final stage, line for line (its build stage is
/// replaced by the test image, which holds the same two binaries: no
/// registry here for `rust:1-bookworm`): its HEALTHCHECK, `drainit --probe`
/// of drainit's own /healthz, makes the container `healthy`, and
/// `docker stop -t 30` drains the demo app to exit 0.
#[test]
fn dockerfile_example_becomes_healthy_and_drains() {
    if !engine_available() {
        return;
    }
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile.example"))
            .unwrap();
    let final_stage = example
        .split("# ---- stage 2")
        .nth(1)
        .expect("Dockerfile.example has a stage 2");
    assert!(final_stage.contains("HEALTHCHECK"), "{final_stage}");
    let tag = unique_tag("drainit-test-example");
    let context = Scratch::new("example-image");
    std::fs::write(
        context.file("Dockerfile"),
        format!("FROM {} AS drainit\n# ---- stage 2{final_stage}", image()),
    )
    .unwrap();
    build_image(&tag, &context.path, None);
    let c = Container::run_with("example", &[], &tag, &[]);
    let took = c.wait_health("healthy");
    let stopped = c.stop(30);
    assert_eq!(c.exit_code(), 0, "{}", c.logs());
    assert!(c.logs().contains("\"outcome\":\"drained\""), "{}", c.logs());
    let _ = writeln!(
        std::io::stderr(),
        "Dockerfile.example: healthy after {} ms, docker stop took {} ms",
        took.as_millis(),
        stopped.as_millis()
    );
    drop(c);
    let _ = docker(&["rmi", "-f", &tag]);
}

/// `DRAINIT_CHECK=1` on an image whose `ENTRYPOINT` ends in `--` (so a
/// `--check` after the image name would be the program): the check of the
/// configuration the container would run with, the program never started,
/// the summary saying why; and inside a running container, the `--serve`
/// address the running drainit holds is no error.
#[test]
fn drainit_check_checks_an_image_whose_entrypoint_ends_in_dashes() {
    if !engine_available() {
        return;
    }
    let tag = unique_tag("drainit-test-check");
    let context = Scratch::new("check-image");
    std::fs::write(
        context.file("Dockerfile"),
        format!(
            "FROM {}\n\
             ENV DRAINIT_SERVE=127.0.0.1:9090\n\
             ENTRYPOINT [\"/drainit\", \"--\"]\n\
             CMD [\"/bin/touch\", \"/tmp/started\"]\n",
            image()
        ),
    )
    .unwrap();
    build_image(&tag, &context.path, None);

    let c = Container::run_with("check", &["-e", "DRAINIT_CHECK=1"], &tag, &[]);
    let code = docker_ok(&["wait", &c.name]);
    let logs = c.logs();
    assert_eq!(code, "0", "{logs}");
    let last = logs.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ok: 0 errors")
            && last.ends_with("the program was not started because DRAINIT_CHECK is set"),
        "{logs}"
    );
    let changed = docker_ok(&["diff", &c.name]);
    assert!(
        !changed.contains("/tmp/started"),
        "the program ran: {changed}"
    );

    // A running container, checked from inside.
    let running = Container::run_with("check-exec", &[], &tag, &["/bin/sleep", "600"]);
    running.wait_until(
        "the listener",
        "wget -q -O /dev/null http://127.0.0.1:9090/healthz",
    );
    let out = docker(&[
        "exec",
        "-e",
        "DRAINIT_CHECK=1",
        &running.name,
        "/drainit",
        "--",
        "/bin/true",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "info: --serve 127.0.0.1:9090 is in use: the drainit running as PID 1 holds it"
        ),
        "{stdout}"
    );
}
