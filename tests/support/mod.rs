//! Test harness for running the real drainit binary: as PID 1 of a fresh PID
//! namespace (`unshare --pid --fork --mount-proc`) or directly as a
//! subreaper, with scratch directories, /proc readers and event waits.
//! Every wait polls for an event with a generous timeout; none relies on a
//! fixed sleep being long enough.

#![allow(dead_code)]

pub mod k8s_api;
pub mod server;

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const DRAINIT: &str = env!("CARGO_BIN_EXE_drainit");

/// The standard signals (1-31) the forwarding tests send for the child to
/// record: all but those no one can catch (KILL, STOP), drainit's own
/// (CHLD), the faults (ILL, TRAP, ABRT, BUS, FPE, SEGV, SYS: see
/// tests/signals.rs) and a terminal's job control (TTIN, TTOU).
pub fn forwarded() -> Vec<i32> {
    use libc::*;
    let not = [
        SIGKILL, SIGSTOP, SIGCHLD, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS,
        SIGTTIN, SIGTTOU,
    ];
    (1..=31).filter(|n| !not.contains(n)).collect()
}

/// A shell script that appends the number of each signal of `signals` to
/// `$D/got` as it comes, touches `$D/ready`, and exits 0 at `$D/stop`.
pub fn recorder_of(signals: &[i32]) -> String {
    let traps: String = signals
        .iter()
        .map(|n| format!("trap 'echo {n} >> \"$D/got\"' {n}; "))
        .collect();
    format!("{traps} touch \"$D/ready\"; while [ ! -e \"$D/stop\" ]; do sleep 0.02; done; exit 0")
}

/// Sends each of `signals` to `d` in turn, waiting for the child (a
/// `recorder_of` them) to record it before the next.
pub fn each_recorded(d: &Drainit, scratch: &Scratch, signals: &[i32]) {
    for (count, signo) in signals.iter().enumerate() {
        d.signal(*signo);
        wait_for(&format!("child to record signal {signo}"), PATIENCE, || {
            (scratch.read("got").lines().count() > count).then_some(())
        });
        let last = scratch.read("got").lines().last().map(str::to_string);
        assert_eq!(last, Some(signo.to_string()), "signal {signo}");
    }
}

/// The exit report (`--exit-report`) drainit wrote at `path`, parsed; a
/// report that does not parse fails the test with its text.
pub fn exit_report(path: impl AsRef<Path>) -> serde_json::Value {
    let path = path.as_ref();
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("report {text:?}: {e}"))
}

/// The write calls `pid` has made so far, failed ones too (`syscw` of
/// `/proc/PID/io`): each try at a full or closed pipe counts.
pub fn write_calls(pid: i32) -> u64 {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no syscw in {io:?}"))
}

/// A port free on 127.0.0.1 a moment ago, for drainit's `--serve`.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One GET to 127.0.0.1:`port` (the health listener): the status code and
/// the body, or None while nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut data = String::new();
    stream.read_to_string(&mut data).ok()?;
    let (head, body) = data.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// True when `found`; otherwise the tests of `suite` skip, with one line
/// naming what is missing and how to get it, or fail when the variable
/// `require` is set to 1 (as `.ci/run` sets them all).
pub fn or_skip(found: bool, suite: &str, missing: &str, require: &str) -> bool {
    if !found {
        assert!(
            std::env::var(require).as_deref() != Ok("1"),
            "{require}=1 but {missing}"
        );
        // Written to stderr itself, not captured with the test's output.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "*** {suite} SKIPPED: {missing} (set {require}=1 to make this a failure) ***"
        );
    }
    found
}

