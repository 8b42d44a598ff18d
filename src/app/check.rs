//! `drainit --check` (or `DRAINIT_CHECK=1`): a client run, like
//! `--probe`, that checks a run's configuration without starting it. The
//! configuration was validated before (a bad option is one `error:` line);
//! here the program is found, the exit report's path and `--serve`'s
//! address are tried, and every ask is made once, side by side as in a
//! run (at most `MAX_POLLS` out at once), all within `BOUND`: each drain
//! source by its kind's own ask and read (`core::sources`, performed by
//! the shell's executor), the hosts of the URLs never sent to, the
//! `--ready-url`, the ECS task metadata, and with `--k8s-protect` the pod's
//! read and its busy patch as a dry run (`dryRun=All`: through RBAC and
//! admission, nothing written). One line per finding on stdout (`ok:`,
//! `info:`, `warn:`, `error:`), then one summary line, last, that counts
//! the errors and warnings: exit 1 when there is an error, else 0.
//!
//! Signals stay blocked as in a run and are taken by the one wait here, so
//! SIGINT, SIGTERM or SIGHUP ends the check at once (exit 1), PID 1 or
//! not. Nothing is sent that would change the app or the pod: stop URLs,
//! stop commands and ECS task protection are never used, only their hosts
//! looked up.

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use crate::core::event::{Action, Answer, Input, Lane, Token};
use crate::core::outcome::Ended;
use crate::core::rules::time_left;
use crate::core::settings::{Config, Notice};
use crate::core::sources::{self, AnyKind, Count, How, Reply, MAX_POLLS, WRONG_URL_SAYS};
use crate::io::threads::{self, Inbox, Outbox};
use crate::io::{reaper, signals};
use crate::proto::exchange::Request;
use crate::proto::http::{parse_url, Failure, Kind, Response};
use crate::shell::executor::Executor;
use crate::shell::lanes;
use crate::util::text::escape;

/// How long one ask may take (a drain command: its `--drain-timeout`, at
/// most this bound's end).
pub const ASK_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole check's bound: an ask not answered by then is said so.
pub const BOUND: Duration = Duration::from_secs(15);
/// What an ask still out at the bound gets to answer (its own time ends
/// at the bound).
const LATE: Duration = Duration::from_secs(1);
/// A lookup of the same name by another ask is running: asked again this
/// much later, within the ask's own time.
const RETRY: Duration = Duration::from_millis(50);
/// The signals that end the check at once (exit 1).
const STOPS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    /// Cannot be told now (nothing listens yet); not a failure.
    Info,
    /// Worth a look; the check still passes.
    Warn,
    /// The run would not work as configured: the check fails.
    Error,
}

/// The findings said so far, counted for the summary.
#[derive(Default)]
struct Findings {
    errors: usize,
    warnings: usize,
}

impl Findings {
    /// One finding, on stdout at once (a slow ask shows where it is).
    fn say(&mut self, level: Level, text: &str) {
        let word = match level {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.errors += usize::from(level == Level::Error);
        self.warnings += usize::from(level == Level::Warn);
        print(&format!("{word}: {text}\n"));
    }
}

/// Text on stdout at once; a reader that went away is no error.
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// The summary line, the check's last: `ok: 0 errors, 1 warning` or
/// `error: 1 error, 0 warnings`, and when `DRAINIT_CHECK` turned the check
/// on, that the program was not started because of it.
pub fn summary(errors: usize, warnings: usize, by_variable: bool) -> String {
    let plural = |n: usize, word: &str| match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    };
    let mut line = format!(
        "{}: {}, {}",
        if errors > 0 { "error" } else { "ok" },
        plural(errors, "error"),
        plural(warnings, "warning")
    );
    if by_variable {
        line.push_str("; the program was not started because DRAINIT_CHECK is set");
    }
    line.push('\n');
    line
}

