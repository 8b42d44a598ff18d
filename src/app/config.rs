//! Validated configuration: turns the raw command line and the `DRAINIT_*` /
//! `TINI_*` environment into the settings the supervisor runs on, or into a
//! one-line usage error that names the offending option.

use std::ffi::{OsStr, OsString};
use std::fmt;

use crate::app::cli::RawArgs;
use crate::app::options::{self, Kind};
use crate::app::values::*;
pub use crate::core::settings::{
    Config, EcsConfig, LogFormat, Notice, NotifyConfig, Probe, ProbeTarget, ProtectConfig,
};
use crate::io::commands as sources;
use crate::io::signals;
use crate::proto::http::Target;
use crate::proto::notify_msg as notify;

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
}

/// Where a setting's text came from, so errors name what the user typed.
struct Setting {
    text: String,
    origin: String,
}

/// The name drainit was called by: as `dumb-init` or `tini` (a symlink or
/// a copy that replaces one), it keeps that init's few defaults that would
/// otherwise change silently; any other name, `docker-init` included, is
/// drainit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    Drainit,
    DumbInit,
    Tini,
}

impl Name {
    /// From `argv[0]`: its last path component.
    pub fn of(argv0: Option<&OsStr>) -> Name {
        let base = argv0
            .and_then(|a| std::path::Path::new(a).file_name())
            .and_then(OsStr::to_str)
            .unwrap_or("");
        match base {
            "dumb-init" => Name::DumbInit,
            "tini" => Name::Tini,
            _ => Name::Drainit,
        }
    }

    /// The exit code of a command-line usage error: dumb-init and tini
    /// exit 1; drainit's own is 2.
    pub fn usage_error_code(self) -> u8 {
        match self {
            Name::Drainit => 2,
            Name::DumbInit | Name::Tini => 1,
        }
    }
}

/// The most drain sources a run may have: each costs a poll per round.
pub const MAX_SOURCES: usize = 64;

/// The default `--grace` on ECS and Kubernetes (with a drain option), under
/// their 30 s default kill; elsewhere the declared default applies.
pub const PLATFORM_GRACE: &str = "25s";

/// Looks up environment variables; a function so tests can supply their own.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The options as typed and the environment, read through the option
/// declarations (`app::options`): each option's variable and default come
/// from there, never typed twice.
struct Env<'a> {
    lookup: EnvLookup<'a>,
    raw: RawArgs,
}

