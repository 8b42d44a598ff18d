//! Validated configuration: turns the raw command line and the `DRAINIT_*` /
//! `TINI_*` environment into the settings the supervisor runs on, or into a
//! one-line usage error that names the offending option. Each concern has
//! a file: the environment lookup (`env`), the stop rules (`stop`), the
//! platforms (`platform`) and their kills (`kill`), health checks
//! (`health`), the compatibility names (`names`) and the names that are
//! near a known one (`spelling`).

mod env;
mod health;
mod kill;
mod names;
mod platform;
pub mod spelling;
mod stop;

use std::ffi::{OsStr, OsString};
use std::fmt;

use crate::app::cli::RawArgs;
use crate::app::options;
use crate::app::values::*;
pub use crate::core::settings::{
    Config, EcsConfig, LogFormat, Notice, NotifyConfig, Probe, ProbeTarget, ProtectConfig,
};
use crate::io::signals;
use crate::proto::notify_msg as notify;
use env::Env;
pub use env::EnvLookup;
pub use names::Name;

/// A bad option or variable; printed as one line, exit code 2.
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Request {
    Run(Box<Config>),
    License,
    /// `--probe`: a health check, not a run.
    Probe(Probe),
    /// `--check`: the configuration of a run to check, not run; its
    /// `program` is empty when none was given.
    Check(Box<Config>),
}

/// The most drain sources a run may have: each costs a poll per round.
pub const MAX_SOURCES: usize = 64;

impl Config {
    /// Validates the raw arguments against the environment.
    pub fn from_raw(raw: RawArgs, env: EnvLookup<'_>) -> Result<Request, UsageError> {
        Config::from_raw_as(raw, env, Name::Drainit)
    }

    /// As `from_raw`, for drainit called by another init's name. Never
    /// inlined: one copy, however many callers.
    #[inline(never)]
    pub fn from_raw_as(
        mut raw: RawArgs,
        env: EnvLookup<'_>,
        name: Name,
    ) -> Result<Request, UsageError> {
        if raw.flag(&options::LICENSE) {
            return Ok(Request::License);
        }
        if let Some(mut url) = raw.value(&options::PROBE) {
            // There is no program in probe mode: `--probe --probe-timeout 1s
            // URL` leaves the URL where the program would be.
            match (url.is_empty(), raw.command.as_slice()) {
                (_, []) => {}
                (true, [word]) => url = word.to_string_lossy().into_owned(),
                _ => {
                    return Err(UsageError(
                        "--probe runs no program: give it one URL (--probe URL)".into(),
                    ))
                }
            }
            return health::probe(&Env::new(env, raw), &url).map(Request::Probe);
        }
        // `--check` (or `DRAINIT_CHECK`) needs no program: it runs none.
        let mut command = std::mem::take(&mut raw.command).into_iter();
        let env = Env::new(env, raw);
        let check = env.flag(&options::CHECK)?;
        let program = match command.next().filter(|p| p != OsStr::new("")) {
            Some(program) => program,
            None if check => OsString::new(),
            None => {
                return Err(UsageError(
                    "missing PROGRAM to run (usage: drainit [OPTIONS] [--] PROGRAM [ARGS...])"
                        .into(),
                ))
            }
        };
        let config = Config::from_env(&env, name, program, command.collect())?;
        Ok(match check {
            true => Request::Check(Box::new(config)),
            false => Request::Run(Box::new(config)),
        })
    }

    /// The run's configuration, each concern read by its own file.
    fn from_env(
        env: &Env<'_>,
        name: Name,
        program: OsString,
        args: Vec<OsString>,
    ) -> Result<Config, UsageError> {
        let pdeathsig = env.value(&options::PDEATHSIG, signals::parse_signal)?;
        let remap_exit = env.values(&options::REMAP_EXIT, parse_exit_code)?;
        let group = names::kill_process_group(env, name)?;
        // dumb-init's own rewrites first: the operator's `-r` beats them.
        let mut rewrite = names::default_rewrites(name, group);
        rewrite.extend(env.values(&options::REWRITE, parse_rewrite)?);
        let sources = stop::Sources::read(env)?;
        let mut notices = Vec::new();
        let (ecs, seen) = platform::read(env, sources.can_say_busy(), &mut notices)?;
        let ecs_protect = ecs.as_ref().is_some_and(|e| e.protect.is_some());
        let k8s = platform::k8s(env, sources.can_say_busy(), ecs_protect, seen, &mut notices)?;
        let notify = notify_from(env)?;
        let max_runtime = stop::max_runtime(env, &mut notices)?;
        let drain_active = sources.active()
            || notify.is_some()
            || max_runtime.is_some()
            || ecs
                .as_ref()
                .is_some_and(|e| e.metadata_uri.is_some() || e.protect.is_some());
        let deadline = stop::deadline(
            env,
            &sources,
            drain_active,
            seen,
            k8s.is_some(),
            &mut notices,
        )?;
        let health = health::read(env, !sources.drain_urls.is_empty())?;
        let verbosity = names::verbosity(env, drain_active)?;
        let log_format = env.value_or_default(&options::LOG_FORMAT, parse_log_format)?;
        let timeline = stop::timeline(env, &sources, &deadline)?;
        let mut config = Config {
            pid1: std::process::id() == 1,
            notify,
            grace_max: deadline.grace_max,
            max_runtime,
            log_format,
            timeline,
            stop_hooks: sources.stop_hooks,
            drain_urls: sources.drain_urls,
            drain_field: env.value_or_default(&options::DRAIN_FIELD, parse_pointer)?,
            stop_execs: sources.stop_execs,
            drain_execs: sources.drain_execs,
            drain_timeout: sources.drain_timeout,
            drain_files: sources.drain_files,
            deadline_exit_code: env
                .value_or_default(&options::DEADLINE_EXIT_CODE, parse_exit_code)?,
            exit_report: env.value(&options::EXIT_REPORT, parse_path)?,
            ecs,
            k8s,
            program,
            args,
            subreaper: names::subreaper(env)?,
            pdeathsig,
            verbosity,
            warn_on_reap: env.flag(&options::WARN_ON_REAP)?,
            kill_process_group: group,
            remap_exit,
            rewrite,
            log_filter: env.get("DRAINIT_LOG")?,
            serve: health.serve,
            ready_url: health.ready_url,
            drain_count_field: health.drain_count_field,
            emf: health::emf(env)?,
            notices,
            compat: names::compat(name, group),
        };
        // Last: every option has been read, so every flag that beat its
        // variable has been seen.
        config.notices.extend(env.take_notices());
        Ok(config)
    }
}

/// `--notify`, on by itself or because a socket path is given.
fn notify_from(env: &Env<'_>) -> Result<Option<NotifyConfig>, UsageError> {
    let socket = env.value(&options::NOTIFY_SOCKET, parse_socket_path)?;
    let access = env.value_or_default(&options::NOTIFY_ACCESS, notify::parse_access)?;
    let on = env.flag(&options::NOTIFY)? || socket.is_some();
    Ok(on.then_some(NotifyConfig { socket, access }))
}

#[cfg(test)]
mod tests;
