//! The command line as typed: clap definitions of drainit's, tini's and
//! dumb-init's flags, kept as raw text so that `config` can validate flags
//! and their `DRAINIT_*` variables with the same one-line errors.

use std::ffi::OsString;

use clap::{ArgAction, Parser};

pub const AFTER_HELP: &str = "\
Every option can also be set with an environment variable DRAINIT_<NAME>
(e.g. DRAINIT_GRACE=20s, DRAINIT_KILL_PROCESS_GROUP=1); a flag beats its
variable. tini's TINI_SUBREAPER, TINI_KILL_PROCESS_GROUP and TINI_VERBOSITY
are honoured too. Option parsing stops at `--` or at the first word that is
not an option: `drainit ls -l` runs `ls -l`.";

#[derive(Debug, Parser)]
#[command(
    name = "drainit",
    version,
    about = "A drain-aware init for containers: reaps zombies, forwards signals, \
             and holds SIGKILL back until the app has drained.",
    after_help = AFTER_HELP,
    disable_version_flag = true
)]
pub struct RawArgs {
    /// Register as a child subreaper (automatic when drainit is not PID 1)
    #[arg(short = 's', long = "subreaper")]
    pub subreaper: bool,

    /// Signal drainit receives when its parent dies (PR_SET_PDEATHSIG)
    #[arg(short = 'p', long = "pdeathsig", value_name = "SIGNAL")]
    pub pdeathsig: Option<String>,

    /// More output; repeat for more (1 warnings, 2 info, 3 debug, 4 trace)
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,

    /// Warn when a process other than the main child is reaped
    #[arg(short = 'w', long = "warn-on-reap")]
    pub warn_on_reap: bool,

    /// Deliver signals to the child's whole process group
    #[arg(short = 'g', long = "kill-process-group")]
    pub kill_process_group: bool,

    /// Remap this exit code of the child to 0 (repeatable, 0-255)
    #[arg(short = 'e', long = "remap-exit", value_name = "CODE")]
    pub remap_exit: Vec<String>,

    /// Rewrite a received signal before forwarding it; TO=0 drops it (repeatable)
    #[arg(short = 'r', long = "rewrite", value_name = "FROM:TO")]
    pub rewrite: Vec<String>,

    /// Print the license and exit
    #[arg(short = 'l', long = "license")]
    pub license: bool,

    /// Print the version and exit
    #[arg(long = "version", action = ArgAction::Version)]
    pub version: Option<bool>,

    /// The program to run and its arguments
    #[arg(
        value_name = "PROGRAM",
        trailing_var_arg = true,
        value_parser = clap::value_parser!(OsString)
    )]
    pub command: Vec<OsString>,
}