impl Env<'_> {
    /// A variable's value; set-but-empty counts as unset, as is usual for
    /// `docker run -e NAME=`.
    fn get(&self, name: &str) -> Result<Option<String>, UsageError> {
        match (self.lookup)(name) {
            None => Ok(None),
            Some(v) if v.is_empty() => Ok(None),
            Some(v) => v
                .into_string()
                .map(Some)
                .map_err(|_| UsageError(format!("{name} is not valid UTF-8"))),
        }
    }

    /// tini's variables switch on when set at all, even to "".
    fn is_set(&self, name: &str) -> bool {
        (self.lookup)(name).is_some()
    }

    /// The flag `--long`'s value if given, else its `DRAINIT_*` variable's.
    fn setting(&self, long: &str) -> Result<Option<Setting>, UsageError> {
        if let Some(text) = self.raw.value(long) {
            return Ok(Some(Setting {
                text,
                origin: format!("--{long}"),
            }));
        }
        let Some(var) = options::get(long).var() else {
            return Ok(None);
        };
        Ok(self.get(&var)?.map(|text| Setting { text, origin: var }))
    }

    /// A repeatable option's values: the flags if given, else its variable,
    /// which holds a comma-separated list, or one value per line where the
    /// declaration says so (commands contain commas; blank lines skipped).
    fn list(&self, long: &str) -> Result<Vec<Setting>, UsageError> {
        let opt = options::get(long);
        let flags = self.raw.values(long);
        if !flags.is_empty() {
            // A comma in a flag splits it as in the variable: the same
            // text means the same sources, whichever way it is given.
            let origin = format!("--{long}");
            let split = |text: String| -> Vec<String> {
                if opt.kind == Kind::Commas {
                    text.split(',').map(|p| p.trim().to_string()).collect()
                } else {
                    vec![text]
                }
            };
            return Ok(flags
                .into_iter()
                .flat_map(split)
                .map(|text| Setting {
                    text,
                    origin: origin.clone(),
                })
                .collect());
        }
        let Some(var) = opt.var() else {
            return Ok(Vec::new());
        };
        let Some(all) = self.get(&var)? else {
            return Ok(Vec::new());
        };
        let setting = |text: &str| Setting {
            text: text.to_string(),
            origin: var.clone(),
        };
        Ok(if opt.kind == Kind::Lines {
            all.lines()
                .filter(|line| !line.trim().is_empty())
                .map(setting)
                .collect()
        } else {
            all.split(',').map(|part| setting(part.trim())).collect()
        })
    }

    /// `--long`'s value, or its variable's, parsed. A `fn` parser and no
    /// inlining keep one copy of this per value type in the binary.
    #[inline(never)]
    fn value<T>(
        &self,
        long: &str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, UsageError> {
        match self.setting(long)? {
            None => Ok(None),
            Some(s) => s.parse(parse).map(Some),
        }
    }

    /// `--long`'s value, its variable's, or else its declared default, each
    /// parsed by the same parser.
    fn value_or_default<T>(
        &self,
        long: &str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<T, UsageError> {
        match self.value(long, parse)? {
            Some(value) => Ok(value),
            None => default(long, parse),
        }
    }

    /// A repeatable option's values, each parsed (see `value`).
    #[inline(never)]
    fn values<T>(
        &self,
        long: &str,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Vec<T>, UsageError> {
        self.list(long)?.iter().map(|s| s.parse(parse)).collect()
    }

    fn flag(&self, long: &str) -> Result<bool, UsageError> {
        if self.raw.flag(long) {
            return Ok(true);
        }
        let Some(var) = options::get(long).var() else {
            return Ok(false);
        };
        match self.get(&var)? {
            None => Ok(false),
            Some(text) => parse_bool(&text).map_err(|e| invalid(&text, &var, &e)),
        }
    }
}

/// The declared default of `--long`, parsed as a typed value would be: the
/// default `--help` shows is the one used. (A test parses every declared
/// default, so the error here cannot happen in a release.)
#[inline(never)]
fn default<T>(long: &str, parse: fn(&str) -> Result<T, String>) -> Result<T, UsageError> {
    let text = options::get(long).default_value().unwrap_or_default();
    parse(text).map_err(|why| invalid(text, &format!("the default of --{long}"), &why))
}

fn invalid(text: &str, origin: &str, why: &str) -> UsageError {
    UsageError(format!("invalid value '{text}' for {origin}: {why}"))
}

impl Setting {
    fn parse<T>(&self, parse: fn(&str) -> Result<T, String>) -> Result<T, UsageError> {
        parse(&self.text).map_err(|why| invalid(&self.text, &self.origin, &why))
    }
}

/// The values of a repeatable source option, each parsed, none given twice
/// (as typed, spaces around aside): a source given twice is a mistake (it
/// would be asked twice per round). A `dyn` parser keeps one copy of this
/// per value type in the binary.
fn unique<T>(
    settings: Vec<Setting>,
    parse: &dyn Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, UsageError> {
    let mut out = Vec::with_capacity(settings.len());
    for (i, setting) in settings.iter().enumerate() {
        let text = setting.text.trim();
        if settings[..i].iter().any(|s| s.text.trim() == text) {
            return Err(invalid(text, &setting.origin, "given twice"));
        }
        out.push(
            parse(&setting.text).map_err(|why| invalid(&setting.text, &setting.origin, &why))?,
        );
    }
    Ok(out)
}

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
        if raw.flag("license") {
            return Ok(Request::License);
        }
        if let Some(mut url) = raw.value("probe") {
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
            return Self::probe_from(&Env { lookup: env, raw }, &url).map(Request::Probe);
        }
        let mut command = std::mem::take(&mut raw.command).into_iter();
        let env = Env { lookup: env, raw };
        let program = command
            .next()
            .filter(|p| p != OsStr::new(""))
            .ok_or_else(|| {
                UsageError(
                    "missing PROGRAM to run (usage: drainit [OPTIONS] [--] PROGRAM [ARGS...])"
                        .into(),
                )
            })?;
        let args = command.collect();

        let pdeathsig = env.value("pdeathsig", signals::parse_signal)?;

        let remap_exit = env.values("remap-exit", parse_exit_code)?;
        let rewrite = env.values("rewrite", parse_rewrite)?;

        // One helper per kind of value keeps every error naming its option.
        let duration = |long: &str| env.value_or_default(long, parse_duration);
        let stop_urls = unique(env.list("stop-url")?, &parse_url)?;
        let stop_method = env.value_or_default("stop-method", parse_method)?;
        let drain_urls = unique(env.list("drain-url")?, &parse_url)?;
        let pre_stop_delay = duration("pre-stop-delay")?;
        // Programs are found on the PATH drainit runs them with.
        let path = (env.lookup)("PATH").and_then(|p| p.into_string().ok());
        let parse_cmd = |text: &str| sources::parse_command(text, path.as_deref());
        let stop_execs = unique(env.list("stop-exec")?, &parse_cmd)?;
        let drain_execs = unique(env.list("drain-exec")?, &parse_cmd)?;
        let drain_files = unique(env.list("drain-file")?, &parse_drain_file)?;
        let sources = drain_urls.len() + drain_execs.len() + drain_files.len();
        if sources > MAX_SOURCES {
            return Err(UsageError(format!(
                "at most {MAX_SOURCES} drain sources (--drain-url, --drain-exec and --drain-file together); {sources} given"
            )));
        }
        let hook_timeout = env.value("hook-timeout", parse_interval)?;
        let drain_timeout = env.value_or_default("drain-timeout", parse_interval)?;
        // Task protection asks the sources that can say "busy": URLs and
        // commands (a drain file only appears at the end of a stop).
        let protect_sources = !drain_urls.is_empty() || !drain_execs.is_empty();
        let mut notices = Vec::new();
        let (ecs, on_ecs) = Self::ecs_from(&env, protect_sources, &mut notices)?;
        let notify_socket = env.value("notify-socket", parse_socket_path)?;
        let notify_access = env.value_or_default("notify-access", notify::parse_access)?;
        // A socket path implies --notify.
        let notify = (env.flag("notify")? || notify_socket.is_some()).then_some(NotifyConfig {
            socket: notify_socket,
            access: notify_access,
        });
        let drain_active = !drain_urls.is_empty()
            || notify.is_some()
            || !stop_urls.is_empty()
            || !stop_execs.is_empty()
            || !drain_execs.is_empty()
            || !drain_files.is_empty()
            || !pre_stop_delay.is_zero()
            || ecs
                .as_ref()
                .is_some_and(|e| e.metadata_uri.is_some() || e.protect.is_some());
        // The default applies only with a drain option, and fits the
        // platform's own kill: ECS's stopTimeout and Kubernetes'
        // terminationGracePeriodSeconds default to 30 s, `docker stop` to 10.
        let grace = match env.setting("grace")? {
            Some(s) => s.parse(parse_grace)?,
            None if !drain_active => None,
            None => {
                let kubernetes = env.get("KUBERNETES_SERVICE_HOST")?.is_some();
                let (text, why) = match (on_ecs, kubernetes) {
                    (true, _) => (PLATFORM_GRACE, "on ECS, whose stopTimeout defaults to 30 s"),
                    (_, true) => (
                        PLATFORM_GRACE,
                        "on Kubernetes, whose terminationGracePeriodSeconds defaults to 30 s",
                    ),
                    _ => (
                        options::get("grace").default_value().unwrap_or_default(),
                        "no ECS or Kubernetes here; docker stop waits 10 s",
                    ),
                };
                let grace = parse_grace(text).map_err(|e| invalid(text, "--grace", &e))?;
                notices.push(Notice::Info(format!(
                    "--grace {text} by default ({why}); set --grace to change it"
                )));
                grace
            }
        };
        // The deadline must leave the app time to get its stop signal: a
        // delay that reaches it would mean SIGKILL without any warning.
        if let Some(grace) = grace.filter(|g| pre_stop_delay >= *g) {
            return Err(UsageError(format!(
                "--pre-stop-delay ({} ms) must be shorter than --grace ({} ms): the app would be killed before it got its stop signal",
                crate::util::time::millis(pre_stop_delay),
                crate::util::time::millis(grace)
            )));
        }
        // An explicit hook timeout must fit between the delay and the
        // deadline, or the stop signal could not come before SIGKILL.
        if let (Some(grace), Some(hook)) = (grace, hook_timeout) {
            if pre_stop_delay + hook >= grace {
                return Err(UsageError(format!(
                    "--pre-stop-delay ({} ms) + --hook-timeout ({} ms) must be shorter than --grace ({} ms)",
                    crate::util::time::millis(pre_stop_delay),
                    crate::util::time::millis(hook),
                    crate::util::time::millis(grace)
                )));
            }
        }
        let grace_max = match env.setting("grace-max")? {
            None => grace,
            Some(s) => {
                let max = s.parse(parse_duration)?;
                match grace {
                    None => {
                        return Err(UsageError(format!(
                        "{} needs a deadline, and there is none (--grace none, or no drain option)",
                        s.origin
                    )))
                    }
                    Some(g) if max < g => {
                        return Err(UsageError(format!(
                            "{} ({} ms) must not be below --grace ({} ms)",
                            s.origin,
                            crate::util::time::millis(max),
                            crate::util::time::millis(g)
                        )))
                    }
                    Some(_) => Some(max),
                }
            }
        };

        let serve = env.value("serve", parse_serve)?;
        let ready_url = env.value("ready-url", parse_ready_url)?;
        if ready_url.is_some() && serve.is_none() {
            return Err(UsageError(
                "--ready-url needs --serve: it is asked for /readyz".into(),
            ));
        }
        let drain_count_field = env.value("drain-count-field", parse_pointer)?;
        if drain_count_field.is_some() && env.list("drain-url")?.is_empty() {
            return Err(UsageError(
                "--drain-count-field needs --drain-url: the count is read from its body".into(),
            ));
        }

        // tini: each -v adds one to the default of 1; TINI_VERBOSITY replaces
        // the count. DRAINIT_VERBOSITY is an ordinary variable: -v beats it.
        // With a drain option the default is 2, so the drain progress and
        // the exit report are visible without asking.
        let default_verbosity = if drain_active { 2 } else { 1 };
        let verbose_count = env.raw.count("verbose");
        let mut verbosity = if verbose_count > 0 {
            1u8.saturating_add(verbose_count).min(4)
        } else {
            // DRAINIT_VERBOSE is `--verbose`'s own variable (a level, as
            // a count of -v makes no sense in a variable); DRAINIT_VERBOSITY
            // is the older spelling, still read.
            let verbose = options::env_var("verbose");
            let found = match env.get(&verbose)? {
                Some(text) => Some((text, verbose)),
                None => env
                    .get("DRAINIT_VERBOSITY")?
                    .map(|text| (text, "DRAINIT_VERBOSITY".to_string())),
            };
            match found {
                Some((text, var)) => {
                    parse_verbosity(&text).map_err(|e| invalid(&text, &var, &e))?
                }
                None => default_verbosity,
            }
        };
        if let Some(text) = env.get("TINI_VERBOSITY")? {
            verbosity = parse_verbosity(&text).map_err(|e| invalid(&text, "TINI_VERBOSITY", &e))?;
        }

        Ok(Request::Run(Box::new(Config {
            notify,
            grace_max,
            log_format: env.value_or_default("log-format", parse_log_format)?,
            grace,
            stop_signals: env.value_or_default("stop-signals", parse_signal_list)?,
            pre_stop_delay,
            stop_hooks: stop_urls
                .into_iter()
                .map(|url| Target {
                    method: stop_method.clone(),
                    url,
                })
                .collect(),
            drain_urls,
            drain_field: env.value_or_default("drain-field", parse_pointer)?,
            stop_execs,
            hook_timeout: match hook_timeout {
                Some(hook) => hook,
                None => default("hook-timeout", parse_interval)?,
            },
            drain_execs,
            drain_timeout,
            drain_files,
            drain_interval: env.value_or_default("drain-interval", parse_interval)?,
            ready_grace: duration("ready-grace")?,
            orphan_grace: duration("orphan-grace")?,
            deadline_exit_code: env.value_or_default("deadline-exit-code", parse_exit_code)?,
            exit_report: env.value("exit-report", parse_path)?,
            ecs,
            program,
            args,
            subreaper: env.flag("subreaper")? || env.is_set("TINI_SUBREAPER"),
            pdeathsig,
            verbosity,
            warn_on_reap: env.flag("warn-on-reap")?,
            // dumb-init: DUMB_INIT_SETSID=0 and -c mean "the child only"
            // (drainit's default); any other value is its session mode,
            // which for signals is -g. -c, a flag, beats every variable.
            // Called dumb-init, its own default holds: the group unless
            // DUMB_INIT_SETSID is exactly 0 (set empty counts as on).
            kill_process_group: !env.raw.flag("single-child")
                && (env.flag("kill-process-group")?
                    || env.is_set("TINI_KILL_PROCESS_GROUP")
                    || match name {
                        Name::DumbInit => {
                            (env.lookup)("DUMB_INIT_SETSID").map_or(true, |v| v != *"0")
                        }
                        _ => env.get("DUMB_INIT_SETSID")?.is_some_and(|v| v != "0"),
                    }),
            remap_exit,
            rewrite,
            log_filter: env.get("DRAINIT_LOG")?,
            serve,
            ready_url,
            drain_count_field,
            // Checked even without --emf: a bad value is a mistake anyway.
            emf: {
                let namespace = env.value_or_default("emf-namespace", parse_namespace)?;
                env.flag("emf")?.then_some(namespace)
            },
            notices,
        })))
    }

    /// `--probe`: reads only its target, `--probe-timeout` and the address
    /// `--serve` or `DRAINIT_SERVE` gives (for the default target); never
    /// another variable, so nothing else in the image can break the check.
    fn probe_from(env: &Env<'_>, url: &str) -> Result<Probe, UsageError> {
        let timeout = match env.raw.value("probe-timeout") {
            Some(text) => {
                parse_interval(&text).map_err(|e| invalid(&text, "--probe-timeout", &e))?
            }
            None => default("probe-timeout", parse_interval)?,
        };
        let target = if url.trim().is_empty() {
            let Some(addr) = env.value("serve", parse_serve)? else {
                return Err(UsageError(
                    "--probe without a URL checks --serve's /healthz, and neither --serve nor DRAINIT_SERVE is set".into(),
                ));
            };
            ProbeTarget::Http(format!("http://{}/healthz", loopback_for(addr)))
        } else {
            parse_probe_target(url).map_err(|e| invalid(url, "--probe", &e))?
        };
        Ok(Probe { target, timeout })
    }

    /// The ECS settings (None when neither the metadata watch nor task
    /// protection is on), and whether this is an ECS task at all (a usable
    /// metadata variable, whatever `--ecs` says).
    fn ecs_from(
        env: &Env<'_>,
        has_drain_url: bool,
        notices: &mut Vec<Notice>,
    ) -> Result<(Option<EcsConfig>, bool), UsageError> {
        let mode = env.value_or_default("ecs", parse_ecs_mode)?;
        let interval = env.value_or_default("ecs-interval", parse_ecs_interval)?;
        let metadata_var = [
            "ECS_CONTAINER_METADATA_URI_V4",
            "ECS_CONTAINER_METADATA_URI",
        ]
        .into_iter()
        .find_map(|var| {
            env.get(var).transpose().map(|v| {
                v.map(|text| Setting {
                    text,
                    origin: var.to_string(),
                })
            })
        })
        .transpose()?;
        // The variable is the platform's, not the operator's: under auto, one
        // that is not a usable http:// URL is a warning and ECS stays off.
        let usable = match metadata_var {
            None => None,
            // Off: the variable is not read at all (nor judged).
            Some(_) if mode == EcsMode::Off => None,
            Some(setting) => match parse_url(&setting.text) {
                Ok(url) => Some(url),
                Err(e) if mode == EcsMode::On => {
                    return Err(invalid(&setting.text, &setting.origin, &e))
                }
                Err(e) => {
                    notices.push(Notice::Warn(format!(
                        "{} is not a usable http:// URL ({e}): ECS integration is off",
                        setting.origin
                    )));
                    None
                }
            },
        };
        let on_ecs = usable.is_some();
        let metadata_uri = match (mode, usable) {
            (EcsMode::Off, _) => None,
            (EcsMode::On, None) => {
                return Err(UsageError(
                    "--ecs on needs ECS_CONTAINER_METADATA_URI_V4 (or ECS_CONTAINER_METADATA_URI), which is not set".into(),
                ))
            }
            (_, uri) => uri,
        };
        // Checked whether or not protection is on: a bad value is a
        // mistake even where it has no effect yet.
        let protect_interval = env.value_or_default("protect-interval", parse_ecs_interval)?;
        let protect_minutes = env.value_or_default("protect-minutes", parse_protect_minutes)?;
        let protect = if env.flag("ecs-protect")? {
            if mode == EcsMode::Off {
                return Err(UsageError(
                    "--ecs-protect cannot be used with --ecs off".into(),
                ));
            }
            if !has_drain_url {
                return Err(UsageError(
                    "--ecs-protect needs --drain-url or --drain-exec to know when the app is busy"
                        .into(),
                ));
            }
            let agent_uri = env.get("ECS_AGENT_URI")?.ok_or_else(|| {
                UsageError(
                    "--ecs-protect needs ECS_AGENT_URI, which is not set (is this an ECS task?)"
                        .into(),
                )
            })?;
            let agent_uri =
                parse_url(&agent_uri).map_err(|e| invalid(&agent_uri, "ECS_AGENT_URI", &e))?;
            Some(ProtectConfig {
                agent_uri,
                interval: protect_interval,
                minutes: protect_minutes,
            })
        } else {
            None
        };
        if metadata_uri.is_none() && protect.is_none() {
            return Ok((None, on_ecs));
        }
        let ecs = EcsConfig {
            metadata_uri,
            interval,
            protect,
        };
        Ok((Some(ecs), on_ecs))
    }
}

/// Where a probe reaches a listener bound to `addr`: an unspecified
/// address (0.0.0.0, ::) is every address, loopback included.
fn loopback_for(addr: std::net::SocketAddr) -> std::net::SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    std::net::SocketAddr::new(ip, addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::cli;
    use clap::Parser;
    use std::path::PathBuf;
    use std::time::Duration;

    /// The grace period when a drain option is set and `--grace` is not
    /// (declared in `app::options`; pinned here).
    /// The default grace off ECS and Kubernetes, and on them.
    const DEFAULT_GRACE: Duration = Duration::from_secs(8);
    const PLATFORM: Duration = Duration::from_secs(25);
    use std::collections::HashMap;

    fn parse_with(args: &[&str], vars: &[(&str, &str)]) -> Result<Config, UsageError> {
        let raw = RawArgs::try_parse_from(std::iter::once("drainit").chain(args.iter().copied()))
            .map_err(|e| UsageError(e.to_string()))?;
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        match Config::from_raw(raw, &|name| vars.get(name).cloned())? {
            Request::Run(config) => Ok(*config),
            Request::License => Err(UsageError("license".into())),
            Request::Probe(_) => Err(UsageError("probe".into())),
        }
    }

    fn parse(args: &[&str]) -> Config {
        parse_with(args, &[]).expect("valid arguments")
    }

    #[test]
    fn durations_in_every_form() {
        let cases = [
            ("500ms", 500),
            ("20s", 20_000),
            ("2m", 120_000),
            ("20", 20_000),
            ("0", 0),
            ("0s", 0),
            ("1.5s", 1_500),
            ("0.25", 250),
            ("1.5m", 90_000),
            ("0.5ms", 0),
            (" 3s ", 3_000),
            ("007", 7_000),
        ];
        for (text, ms) in cases {
            assert_eq!(
                parse_duration(text).map(|d| d.as_millis()),
                Ok(ms),
                "{text}"
            );
        }
    }

    #[test]
    fn durations_reject_garbage() {
        for text in [
            "",
            "abc",
            "s",
            "ms",
            "-1",
            "-1s",
            "1h",
            "1d",
            "1 s",
            "1e3",
            "1.2.3",
            ".",
            "1,5",
            "inf",
            "NaN",
            "+5",
            "20S",
            "5sec",
            "10us",
            "99999999999999999999m",
            "∞",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn exit_codes_in_range_only() {
        for n in 0..=255u16 {
            assert_eq!(parse_exit_code(&n.to_string()), Ok(n as u8));
        }
        for text in ["256", "-1", "", "x", "1.0", "+1", "0x10"] {
            assert!(parse_exit_code(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn rewrite_pairs() {
        assert_eq!(parse_rewrite("TERM:QUIT"), Ok((15, 3)));
        assert_eq!(parse_rewrite("15:0"), Ok((15, 0)));
        assert_eq!(parse_rewrite("sigint:SIGTERM"), Ok((2, 15)));
        // Any forwarded signal is a source, fault and job-control ones too.
        assert_eq!(parse_rewrite("SEGV:TERM"), Ok((11, 15)));
        assert_eq!(parse_rewrite("TTIN:HUP"), Ok((21, 1)));
        for text in [
            "TERM",
            "TERM:",
            ":QUIT",
            "TERM:BOGUS",
            "CHLD:TERM",
            "KILL:TERM",
            "STOP:TERM",
            "TERM:QUIT:HUP",
        ] {
            assert!(parse_rewrite(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn option_parsing_stops_at_first_word() {
        let c = parse(&["-v", "ls", "-l", "-v", "--", "x"]);
        assert_eq!(c.program, "ls");
        assert_eq!(c.args, ["-l", "-v", "--", "x"]);
        assert_eq!(c.verbosity, 2);
        let c = parse(&["--", "-weird-name", "-s"]);
        assert_eq!(c.program, "-weird-name");
        assert_eq!(c.args, ["-s"]);
        assert!(!c.subreaper);
    }

    #[test]
    fn tini_flags() {
        let c = parse(&[
            "-s", "-g", "-w", "-vvv", "-p", "SIGKILL", "-e", "143", "-e", "1", "true",
        ]);
        assert!(c.subreaper && c.kill_process_group && c.warn_on_reap);
        assert_eq!(c.verbosity, 4);
        assert_eq!(c.pdeathsig, Some(9));
        assert_eq!(c.remap_exit, [143, 1]);
        assert_eq!(c.program, "true");
    }

    #[test]
    fn tini_variables() {
        let c = parse_with(
            &["-vv", "x"],
            &[
                ("TINI_SUBREAPER", ""),
                ("TINI_KILL_PROCESS_GROUP", "0"),
                ("TINI_VERBOSITY", "0"),
            ],
        )
        .unwrap();
        assert!(c.subreaper, "TINI_SUBREAPER switches on when set at all");
        assert!(c.kill_process_group, "even to 0, as in tini");
        assert_eq!(c.verbosity, 0, "TINI_VERBOSITY replaces the -v count");
        assert!(parse_with(&["x"], &[("TINI_VERBOSITY", "loud")])
            .unwrap_err()
            .0
            .contains("TINI_VERBOSITY"));
    }

    #[test]
    fn drainit_variables_and_flag_precedence() {
        let vars = [
            ("DRAINIT_SUBREAPER", "yes"),
            ("DRAINIT_KILL_PROCESS_GROUP", "0"),
            ("DRAINIT_PDEATHSIG", "HUP"),
            ("DRAINIT_REMAP_EXIT", "3, 4"),
            ("DRAINIT_REWRITE", "TERM:QUIT,HUP:0"),
            ("DRAINIT_VERBOSITY", "3"),
        ];
        let c = parse_with(&["x"], &vars).unwrap();
        assert!(c.subreaper);
        assert!(!c.kill_process_group);
        assert_eq!(c.pdeathsig, Some(libc::SIGHUP));
        assert_eq!(c.remap_exit, [3, 4]);
        assert_eq!(c.rewrite, [(15, 3), (1, 0)]);
        assert_eq!(c.verbosity, 3);
        let c = parse_with(
            &["-p", "USR1", "-e", "9", "-r", "INT:TERM", "-v", "x"],
            &vars,
        )
        .unwrap();
        assert_eq!(
            c.pdeathsig,
            Some(libc::SIGUSR1),
            "a flag beats its variable"
        );
        assert_eq!(c.remap_exit, [9]);
        assert_eq!(c.rewrite, [(2, 15)]);
        assert_eq!(c.verbosity, 2);
        let c = parse_with(&["x"], &[("DRAINIT_PDEATHSIG", "")]).unwrap();
        assert_eq!(c.pdeathsig, None, "empty means unset");
    }

    #[test]
    fn bad_values_name_the_option_in_one_line() {
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case; 8] = [
            (&["-e", "256", "x"], &[], "--remap-exit"),
            (&["-p", "NOPE", "x"], &[], "--pdeathsig"),
            (&["-r", "TERM", "x"], &[], "--rewrite"),
            (
                &["x"],
                &[("DRAINIT_REMAP_EXIT", "1,x")],
                "DRAINIT_REMAP_EXIT",
            ),
            (
                &["x"],
                &[("DRAINIT_SUBREAPER", "maybe")],
                "DRAINIT_SUBREAPER",
            ),
            (&["x"], &[("DRAINIT_PDEATHSIG", "0")], "DRAINIT_PDEATHSIG"),
            (&["x"], &[("DRAINIT_VERBOSITY", "-1")], "DRAINIT_VERBOSITY"),
            (&[], &[], "PROGRAM"),
        ];
        for (args, vars, needle) in cases {
            let err = parse_with(args, vars).unwrap_err().0;
            assert!(err.contains(needle), "{err:?} should name {needle}");
            assert!(!err.contains('\n'), "{err:?} should be one line");
        }
    }

    #[test]
    fn drain_defaults() {
        let c = parse(&["x"]);
        assert_eq!(
            c.grace, None,
            "no drain option: tini behaviour, no deadline"
        );
        assert_eq!(c.verbosity, 1);
        assert_eq!(c.stop_signals, [libc::SIGTERM, libc::SIGINT]);
        assert_eq!(c.drain_field, "/readyForTermination");
        assert_eq!(c.drain_interval, Duration::from_secs(1));
        assert_eq!(c.ready_grace, Duration::from_secs(2));
        assert_eq!(c.orphan_grace, Duration::ZERO);
        assert_eq!(c.deadline_exit_code, 124);
        assert_eq!(c.log_format, LogFormat::Text);
        let c = parse(&["--drain-url", "http://127.0.0.1:1/d", "x"]);
        assert_eq!(c.grace, Some(DEFAULT_GRACE));
        assert_eq!(c.verbosity, 2, "drain progress is shown by default");
        let c = parse(&["--stop-url", "http://127.0.0.1:1/s", "x"]);
        assert_eq!(c.grace, Some(DEFAULT_GRACE));
        assert_eq!(c.stop_hooks[0].method, "POST");
        let c = parse(&["--pre-stop-delay", "5s", "x"]);
        assert_eq!(c.grace, Some(DEFAULT_GRACE));
    }

    #[test]
    fn grace_forms() {
        let url = "http://127.0.0.1:1/d";
        for (text, want) in [
            ("none", None),
            ("NONE", None),
            ("0", None),
            ("0s", None),
            ("20s", Some(20_000)),
            ("500ms", Some(500)),
            ("2m", Some(120_000)),
            ("90", Some(90_000)),
        ] {
            let c = parse(&["--grace", text, "--drain-url", url, "x"]);
            assert_eq!(c.grace.map(|g| g.as_millis() as u64), want, "{text}");
        }
        let c = parse_with(&["--drain-url", url, "x"], &[("DRAINIT_GRACE", "10s")]).unwrap();
        assert_eq!(c.grace, Some(Duration::from_secs(10)));
        let c = parse_with(&["--grace", "3s", "x"], &[("DRAINIT_GRACE", "10s")]).unwrap();
        assert_eq!(c.grace, Some(Duration::from_secs(3)), "flag beats variable");
    }

    #[test]
    fn drain_options_from_the_environment() {
        let vars = [
            ("DRAINIT_DRAIN_URL", "http://127.0.0.1:9/drain"),
            ("DRAINIT_DRAIN_FIELD", "/a/b"),
            ("DRAINIT_DRAIN_INTERVAL", "250ms"),
            ("DRAINIT_STOP_SIGNALS", "sigterm,QUIT"),
            ("DRAINIT_STOP_URL", "http://127.0.0.1:9/stop"),
            ("DRAINIT_STOP_METHOD", "delete"),
            ("DRAINIT_READY_GRACE", "0"),
            ("DRAINIT_ORPHAN_GRACE", "3s"),
            ("DRAINIT_PRE_STOP_DELAY", "1"),
            ("DRAINIT_DEADLINE_EXIT_CODE", "75"),
            ("DRAINIT_EXIT_REPORT", "/dev/termination-log"),
            ("DRAINIT_LOG_FORMAT", "JSON"),
        ];
        let c = parse_with(&["x"], &vars).unwrap();
        assert_eq!(c.drain_urls, ["http://127.0.0.1:9/drain"]);
        assert_eq!(c.drain_field, "/a/b");
        assert_eq!(c.drain_interval, Duration::from_millis(250));
        assert_eq!(c.stop_signals, [libc::SIGTERM, libc::SIGQUIT]);
        assert_eq!(c.stop_hooks[0].method, "DELETE");
        assert_eq!(c.ready_grace, Duration::ZERO);
        assert_eq!(c.orphan_grace, Duration::from_secs(3));
        assert_eq!(c.pre_stop_delay, Duration::from_secs(1));
        assert_eq!(c.deadline_exit_code, 75);
        assert_eq!(
            c.exit_report.as_deref(),
            Some(std::path::Path::new("/dev/termination-log"))
        );
        assert_eq!(c.log_format, LogFormat::Json);
    }

    #[test]
    fn bad_drain_values_name_their_option() {
        let cases = [
            (vec!["--grace", "abc"], "--grace"),
            (vec!["--drain-url", "https://127.0.0.1/"], "--drain-url"),
            (vec!["--drain-field", "x"], "--drain-field"),
            (vec!["--drain-interval", "0"], "--drain-interval"),
            (vec!["--drain-interval", "0ms"], "--drain-interval"),
            (vec!["--stop-signals", "CHLD"], "--stop-signals"),
            (vec!["--stop-signals", ""], "--stop-signals"),
            (vec!["--stop-method", "PO ST"], "--stop-method"),
            (vec!["--ready-grace", "soon"], "--ready-grace"),
            (vec!["--log-format", "yaml"], "--log-format"),
        ];
        for (mut args, needle) in cases {
            args.push("x");
            let err = parse_with(&args, &[]).unwrap_err().0;
            assert!(err.contains(needle) && !err.contains('\n'), "{err:?}");
        }
    }

    #[test]
    fn ecs_detection() {
        assert_eq!(parse(&["x"]).ecs, None);
        let v4 = [(
            "ECS_CONTAINER_METADATA_URI_V4",
            "http://169.254.170.2/v4/abc",
        )];
        let c = parse_with(&["x"], &v4).unwrap();
        let ecs = c.ecs.clone().unwrap();
        assert_eq!(
            ecs.metadata_uri.as_deref(),
            Some("http://169.254.170.2/v4/abc")
        );
        assert_eq!(ecs.interval, Duration::from_secs(5));
        assert_eq!(ecs.protect, None);
        assert_eq!(c.grace, Some(PLATFORM), "ECS counts as a drain feature");
        assert_eq!(c.verbosity, 2);
        let v3 = [("ECS_CONTAINER_METADATA_URI", "http://169.254.170.2/v3/abc")];
        let c = parse_with(&["x"], &v3).unwrap();
        assert_eq!(
            c.ecs.unwrap().metadata_uri.as_deref(),
            Some("http://169.254.170.2/v3/abc")
        );
        let both = [v4[0], v3[0]];
        let c = parse_with(&["x"], &both).unwrap();
        assert!(
            c.ecs.unwrap().metadata_uri.unwrap().contains("/v4/"),
            "v4 wins"
        );
        assert_eq!(parse_with(&["--ecs", "off", "x"], &v4).unwrap().ecs, None);
        assert_eq!(
            parse_with(&["x"], &[("DRAINIT_ECS", "off"), v4[0]])
                .unwrap()
                .ecs,
            None
        );
        let c = parse_with(&["--ecs-interval", "1s", "x"], &v4).unwrap();
        assert_eq!(c.ecs.unwrap().interval, Duration::from_secs(1));
    }

    #[test]
    fn ecs_protection_settings() {
        let vars = [("ECS_AGENT_URI", "http://169.254.170.2/api/abc")];
        let c = parse_with(
            &[
                "--ecs-protect",
                "--drain-url",
                "http://127.0.0.1:8080/drain",
                "x",
            ],
            &vars,
        )
        .unwrap();
        let p = c.ecs.unwrap().protect.unwrap();
        assert_eq!(p.agent_uri, "http://169.254.170.2/api/abc");
        assert_eq!(p.interval, Duration::from_secs(10));
        assert_eq!(p.minutes, 60);
        for minutes in ["1", "2880"] {
            let c = parse_with(
                &[
                    "--ecs-protect",
                    "--protect-minutes",
                    minutes,
                    "--drain-url",
                    "http://127.0.0.1:1/d",
                    "x",
                ],
                &vars,
            )
            .unwrap();
            assert_eq!(c.ecs.unwrap().protect.unwrap().minutes.to_string(), minutes);
        }
        for minutes in ["0", "2881", "1.5", "x", ""] {
            let err = parse_with(
                &[
                    "--ecs-protect",
                    "--protect-minutes",
                    minutes,
                    "--drain-url",
                    "http://127.0.0.1:1/d",
                    "x",
                ],
                &vars,
            )
            .unwrap_err();
            assert!(err.0.contains("--protect-minutes"), "{err}");
        }
        let err = parse_with(
            &[
                "--ecs-protect",
                "--ecs",
                "off",
                "--drain-url",
                "http://127.0.0.1:1/d",
                "x",
            ],
            &vars,
        )
        .unwrap_err();
        assert!(err.0.contains("--ecs off"), "{err}");
        let err = parse_with(
            &["--ecs-protect", "--drain-url", "http://127.0.0.1:1/d", "x"],
            &[("ECS_AGENT_URI", "https://x/")],
        )
        .unwrap_err();
        assert!(err.0.contains("ECS_AGENT_URI"), "{err}");
        // The platform's variable: a bad one is a warning under auto, and
        // only --ecs on makes it an error.
        for bad in [
            "unix:/x",
            "https://169.254.170.2/v4/abc",
            "garbage",
            "http://[fe80::1%eth0]/v4",
        ] {
            let var = [("ECS_CONTAINER_METADATA_URI_V4", bad)];
            let c = parse_with(&["--drain-url", "http://127.0.0.1:1/d", "x"], &var).unwrap();
            assert_eq!(c.ecs, None, "{bad}");
            assert_eq!(c.grace, Some(DEFAULT_GRACE), "{bad}: no platform");
            let warnings = c
                .notices
                .iter()
                .filter(|n| matches!(n, Notice::Warn(_)))
                .count();
            assert_eq!(warnings, 1, "{bad}: {:?}", c.notices);
            let err = parse_with(&["--ecs", "on", "x"], &var).unwrap_err();
            assert!(err.0.contains("ECS_CONTAINER_METADATA_URI_V4"), "{err}");
        }
        // Bad values are refused even where protection is off.
        let err = parse_with(&["--protect-minutes", "0", "x"], &[]).unwrap_err();
        assert!(err.0.contains("--protect-minutes"), "{err}");
        let err = parse_with(&["--protect-interval", "zz", "x"], &[]).unwrap_err();
        assert!(err.0.contains("--protect-interval"), "{err}");
        let err = parse_with(&["x"], &[("DRAINIT_PROTECT_MINUTES", "0")]).unwrap_err();
        assert!(err.0.contains("DRAINIT_PROTECT_MINUTES"), "{err}");
    }

    #[test]
    fn rewrite_lookup() {
        let c = parse(&["-r", "TERM:QUIT", "-r", "HUP:0", "x"]);
        assert_eq!(c.rewritten(libc::SIGTERM), Some(libc::SIGQUIT));
        assert_eq!(c.rewritten(libc::SIGHUP), None);
        assert_eq!(c.rewritten(libc::SIGUSR1), Some(libc::SIGUSR1));
    }

    /// The environment every option can be checked against: ECS metadata
    /// and task protection active, so their options are read too.
    const ALL_ON: [(&str, &str); 4] = [
        ("ECS_CONTAINER_METADATA_URI_V4", "http://127.0.0.1:1/v4"),
        ("ECS_AGENT_URI", "http://127.0.0.1:1/api"),
        ("DRAINIT_ECS_PROTECT", "1"),
        ("DRAINIT_DRAIN_URL", "http://127.0.0.1:1/d"),
    ];

    /// Every long option that is a setting, with its help text.
    fn settings_with_help() -> Vec<(String, String)> {
        cli::command()
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?;
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                options::OPTIONS
                    .iter()
                    .any(|o| o.long == long && o.var)
                    .then(|| (long.to_string(), help))
            })
            .collect()
    }

    #[test]
    // Dozens of full parses: minutes under Miri, and no unsafe code in them.
    #[cfg_attr(miri, ignore)]
    fn every_long_option_has_a_working_variable_listed_in_help() {
        let help = cli::command().render_help().to_string();
        parse_with(&["x"], &ALL_ON).expect("the base environment is valid");
        let options = settings_with_help();
        assert!(options.len() >= 25, "{options:?}");
        for (long, _) in &options {
            let var = options::env_var(long);
            assert!(
                help.contains(&format!("[env: {var}]")),
                "--help does not list {var}"
            );
            let mut env: Vec<(&str, &str)> =
                ALL_ON.iter().copied().filter(|(k, _)| *k != var).collect();
            env.push((&var, "@@"));
            match parse_with(&["x"], &env) {
                Err(e) => assert!(e.0.contains(&var), "{var}=@@ gave {e}"),
                // Any text is a valid path: then it must have arrived.
                Ok(c) if var == "DRAINIT_DRAIN_FILE" => {
                    assert_eq!(c.drain_files, [PathBuf::from("@@")])
                }
                Ok(c) => assert_eq!(
                    c.exit_report,
                    Some(PathBuf::from("@@")),
                    "{var} was silently ignored"
                ),
            }
        }
    }

    #[test]
    // Dozens of full parses: minutes under Miri, and no unsafe code in them.
    #[cfg_attr(miri, ignore)]
    fn every_default_in_help_is_the_default() {
        let base = parse_with(&["x"], &ALL_ON).unwrap();
        let mut checked = 0;
        for (long, help) in settings_with_help() {
            let Some(default) = help
                .split("[default: ")
                .nth(1)
                .and_then(|rest| rest.split(']').next())
                .filter(|d| !d.contains(' '))
            else {
                continue;
            };
            let var = options::env_var(&long);
            let mut env: Vec<(&str, &str)> =
                ALL_ON.iter().copied().filter(|(k, _)| *k != var).collect();
            env.push((&var, default));
            let explicit = parse_with(&["x"], &env)
                .unwrap_or_else(|e| panic!("{var}={default} from --help: {e}"));
            assert_eq!(
                explicit, base,
                "--{long}: help says the default is {default}"
            );
            checked += 1;
        }
        assert!(checked >= 12, "only {checked} defaults checked");
    }

    #[test]
    fn source_options_and_their_variables() {
        let c = parse(&[
            "--stop-exec",
            "sh -c 'echo a, b'",
            "--drain-exec",
            "true",
            "--drain-exec",
            "false x",
            "--drain-file",
            "/tmp/a",
            "x",
        ]);
        assert_eq!(c.stop_execs[0].argv, ["sh", "-c", "echo a, b"]);
        assert_eq!(c.drain_execs.len(), 2);
        assert_eq!(c.drain_files, [PathBuf::from("/tmp/a")]);
        assert_eq!(c.hook_timeout, Duration::from_secs(10));
        assert_eq!(c.drain_timeout, Duration::from_secs(5));
        assert_eq!(
            c.grace,
            Some(DEFAULT_GRACE),
            "a drain source sets the grace"
        );
        let c = parse_with(
            &["x"],
            &[
                ("DRAINIT_DRAIN_EXEC", "true\n\nsh -c 'exit 0, 1'\n"),
                ("DRAINIT_STOP_EXEC", "true"),
                ("DRAINIT_DRAIN_FILE", "/tmp/a, /tmp/b"),
                ("DRAINIT_HOOK_TIMEOUT", "3s"),
            ],
        )
        .unwrap();
        assert_eq!(c.drain_execs[1].argv, ["sh", "-c", "exit 0, 1"]);
        assert_eq!(c.drain_execs.len(), 2, "one command per line");
        assert_eq!(
            c.drain_files,
            [PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")]
        );
        assert_eq!(c.hook_timeout, Duration::from_secs(3));
    }

    #[test]
    fn bad_sources_are_usage_errors() {
        for (args, needle) in [
            (&["--stop-exec", "", "x"][..], "--stop-exec"),
            (&["--drain-exec", "sh -c 'x", "x"], "unclosed quote"),
            (
                &["--drain-exec", "no-such-program-drainit", "x"],
                "not found",
            ),
            (&["--drain-exec", "/etc/passwd", "x"], "not an executable"),
            (
                &["--drain-exec", "true", "--drain-exec", "true", "x"],
                "twice",
            ),
            (&["--drain-file", "/a", "--drain-file", "/a", "x"], "twice"),
            (&["--drain-file", " ", "x"], "--drain-file"),
            (&["--hook-timeout", "0", "x"], "--hook-timeout"),
            (&["--drain-timeout", "x", "x"], "--drain-timeout"),
            (
                &[
                    "--stop-exec",
                    "true",
                    "--grace",
                    "10s",
                    "--hook-timeout",
                    "10s",
                    "x",
                ],
                "--hook-timeout",
            ),
            (
                &[
                    "--stop-exec",
                    "true",
                    "--grace",
                    "10s",
                    "--pre-stop-delay",
                    "4s",
                    "--hook-timeout",
                    "6s",
                    "x",
                ],
                "--hook-timeout",
            ),
        ] {
            let e = parse_with(args, &[]).unwrap_err();
            assert!(e.0.contains(needle), "{args:?}: {e}");
            assert!(!e.0.contains('\n'), "one line: {e}");
        }
        // No deadline: any hook timeout fits.
        parse(&[
            "--stop-exec",
            "true",
            "--grace",
            "none",
            "--hook-timeout",
            "3600s",
            "x",
        ]);
    }

    #[test]
    fn drainit_verbose_is_read() {
        let c = parse_with(&["x"], &[("DRAINIT_VERBOSE", "3")]).unwrap();
        assert_eq!(c.verbosity, 3);
        let c = parse_with(&["-v", "x"], &[("DRAINIT_VERBOSE", "4")]).unwrap();
        assert_eq!(c.verbosity, 2, "-v beats the variable");
    }

    #[test]
    fn notify_options() {
        let c = parse(&["x"]);
        assert_eq!(c.notify, None);
        assert_eq!(c.grace_max, None);
        let c = parse(&["--notify", "x"]);
        let n = c.notify.unwrap();
        assert_eq!((n.socket, n.access), (None, notify::Access::All));
        assert_eq!(c.grace, Some(DEFAULT_GRACE), "--notify is a drain option");
        assert_eq!(c.grace_max, c.grace, "grace-max defaults to grace");
        assert_eq!(c.verbosity, 2);
        let c = parse(&["--notify-socket", "/run/n.sock", "x"]);
        assert_eq!(
            c.notify.unwrap().socket,
            Some(PathBuf::from("/run/n.sock")),
            "a socket path implies --notify"
        );
        let c = parse(&["--notify-access", "main", "x"]);
        assert_eq!(
            c.notify, None,
            "--notify-access alone does not switch it on"
        );
        let c = parse_with(
            &["x"],
            &[
                ("DRAINIT_NOTIFY", "1"),
                ("DRAINIT_NOTIFY_ACCESS", "main"),
                ("DRAINIT_GRACE", "30s"),
                ("DRAINIT_GRACE_MAX", "110s"),
            ],
        )
        .unwrap();
        assert_eq!(c.notify.unwrap().access, notify::Access::Main);
        assert_eq!(c.grace_max, Some(Duration::from_secs(110)));
        let c = parse(&["--grace", "30s", "--grace-max", "30s", "x"]);
        assert_eq!(c.grace_max, Some(Duration::from_secs(30)), "equal is fine");
        for args in [
            &["--grace", "30s", "--grace-max", "29s", "x"][..],
            &["--grace", "none", "--grace-max", "60s", "x"],
            &["--grace-max", "60s", "x"],
            &["--notify", "--grace-max", "1h", "x"],
        ] {
            let e = parse_with(args, &[]).unwrap_err();
            assert!(e.0.contains("--grace-max"), "{args:?}: {e}");
        }
    }

    #[test]
    fn a_pre_stop_delay_must_end_before_the_deadline() {
        for (delay, grace) in [("2s", "1s"), ("1s", "1s"), ("30s", "25s")] {
            let e =
                parse_with(&["--pre-stop-delay", delay, "--grace", grace, "x"], &[]).unwrap_err();
            assert!(
                e.0.contains("--pre-stop-delay") && e.0.contains("--grace"),
                "{e}"
            );
        }
        // The default grace a delay switches on counts too.
        assert!(parse_with(&["--pre-stop-delay", "30s", "x"], &[]).is_err());
        let c = parse_with(&["--pre-stop-delay", "30s", "--grace", "none", "x"], &[]).unwrap();
        assert_eq!(c.grace, None);
        let c = parse_with(&["--pre-stop-delay", "7s", "x"], &[]).unwrap();
        assert_eq!(c.grace, Some(DEFAULT_GRACE));
        // On Kubernetes the default is longer, and logged with its reason.
        let k8s = [("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
        let c = parse_with(&["--pre-stop-delay", "24s", "x"], &k8s).unwrap();
        assert_eq!(c.grace, Some(PLATFORM));
        assert!(
            matches!(&c.notices[..], [Notice::Info(n)] if n.contains("25s") && n.contains("Kubernetes")),
            "{:?}",
            c.notices
        );
        // An explicit --grace is said nowhere: nothing was chosen for it.
        let c = parse_with(&["--pre-stop-delay", "1s", "--grace", "9s", "x"], &k8s).unwrap();
        assert!(c.notices.is_empty(), "{:?}", c.notices);
    }

    #[test]
    fn a_comma_in_a_flag_splits_it_as_in_the_variable() {
        let c = parse_with(
            &[
                "--drain-url",
                "http://a/drain,http://b/drain",
                "--drain-file",
                "/x,/y",
                "x",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(c.drain_urls, ["http://a/drain", "http://b/drain"]);
        assert_eq!(c.drain_files.len(), 2);
        let c = parse_with(&["--stop-url", "http://a/s, http://b/s", "x"], &[]).unwrap();
        assert_eq!(c.stop_hooks.len(), 2);
    }

    #[test]
    fn at_most_sixty_four_sources() {
        let urls: Vec<String> = (0..65).map(|i| format!("http://127.0.0.1:1/{i}")).collect();
        let mut args: Vec<&str> = Vec::new();
        for url in &urls[..64] {
            args.extend(["--drain-url", url]);
        }
        args.push("x");
        assert_eq!(parse_with(&args, &[]).unwrap().drain_urls.len(), 64);
        args.pop();
        args.extend(["--drain-file", "/tmp/x", "x"]);
        let err = parse_with(&args, &[]).unwrap_err();
        assert!(err.0.contains("64") && err.0.contains("65"), "{err}");
    }
}
