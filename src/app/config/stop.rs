//! The stop rules: the drain sources and stop hooks a stop uses, when a
//! drain option is active, and the stop's timings, with the rules that
//! span several options (the default `--grace` and the platform it fits,
//! a delay and a hook timeout that must end before the deadline,
//! `--grace-max`). Builds what the timeline goes by.

use std::path::PathBuf;
use std::time::Duration;

use super::env::{default, invalid, unique, Env};
use super::kill::Seen;
use super::{Notice, UsageError, MAX_SOURCES};
use crate::app::options;
use crate::app::values::*;
use crate::core::settings::Cmd;
use crate::core::settings::TimelineSettings as Settings;
use crate::core::sources::exec::public_command;
use crate::io::commands as sources;
use crate::proto::http::Target;
use crate::util::redact;
use crate::util::time::millis;

/// The stop hooks and drain sources, and the timeouts of their requests.
pub(super) struct Sources {
    pub stop_hooks: Vec<Target>,
    pub drain_urls: Vec<String>,
    pub stop_execs: Vec<Cmd>,
    pub drain_execs: Vec<Cmd>,
    pub drain_files: Vec<PathBuf>,
    pub pre_stop_delay: Duration,
    /// `--hook-timeout` as given (its default applies later).
    pub hook_timeout: Option<Duration>,
    pub drain_timeout: Duration,
}

impl Sources {
    /// Every stop hook and drain source, none given twice, at most
    /// `MAX_SOURCES` drain sources.
    pub fn read(env: &Env<'_>) -> Result<Sources, UsageError> {
        let stop_urls = unique(env.list(&options::STOP_URL)?, &parse_url, redact::value)?;
        let stop_method = env.value_or_default(&options::STOP_METHOD, parse_method)?;
        let drain_urls = unique(env.list(&options::DRAIN_URL)?, &parse_url, redact::value)?;
        let pre_stop_delay = env.value_or_default(&options::PRE_STOP_DELAY, parse_duration)?;
        // Programs are found on the PATH drainit runs them with.
        let path = (env.lookup)("PATH").and_then(|p| p.into_string().ok());
        let parse_cmd = |text: &str| sources::parse_command(text, path.as_deref());
        let stop_execs = unique(env.list(&options::STOP_EXEC)?, &parse_cmd, public_command)?;
        let drain_execs = unique(env.list(&options::DRAIN_EXEC)?, &parse_cmd, public_command)?;
        let drain_files = unique(
            env.list(&options::DRAIN_FILE)?,
            &parse_drain_file,
            redact::value,
        )?;
        let count = drain_urls.len() + drain_execs.len() + drain_files.len();
        if count > MAX_SOURCES {
            return Err(UsageError(format!(
                "at most {MAX_SOURCES} drain sources (--drain-url, --drain-exec and --drain-file together); {count} given"
            )));
        }
        Ok(Sources {
            stop_hooks: stop_urls
                .into_iter()
                .map(|url| Target {
                    method: stop_method.clone(),
                    url,
                })
                .collect(),
            drain_urls,
            stop_execs,
            drain_execs,
            drain_files,
            pre_stop_delay,
            hook_timeout: env.value(&options::HOOK_TIMEOUT, parse_interval)?,
            drain_timeout: env.value_or_default(&options::DRAIN_TIMEOUT, parse_interval)?,
        })
    }

    /// The sources that can say "busy" (task protection asks them): URLs
    /// and commands (a drain file only appears at the end of a stop).
    pub fn can_say_busy(&self) -> bool {
        !self.drain_urls.is_empty() || !self.drain_execs.is_empty()
    }

    fn drain(&self) -> bool {
        self.can_say_busy() || !self.drain_files.is_empty()
    }

    fn hook(&self) -> bool {
        !self.stop_hooks.is_empty() || !self.stop_execs.is_empty()
    }

    /// Whether these options alone make this a draining run.
    pub fn active(&self) -> bool {
        self.drain() || self.hook() || !self.pre_stop_delay.is_zero()
    }
}

/// `--grace`: as given, else (with a drain option) the default that fits
/// the platform's own kill, said at start with its reason; and whether it
/// is that platform's default.
fn grace(
    env: &Env<'_>,
    drain_active: bool,
    seen: Seen,
    k8s_protect: bool,
    notices: &mut Vec<Notice>,
) -> Result<(Option<Duration>, bool), UsageError> {
    if let Some(s) = env.setting(&options::GRACE)? {
        let grace = s.parse(parse_grace)?;
        // Given, it gets its line as the default does: the platform's own
        // kill is what it must stay under, and only the operator knows it.
        notices.push(Notice::Info(match grace {
            Some(g) => format!(
                "{} {}: the deadline is {} ms after a stop begins; the platform's own kill must come later",
                s.origin,
                crate::util::text::echo(s.text.trim()),
                millis(g)
            ),
            None => format!(
                "{} {}: no deadline; the app has until the platform's own kill",
                s.origin,
                crate::util::text::echo(s.text.trim())
            ),
        }));
        return Ok((grace, false));
    }
    if !drain_active {
        return Ok((None, false));
    }
    // `docker stop` waits 10 s.
    let clock = seen.clock();
    let text = match clock {
        Some(clock) => clock.grace,
        None => options::GRACE.default_value().unwrap_or_default(),
    };
    let grace = parse_grace(text).map_err(|e| invalid(text, "--grace", &e))?;
    // With --k8s-protect the pod's own period replaces it once read (its
    // line follows): said so now, so that the two lines agree.
    let line = match k8s_protect {
        true => format!(
            "--grace {text} until the pod's terminationGracePeriodSeconds is read (--k8s-protect), which then sets it; set --grace to choose it yourself"
        ),
        false => format!(
            "--grace {text} by default ({}); set --grace to change it",
            seen.why()
        ),
    };
    notices.push(Notice::Info(line));
    Ok((grace, clock.is_some()))
}

