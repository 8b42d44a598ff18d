//! Compatibility names: what drainit keeps of tini and dumb-init when it is
//! called by their names, and their variables (`TINI_*`, `DUMB_INIT_*`)
//! with the older `DRAINIT_VERBOSITY`, which mean what they mean there.

use std::ffi::OsStr;

use super::env::{invalid, Env};
use super::UsageError;
use crate::app::options;
use crate::app::values::parse_verbosity;
use crate::core::settings::Compat;

/// The name drainit was called by: as `dumb-init` or `tini` (a symlink or
/// a copy that replaces one; `tini-static` is tini's static build), it
/// keeps that init's few defaults that would otherwise change silently;
/// any other name, `docker-init` included, is drainit.
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
            "tini" | "tini-static" => Name::Tini,
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

    /// The prefix of the variables this init reads, and every one of them
    /// that it reads (those drainit does not honour included), so that an
    /// unknown one can be pointed out; `None` for drainit's own name.
    pub fn variables(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            Name::Drainit => None,
            Name::Tini => Some(("TINI_", TINI_VARIABLES)),
            Name::DumbInit => Some(("DUMB_INIT_", DUMB_INIT_VARIABLES)),
        }
    }
}

/// What drainit keeps of dumb-init's behaviour, called by its name
/// (`group`: its session mode, the signals to the child's process group):
/// SIGTERM to what the child left in its group when it ends (session mode
/// only, as dumb-init), stopping itself after forwarding a job-control
/// signal, and no hold on the start directory. Under any other name, none.
pub(super) fn compat(name: Name, group: bool) -> Compat {
    match name {
        Name::DumbInit => Compat {
            term_group_at_exit: group,
            job_control_stops_self: true,
            leave_start_directory: true,
        },
        Name::Drainit | Name::Tini => Compat::default(),
    }
}

/// dumb-init's rewrites in its session mode: SIGTSTP, SIGTTIN and SIGTTOU
/// reach the child's group as SIGSTOP (which it cannot catch), unless the
/// operator's own `-r` for that signal, read after these, says otherwise.
pub(super) fn default_rewrites(name: Name, group: bool) -> Vec<(i32, i32)> {
    if name != Name::DumbInit || !group {
        return Vec::new();
    }
    [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU]
        .into_iter()
        .map(|signo| (signo, libc::SIGSTOP))
        .collect()
}

/// Every variable tini (v0.19) reads.
const TINI_VARIABLES: &[&str] = &[
    "TINI_SUBREAPER",
    "TINI_VERBOSITY",
    "TINI_KILL_PROCESS_GROUP",
];

/// Every variable dumb-init (v1.2.5) reads; `DUMB_INIT_DEBUG` is its own
/// debug output, which drainit's `-v` replaces.
const DUMB_INIT_VARIABLES: &[&str] = &["DUMB_INIT_SETSID", "DUMB_INIT_DEBUG"];

/// `DRAINIT_*` variables drainit reads that are not an option's.
pub const OTHER_DRAINIT_VARIABLES: &[&str] = &[OLD_VERBOSE, "DRAINIT_LOG"];

/// `DRAINIT_*` variables of the build, not the run (build.rs reads
/// `DRAINIT_GIT_COMMIT`): a shell that built drainit may still export
/// them, and drainit passes them by in silence.
pub const BUILD_VARIABLES: &[&str] = &["DRAINIT_GIT_COMMIT"];

/// Whether `name` is a `DRAINIT_*` variable of the test suite's, whose
/// variables reach the drainit it starts: `DRAINIT_REQUIRE_*`,
/// `DRAINIT_REGENERATE_DOCS`, and `DRAINIT_TEST_FAULT` in a build with
/// fault points (in any other build it does nothing, and is said).
pub fn is_test_suite_variable(name: &str) -> bool {
    name.starts_with("DRAINIT_REQUIRE_")
        || name == "DRAINIT_REGENERATE_DOCS"
        || (cfg!(feature = "fault-injection") && name == "DRAINIT_TEST_FAULT")
}

