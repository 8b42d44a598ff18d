//! drainit's entry point: parse and validate the command line, set up
//! logging and the process, run the supervisor, and map its one `Outcome`
//! to the exit code. This is the only place drainit's exit status is decided.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use log::{debug, warn};

use crate::app::cli::RawArgs;
use crate::app::config::{spelling, Config, Name, Notice, Request};
use crate::app::logging;
use crate::core::outcome::{self as exit, ExitPolicy, Outcome, RunSummary, SpawnFailure};
use crate::io::arena::Released;
use crate::io::{early, logwriter, signals};
use crate::shell::supervisor;
use crate::util::text::cut;

/// How long the last log lines may hold the exit.
const EXIT_FLUSH: std::time::Duration = std::time::Duration::from_millis(100);
/// How long help, version and license text may wait for a reader (a
/// human's terminal may take a moment), then the rest is dropped.
const SHOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest usage error: its echoed values are cut first
/// (`util::text::echo`), and this cuts whatever else might grow it.
const LINE_MAX: usize = 1024;
const LICENSE: &str = include_str!("../../LICENSE");

/// The whole program after start-up: parse, validate, supervise, exit.
pub fn main() -> ExitCode {
    // Before any thread starts: request threads' panics are contained.
    crate::io::http::install_panic_hook();
    let name = Name::of(std::env::args_os().next().as_deref());
    let usage_error = ExitCode::from(name.usage_error_code());
    // clap's burst comes from the start-up arena, whose pages go back to
    // the kernel once the configuration is copied out (see `io/arena.rs`).
    let mut config = match crate::io::arena::scratch(|| configure(name)) {
        Ok(parsed) => Box::new(Config::clone(&parsed)),
        Err(code) => return code,
    };
    let released = crate::io::arena::release();
    if config.compat.leave_start_directory {
        anchor_paths(&mut config);
    }
    // Before the child starts: a report that could never be written is a
    // usage error now, not a surprise at exit. Its directory stays open.
    let report_file = match config
        .exit_report
        .as_deref()
        .map(crate::io::report_file::prepare)
    {
        None => None,
        Some(Ok(file)) => Some(file),
        Some(Err(e)) => {
            let path = config
                .exit_report
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            let path = cut(&path.to_string_lossy(), crate::util::text::ECHO_MAX).into_owned();
            say_early(&format!("drainit: --exit-report {path}: {e}"));
            return usage_error;
        }
    };
    // Before the child starts too: an address that cannot be bound is a
    // usage error, not a health check that fails later.
    let listener = match config
        .serve
        .map(|addr| (addr, crate::io::serve::bind(addr)))
    {
        None => None,
        Some((_, Ok(listener))) => Some(listener),
        Some((addr, Err(e))) => {
            say_early(&format!(
                "drainit: --serve {addr}: cannot listen there: {e}"
            ));
            return usage_error;
        }
    };
    logging::init(&config);
    logging::start_writer(&config);
    match released {
        Released::Pages(bytes) => debug!("start-up arena: {} KiB given back", bytes / 1024),
        Released::Live(blocks) => debug!("start-up arena kept: {blocks} of its blocks live"),
        Released::Nothing => {}
    }
    for notice in &config.notices {
        match notice {
            Notice::Info(text) => log::info!("{text}"),
            Notice::Warn(text) => log::warn!("{text}"),
        }
    }
    let (outcome, summary) = match prepare_process(&config) {
        Ok((handled, inherited)) => supervisor::run(&config, handled, inherited, listener),
        Err(e) => {
            log::error!("{e}");
            (
                Outcome::SpawnFailed(SpawnFailure::Other),
                RunSummary::default(),
            )
        }
    };
    ExitCode::from(finish(&config, report_file.as_ref(), &outcome, summary))
}

