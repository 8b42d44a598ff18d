//! `drainit --check`: a client run, like `--probe`, that checks a run's
//! configuration without starting it. The configuration was validated
//! before (a bad option is the one `error:` line); here the program is
//! found, every host is looked up, each drain source is asked once, and
//! the exit report's path and `--serve`'s address are tried. One line per
//! finding on stdout (`ok:`, `info:`, `warn:`, `error:`); true (exit 0)
//! when no line is a warning or an error.
//!
//! Nothing is sent that would change the app: stop URLs, stop commands and
//! ECS task protection are never used, only their hosts looked up.

use std::io::Write;
use std::time::Duration;

use crate::core::settings::{Cmd, Config, Notice};
use crate::core::sources::exec::public_command;
use crate::core::sources::url::{public_url, WRONG_URL};
use crate::proto::drain_body;
use crate::proto::http::{parse_url, Target};
use crate::util::text::escape;

/// How long one lookup, one request or one drain command may take.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    /// Cannot be told now (nothing listens yet); not a failure.
    Info,
    Warn,
    Error,
}

/// The findings said so far, and whether one of them fails the check.
struct Findings {
    failed: bool,
}

impl Findings {
    /// One finding, on stdout at once (a slow ask shows where it is).
    fn say(&mut self, level: Level, text: std::fmt::Arguments<'_>) {
        let word = match level {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.failed |= matches!(level, Level::Warn | Level::Error);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{word}: {text}");
        let _ = out.flush();
    }
}

/// Checks `config`; true when nothing is wrong.
pub fn run(config: &Config) -> bool {
    let mut findings = Findings { failed: false };
    findings.say(
        Level::Ok,
        format_args!("the options and variables are valid"),
    );
    for notice in &config.notices {
        match notice {
            Notice::Info(text) => findings.say(Level::Info, format_args!("{text}")),
            Notice::Warn(text) => findings.say(Level::Warn, format_args!("{text}")),
        }
    }
    program(config, &mut findings);
    files(config, &mut findings);
    hosts(config, &mut findings);
    for url in &config.drain_urls {
        drain_url(url, &config.drain_field, &mut findings);
    }
    for cmd in &config.drain_execs {
        drain_exec(cmd, config.drain_timeout, &mut findings);
    }
    if let Some(url) = &config.ready_url {
        ready_url(url, &mut findings);
    }
    if let Some(uri) = config.ecs.as_ref().and_then(|e| e.metadata_uri.as_ref()) {
        metadata(uri, &mut findings);
    }
    !findings.failed
}

/// PROGRAM, when given: found on `PATH` and executable, as the run would
/// start it.
fn program(config: &Config, findings: &mut Findings) {
    if config.program.is_empty() {
        findings.say(Level::Info, format_args!("no PROGRAM given: not checked"));
        return;
    }
    let name = config.program.to_string_lossy();
    let path = std::env::var("PATH").ok();
    // Quoted whole, as one word: the program's name is not split.
    let quoted = format!("'{}'", name.replace('\'', r"'\''"));
    let found = crate::io::commands::parse_command(&quoted, path.as_deref());
    match found {
        Ok(cmd) => findings.say(
            Level::Ok,
            format_args!("program {}: {}", escape(&name, 200), cmd.program.display()),
        ),
        Err(e) => findings.say(
            Level::Error,
            format_args!("program {}: {e}", escape(&name, 200)),
        ),
    }
}

/// The exit report's path (its directory is made as the run would), the
/// drain files' directories and `--serve`'s address.
fn files(config: &Config, findings: &mut Findings) {
    if let Some(path) = &config.exit_report {
        match crate::io::report_file::prepare(path) {
            Ok(_) => findings.say(Level::Ok, format_args!("--exit-report {}", path.display())),
            Err(e) => findings.say(
                Level::Error,
                format_args!("--exit-report {}: {e}", path.display()),
            ),
        }
    }
    for file in &config.drain_files {
        let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
        match dir.map(std::path::Path::is_dir) {
            Some(false) => findings.say(
                Level::Warn,
                format_args!(
                    "drain file {}: its directory does not exist (the app must make it)",
                    file.display()
                ),
            ),
            _ if file.exists() => findings.say(
                Level::Info,
                format_args!(
                    "drain file {} exists now: it counts only once written during a stop",
                    file.display()
                ),
            ),
            _ => findings.say(Level::Ok, format_args!("drain file {}", file.display())),
        }
    }
    if let Some(addr) = config.serve {
        match crate::io::serve::bind(addr) {
            Ok(listener) => {
                drop(listener);
                findings.say(Level::Ok, format_args!("--serve {addr} can listen"));
            }
            Err(e) => findings.say(
                Level::Error,
                format_args!("--serve {addr}: cannot listen there: {e}"),
            ),
        }
    }
}

/// Every host name of the run's URLs, each looked up once (IP addresses
/// and `localhost` need no lookup).
fn hosts(config: &Config, findings: &mut Findings) {
    let urls = config
        .drain_urls
        .iter()
        .chain(config.stop_hooks.iter().map(|t| &t.url))
        .chain(&config.ready_url)
        .chain(config.ecs.iter().flat_map(|e| {
            let agent = e.protect.as_ref().map(|p| &p.agent_uri);
            e.metadata_uri.iter().chain(agent)
        }));
    let mut seen: Vec<String> = Vec::new();
    for url in urls.filter_map(|u| parse_url(u).ok()) {
        let host = url.host;
        let literal = host.parse::<std::net::IpAddr>().is_ok()
            || host.eq_ignore_ascii_case("localhost")
            || host.eq_ignore_ascii_case("localhost.");
        if literal || seen.contains(&host) {
            continue;
        }
        // A connection refused means the name did resolve.
        match crate::io::http::connect_only(&host, url.port, ASK_TIMEOUT) {
            Err(f) if matches!(f.kind(), "resolve" | "resolver_busy") => findings.say(
                Level::Warn,
                format_args!("host {} does not resolve: {f}", escape(&host, 100)),
            ),
            _ => findings.say(
                Level::Ok,
                format_args!("host {} resolves", escape(&host, 100)),
            ),
        }
        seen.push(host);
    }
}

/// One GET of `url`, as a drain poll would send it.
fn ask(url: &str) -> Result<crate::proto::http::Response, crate::proto::http::Failure> {
    let target = Target {
        method: "GET".into(),
        url: url.to_string(),
    };
    crate::io::http::send(&target, None, ASK_TIMEOUT)
}

/// A finding for an answer that cannot be judged by its body: nothing
/// listens yet (the app is not running), the URL looks wrong, or no answer.
fn unanswered(
    what: &str,
    result: &Result<crate::proto::http::Response, crate::proto::http::Failure>,
) -> Option<(Level, String)> {
    match result {
        Err(f) if f.kind() == "refused" => Some((
            Level::Info,
            format!("{what}: nothing listens there now (start the app to check its answer)"),
        )),
        Err(f) => Some((Level::Warn, format!("{what}: {f}"))),
        Ok(r) if WRONG_URL.contains(&r.status) => Some((
            Level::Error,
            format!("{what}: HTTP {}: the URL looks wrong", r.status),
        )),
        Ok(_) => None,
    }
}

/// A drain URL, asked once and read by the same rules as during a stop.
fn drain_url(url: &str, pointer: &str, findings: &mut Findings) {
    let what = format!("drain URL {}", escape(&public_url(url), 200));
    let result = ask(url);
    if let Some((level, text)) = unanswered(&what, &result) {
        return findings.say(level, format_args!("{text}"));
    }
    let reading = drain_body::evaluate(&result, pointer);
    let unreadable = reading
        .problem
        .as_ref()
        .is_some_and(|(kind, _)| kind == "bad_json" || kind == "no_boolean");
    if unreadable {
        return findings.say(
            Level::Warn,
            format_args!(
                "{what}: {}: drainit would never see it ready (the boolean is read at {pointer}, --drain-field)",
                reading.summary
            ),
        );
    }
    let state = if reading.ready { "ready" } else { "busy" };
    findings.say(
        Level::Ok,
        format_args!("{what}: {} ({state})", reading.summary),
    );
}

/// A drain command, run once within `timeout` as during a stop.
fn drain_exec(cmd: &Cmd, timeout: Duration, findings: &mut Findings) {
    let what = format!("drain command {}", escape(&public_command(&cmd.text), 200));
    let pid = match crate::io::commands::start(cmd) {
        Ok(pid) => pid,
        Err(e) => return findings.say(Level::Error, format_args!("{what}: cannot start: {e}")),
    };
    let status = match wait_within(pid, timeout) {
        Ok(status) => status,
        Err(why) => return findings.say(Level::Warn, format_args!("{what}: {why}")),
    };
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    match code {
        Some(0) => findings.say(Level::Ok, format_args!("{what}: exit 0 (ready)")),
        Some(code @ (126 | 127)) => findings.say(
            Level::Error,
            format_args!("{what}: exit {code} (its shell could not run a program)"),
        ),
        Some(code) => findings.say(Level::Ok, format_args!("{what}: exit {code} (busy)")),
        None => findings.say(Level::Warn, format_args!("{what}: ended by a signal")),
    }
}

/// The wait status of child `pid` once it ends within `timeout`, polled
/// every `POLL`; past the timeout its process group is killed and reaped,
/// and the error says so.
fn wait_within(pid: i32, timeout: Duration) -> Result<i32, &'static str> {
    const POLL: Duration = Duration::from_millis(10);
    let deadline = std::time::Instant::now() + timeout;
    let mut status = 0;
    loop {
        // SAFETY: waits for the one child started for this check.
        match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
            0 if std::time::Instant::now() < deadline => std::thread::sleep(POLL),
            0 => {
                crate::io::commands::kill_group(pid);
                // SAFETY: as above; it is dying of SIGKILL.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                return Err("ran longer than --drain-timeout and was killed");
            }
            n if n == pid => return Ok(status),
            _ => return Err("could not be waited for"),
        }
    }
}

/// `--ready-url`: 2xx means ready, as `/readyz` reads it.
fn ready_url(url: &str, findings: &mut Findings) {
    let what = format!("--ready-url {}", escape(&public_url(url), 200));
    let result = ask(url);
    if let Some((level, text)) = unanswered(&what, &result) {
        return findings.say(level, format_args!("{text}"));
    }
    let status = result.map_or(0, |r| r.status);
    let state = if (200..300).contains(&status) {
        "ready"
    } else {
        "not ready"
    };
    findings.say(Level::Ok, format_args!("{what}: HTTP {status} ({state})"));
}

/// The ECS task metadata endpoint: asked once, 2xx expected.
fn metadata(uri: &str, findings: &mut Findings) {
    let what = format!("ECS task metadata {}", escape(&public_url(uri), 200));
    match ask(&format!("{}/task", uri.trim_end_matches('/'))) {
        Ok(r) if (200..300).contains(&r.status) => {
            findings.say(Level::Ok, format_args!("{what}: HTTP {}", r.status))
        }
        Ok(r) => findings.say(Level::Warn, format_args!("{what}: HTTP {}", r.status)),
        Err(f) => findings.say(Level::Warn, format_args!("{what}: {f}")),
    }
}
