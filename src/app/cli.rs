//! The command line as typed: the clap command built from the option
//! declarations (`options::OPTIONS`), and `RawArgs`, the values given, kept
//! as raw text so that `config` can validate flags and their `DRAINIT_*`
//! variables with the same one-line errors.
//!
//! Two commands: `parser()`, what a run parses with (no help texts, so a
//! run builds and wraps none), and `command()`, the same with every help
//! text, from which `--help` (`HELP`, a committed text: the binary carries
//! no help renderer) and the man page are generated and checked by
//! tests/options.rs.

use std::ffi::OsString;

use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches, Parser};

use crate::app::options::{self, Kind, Opt, OPTIONS};

/// `drainit --help`: clap's rendering of `command()` with `TEMPLATE`,
/// generated and kept equal by tests/options.rs
/// (`DRAINIT_REGENERATE_DOCS=1 cargo test --test options` rewrites it).
pub const HELP: &str = include_str!("help.txt");

const ABOUT: &str = "\
A drain-aware init for containers: reaps zombies, forwards signals, and holds SIGKILL back
until the app has drained.";

// Written out: clap's generated usage (its "usage" feature) costs 12 KiB of
// static binary for this one line.
const USAGE: &str = "drainit [OPTIONS] [--] PROGRAM [ARGS]...";

/// clap's default layout with the arguments written out: clap shows an
/// optional positional as `[PROGRAM]...`, and PROGRAM is required (the
/// check is `config`'s, so that `-l` and the one-line error keep working).
/// For `help_template`, which needs clap's `help` feature: tests only.
pub const TEMPLATE: &str = "\
{about-with-newline}
{usage-heading} {usage}

Arguments:
  PROGRAM    The program to run (required)
  [ARGS]...  Its arguments

{all-args}{after-help}";

pub const AFTER_HELP: &str = "\
Every option can also be set with the environment variable shown with it
(DRAINIT_ and the long name, e.g. DRAINIT_GRACE=20s); a flag beats its
variable. tini's TINI_SUBREAPER, TINI_KILL_PROCESS_GROUP and TINI_VERBOSITY
are honoured too. Option parsing stops at `--` or at the first word that is
not an option: `drainit ls -l` runs `ls -l`.

Exit codes: the child's own (128+N when signal N ended it); 0 when the app reported ready
and drainit ended it; 2 usage error; 124 deadline passed, child killed (--deadline-exit-code);
125 drainit failed to start the child; 126 PROGRAM not executable; 127 PROGRAM not found.

Docs: README.md and docs/ in drainit's source repository (docs/options.md: every option;
docs/drainit.1: the man page).";

/// Lines of `--help` stay within this many columns.
pub const HELP_COLUMNS: usize = 100;

/// The clap id of PROGRAM and its arguments.
pub const PROGRAM: &str = "program";

/// The clap id of `-h`/`--help`.
const HELP_ID: &str = "help";

/// The command a run parses with: one argument per declared option, no
/// help texts. `-h`/`--help` is an argument of its own (clap adds its
/// built-in one only with its `help` feature) that ends the parse with
/// `ErrorKind::DisplayHelp`, for the caller to print `HELP`.
pub fn parser() -> Command {
    OPTIONS
        .iter()
        .fold(
            Command::new("drainit")
                .version(crate::util::version::VERSION)
                .override_usage(USAGE)
                .disable_version_flag(true)
                .disable_help_flag(true),
            |cmd, opt| cmd.arg(arg(opt)),
        )
        .arg(
            Arg::new(PROGRAM)
                .value_name("PROGRAM")
                .action(ArgAction::Append)
                .num_args(1..)
                .trailing_var_arg(true)
                .value_parser(clap::value_parser!(OsString))
                .hide(true),
        )
        .arg(
            Arg::new(HELP_ID)
                .short('h')
                .long("help")
                .action(ArgAction::Help),
        )
}

/// `parser()` with every help text: each option's text followed by its
/// default and its variable, wrapped to `HELP_COLUMNS`; the about and
/// after-help texts. What `HELP` and the man page are made from; a run
/// never builds it.
pub fn command() -> Command {
    // Where clap starts the help texts: after the widest "-x, --long <V>"
    // (clap aligns each heading on its own widest; this is the widest of
    // all, so every line fits).
    let column = OPTIONS
        .iter()
        .map(|o| {
            let value = if o.value.is_empty() {
                0
            } else {
                o.value.len() + 3
            };
            let count = if o.kind == Kind::Count { 3 } else { 0 };
            2 + 4 + 2 + o.long.len() + value + count + 2
        })
        .max()
        .unwrap_or(0);
    let width = HELP_COLUMNS.saturating_sub(column);
    parser().about(ABOUT).after_help(AFTER_HELP).mut_args(|a| {
        let text = match a.get_id().as_str() {
            PROGRAM => "The program to run and its arguments".to_string(),
            HELP_ID => "Print help".to_string(),
            id => help(
                options::find(id).expect("every argument is declared"),
                width,
            ),
        };
        a.help(text)
    })
}