/// True when `name` is an executable file in a directory of `PATH`.
pub fn has_command(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// True when python3 imports every module of `modules` (`"a, b"`), asked
/// once per test binary and modules.
pub fn python_imports(modules: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ASKED: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let mut asked = ASKED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    *asked.entry(modules.to_string()).or_insert_with(|| {
        Command::new("python3")
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Generous: a noisy 2-core CI machine can stall for seconds.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `check` every few milliseconds until it returns Some, or panics
/// with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A scratch directory removed on drop.
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "drainit-test-{}-{}-{}",
            std::process::id(),
            name,
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create scratch dir");
        Scratch { path }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.file(name)).unwrap_or_default()
    }

    /// Waits until the file exists and returns its contents.
    pub fn wait_file(&self, name: &str) -> String {
        let path = self.file(name);
        wait_for(&format!("file {}", path.display()), PATIENCE, || {
            path.exists()
                .then(|| fs::read_to_string(&path).unwrap_or_default())
        })
    }

    /// The number a process writes into `name`, once it is all there: a
    /// file can be seen between its creation and its write.
    pub fn wait_number<T: std::str::FromStr>(&self, name: &str) -> T {
        let path = self.file(name);
        wait_for(&format!("a number in {}", path.display()), PATIENCE, || {
            fs::read_to_string(&path)
                .ok()
                .and_then(|text| text.trim().parse().ok())
        })
    }

    pub fn touch(&self, name: &str) {
        fs::write(self.file(name), b"").expect("touch");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// A running drainit, either as PID 1 of its own namespace or directly.
pub struct Drainit {
    child: Child,
    /// drainit's PID as seen from the test (outside the namespace); None
    /// when it had already finished before the test looked.
    pid: Option<i32>,
    namespace: bool,
    stderr_path: PathBuf,
    _scratch: Scratch,
    status: Option<ExitStatus>,
}

/// Every catchable signal but the C libraries' own (32-34, which `signal`
/// refuses) back to its default action, the mask emptied.
fn reset_dispositions() -> std::io::Result<()> {
    for signo in (1..=64).filter(|s| ![libc::SIGKILL, libc::SIGSTOP, 32, 33, 34].contains(s)) {
        // SAFETY: async-signal-safe calls in the forked child.
        unsafe { libc::signal(signo, libc::SIG_DFL) };
    }
    // SAFETY: as above; an empty set.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    Ok(())
}

/// Builds a drainit invocation.
pub struct Launch {
    program: String,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    namespace: bool,
    pre_exec: Option<Box<dyn FnMut() -> std::io::Result<()> + Send + Sync>>,
}

pub fn drainit<I, S>(args: I) -> Launch
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    Launch {
        program: DRAINIT.to_string(),
        args: args.into_iter().map(|s| s.as_ref().to_string()).collect(),
        envs: Vec::new(),
        namespace: true,
        pre_exec: None,
    }
}

impl Launch {
    /// Appends arguments (used when the test builds the launch first).
    pub fn with_args(mut self, args: Vec<String>) -> Launch {
        self.args.extend(args);
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Launch {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Runs another drainit build (see `built`) instead of the debug one.
    pub fn binary(mut self, path: &str) -> Launch {
        self.program = path.to_string();
        self
    }

    /// Run drainit directly (it is then not PID 1 and acts as a subreaper).
    pub fn not_pid1(mut self) -> Launch {
        self.namespace = false;
        self
    }

    /// Code to run in the forked process just before exec (signal state).
    pub fn before_exec(
        mut self,
        f: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Launch {
        self.pre_exec = Some(Box::new(f));
        self
    }

    fn command(&self) -> Command {
        let mut command = if self.namespace {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc", "--kill-child"]);
            c.arg(&self.program);
            c
        } else {
            Command::new(&self.program)
        };
        command.args(&self.args);
        // Keep the test's own DRAINIT_/TINI_ settings, and the variables
        // that say which platform this is, from leaking in.
        for (key, _) in std::env::vars() {
            if [
                "DRAINIT_",
                "TINI_",
                "ECS_",
                "DUMB_INIT_",
                "KUBERNETES_",
                "FLY_",
                "NOMAD_",
                "K_SERVICE",
                "CLOUD_RUN_",
                "CONTAINER_APP_",
            ]
            .iter()
            .any(|prefix| key.starts_with(prefix))
            {
                command.env_remove(key);
            }
        }
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        command
    }

    pub fn start(mut self) -> Drainit {
        let scratch = Scratch::new("drainit-stderr");
        let stderr_path = scratch.file("stderr");
        let mut command = self.command();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr_path).expect("stderr file"));
        // A known start: whatever the test runner inherited (`nohup` ignores
        // SIGHUP, some CI shells ignore SIGINT/SIGQUIT) must not reach
        // drainit, whose child inherits it. Then the test's own set-up.
        // SAFETY: test-only; plain libc calls between fork and exec.
        unsafe {
            command.pre_exec(reset_dispositions);
        }
        if let Some(f) = self.pre_exec.take() {
            // SAFETY: test-only; the closures make plain libc calls.
            unsafe {
                command.pre_exec(f);
            }
        }
        let child = command.spawn().unwrap_or_else(|e| {
            panic!("cannot start drainit (is util-linux unshare installed?): {e}")
        });
        let outer = child.id() as i32;
        let pid = if self.namespace {
            // drainit is unshare's only child. A quick run may be over before
            // we look, so "unshare already exited" is fine here; wait_code()
            // fails loudly if unshare itself could not make the namespace.
            wait_for("drainit to start inside unshare", PATIENCE, || {
                match (children_of(outer).first(), proc_state(outer)) {
                    (Some(&pid), _) => Some(Some(pid)),
                    (None, Some('Z')) | (None, None) => Some(None),
                    (None, _) => None,
                }
            })
        } else {
            Some(outer)
        };
        Drainit {
            child,
            pid,
            namespace: self.namespace,
            stderr_path,
            _scratch: scratch,
            status: None,
        }
    }

    /// Runs to completion and returns the exit code and stderr.
    pub fn run(self) -> (i32, String) {
        let mut d = self.start();
        let code = d.wait_code();
        (code, d.stderr())
    }
}

impl Drainit {
    /// drainit's PID as the test sees it.
    pub fn pid(&self) -> i32 {
        self.pid
            .expect("drainit exited before the test could see it")
    }

    pub fn signal(&self, signo: i32) {
        // SAFETY: kill has no memory effects.
        let rc = unsafe { libc::kill(self.pid(), signo) };
        assert_eq!(rc, 0, "kill({}, {signo}) failed", self.pid());
    }

    /// Translates a PID printed inside drainit's namespace (e.g. a shell's
    /// `$!`) to the PID the test sees, by matching NSpid within the same
    /// PID namespace.
    pub fn outer_pid(&self, inner: i32) -> i32 {
        if !self.namespace {
            return inner;
        }
        let ns =
            fs::read_link(format!("/proc/{}/ns/pid", self.pid())).expect("drainit's pid namespace");
        wait_for(&format!("outer pid of {inner}"), PATIENCE, || {
            fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
                let p: i32 = entry.file_name().to_str()?.parse().ok()?;
                if fs::read_link(format!("/proc/{p}/ns/pid")).ok()? != ns {
                    return None;
                }
                let nspid = status_field(p, "NSpid")?;
                (nspid.split_whitespace().last()?.parse::<i32>().ok()? == inner).then_some(p)
            })
        })
    }

    /// Waits for drainit to exit and returns its exit code (unshare passes
    /// it through; a signal death is reported as 128+N like a shell).
    pub fn wait_code(&mut self) -> i32 {
        let status = self.wait_status(PATIENCE);
        let stderr = self.stderr();
        assert!(
            !stderr.starts_with("unshare:"),
            "unshare could not create the PID namespace (tests need root): {stderr}"
        );
        assert!(!stderr.contains("panicked"), "drainit panicked: {stderr}");
        status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
    }

    pub fn wait_status(&mut self, timeout: Duration) -> ExitStatus {
        if let Some(status) = self.status {
            return status;
        }
        let child = &mut self.child;
        let status = wait_for("drainit to exit", timeout, || {
            child.try_wait().ok().flatten()
        });
        self.status = Some(status);
        status
    }

    /// Returns Some(exit code) if drainit has already exited.
    pub fn try_code(&mut self) -> Option<i32> {
        let status = self.child.try_wait().ok().flatten()?;
        self.status = Some(status);
        Some(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        )
    }

    pub fn stderr(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.stderr_path) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Processes in drainit's PID namespace, drainit itself aside (its own
    /// arguments may name them), whose command line (arguments joined by
    /// spaces) contains `marker`, as (outer pid, state letter).
    pub fn processes_with(&self, marker: &str) -> Vec<(i32, char)> {
        let Ok(ns) = fs::read_link(format!("/proc/{}/ns/pid", self.pid())) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let Ok(entries) = fs::read_dir("/proc") else {
            return out;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if pid == self.pid()
                || fs::read_link(format!("/proc/{pid}/ns/pid")).ok().as_ref() != Some(&ns)
            {
                continue;
            }
            let mut cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            for b in &mut cmdline {
                if *b == 0 {
                    *b = b' ';
                }
            }
            if String::from_utf8_lossy(&cmdline).contains(marker) {
                out.push((pid, proc_state(pid).unwrap_or('?')));
            }
        }
        out
    }

    /// The main child's PID (outside view): drainit's first live child.
    pub fn wait_child(&self) -> i32 {
        wait_for("drainit's child", PATIENCE, || {
            children_of(self.pid()).first().copied()
        })
    }
}

impl Drop for Drainit {
    fn drop(&mut self) {
        if self.status.is_none() {
            // SAFETY: test clean-up; unshare --kill-child takes drainit along.
            unsafe {
                if let Some(pid) = self.pid {
                    libc::kill(pid, libc::SIGKILL);
                }
                libc::kill(self.child.id() as i32, libc::SIGKILL);
            }
            let _ = self.child.wait();
        }
    }
}

/// A release build of drainit other than the debug binary cargo test built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Build {
    /// What ships in images: static musl, release profile.
    Static,
    /// The glibc release build (`cargo build --release`, `cargo install`).
    Glibc,
    /// Static musl release with the `fault-injection` feature (test hooks).
    StaticFaults,
    /// glibc release with the `fault-injection` feature.
    GlibcFaults,
}