/// One ask of the check.
enum Ask {
    /// A drain source of the run (`sources::kinds`): its kind's ask and read.
    Source(usize),
    /// A host name only looked up: a stop URL's, the ECS agent's.
    Host(String, u16),
    /// `--ready-url`, read by the health listener's rule.
    Ready(String),
    /// The ECS task metadata, read by the watch's rule.
    Metadata,
    /// `--k8s-protect`: the pod's read, then the busy patch as a dry run.
    #[cfg(feature = "k8s")]
    Pod(k8s::Step),
}

/// An ask out.
struct Out {
    token: Token,
    ask: usize,
    /// When it was first asked (a retry keeps it).
    first: Instant,
    /// A command's kill time, and how long it had once killed.
    kill_at: Option<Instant>,
    killed: Option<Duration>,
}

/// The check under way.
struct Check<'a> {
    config: &'a Config,
    kinds: Vec<AnyKind>,
    asks: Vec<Ask>,
    /// Asks waiting for a slot: which, not before when, first asked when.
    queue: VecDeque<(usize, Instant, Option<Instant>)>,
    out: Vec<Out>,
    executor: Executor<'a>,
    outbox: Outbox,
    inbox: Inbox,
    findings: Findings,
    tokens: u32,
    end: Instant,
    #[cfg(feature = "k8s")]
    pod: Option<k8s::Pod>,
}

/// Checks `config`; true when no finding is an error. `by_variable`:
/// `DRAINIT_CHECK` turned the check on (the summary says so).
pub fn run(config: &Config, by_variable: bool) -> bool {
    let now = Instant::now();
    let mut findings = Findings::default();
    findings.say(Level::Ok, "the options and variables are valid");
    for notice in &config.notices {
        match notice {
            Notice::Info(text) => findings.say(Level::Info, text),
            Notice::Warn(text) => findings.say(Level::Warn, text),
        }
    }
    program(config, &mut findings);
    files(config, &mut findings);
    let handled = match signals::install() {
        Ok((handled, _)) => Some(handled),
        Err(e) => {
            findings.say(Level::Error, &format!("cannot set up signal handling: {e}"));
            None
        }
    };
    let (outbox, inbox) = threads::inbox();
    let mut check = Check {
        config,
        kinds: sources::kinds(config),
        asks: Vec::new(),
        queue: VecDeque::new(),
        out: Vec::new(),
        executor: Executor::new(config, 0, false, outbox.clone()),
        outbox,
        inbox,
        findings,
        tokens: 0,
        end: now + BOUND,
        #[cfg(feature = "k8s")]
        pod: k8s::Pod::new(config),
    };
    check.plan();
    if let Some(handled) = handled {
        check.drive(&handled);
    }
    let (errors, warnings) = (check.findings.errors, check.findings.warnings);
    check.executor.kill_all_runs("the check is over");
    print(&summary(errors, warnings, by_variable));
    errors == 0
}

/// PROGRAM, when given: found on `PATH` and executable, as the run would
/// start it.
fn program(config: &Config, findings: &mut Findings) {
    if config.program.is_empty() {
        return findings.say(Level::Info, "no PROGRAM given: not checked");
    }
    let name = config.program.to_string_lossy();
    let path = std::env::var("PATH").ok();
    // Quoted whole, as one word: the program's name is not split.
    let quoted = format!("'{}'", name.replace('\'', r"'\''"));
    let shown = escape(&name, 200);
    match crate::io::commands::parse_command(&quoted, path.as_deref()) {
        Ok(cmd) => findings.say(
            Level::Ok,
            &format!("program {shown}: {}", cmd.program.display()),
        ),
        Err(e) => findings.say(Level::Error, &format!("program {shown}: {e}")),
    }
}