/// The run's configuration from the command line and the environment, or
/// the exit code of a run that ends here: help, version, license, a
/// `--probe`, or a usage error (said in one line).
fn configure(name: Name) -> Result<Box<Config>, ExitCode> {
    let mode = Mode::of_args();
    // A client (a health check, a check of the configuration) exits 0 or
    // 1, never 2 (Docker reserves it), even for a command line it cannot
    // read.
    let usage_error = match mode {
        Mode::Init => ExitCode::from(name.usage_error_code()),
        Mode::Probe | Mode::Check { .. } => ExitCode::FAILURE,
    };
    let parsed = crate::app::cli::parser().try_get_matches();
    let raw = match parsed {
        Ok(matches) => RawArgs::from_matches(matches),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            // The help is a text of its own (the parser has no help texts).
            let text = match e.kind() {
                ErrorKind::DisplayHelp => std::borrow::Cow::Borrowed(crate::app::cli::HELP),
                _ => std::borrow::Cow::Owned(e.to_string()),
            };
            // dumb-init prints these on stderr.
            print_quietly(&text, name == Name::DumbInit);
            return Err(ExitCode::SUCCESS);
        }
        Err(e) => {
            say_usage_error(&command_line_error(&e), mode);
            return Err(usage_error);
        }
    };
    // Said first: a misspelt variable explains what follows.
    let note_unknown_variables = |config: &mut Config| {
        let names = std::env::vars_os().map(|(name, _)| name);
        let mut notices = spelling::unknown_variables(names, name);
        notices.append(&mut config.notices);
        config.notices = notices;
    };
    match Config::from_raw_as(raw, &|name| std::env::var_os(name), name) {
        Ok(Request::Run(mut config)) => {
            note_unknown_variables(&mut config);
            Ok(config)
        }
        Ok(Request::License) => {
            print_quietly(LICENSE, false);
            Err(ExitCode::SUCCESS)
        }
        Ok(Request::Probe(probe)) => {
            // 0 or 1, whatever happens: a bug is unhealthy, never 101.
            let healthy = std::panic::catch_unwind(|| crate::app::probe::run(&probe));
            Err(client_exit(matches!(healthy, Ok(true))))
        }
        Ok(Request::Check(mut config)) => {
            note_unknown_variables(&mut config);
            let by_variable = matches!(mode, Mode::Check { by_variable: true });
            let passed = std::panic::catch_unwind(|| crate::app::check::run(&config, by_variable));
            Err(client_exit(matches!(passed, Ok(true))))
        }
        Err(e) => {
            say_usage_error(&format!("drainit: {e}"), mode);
            Err(usage_error)
        }
    }
}

/// 0 when a client run (`--probe`, `--check`) found all well, else 1.
fn client_exit(well: bool) -> ExitCode {
    if well {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What the command line makes of drainit, as far as a usage error goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Init,
    /// `--probe`: a usage error is an unhealthy result.
    Probe,
    /// `--check`, or `DRAINIT_CHECK` (`by_variable`): a usage error is
    /// the check's finding.
    Check {
        by_variable: bool,
    },
}

impl Mode {
    /// From drainit's own options (what follows `--` is the child's), and
    /// `DRAINIT_CHECK` read as the configuration reads it.
    fn of_args() -> Mode {
        let mut mode = Mode::Init;
        for arg in std::env::args_os().take_while(|a| a != "--") {
            if arg == "--probe" || arg.to_string_lossy().starts_with("--probe=") {
                return Mode::Probe;
            }
            if arg == "--check" {
                mode = Mode::Check { by_variable: false };
            }
        }
        let variable = crate::app::options::CHECK
            .var()
            .and_then(std::env::var_os)
            .is_some_and(|v| v.to_str().map(crate::app::values::parse_bool) == Some(Ok(true)));
        match mode {
            Mode::Init if variable => Mode::Check { by_variable: true },
            mode => mode,
        }
    }
}

/// clap's error as drainit's one line; an unknown flag near a known one
/// says which (`--grace-period`: did you mean --grace?).
fn command_line_error(e: &clap::Error) -> String {
    let mut text = e.to_string();
    // The values clap echoes may hold a secret (a URL given to a switch,
    // `--notify=http://user:pw@host`): redacted and cut to 256
    // characters, clap's own words kept.
    // In the whole text, before its first line is taken: a value read
    // from a secret often ends in a newline, which would cut the line.
    for kind in [ContextKind::InvalidValue, ContextKind::InvalidArg] {
        if let Some(ContextValue::String(typed)) = e.get(kind) {
            let redacted = crate::util::redact::value(typed);
            let shown = crate::util::text::echo(&redacted);
            if shown != typed.as_str() {
                text = text.replace(typed.as_str(), &shown);
            }
        }
    }
    let first = text.lines().next().unwrap_or("invalid arguments");
    let first = first.trim_start_matches("error: ");
    // Whatever still looks like a URL, however clap quoted it.
    let first = crate::util::redact::in_text(first);
    let suggestion = match (e.kind(), e.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(typed))) => {
            spelling::flag_suggestion(typed)
        }
        _ => None,
    };
    match suggestion {
        Some(known) => format!("drainit: {first}; did you mean {known}? (see drainit --help)"),
        None => format!("drainit: {first} (see drainit --help)"),
    }
}

