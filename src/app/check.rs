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
//! Findings never wait long for stdout (`io::early`): on a stdout nobody
//! reads they are dropped, and the exit code is the check's all the same.
//!
//! Signals stay blocked as in a run and are taken by the one wait here, so
//! SIGINT, SIGTERM or SIGHUP ends the check at once (exit 1), PID 1 or
//! not. Nothing is sent that would change the app or the pod: stop URLs,
//! stop commands and ECS task protection are never used, only their hosts
//! looked up.

use std::time::{Duration, Instant};

use crate::core::event::{Action, Answer, Input, Lane, Token};
use crate::core::listener::app_ready;
use crate::core::outcome::Ended;
use crate::core::rules::time_left;
use crate::core::settings::{Config, Notice};
use crate::core::sources::url::WRONG_URL;
use crate::core::sources::{self, AnyKind, How, Reply, MAX_POLLS, WRONG_URL_SAYS};
use crate::io::threads::{self, Inbox, Outbox};
use crate::io::{reaper, signals};
use crate::proto::exchange::Request;
use crate::proto::http::{parse_url, Kind, Response};
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
/// What a refused connection says under a check.
const NOTHING: &str = "nothing listens there now (start the app to check its answer)";
/// How long one finding may wait for room in stdout (see [`print`]).
const OUT_WAIT: Duration = crate::io::early::EARLY_WAIT;
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
    #[inline(never)]
    fn say(&mut self, level: Level, text: std::fmt::Arguments<'_>) {
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

/// Text on stdout at once, never waiting for a reader more than
/// `OUT_WAIT` (and not at all once stdout ran out of time): what it cannot
/// take is dropped, and a reader that went away is no error. The check's
/// bound and signals hold whatever stdout does.
#[inline(never)]
fn print(text: &str) {
    crate::io::early::stdout(text.as_bytes(), OUT_WAIT);
}

/// The summary line, the check's last: `ok: 0 errors, 1 warning` or
/// `error: 1 error, 0 warnings`, and when `DRAINIT_CHECK` turned the check
/// on, that the program was not started because of it.
pub fn summary(errors: usize, warnings: usize, by_variable: bool) -> String {
    let s = |n: usize| if n == 1 { "" } else { "s" };
    let word = if errors > 0 { "error" } else { "ok" };
    let why = match by_variable {
        true => "; the program was not started because DRAINIT_CHECK is set",
        false => "",
    };
    format!(
        "{word}: {errors} error{}, {warnings} warning{}{why}\n",
        s(errors),
        s(warnings)
    )
}

/// One ask of the check.
enum Ask {
    /// A drain source of the run (`sources::kinds`): its kind's ask and read.
    Source(usize),
    /// A host name only looked up: a stop URL's, the ECS agent's.
    Host(String, u16),
    /// `--ready-url`, read by the health listener's rule.
    Ready(String),
    /// The ECS task metadata: the watch's task URL.
    Metadata(String),
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
    queue: Vec<(usize, Instant, Option<Instant>)>,
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
    for notice in &config.notices {
        match notice {
            Notice::Info(text) => findings.say(Level::Info, format_args!("{text}")),
            Notice::Warn(text) => findings.say(Level::Warn, format_args!("{text}")),
        }
    }
    program(config, &mut findings);
    files(config, &mut findings);
    let handled = match signals::install() {
        Ok((handled, _)) => Some(handled),
        Err(e) => {
            findings.say(
                Level::Error,
                format_args!("cannot set up signal handling: {e}"),
            );
            None
        }
    };
    let (outbox, inbox) = threads::inbox();
    let mut check = Check {
        config,
        kinds: sources::kinds(config),
        asks: Vec::new(),
        queue: Vec::new(),
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
        return;
    }
    let name = config.program.to_string_lossy();
    let path = std::env::var_os("PATH");
    let path = path.as_deref().and_then(std::ffi::OsStr::to_str);
    // Quoted whole, as one word: the program's name is not split.
    let quoted = format!("'{}'", name.replace('\'', r"'\''"));
    let shown = escape(&name, 200);
    match crate::io::commands::parse_command(&quoted, path) {
        Ok(cmd) => findings.say(
            Level::Ok,
            format_args!("program {shown}: {}", cmd.program.display()),
        ),
        Err(e) => findings.say(Level::Error, format_args!("program {shown}: {e}")),
    }
}

/// The exit report's path (its directory is made as the run would), the
/// drain files' directories and `--serve`'s address.
fn files(config: &Config, findings: &mut Findings) {
    if let Some(path) = &config.exit_report {
        let shown = path.display();
        match crate::io::report_file::prepare(path) {
            Ok(_) => findings.say(Level::Ok, format_args!("--exit-report {shown}")),
            Err(e) => findings.say(Level::Error, format_args!("--exit-report {shown}: {e}")),
        }
    }
    for file in &config.drain_files {
        if file
            .parent()
            .is_some_and(|d| !d.as_os_str().is_empty() && !d.is_dir())
        {
            findings.say(
                Level::Warn,
                format_args!(
                    "drain file {}: its directory does not exist (the app must make it)",
                    file.display()
                ),
            );
        }
    }
    if let Some(addr) = config.serve {
        match crate::io::serve::bind(addr) {
            Ok(_) => findings.say(Level::Ok, format_args!("--serve {addr} can listen")),
            Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) && beside_drainit() => findings
                .say(
                    Level::Info,
                    format_args!("--serve {addr} is in use: the drainit running as PID 1 holds it"),
                ),
            Err(e) => findings.say(
                Level::Error,
                format_args!("--serve {addr}: cannot listen there: {e}"),
            ),
        }
    }
}