/// The exit report's path (its directory is made as the run would), the
/// drain files' directories and `--serve`'s address.
fn files(config: &Config, findings: &mut Findings) {
    if let Some(path) = &config.exit_report {
        let what = format!("--exit-report {}", path.display());
        match crate::io::report_file::prepare(path) {
            Ok(_) => findings.say(Level::Ok, &what),
            Err(e) => findings.say(Level::Error, &format!("{what}: {e}")),
        }
    }
    for file in &config.drain_files {
        if file
            .parent()
            .is_some_and(|d| !d.as_os_str().is_empty() && !d.is_dir())
        {
            findings.say(
                Level::Warn,
                &format!(
                    "drain file {}: its directory does not exist (the app must make it)",
                    file.display()
                ),
            );
        }
    }
    if let Some(addr) = config.serve {
        match crate::io::serve::bind(addr) {
            Ok(_) => findings.say(Level::Ok, &format!("--serve {addr} can listen")),
            Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) && beside_drainit() => findings
                .say(
                    Level::Info,
                    &format!("--serve {addr} is in use: the drainit running as PID 1 holds it"),
                ),
            Err(e) => findings.say(
                Level::Error,
                &format!("--serve {addr}: cannot listen there: {e}"),
            ),
        }
    }
}

/// This check runs beside a drainit that is PID 1 (`docker exec` into a
/// running container): the same program, by its file or its name.
fn beside_drainit() -> bool {
    let same = |what: &str| {
        let pid1 = std::fs::read_link(format!("/proc/1/{what}"))
            .map(|p| p.into_os_string().into_encoded_bytes())
            .or_else(|_| std::fs::read(format!("/proc/1/{what}")));
        let me = std::fs::read_link(format!("/proc/self/{what}"))
            .map(|p| p.into_os_string().into_encoded_bytes())
            .or_else(|_| std::fs::read(format!("/proc/self/{what}")));
        matches!((pid1, me), (Ok(a), Ok(b)) if a == b)
    };
    std::process::id() != 1 && (same("exe") || same("comm"))
}

