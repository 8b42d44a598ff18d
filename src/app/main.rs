//! drainit's entry point: parse and validate the command line, set up
//! logging and the process, run the supervisor, and map its one `Outcome`
//! to the exit code. This is the only place drainit's exit status is decided.

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::FromArgMatches;
use log::{debug, warn};

use crate::app::cli::RawArgs;
use crate::app::config::{Config, Name, Notice, Request};
use crate::app::logging;
use crate::core::outcome::{self as exit, ExitPolicy, Outcome, RunSummary, SpawnFailure};
use crate::io::{logwriter, signals};
use crate::shell::supervisor;

/// How long the last log lines may hold the exit.
const EXIT_FLUSH: std::time::Duration = std::time::Duration::from_millis(100);
const LICENSE: &str = include_str!("../../LICENSE");

/// The whole program after start-up: parse, validate, supervise, exit.
pub fn main() -> ExitCode {
    // Before any thread starts: request threads' panics are contained.
    crate::io::http::install_panic_hook();
    let name = Name::of(std::env::args_os().next().as_deref());
    let usage_error = ExitCode::from(name.usage_error_code());
    // A health check exits 0 or 1, never 2 (Docker reserves it), even for
    // a command line it cannot read.
    // (Only drainit's own options: what follows `--` is the child's.)
    let probing = std::env::args_os()
        .take_while(|a| a != "--")
        .any(|a| a == "--probe" || a.to_string_lossy().starts_with("--probe="));
    let usage_error = if probing {
        ExitCode::FAILURE
    } else {
        usage_error
    };
    let parsed = crate::app::cli::command()
        .try_get_matches()
        .and_then(|matches| RawArgs::from_arg_matches(&matches));
    let raw = match parsed {
        Ok(raw) => raw,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            // dumb-init prints these on stderr.
            print_quietly(&e.to_string(), name == Name::DumbInit);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let line = format!(
                "drainit: {} (see drainit --help)",
                first.trim_start_matches("error: ")
            );
            say_usage_error(&line, probing);
            return usage_error;
        }
    };
    let config = match Config::from_raw_as(raw, &|name| std::env::var_os(name), name) {
        Ok(Request::Run(config)) => config,
        Ok(Request::License) => {
            print_quietly(LICENSE, false);
            return ExitCode::SUCCESS;
        }
        Ok(Request::Probe(probe)) => {
            // 0 or 1, whatever happens: a bug is unhealthy, never 101.
            let healthy = std::panic::catch_unwind(|| crate::app::probe::run(&probe));
            return if matches!(healthy, Ok(true)) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        Err(e) => {
            say_usage_error(&format!("drainit: {e}"), probing);
            return usage_error;
        }
    };
    if let Some(path) = &config.exit_report {
        // Before the child starts: a report that could never be written is
        // a usage error now, not a surprise at exit.
        if let Err(e) = crate::io::report_file::prepare(path) {
            eprintln!("drainit: --exit-report {}: {e}", path.display());
            return usage_error;
        }
    }
    // Before the child starts too: an address that cannot be bound is a
    // usage error, not a health check that fails later.
    let listener = match config
        .serve
        .map(|addr| (addr, crate::io::serve::bind(addr)))
    {
        None => None,
        Some((_, Ok(listener))) => Some(listener),
        Some((addr, Err(e))) => {
            eprintln!("drainit: --serve {addr}: cannot listen there: {e}");
            return usage_error;
        }
    };
    logging::init(&config);
    for notice in &config.notices {
        match notice {
            Notice::Info(text) => log::info!("{text}"),
            Notice::Warn(text) => log::warn!("{text}"),
        }
    }
    let policy = ExitPolicy {
        remap_to_zero: config.remap_exit.clone(),
        deadline_code: config.deadline_exit_code,
    };
    let (outcome, mut summary) = match prepare_process(&config) {
        Ok((handled, inherited)) => supervisor::run(&config, handled, inherited, listener),
        Err(e) => {
            log::error!("{e}");
            (
                Outcome::SpawnFailed(SpawnFailure::Other),
                RunSummary::default(),
            )
        }
    };
    let code = outcome.exit_code(&policy);
    // The report is built only when someone reads it (a stop's log line,
    // --exit-report): a plain tini-style run skips it.
    if summary.stop_trigger.is_some() {
        summary.log_lines_dropped = logwriter::lost_total();
        let report = exit::report(&outcome, code, &summary);
        log::info!(target: logging::REPORT_TARGET, "{report}");
    }
    if let Some(namespace) = &config.emf {
        // A bare JSON line (no log prefix in either format): CloudWatch
        // extracts metrics only from a log event that is the object itself.
        summary.log_lines_dropped = logwriter::lost_total();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut line = crate::core::emf::line(&outcome, code, &summary, namespace, now);
        line.push('\n');
        logwriter::write_final(line.into_bytes());
    }
    // The writer gets a moment for the last lines; the exit code never
    // waits for a stderr nobody reads. What it could not write is counted
    // in the report file, written after it.
    logwriter::flush(EXIT_FLUSH);
    if let Some(path) = &config.exit_report {
        summary.log_lines_dropped = logwriter::lost_total();
        let text = format!("{}\n", exit::report(&outcome, code, &summary));
        if let Err(e) = crate::io::report_file::write(path, text.as_bytes()) {
            warn!("cannot write the exit report to {}: {e}", path.display());
            logwriter::flush(EXIT_FLUSH);
        }
    }
    ExitCode::from(code)
}

/// A usage error's one line: on stderr, or for `--probe` on stdout as an
/// unhealthy result (a health check's one line of output).
fn say_usage_error(line: &str, probing: bool) {
    if probing {
        print_quietly(&format!("unhealthy: {line}\n"), false);
    } else {
        eprintln!("{line}");
    }
}

/// Help, version and license text, on stdout (or stderr): a reader that
/// went away (`drainit --help | head -1`) is not an error worth a panic or
/// a message.
fn print_quietly(text: &str, stderr: bool) {
    use std::io::Write;
    if stderr {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
        return;
    }
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    let _ = std::io::stdout().lock().flush();
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
    let pid1 = std::process::id() == 1;
    if config.subreaper || !pid1 {
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
