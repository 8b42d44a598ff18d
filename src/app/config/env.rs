//! The environment lookup: an option's value from its flag, else from its
//! `DRAINIT_*` variable, else from its declared default, each parsed by the
//! same parser and every error naming what the user typed. A flag that
//! beats a variable that is also set is noted for the log.

use std::cell::RefCell;
use std::ffi::OsString;

use super::{Notice, UsageError};
use crate::app::cli::RawArgs;
use crate::app::options::{Kind, Opt};
use crate::util::redact;

/// Looks up environment variables; a function so tests can supply their own.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// Where a setting's text came from, so errors name what the user typed.
pub(super) struct Setting {
    pub text: String,
    pub origin: String,
}

impl Setting {
    pub fn parse<T>(&self, parse: fn(&str) -> Result<T, String>) -> Result<T, UsageError> {
        parse(&self.text).map_err(|why| invalid(&self.text, &self.origin, &why))
    }
}

/// The options as typed and the environment, read through the option
/// declarations (`app::options`): each option's variable and default come
/// from there, never typed twice.
pub(super) struct Env<'a> {
    pub lookup: EnvLookup<'a>,
    pub raw: RawArgs,
    /// What reading found worth a line at start (a flag beating its
    /// variable), each said once.
    notices: RefCell<Vec<Notice>>,
}