/// The exit code of the run's outcome, after the exit report (to its file
/// and the log) and the `--emf` line.
fn finish(
    config: &Config,
    report_file: Option<&crate::io::report_file::ReportFile>,
    outcome: &Outcome,
    mut summary: RunSummary,
) -> u8 {
    let policy = ExitPolicy {
        remap_to_zero: config.remap_exit.clone(),
        deadline_code: config.deadline_exit_code,
    };
    let code = outcome.exit_code(&policy);
    // The report is built only when someone reads it (a stop's log line,
    // --exit-report): a plain tini-style run skips it.
    if summary.stop_trigger.is_some() {
        summary.log_lines_dropped = logwriter::lost_total();
        let report = exit::report(outcome, code, &summary);
        log::info!(target: logging::REPORT_TARGET, "{report}");
    }
    if let Some(namespace) = &config.emf {
        // A bare JSON line (no log prefix in either format): CloudWatch
        // extracts metrics only from a log event that is the object itself.
        summary.log_lines_dropped = logwriter::lost_total();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut line = crate::core::emf::line(outcome, code, &summary, namespace, now);
        line.push('\n');
        logwriter::write_final(line.into_bytes());
    }
    // The writer gets a moment for the last lines; the exit code never
    // waits for a stderr nobody reads. What it could not write is counted
    // in the report file, written after it.
    logwriter::flush(EXIT_FLUSH);
    if let (Some(file), Some(path)) = (report_file, &config.exit_report) {
        summary.log_lines_dropped = logwriter::lost_total();
        let text = format!("{}\n", exit::report(outcome, code, &summary));
        if let Err(e) = file.write(text.as_bytes()) {
            warn!("cannot write the exit report to {}: {e}", path.display());
            logwriter::flush(EXIT_FLUSH);
        }
    }
    code
}

/// A usage error's one line: on stderr; for `--probe` on stdout as an
/// unhealthy result (a health check's one line of output), for `--check`
/// on stdout as its finding.
fn say_usage_error(line: &str, mode: Mode) {
    match mode {
        Mode::Init => say_early(line),
        Mode::Probe => {
            let line = cut(line, LINE_MAX);
            early::stdout(format!("unhealthy: {line}\n").as_bytes(), early::EARLY_WAIT);
        }
        Mode::Check { by_variable } => {
            let finding = line.strip_prefix("drainit: ").unwrap_or(line);
            let finding = cut(finding, LINE_MAX);
            let summary = crate::app::check::summary(1, 0, by_variable);
            let text = format!("error: {finding}\n{summary}");
            early::stdout(text.as_bytes(), early::EARLY_WAIT);
        }
    }
}

/// Help, version and license text, on stdout (or stderr): a reader that
/// went away (`drainit --help | head -1`) is not an error worth a panic or
/// a message, and one that never reads holds the exit at most
/// `SHOWN_WAIT`.
fn print_quietly(text: &str, stderr: bool) {
    match stderr {
        true => early::stderr(text.as_bytes(), SHOWN_WAIT),
        false => early::stdout(text.as_bytes(), SHOWN_WAIT),
    };
}

/// One line on stderr before the log exists (a usage error): never waits
/// for a reader, so a stderr nobody reads cannot hold PID 1. A line longer
/// than `LINE_MAX` is cut (each value it echoes already is).
fn say_early(line: &str) {
    let mut text = cut(line, LINE_MAX).into_owned();
    text.push('\n');
    early::stderr(text.as_bytes(), early::EARLY_WAIT);
}

/// Called `dumb-init`, drainit leaves its start directory for `/` as the
/// child starts (`supervisor::run`), so it holds no mount busy: every
/// path it keeps for later (the exit report, drain files, the notify
/// socket, the programs of hook and drain commands) is made absolute here
/// first. A start directory that cannot be read (removed) is kept instead.
fn anchor_paths(config: &mut Config) {
    let here = match std::env::current_dir() {
        Ok(here) => here,
        Err(e) => {
            debug!("cannot read the start directory ({e}); drainit stays in it");
            config.compat.leave_start_directory = false;
            return;
        }
    };
    let anchor = |path: &mut std::path::PathBuf| {
        if path.is_relative() {
            *path = here.join(&*path);
        }
    };
    config.exit_report.iter_mut().for_each(anchor);
    config.drain_files.iter_mut().for_each(anchor);
    if let Some(notify) = &mut config.notify {
        notify.socket.iter_mut().for_each(anchor);
    }
    for cmd in config
        .stop_execs
        .iter_mut()
        .chain(config.drain_execs.iter_mut())
    {
        anchor(&mut cmd.program);
        // Hooks, drain and stop commands run where the child starts.
        cmd.dir = Some(here.clone());
    }
}

/// Process-wide set-up before the child starts; failing here is still safe.
fn prepare_process(
    config: &Config,
) -> Result<(signals::Handled, &'static signals::Inherited), String> {
    if let Some(signo) = config.pdeathsig {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signo as libc::c_ulong) } != 0 {
            return Err(format!(
                "cannot set the parent-death signal: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // Not PID 1: orphans would go to the real init and stay zombies there
    // from our point of view, so become their reaper (as catatonit does)
    // instead of only warning like tini.
    if config.subreaper || !config.pid1 {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) } != 0 {
            let e = std::io::Error::last_os_error();
            if config.subreaper {
                return Err(format!("cannot register as a child subreaper: {e}"));
            }
            warn!("not PID 1 and cannot register as a child subreaper ({e}): orphans will not be reaped by drainit");
        } else {
            debug!("registered as a child subreaper");
        }
    }
    signals::install().map_err(|e| format!("cannot set up signal handling: {e}"))
}