/// This check runs beside a drainit that is PID 1 (`docker exec` into a
/// running container): the same program file.
fn beside_drainit() -> bool {
    let exe = |path: &std::ffi::CStr, buf: &mut [u8; 256]| {
        // SAFETY: readlink writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        usize::try_from(n).ok()
    };
    let (mut one, mut me) = ([0u8; 256], [0u8; 256]);
    let pid1 = exe(c"/proc/1/exe", &mut one);
    std::process::id() != 1
        && pid1.is_some()
        && pid1 == exe(c"/proc/self/exe", &mut me)
        && one == me
}

impl Check<'_> {
    /// Every ask, in the order the findings are best read.
    fn plan(&mut self) {
        self.asks.extend((0..self.kinds.len()).map(Ask::Source));
        let config = self.config;
        self.asks
            .extend(config.ready_url.iter().cloned().map(Ask::Ready));
        if let Some(watch) = crate::core::watch::ecs::from_config(config) {
            self.asks.push(Ask::Metadata(watch.task_url));
        }
        #[cfg(feature = "k8s")]
        if self.pod.is_some() {
            self.asks.push(Ask::Pod(k8s::Step::Read));
        }
        // The hosts of URLs never sent to, each once (IP addresses need
        // no lookup); the URLs asked say for themselves.
        let agent = config.ecs.iter().flat_map(|e| &e.protect);
        let urls = config.stop_hooks.iter().map(|t| &t.url);
        let mut seen = Vec::new();
        for url in urls.chain(agent.map(|p| &p.agent_uri)) {
            let Ok(url) = parse_url(url) else { continue };
            let literal = url.host.parse::<std::net::IpAddr>().is_ok();
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
                    format_args!("stopped by {name} before the check was over"),
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
        let mut i = 0;
        while let Some(&(ask, at, first)) = self.queue.get(i) {
            if self.out.len() >= MAX_POLLS || at > now || now >= self.end {
                i += 1;
                continue;
            }
            self.queue.remove(i);
            self.start(ask, now, first.unwrap_or(now));
        }
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
            Ask::Ready(url) | Ask::Metadata(url) => send(Lane::Poll, Request::get(url)),
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
                // No thread for it: no answer, said at the bound.
                let _ = lanes::pool(Lane::Poll).submit(job);
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

    /// Past the bound: the asks that never got a slot, and a moment later
    /// those still out, are said in one line.
    fn past_bound(&mut self, now: Instant) {
        let mut n = self.queue.len();
        self.queue.clear();
        if now >= self.end + LATE {
            n += self.out.len();
            self.out.clear();
        }
        if n > 0 {
            let secs = BOUND.as_secs();
            let text = format_args!("{n} asks got no answer within the check's bound ({secs} s)");
            self.findings.say(Level::Warn, text);
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
            Ask::Metadata(_) => "ECS task metadata".into(),
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
            return self.queue.push((out.ask, retry, Some(out.first)));
        }
        let what = self.what(out.ask);
        let say = &mut self.findings;
        let result = match &input {
            Input::Http { result, .. } => Some(result),
            _ => None,
        };
        match (&self.asks[out.ask], result) {
            (Ask::Source(k), _) => {
                let reply = match &input {
                    Input::Http { result, .. } => Reply::Http(result),
                    Input::RunEnded { ended, .. } => Reply::Run(Ok(*ended), out.killed),
                    Input::File { seen, .. } => Reply::File(seen),
                    _ => Reply::Run(Err(()), None),
                };
                let read = self.kinds[*k].read(reply);
                source(say, &what, &read, &input)
            }
            (Ask::Host(..), Some(Err(f))) if f.kind == Kind::Resolve => {
                say.say(Level::Warn, format_args!("{what}: does not resolve: {f}"))
            }
            (Ask::Host(..), Some(Err(f)))
                if matches!(f.kind, Kind::Timeout | Kind::ResolverBusy | Kind::Internal) =>
            {
                say.say(
                    Level::Warn,
                    format_args!("{what}: not known to resolve: {f}"),
                )
            }
            (Ask::Host(..), _) => say.say(Level::Ok, format_args!("{what}: resolves")),
            (Ask::Ready(_), Some(Err(f))) if f.kind == Kind::Refused => {
                say.say(Level::Info, format_args!("{what}: {NOTHING}"))
            }
            (Ask::Ready(_), Some(Ok(r))) if WRONG_URL.contains(&r.status) => say.say(
                Level::Error,
                format_args!("{what}: HTTP {}: {WRONG_URL_SAYS}", r.status),
            ),
            // As `/readyz` reads it.
            (Ask::Ready(_), Some(Ok(r))) => match app_ready(Ok(r.status)) {
                Ok(()) => say.say(Level::Ok, format_args!("{what}: ready")),
                Err(why) => say.say(Level::Ok, format_args!("{what}: not ready ({why})")),
            },
            (Ask::Metadata(_), Some(Ok(r))) if r.status == 200 => {
                say.say(Level::Ok, format_args!("{what}: HTTP 200"))
            }
            (Ask::Metadata(_), Some(Ok(r))) => {
                say.say(Level::Warn, format_args!("{what}: HTTP {}", r.status))
            }
            #[cfg(feature = "k8s")]
            (Ask::Pod(step), Some(result)) => {
                let step = *step;
                let Some(pod) = self.pod.as_mut() else {
                    return;
                };
                let (said, next) = pod.answered(self.config, step, result, now);
                for (level, text) in said {
                    say.say(level, format_args!("{what}: {text}"));
                }
                if let Some(next) = next {
                    self.asks.push(Ask::Pod(next));
                    self.queue.push((self.asks.len() - 1, now, None));
                }
            }
            (_, Some(Err(f))) => say.say(Level::Warn, format_args!("{what}: {f}")),
            _ => say.say(Level::Warn, format_args!("{what}: no answer")),
        }
    }
}

/// A drain source's finding from its kind's read: nothing listening is
/// noted (the app is not running under a check); a status that says the
/// URL is wrong, or a body that can never say ready, is an error; no
/// answer is a warning.
fn source(say: &mut Findings, what: &str, read: &sources::Read, input: &Input) {
    let refused = matches!(&read.failure, Some((Kind::Refused, _)));
    let ran = match input {
        Input::RunEnded { ended, .. } => Some(*ended),
        _ => None,
    };
    match (&read.answer, read.wrong_url, ran) {
        _ if refused => say.say(Level::Info, format_args!("{what}: {NOTHING}")),
        (_, Some(status), _) => say.say(
            Level::Error,
            format_args!("{what}: HTTP {status}: {WRONG_URL_SAYS}"),
        ),
        (_, _, Some(Ended::Exited(code @ (126 | 127)))) => say.say(
            Level::Error,
            format_args!("{what}: exit {code}: it could not run a program (126: not executable, 127: not found)"),
        ),
        (Answer::NotReady(why), ..) if read.never_ready => say.say(
            Level::Error,
            format_args!("{what}: {why}: drainit would never see it ready (--drain-field)"),
        ),
        (Answer::Ready, ..) => match &read.summary {
            Some(summary) => say.say(Level::Ok, format_args!("{what}: ready ({summary})")),
            None => say.say(Level::Ok, format_args!("{what}: ready")),
        },
        (Answer::NotReady(why), ..) => say.say(Level::Ok, format_args!("{what}: not ready ({why})")),
        (Answer::NoAnswer(why), ..) => {
            let level = match input {
                Input::RunFailed { .. } => Level::Error,
                _ => Level::Warn,
            };
            say.say(level, format_args!("{what}: no answer ({why})"))
        }
    }
}

#[cfg(feature = "k8s")]
mod k8s;