impl<'a> Env<'a> {
    pub fn new(lookup: EnvLookup<'a>, raw: RawArgs) -> Env<'a> {
        Env {
            lookup,
            raw,
            notices: RefCell::new(Vec::new()),
        }
    }

    /// The notices reading gathered, in the order they arose.
    pub fn take_notices(&self) -> Vec<Notice> {
        self.notices.take()
    }

    /// A variable's value; set-but-empty counts as unset, as is usual for
    /// `docker run -e NAME=`.
    pub fn get(&self, name: &str) -> Result<Option<String>, UsageError> {
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
    pub fn is_set(&self, name: &str) -> bool {
        (self.lookup)(name).is_some()
    }

    /// Notes that `flag`, given, beats `var` when `var` is set too (an
    /// empty variable counts as unset, so it is beaten by nothing).
    pub fn note_beaten(&self, flag: &str, var: &str) {
        if !(self.lookup)(var).is_some_and(|v| !v.is_empty()) {
            return;
        }
        let notice = Notice::Info(format!(
            "{flag} overrides {var} (a flag beats its variable)"
        ));
        let mut notices = self.notices.borrow_mut();
        if !notices.contains(&notice) {
            notices.push(notice);
        }
    }

    /// The variable `opt` reads, noted as beaten since its flag is given.
    fn beaten(&self, opt: &Opt) {
        if let Some(var) = opt.var() {
            self.note_beaten(&format!("--{}", opt.long), &var);
        }
    }

    /// `opt`'s value if given as a flag, else its `DRAINIT_*` variable's.
    pub fn setting(&self, opt: &Opt) -> Result<Option<Setting>, UsageError> {
        if let Some(text) = self.raw.value(opt) {
            self.beaten(opt);
            return Ok(Some(Setting {
                text,
                origin: format!("--{}", opt.long),
            }));
        }
        let Some(var) = opt.var() else {
            return Ok(None);
        };
        Ok(self.get(&var)?.map(|text| Setting { text, origin: var }))
    }

    /// A repeatable option's values: the flags if given, else its variable,
    /// which holds a comma-separated list, or one value per line where the
    /// declaration says so (commands contain commas; blank lines skipped).
    pub fn list(&self, opt: &Opt) -> Result<Vec<Setting>, UsageError> {
        let flags = self.raw.values(opt);
        if !flags.is_empty() {
            self.beaten(opt);
            // A comma in a flag splits it as in the variable: the same
            // text means the same sources, whichever way it is given.
            let origin = format!("--{}", opt.long);
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

    /// `opt`'s value, or its variable's, parsed. The work is `read`'s, one
    /// copy for every value type; this part only keeps the parsed value.
    pub fn value<T>(
        &self,
        opt: &Opt,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, UsageError> {
        let mut value = None;
        self.read(opt, &mut |text| {
            value = Some(parse(text)?);
            Ok(())
        })?;
        Ok(value)
    }

    /// Hands `opt`'s value, or its variable's, if set, to `keep`, whose
    /// error becomes a usage error naming what the user typed.
    #[inline(never)]
    fn read(
        &self,
        opt: &Opt,
        keep: &mut dyn FnMut(&str) -> Result<(), String>,
    ) -> Result<(), UsageError> {
        match self.setting(opt)? {
            None => Ok(()),
            Some(s) => keep(&s.text).map_err(|why| invalid(&s.text, &s.origin, &why)),
        }
    }

    /// `opt`'s value, its variable's, or else its declared default, each
    /// parsed by the same parser.
    pub fn value_or_default<T>(
        &self,
        opt: &Opt,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<T, UsageError> {
        match self.value(opt, parse)? {
            Some(value) => Ok(value),
            None => default(opt, parse),
        }
    }

    /// A repeatable option's values, each parsed (see `value`).
    #[inline(never)]
    pub fn values<T>(
        &self,
        opt: &Opt,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Vec<T>, UsageError> {
        self.list(opt)?.iter().map(|s| s.parse(parse)).collect()
    }

    /// A switch: given, or its variable's boolean.
    pub fn flag(&self, opt: &Opt) -> Result<bool, UsageError> {
        if self.raw.flag(opt) {
            self.beaten(opt);
            return Ok(true);
        }
        let Some(var) = opt.var() else {
            return Ok(false);
        };
        match self.get(&var)? {
            None => Ok(false),
            Some(text) => {
                crate::app::values::parse_bool(&text).map_err(|e| invalid(&text, &var, &e))
            }
        }
    }
}

/// The declared default of `opt`, parsed as a typed value would be: the
/// default `--help` shows is the one used. (A test parses every declared
/// default, so the error here cannot happen in a release.)
#[inline(never)]
pub(super) fn default<T>(opt: &Opt, parse: fn(&str) -> Result<T, String>) -> Result<T, UsageError> {
    let text = opt.default_value().unwrap_or_default();
    parse(text).map_err(|why| bad_default(opt, text, &why))
}

/// The error of a declared default that does not parse: one copy, however
/// many value types `default` is used with.
fn bad_default(opt: &Opt, text: &str, why: &str) -> UsageError {
    invalid(text, &format!("the default of --{}", opt.long), why)
}

/// A usage error echoing the bad value, which may hold a secret (a URL's
/// token or user-info): it leaves by the redaction rule
/// (`util::redact::value`), as everything drainit prints does, cut to
/// 256 characters (`util::text::echo`).
pub(super) fn invalid(text: &str, origin: &str, why: &str) -> UsageError {
    let (text, why) = (redact::value(text), redact::in_text(why));
    let text = crate::util::text::echo(&text);
    UsageError(format!("invalid value '{text}' for {origin}: {why}"))
}

/// The values of a repeatable source option, each parsed, none given twice
/// (as typed, spaces around aside): a source given twice is a mistake (it
/// would be asked twice per round). A `dyn` parser keeps one copy of this
/// per value type in the binary. `shown`: the value as an error may echo
/// it (a command: its program only).
pub(super) fn unique<T>(
    settings: Vec<Setting>,
    parse: &dyn Fn(&str) -> Result<T, String>,
    shown: fn(&str) -> String,
) -> Result<Vec<T>, UsageError> {
    let mut out = Vec::with_capacity(settings.len());
    for (i, setting) in settings.iter().enumerate() {
        let text = setting.text.trim();
        if settings[..i].iter().any(|s| s.text.trim() == text) {
            return Err(invalid(&shown(text), &setting.origin, "given twice"));
        }
        out.push(
            parse(&setting.text)
                .map_err(|why| invalid(&shown(&setting.text), &setting.origin, &why))?,
        );
    }
    Ok(out)
}