impl Check<'_> {
    /// Every ask, in the order the findings are best read.
    fn plan(&mut self) {
        self.asks.extend((0..self.kinds.len()).map(Ask::Source));
        let config = self.config;
        self.asks
            .extend(config.ready_url.iter().cloned().map(Ask::Ready));
        if config
            .ecs
            .as_ref()
            .is_some_and(|e| e.metadata_uri.is_some())
        {
            self.asks.push(Ask::Metadata);
        }
        #[cfg(feature = "k8s")]
        if self.pod.is_some() {
            self.asks.push(Ask::Pod(k8s::Step::Read));
        }
        // The hosts of URLs never sent to, each once; the URLs asked say
        // for themselves whether their host resolves.
        let asked: Vec<String> = config
            .drain_urls
            .iter()
            .chain(&config.ready_url)
            .chain(config.ecs.iter().flat_map(|e| &e.metadata_uri))
            .filter_map(|u| parse_url(u).ok().map(|u| u.host))
            .collect();
        let agent = config
            .ecs
            .iter()
            .flat_map(|e| &e.protect)
            .map(|p| &p.agent_uri);
        let mut seen = asked;
        for url in config
            .stop_hooks
            .iter()
            .map(|t| &t.url)
            .chain(agent)
            .filter_map(|u| parse_url(u).ok())
        {
            let literal = url.host.parse::<std::net::IpAddr>().is_ok()
                || url
                    .host
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case("localhost");
            if !literal && crate::util::text::first_time(&mut seen, &url.host) {
                self.asks.push(Ask::Host(url.host, url.port));
            }
        }
        let now = Instant::now();
        self.queue
            .extend((0..self.asks.len()).map(|i| (i, now, None)));
    }

    /// Asks, side by side, until every ask is answered, the bound passed,
    /// or a stop signal came.
    fn drive(&mut self, handled: &signals::Handled) {
        loop {
            let now = Instant::now();
            self.pump(now);
            if now >= self.end {
                self.past_bound(now);
            }
            if self.out.is_empty() && self.queue.is_empty() {
                return;
            }
            let next = self.next_time(now);
            let signal = handled.wait(Some(next.saturating_duration_since(now)));
            if let Some(signo) = signal.map(|r| r.signo).filter(|s| STOPS.contains(s)) {
                let name = crate::util::signame::signal_name(signo);
                return self.findings.say(
                    Level::Error,
                    &format!("stopped by {name} before the check was over"),
                );
            }
            self.gather(Instant::now());
        }
    }

    /// The earliest time something is due: a queued ask's retry, a kill,
    /// the bound.
    fn next_time(&self, now: Instant) -> Instant {
        let free = self.out.len() < MAX_POLLS;
        let queued = self.queue.iter().filter(|_| free).map(|q| q.1);
        let kills = self.out.iter().filter_map(|o| o.kill_at);
        let bound = if now < self.end {
            self.end
        } else {
            self.end + LATE
        };
        queued.chain(kills).fold(bound, Instant::min).max(now)
    }

    /// Starts the queued asks that are due while slots are free, and kills
    /// the commands whose time is up.
    fn pump(&mut self, now: Instant) {
        for out in self.out.iter_mut() {
            let Some(at) = out.kill_at.filter(|at| *at <= now) else {
                continue;
            };
            // The time it was given, as a run says it.
            out.kill_at = None;
            out.killed = Some(at.saturating_duration_since(out.first));
            self.executor.execute(Action::KillRun(out.token));
        }
        let mut waiting = VecDeque::new();
        while let Some((ask, at, first)) = self.queue.pop_front() {
            if self.out.len() >= MAX_POLLS || at > now || now >= self.end {
                waiting.push_back((ask, at, first));
                continue;
            }
            self.start(ask, now, first.unwrap_or(now));
        }
        self.queue = waiting;
    }

    /// Asks `ask` once.
    fn start(&mut self, ask: usize, now: Instant, first: Instant) {
        self.tokens += 1;
        let token = Token(self.tokens);
        let timeout = time_left(ASK_TIMEOUT, Some(self.end), now, false);
        let send = |lane, request| Action::Send {
            token,
            lane,
            request,
            timeout,
        };
        let mut kill_at = None;
        let action = match &self.asks[ask] {
            Ask::Source(k) => match self.kinds[*k].ask() {
                How::Send(request) => send(Lane::Poll, request),
                How::Run(cmd) => {
                    let limit = time_left(self.config.drain_timeout, Some(self.end), now, false);
                    kill_at = Some(now + limit);
                    Action::StartRun { token, cmd }
                }
                How::Look(path) => Action::CheckFile {
                    token,
                    path,
                    since: now,
                },
            },
            Ask::Ready(url) => send(Lane::Poll, Request::get(url)),
            Ask::Metadata => match crate::core::watch::ecs::from_config(self.config) {
                Some(watch) => send(Lane::Watch, Request::get(&watch.task_url)),
                None => return,
            },
            #[cfg(feature = "k8s")]
            Ask::Pod(step) => match self.pod.as_mut() {
                Some(pod) => send(Lane::Protect, pod.request(self.config, *step)),
                None => return,
            },
            Ask::Host(host, port) => {
                let (host, port, outbox) = (host.clone(), *port, self.outbox.clone());
                let job = Box::new(move || {
                    let result = crate::io::http::connect_only(&host, port, timeout);
                    let result = result.map(|()| Response::default());
                    outbox.send(Input::Http { token, result });
                });
                if let Err(e) = lanes::pool(Lane::Poll).submit(job) {
                    let detail = format!("cannot start a thread: {e}");
                    let result = Err(Failure::new(Kind::Internal, &detail));
                    self.executor
                        .answers
                        .push_back(Input::Http { token, result });
                }
                Action::Exit
            }
        };
        // `Exit` is no action for the executor: a lookup's job is out.
        self.executor.execute(action);
        self.out.push(Out {
            token,
            ask,
            first,
            kill_at,
            killed: None,
        });
    }

    /// The answers that came: the executor's own, the request threads'
    /// (the inbox) and the commands reaped.
    fn gather(&mut self, now: Instant) {
        let reaped = reaper::reap_all();
        for (pid, ended) in reaped.ended {
            let input = self.executor.reaped(pid, ended, false);
            self.executor.answers.push_back(input);
        }
        while let Some(input) = self.inbox.try_recv() {
            self.executor.answers.push_back(input);
        }
        while let Some(input) = self.executor.answers.pop_front() {
            self.answered(input, now);
        }
    }

    /// Past the bound: what never got a slot is said so, and what is still
    /// out a moment later too.
    fn past_bound(&mut self, now: Instant) {
        let late = now >= self.end + LATE;
        let never: Vec<usize> = self.queue.drain(..).map(|q| q.0).collect();
        let still = self.out.iter().filter(|_| late).map(|o| o.ask);
        let secs = BOUND.as_secs();
        for ask in never.into_iter().chain(still.collect::<Vec<_>>()) {
            let what = self.what(ask);
            let text = format!("{what}: no answer within the check's bound ({secs} s)");
            self.findings.say(Level::Warn, &text);
        }
        if late {
            self.out.clear();
        }
    }

    /// What an ask is, as its findings name it.
    fn what(&self, ask: usize) -> String {
        match &self.asks[ask] {
            Ask::Source(k) => {
                let about = self.kinds[*k].about();
                format!("drain source {} {}", about.name, escape(&about.public, 200))
            }
            Ask::Host(host, _) => format!("host {}", escape(host, 100)),
            Ask::Ready(url) => format!(
                "--ready-url {}",
                escape(&sources::url::public_url(url), 200)
            ),
            Ask::Metadata => "ECS task metadata".into(),
            #[cfg(feature = "k8s")]
            Ask::Pod(step) => self.pod.as_ref().map_or(String::new(), |p| p.what(*step)),
        }
    }

    /// One answer: its findings, or the ask again a moment later when its
    /// lookup found another of the same name running.
    fn answered(&mut self, input: Input, now: Instant) {
        let token = match &input {
            Input::Http { token, .. }
            | Input::RunEnded { token, .. }
            | Input::RunFailed { token }
            | Input::File { token, .. } => *token,
            _ => return,
        };
        let Some(at) = self.out.iter().position(|o| o.token == token) else {
            return;
        };
        let out = self.out.swap_remove(at);
        let busy =
            matches!(&input, Input::Http { result: Err(f), .. } if f.kind == Kind::ResolverBusy);
        let retry = now + RETRY;
        if busy && retry < out.first + ASK_TIMEOUT && retry < self.end {
            return self.queue.push_back((out.ask, retry, Some(out.first)));
        }
        let what = self.what(out.ask);
        let said = match (&self.asks[out.ask], &input) {
            (Ask::Source(k), _) => {
                let reply = match &input {
                    Input::Http { result, .. } => Reply::Http(result),
                    Input::RunEnded { ended, .. } => Reply::Run(Ok(*ended), out.killed),
                    Input::File { seen, .. } => Reply::File(seen),
                    _ => Reply::Run(Err(()), None),
                };
                let read = self.kinds[*k].read(reply);
                if let Some((pointer, Count::Bad(why))) = &read.count {
                    let text = format!("{what}: --drain-count-field {pointer}: {why}");
                    self.findings.say(Level::Warn, &text);
                }
                source(&read, &input)
            }
            (Ask::Host(..), Input::Http { result: Err(f), .. }) if f.kind == Kind::Resolve => {
                (Level::Warn, format!("does not resolve: {f}"))
            }
            (Ask::Host(..), _) => (Level::Ok, "resolves".into()),
            (Ask::Ready(_), Input::Http { result, .. }) => ready(result),
            (Ask::Metadata, Input::Http { result, .. }) => self.metadata(result.clone()),
            #[cfg(feature = "k8s")]
            (Ask::Pod(step), Input::Http { result, .. }) => {
                let step = *step;
                let Some(pod) = self.pod.as_mut() else {
                    return;
                };
                let (said, next) = pod.answered(self.config, step, result, now);
                if let Some(next) = next {
                    self.asks.push(Ask::Pod(next));
                    self.queue.push_back((self.asks.len() - 1, now, None));
                }
                for (level, text) in said {
                    self.findings.say(level, &format!("{what}: {text}"));
                }
                return;
            }
            _ => (Level::Warn, "no answer".into()),
        };
        self.findings.say(said.0, &format!("{what}: {}", said.1));
    }

    /// The ECS task metadata's answer, read by the watch's own rule.
    fn metadata(&self, result: Result<Response, Failure>) -> (Level, String) {
        let shown = match &result {
            Ok(r) => format!("HTTP {}", r.status),
            Err(f) => f.to_string(),
        };
        let watch = crate::core::watch::ecs::from_config(self.config);
        let task = watch.and_then(|mut w| {
            w.on_task(result);
            w.task
        });
        match task {
            Some(task) => (
                Level::Ok,
                format!("task family {}", escape(&task.family, 100)),
            ),
            None => (Level::Warn, format!("no task metadata ({shown})")),
        }
    }
}