/// The clap argument of one declared option.
fn arg(opt: &'static Opt) -> Arg {
    let action = match opt.kind {
        Kind::Flag => ArgAction::SetTrue,
        Kind::Count => ArgAction::Count,
        Kind::One => ArgAction::Set,
        Kind::Commas | Kind::Lines => ArgAction::Append,
        Kind::Version => ArgAction::Version,
        Kind::Optional => ArgAction::Set,
    };
    let mut arg = Arg::new(opt.long).long(opt.long).action(action);
    if let Some(short) = opt.short {
        arg = arg.short(short);
    }
    if opt.kind == Kind::Optional {
        // `--probe` alone is "" (the default target), `--probe URL` the URL.
        arg = arg.num_args(0..=1).default_missing_value("");
    }
    if !opt.value.is_empty() {
        arg = arg.value_name(opt.value);
    }
    if let Some(heading) = opt.heading.title() {
        arg = arg.help_heading(heading);
    }
    if std::ptr::eq(opt, &options::SINGLE_CHILD) {
        arg = arg.conflicts_with(options::KILL_PROCESS_GROUP.long);
    }
    if std::ptr::eq(opt, &options::CHECK) {
        arg = arg.conflicts_with(options::PROBE.long);
    }
    arg
}

/// The help text, the repeat note, "[default: X]" and "[env: VAR]",
/// wrapped at spaces to `width` (the brackets are never split).
fn help(opt: &Opt, width: usize) -> String {
    let default = opt.default_shown().map(|d| format!("[default: {d}]"));
    let var = opt.var().map(|v| format!("[env: {v}]"));
    let words = opt
        .help
        .split(' ')
        .chain(opt.repeat_note().split(' '))
        .chain(default.as_deref())
        .chain(var.as_deref())
        .filter(|w| !w.is_empty());
    let mut out = String::new();
    // Byte offsets in `out`: where the current line starts, and its last word.
    let (mut line, mut last) = (0, 0);
    for word in words {
        if out.len() > line {
            if out.len() - line + 1 + word.len() <= width {
                out.push(' ');
            } else if word.starts_with('-') && last > line {
                // No line starts with an option name, which readers of
                // `--help` (and tests/docs.rs) take for an option of its
                // own: the word before it moves down too.
                out.replace_range(last - 1..last, "\n");
                line = last;
                out.push(' ');
            } else {
                out.push('\n');
                line = out.len();
            }
        }
        last = out.len();
        out.push_str(word);
    }
    out
}

/// The command line as given: each declared option's values, asked for by
/// the option's constant (its long name is clap's id), and the program
/// with its arguments.
#[derive(Debug, Clone)]
pub struct RawArgs {
    matches: ArgMatches,
    pub command: Vec<OsString>,
}

impl RawArgs {
    /// Whether the switch `opt` was given.
    pub fn flag(&self, opt: &Opt) -> bool {
        self.matches.get_flag(opt.long)
    }

    /// How often the counted switch `opt` was given.
    pub fn count(&self, opt: &Opt) -> u8 {
        self.matches.get_count(opt.long)
    }

    /// The values of `opt`, as typed, in order (empty when not given).
    pub fn values(&self, opt: &Opt) -> Vec<String> {
        self.matches
            .get_many::<String>(opt.long)
            .map(|values| values.cloned().collect())
            .unwrap_or_default()
    }

    /// The value of a single-valued `opt`, if given.
    pub fn value(&self, opt: &Opt) -> Option<String> {
        self.matches.get_one::<String>(opt.long).cloned()
    }
}

impl RawArgs {
    /// The command line `parser()` matched, taken as it is (not copied).
    pub fn from_matches(mut matches: ArgMatches) -> RawArgs {
        let command = matches
            .remove_many::<OsString>(PROGRAM)
            .map(|words| words.collect())
            .unwrap_or_default();
        RawArgs { matches, command }
    }
}

impl FromArgMatches for RawArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(RawArgs::from_matches(matches.clone()))
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        Ok(RawArgs::from_matches(std::mem::take(matches)))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl CommandFactory for RawArgs {
    fn command() -> Command {
        parser()
    }

    fn command_for_update() -> Command {
        parser()
    }
}

impl Parser for RawArgs {}