/// The deadline must leave the app time to get its stop signal: a delay
/// that reaches it would mean SIGKILL without any warning; and an explicit
/// hook timeout must fit between the delay and the deadline. A platform's
/// default that does not fit is kept, with one warning: the platform's
/// kill is what counts, and a stop cuts the delay as it does for the
/// pod's grace (true: the delay must give way).
fn check_fits(
    grace: Option<Duration>,
    sources: &Sources,
    platform_default: Option<Seen>,
    notices: &mut Vec<Notice>,
) -> Result<bool, UsageError> {
    let Some(grace) = grace else {
        return Ok(false);
    };
    let delay = sources.pre_stop_delay;
    let hook = sources.hook_timeout.filter(|hook| delay + *hook >= grace);
    let what = match hook {
        _ if delay >= grace => format!("--pre-stop-delay ({} ms)", millis(delay)),
        Some(hook) => format!(
            "--pre-stop-delay ({} ms) + --hook-timeout ({} ms)",
            millis(delay),
            millis(hook)
        ),
        None => return Ok(false),
    };
    if let Some(seen) = platform_default {
        notices.push(Notice::Warn(format!(
            "the default --grace ({} ms) {} is not longer than {what}: it is kept, and a stop cuts the delay to at most half of the grace (a hook gets at most half of what is left); set --grace to choose it yourself",
            millis(grace),
            seen.name()
        )));
        return Ok(true);
    }
    Err(UsageError(match hook {
        _ if delay >= grace => format!(
            "{what} must be shorter than --grace ({} ms): the app would be killed before it got its stop signal",
            millis(grace)
        ),
        _ => format!("{what} must be shorter than --grace ({} ms)", millis(grace)),
    }))
}

/// `--grace-max`: the grace unless given, and then never below it.
fn grace_max(env: &Env<'_>, grace: Option<Duration>) -> Result<Option<Duration>, UsageError> {
    let Some(s) = env.setting(&options::GRACE_MAX)? else {
        return Ok(grace);
    };
    let max = s.parse(parse_duration)?;
    match grace {
        None => Err(UsageError(format!(
            "{} needs a deadline, and there is none (--grace none, or no drain option)",
            s.origin
        ))),
        Some(g) if max < g => Err(UsageError(format!(
            "{} ({} ms) must not be below --grace ({} ms)",
            s.origin,
            millis(max),
            millis(g)
        ))),
        Some(_) => Ok(Some(max)),
    }
}

/// The stop's deadline as configured.
pub(super) struct Deadline {
    /// `--grace`.
    pub grace: Option<Duration>,
    /// `--grace-max`.
    pub grace_max: Option<Duration>,
    /// The grace is a platform's default that the delay (and hook
    /// timeout) do not fit in: a stop cuts the delay.
    pub delay_gives_way: bool,
}

/// The deadline (`--grace`) and how far extensions may move it
/// (`--grace-max`), checked against the delay and the hook timeout.
pub(super) fn deadline(
    env: &Env<'_>,
    sources: &Sources,
    drain_active: bool,
    seen: Seen,
    k8s_protect: bool,
    notices: &mut Vec<Notice>,
) -> Result<Deadline, UsageError> {
    let (grace, by_platform) = grace(env, drain_active, seen, k8s_protect, notices)?;
    let delay_gives_way = check_fits(grace, sources, by_platform.then_some(seen), notices)?;
    Ok(Deadline {
        grace,
        grace_max: grace_max(env, grace)?,
        delay_gives_way,
    })
}

/// What the timeline goes by, from the sources and the deadline read
/// before and the stop's other timings.
pub(super) fn timeline(
    env: &Env<'_>,
    sources: &Sources,
    deadline: &Deadline,
) -> Result<Settings, UsageError> {
    Ok(Settings {
        stop_signals: env.value_or_default(&options::STOP_SIGNALS, parse_signal_list)?,
        grace: deadline.grace,
        delay_gives_way: deadline.delay_gives_way,
        pre_stop_delay: sources.pre_stop_delay,
        hook: sources.hook(),
        hook_timeout: match sources.hook_timeout {
            Some(hook) => hook,
            None => default(&options::HOOK_TIMEOUT, parse_interval)?,
        },
        drain: sources.drain(),
        drain_interval: env.value_or_default(&options::DRAIN_INTERVAL, parse_interval)?,
        ready_grace: env.value_or_default(&options::READY_GRACE, parse_duration)?,
        orphan_grace: env.value_or_default(&options::ORPHAN_GRACE, parse_duration)?,
    })
}

/// `--max-runtime`, said at start when given: a stop then begins that long
/// after the app's start.
pub(super) fn max_runtime(
    env: &Env<'_>,
    notices: &mut Vec<Notice>,
) -> Result<Option<Duration>, UsageError> {
    let Some(s) = env.setting(&options::MAX_RUNTIME)? else {
        return Ok(None);
    };
    let max = s.parse(parse_max_runtime)?;
    notices.push(Notice::Info(format!(
        "{} {}: a stop begins {} ms after the app started, as a stop signal's would",
        s.origin,
        crate::util::text::echo(s.text.trim()),
        millis(max)
    )));
    Ok(Some(max))
}