/// Builds (once per test run, into its own target dir) and returns the path
/// of a release drainit binary.
/// `unshare --pid --fork --mount-proc --kill-child BINARY`: the binary as
/// PID 1 of a fresh PID namespace, for a test that sets the command's
/// streams itself (`drainit()` sets them for the others).
pub fn as_pid1(binary: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new("unshare");
    command
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(binary);
    command
}

pub fn built(build: Build) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static BUILT: OnceLock<Mutex<HashMap<Build, String>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(&build) {
        return path.clone();
    }
    let (target, faults) = match build {
        Build::Static => (Some("x86_64-unknown-linux-musl"), false),
        Build::Glibc => (None, false),
        Build::StaticFaults => (Some("x86_64-unknown-linux-musl"), true),
        Build::GlibcFaults => (None, true),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir_name = format!(
        "release-{}{}",
        target.unwrap_or("glibc"),
        if faults { "-faults" } else { "" }
    );
    let target_dir = root.join("target").join(dir_name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["build", "--release", "--bin", "drainit", "--target-dir"])
        .arg(&target_dir);
    if let Some(target) = target {
        command.args(["--target", target]);
    }
    if faults {
        command.args(["--features", "fault-injection"]);
    }
    let status = command.status().expect("run cargo");
    assert!(
        status.success(),
        "release build {build:?} failed (static builds need: rustup target add x86_64-unknown-linux-musl)"
    );
    let mut path = target_dir;
    if let Some(target) = target {
        path = path.join(target);
    }
    let path = path
        .join("release")
        .join("drainit")
        .to_string_lossy()
        .into_owned();
    built.insert(build, path.clone());
    path
}