/// A drain source's finding from its kind's read: nothing listening is
/// noted (the app is not running under a check); a status that says the
/// URL is wrong, or a body that can never say ready, is an error; no
/// answer is a warning.
fn source(read: &sources::Read, input: &Input) -> (Level, String) {
    let refused = matches!(&read.failure, Some((Kind::Refused, _)));
    match (&read.answer, read.wrong_url, input) {
        _ if refused => (
            Level::Info,
            "nothing listens there now (start the app to check its answer)".into(),
        ),
        (_, Some(status), _) => (Level::Error, format!("HTTP {status}: {WRONG_URL_SAYS}")),
        (_, _, Input::RunFailed { .. }) => (Level::Error, "cannot start".into()),
        (
            _,
            _,
            Input::RunEnded {
                ended: Ended::Exited(code @ (126 | 127)),
                ..
            },
        ) => (
            Level::Error,
            format!(
                "exit {code}: it could not run a program (126: not executable, 127: not found)"
            ),
        ),
        (Answer::NotReady(why), ..) if read.never_ready => (
            Level::Error,
            format!("{why}: drainit would never see it ready (--drain-field)"),
        ),
        (Answer::Ready, ..) => (Level::Ok, format!("ready{}", summary_of(read))),
        (Answer::NotReady(why), ..) => (Level::Ok, format!("not ready ({why})")),
        (Answer::NoAnswer(why), ..) => (Level::Warn, format!("no answer ({why})")),
    }
}

/// A read's summary, after a comma, when it has one.
fn summary_of(read: &sources::Read) -> String {
    read.summary
        .as_ref()
        .map_or(String::new(), |s| format!(" ({s})"))
}

/// `--ready-url`'s answer, by the rule `/readyz` reads it with.
fn ready(result: &Result<Response, Failure>) -> (Level, String) {
    let asked = result
        .as_ref()
        .map(|r| r.status)
        .map_err(Failure::to_string);
    match (crate::core::listener::app_ready(asked), result) {
        (_, Err(f)) if f.kind == Kind::Refused => (
            Level::Info,
            "nothing listens there now (start the app to check its answer)".into(),
        ),
        (_, Err(f)) => (Level::Warn, f.to_string()),
        (_, Ok(r)) if sources::url::WRONG_URL.contains(&r.status) => {
            (Level::Error, format!("HTTP {}: {WRONG_URL_SAYS}", r.status))
        }
        (Ok(()), _) => (Level::Ok, "ready".into()),
        (Err(why), _) => (Level::Ok, format!("not ready ({why})")),
    }
}

#[cfg(feature = "k8s")]
mod k8s;
