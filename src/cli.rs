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

    /// Deadline from the start of a stop; then SIGKILL. 0/none never escalates
    /// [default: 25s with a drain option, else none]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub grace: Option<String>,

    /// Received signals that begin a stop [default: TERM,INT]
    #[arg(long, value_name = "LIST", help_heading = "Draining")]
    pub stop_signals: Option<String>,

    /// Wait this long before the stop hooks and signal [default: 0]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub pre_stop_delay: Option<String>,

    /// Request sent once when the stop hooks fire (e.g. POST /shutdown)
    #[arg(long, value_name = "URL", help_heading = "Draining")]
    pub stop_url: Option<String>,

    /// HTTP method of --stop-url [default: POST]
    #[arg(long, value_name = "M", help_heading = "Draining")]
    pub stop_method: Option<String>,

    /// The app's drain endpoint, polled during a stop
    #[arg(long, value_name = "URL", help_heading = "Draining")]
    pub drain_url: Option<String>,

    /// JSON pointer to the readiness boolean [default: /readyForTermination]
    #[arg(long, value_name = "PTR", help_heading = "Draining")]
    pub drain_field: Option<String>,

    /// Poll period of --drain-url [default: 1s]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub drain_interval: Option<String>,

    /// Once the app is ready, time for the child to exit by itself [default: 2s]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub ready_grace: Option<String>,

    /// After the main child exits, SIGTERM what remains and wait up to D [default: 0]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub orphan_grace: Option<String>,

    /// Exit code when the deadline passes and drainit kills the child [default: 124]
    #[arg(long, value_name = "N", help_heading = "Draining")]
    pub deadline_exit_code: Option<String>,

    /// Write the JSON exit report here when drainit exits
    #[arg(long, value_name = "PATH", help_heading = "Draining")]
    pub exit_report: Option<String>,

    /// Amazon ECS integration: auto (when the metadata variable is set), on, off
    /// [default: auto]
    #[arg(long, value_name = "MODE", help_heading = "Amazon ECS")]
    pub ecs: Option<String>,

    /// Task metadata poll period, at least 1s [default: 5s]
    #[arg(long, value_name = "D", help_heading = "Amazon ECS")]
    pub ecs_interval: Option<String>,

    /// Keep task scale-in protection on while the app is busy (needs
    /// ECS_AGENT_URI and --drain-url)
    #[arg(long, help_heading = "Amazon ECS")]
    pub ecs_protect: bool,

    /// How often --ecs-protect polls the drain URL [default: 10s]
    #[arg(long, value_name = "D", help_heading = "Amazon ECS")]
    pub protect_interval: Option<String>,

    /// Protection length per request, 1-2880 minutes [default: 60]
    #[arg(long, value_name = "M", help_heading = "Amazon ECS")]
    pub protect_minutes: Option<String>,

    /// Log format: text or json [default: text]
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,

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