/// An example program built once per test run into its own target dir
/// (the outer `cargo test` owns the default one, and `cargo test --test X`
/// does not build examples); its path.
fn example(name: &'static str) -> String {
    use std::sync::Mutex;
    static BUILT: Mutex<Vec<(&str, String)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, path)) = built.iter().find(|(n, _)| *n == name) {
        return path.clone();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target_dir = root.join("target").join("helpers");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["build", "--release", "--example", name, "--target-dir"])
        .arg(&target_dir)
        .status()
        .expect("run cargo");
    assert!(status.success(), "building examples/{name}.rs failed");
    let path = target_dir.join("release").join("examples").join(name);
    let path = path.to_str().expect("utf-8 path").to_string();
    built.push((name, path.clone()));
    path
}

/// The helper child `examples/stress.rs`.
pub fn stress_helper() -> String {
    example("stress")
}

/// `examples/notify_send.rs`, an sd_notify sender.
pub fn notify_sender() -> String {
    example("notify_send")
}

/// Runs drainit with bad `flags`/`vars` in front of a child that would
/// leave a marker file, and asserts the usage-error contract: exit 2, one
/// line on stderr naming `needle`, and the child never started.
pub fn assert_usage_error(flags: &[&str], vars: &[(&str, &str)], needle: &str) {
    let scratch = Scratch::new("usage");
    let marker = scratch.file("started");
    let mut launch = drainit(
        flags
            .iter()
            .copied()
            .chain(["/bin/touch", path_str(&marker)]),
    )
    .not_pid1();
    for (k, v) in vars {
        launch = launch.env(k, v);
    }
    let (code, stderr) = launch.run();
    assert_eq!(code, 2, "{flags:?} {vars:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains(needle), "{stderr:?} should name {needle}");
    assert!(
        !marker.exists(),
        "the child must not start for {flags:?} {vars:?}"
    );
}

/// Children of `pid`, from /proc (all threads).
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(text) = fs::read_to_string(task.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
    }
    out
}

/// Fields of /proc/PID/stat after the command name.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 2..];
    Some(after.split_whitespace().map(String::from).collect())
}