/// The older spelling of `DRAINIT_VERBOSE`.
const OLD_VERBOSE: &str = "DRAINIT_VERBOSITY";

/// The verbosity level. tini: each -v adds one to the default of 1;
/// TINI_VERBOSITY replaces the count. DRAINIT_VERBOSE is `--verbose`'s own
/// variable (a level, as a count of -v makes no sense in a variable), and
/// DRAINIT_VERBOSITY its older spelling: -v beats both. With a drain option
/// the default is 2, so the drain progress and the exit report are
/// visible without asking.
pub(super) fn verbosity(env: &Env<'_>, drain_active: bool) -> Result<u8, UsageError> {
    let count = env.raw.count(&options::VERBOSE);
    let mut verbosity = if count > 0 {
        for var in [
            options::env_var(options::VERBOSE.long).as_str(),
            OLD_VERBOSE,
        ] {
            env.note_beaten("-v", var);
        }
        1u8.saturating_add(count).min(4)
    } else {
        let verbose = options::env_var(options::VERBOSE.long);
        let found = match env.get(&verbose)? {
            Some(text) => Some((text, verbose)),
            None => env
                .get(OLD_VERBOSE)?
                .map(|text| (text, OLD_VERBOSE.to_string())),
        };
        match found {
            Some((text, var)) => parse_verbosity(&text).map_err(|e| invalid(&text, &var, &e))?,
            None if drain_active => 2,
            None => 1,
        }
    };
    if let Some(text) = env.get("TINI_VERBOSITY")? {
        verbosity = parse_verbosity(&text).map_err(|e| invalid(&text, "TINI_VERBOSITY", &e))?;
    }
    Ok(verbosity)
}

/// `--subreaper`, its variable, or tini's TINI_SUBREAPER set at all.
pub(super) fn subreaper(env: &Env<'_>) -> Result<bool, UsageError> {
    Ok(env.flag(&options::SUBREAPER)? || env.is_set("TINI_SUBREAPER"))
}

/// Whether signals go to the child's whole process group. dumb-init:
/// DUMB_INIT_SETSID=0 and -c mean "the child only" (drainit's default); any
/// other value is its session mode, which for signals is -g. -c, a flag,
/// beats every variable. Called dumb-init, its own default holds: the group
/// unless DUMB_INIT_SETSID is exactly 0 (set empty counts as on).
pub(super) fn kill_process_group(env: &Env<'_>, name: Name) -> Result<bool, UsageError> {
    if env.raw.flag(&options::SINGLE_CHILD) {
        return Ok(false);
    }
    Ok(env.flag(&options::KILL_PROCESS_GROUP)?
        || env.is_set("TINI_KILL_PROCESS_GROUP")
        || match name {
            Name::DumbInit => (env.lookup)("DUMB_INIT_SETSID").map_or(true, |v| v != *"0"),
            _ => env.get("DUMB_INIT_SETSID")?.is_some_and(|v| v != "0"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dumb_init_keeps_dumb_inits_rules() {
        for name in [Name::Drainit, Name::Tini] {
            assert_eq!(compat(name, true), Compat::default());
            assert!(default_rewrites(name, true).is_empty());
        }
        let session = compat(Name::DumbInit, true);
        assert!(session.term_group_at_exit);
        assert!(session.job_control_stops_self);
        assert!(session.leave_start_directory);
        // -c or DUMB_INIT_SETSID=0: no session, so no group to end and
        // the job-control signals go unchanged; it still stops itself.
        let single = compat(Name::DumbInit, false);
        assert!(!single.term_group_at_exit);
        assert!(single.job_control_stops_self);
        assert!(default_rewrites(Name::DumbInit, false).is_empty());
        assert_eq!(
            default_rewrites(Name::DumbInit, true),
            [(20, 19), (21, 19), (22, 19)]
        );
    }
}