/// The one-letter state (R, S, Z...) of a process, None if it is gone.
pub fn proc_state(pid: i32) -> Option<char> {
    stat_fields(pid)?.first()?.chars().next()
}

pub fn parent_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// A field of /proc/PID/status, e.g. "voluntary_ctxt_switches".
pub fn status_field(pid: i32, name: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(':')
            .map(|v| v.trim().to_string())
    })
}

/// Zombie children of `pid`, scanning every process's parent in /proc
/// (the `children` file omits nothing, but zombies are what we want to see).
pub fn zombie_children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(fields) = stat_fields(p) {
                if fields.first().map(String::as_str) == Some("Z")
                    && fields.get(1).and_then(|s| s.parse().ok()) == Some(pid)
                {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// A hex signal-set field of /proc/PID/status (SigBlk, SigIgn, ShdPnd...).
/// The child of the `-g` tests (see `usr1_reached_the_grandchild`).
pub const GROUP_CHILD: &str = "trap 'touch \"$D/child-got\"' USR1; sleep 600 & echo $! > \"$D/grandchild\"; \
     touch \"$D/ready\"; while [ ! -e \"$D/stop\" ]; do sleep 0.02; done; kill $! 2>/dev/null; exit 0";

/// For the `-g` tests: drainit runs a child that started a grandchild in
/// its group, wrote its pid to `grandchild` and touched `ready`, traps USR1
/// by touching `child-got`, and exits 0 once `stop` exists. Sends USR1 to
/// drainit and says whether it reached the grandchild too.
pub fn usr1_reached_the_grandchild(mut d: Drainit, scratch: &Scratch) -> bool {
    scratch.wait_file("ready");
    let grandchild = d.outer_pid(scratch.read("grandchild").trim().parse().unwrap());
    d.signal(libc::SIGUSR1);
    scratch.wait_file("child-got");
    // drainit signals the group (or not) in one kill() before the child can
    // run its trap, so by now USR1 has either ended the grandchild (its
    // default action) or it never will.
    let reached = match proc_state(grandchild) {
        None | Some('Z') => true,
        _ => sigset_has(&status_field(grandchild, "ShdPnd").unwrap(), libc::SIGUSR1),
    };
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    reached
}

pub fn sigset_has(mask_hex: &str, signo: i32) -> bool {
    u64::from_str_radix(mask_hex.trim(), 16)
        .map(|m| m & (1u64 << (signo - 1)) != 0)
        .unwrap_or(false)
}

/// `sh -c SCRIPT` as drainit arguments, with the scratch dir in `$D`.
pub fn sh(scratch: &Scratch, script: &str) -> Vec<String> {
    vec![
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        format!("D='{}'; {script}", scratch.path.display()),
    ]
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

pub fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// Where a pod's service-account directory is mounted (`io::k8s::SA_DIR`).
pub const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Code for `Launch::before_exec` (or `CommandExt::pre_exec`): gives the
/// process a mount namespace of its own in which `dir` is the pod's
/// service-account directory at its standard path (a tmpfs over /var/run,
/// the path made in it, `dir` bind-mounted there), so drainit reads what
/// the test writes into `dir`, token rotations included. Needs root.
pub fn service_account_at(dir: &Path) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    use std::ffi::CString;
    let c = |s: &str| CString::new(s).unwrap();
    let source = c(path_str(dir));
    let mut parts = Vec::new();
    let mut at = String::from("/var/run");
    for part in SA_DIR.trim_start_matches("/var/run/").split('/') {
        at.push('/');
        at.push_str(part);
        parts.push(c(&at));
    }
    let (none, root, run, tmpfs, target) =
        (c("none"), c("/"), c("/var/run"), c("tmpfs"), c(SA_DIR));
    move || {
        let fail = || Err(std::io::Error::last_os_error());
        // SAFETY: plain syscalls with C strings made before the fork; they
        // change only this process's view of the mounts.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            if libc::mount(
                none.as_ptr(),
                root.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            if libc::mount(
                tmpfs.as_ptr(),
                run.as_ptr(),
                tmpfs.as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            for part in &parts {
                if libc::mkdir(part.as_ptr(), 0o755) != 0 {
                    return fail();
                }
            }
            if libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
        }
        Ok(())
    }
}

/// The threads of `pid` by name, sorted.
pub fn thread_names(pid: i32) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task")
        .filter_map(|t| {
            let comm = t.ok()?.path().join("comm");
            Some(fs::read_to_string(comm).ok()?.trim().to_string())
        })
        .collect();
    names.sort();
    names
}
