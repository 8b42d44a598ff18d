//! The command line as typed: clap definitions of drainit's, tini's and
//! dumb-init's flags, kept as raw text so that `config` can validate flags
//! and their `DRAINIT_*` variables with the same one-line errors.

use std::ffi::OsString;

use clap::{ArgAction, CommandFactory, Parser};

pub const AFTER_HELP: &str = "\
Every option can also be set with the environment variable shown with it
(DRAINIT_ and the long name, e.g. DRAINIT_GRACE=20s); a flag beats its
variable. tini's TINI_SUBREAPER, TINI_KILL_PROCESS_GROUP and TINI_VERBOSITY
are honoured too. Option parsing stops at `--` or at the first word that is
not an option: `drainit ls -l` runs `ls -l`.";

/// Long options with no `DRAINIT_*` variable: actions, and dumb-init's
/// `--single-child`, whose variable is dumb-init's own `DUMB_INIT_SETSID`.
pub const NO_VARIABLE: [&str; 4] = ["help", "version", "license", "single-child"];

/// The variable of the option `--long`: `DRAINIT_` and the long name in
/// capitals, dashes as underscores. The one place a variable name is made.
pub fn env_var(long: &str) -> String {
    format!("DRAINIT_{}", long.to_ascii_uppercase().replace('-', "_"))
}

/// The clap command, each option's help ending with its variable, so the
/// help text is generated from the one declaration and cannot drift.
pub fn command() -> clap::Command {
    RawArgs::command().mut_args(|arg| {
        let Some(long) = arg.get_long().filter(|l| !NO_VARIABLE.contains(l)) else {
            return arg;
        };
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let var = env_var(long);
        arg.help(format!("{help} [env: {var}]"))
    })
}

#[derive(Debug, Parser)]
#[command(
    name = "drainit",
    version = crate::util::version::VERSION,
    about = "A drain-aware init for containers: reaps zombies, forwards signals, \
             and holds SIGKILL back until the app has drained.",
    after_help = AFTER_HELP,
    // Written out: clap's generated usage (its "usage" feature) costs
    // 12 KiB of static binary for this one line.
    override_usage = "drainit [OPTIONS] [--] PROGRAM [ARGS]...",
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

    /// dumb-init's single-child mode: signal only the child, drainit's default
    /// (accepted for dumb-init users; beats the -g variables)
    #[arg(
        short = 'c',
        long = "single-child",
        conflicts_with = "kill_process_group"
    )]
    pub single_child: bool,

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
    /// (repeatable; comma-separated in the variable)
    #[arg(long, value_name = "URL", help_heading = "Draining")]
    pub stop_url: Vec<String>,

    /// HTTP method of --stop-url [default: POST]
    #[arg(long, value_name = "M", help_heading = "Draining")]
    pub stop_method: Option<String>,

    /// The app's drain endpoint, polled during a stop (repeatable;
    /// comma-separated in the variable)
    #[arg(long, value_name = "URL", help_heading = "Draining")]
    pub drain_url: Vec<String>,

    /// Command run once when the stop hooks fire, split with shell quoting
    /// but no shell (repeatable; in the variable, one per line)
    #[arg(long, value_name = "CMD", help_heading = "Draining")]
    pub stop_exec: Vec<String>,

    /// Longest wait for the stop hooks before the stop signal goes out [default: 10s]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub hook_timeout: Option<String>,

    /// Readiness by command: exit 0 is ready, run every --drain-interval
    /// (repeatable; in the variable, one per line)
    #[arg(long, value_name = "CMD", help_heading = "Draining")]
    pub drain_exec: Vec<String>,

    /// Longest run of a --drain-exec command, then it is killed [default: 5s]
    #[arg(long, value_name = "D", help_heading = "Draining")]
    pub drain_timeout: Option<String>,

    /// Readiness by file: ready once PATH exists, written during the stop
    /// (repeatable; comma-separated in the variable)
    #[arg(long, value_name = "PATH", help_heading = "Draining")]
    pub drain_file: Vec<String>,

    /// JSON pointer to the readiness boolean [default: /readyForTermination]
    #[arg(long, value_name = "PTR", help_heading = "Draining")]
    pub drain_field: Option<String>,

    /// Period of the rounds over the drain sources [default: 1s]
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

    /// Receive the app's sd_notify messages (NOTIFY_SOCKET): READY, STATUS,
    /// STOPPING, EXTEND_TIMEOUT_USEC, X_DRAINIT_READY_FOR_TERMINATION
    #[arg(long, help_heading = "sd_notify")]
    pub notify: bool,

    /// Bind the notify socket at this absolute path (implies --notify)
    /// [default: an abstract name]
    #[arg(long, value_name = "PATH", help_heading = "sd_notify")]
    pub notify_socket: Option<String>,

    /// Who may send: all (any process in drainit's PID namespace) or main
    /// (the main child only) [default: all]
    #[arg(long, value_name = "WHO", help_heading = "sd_notify")]
    pub notify_access: Option<String>,

    /// Latest deadline EXTEND_TIMEOUT_USEC may reach, from the start of a
    /// stop [default: the --grace value]
    #[arg(long, value_name = "D", help_heading = "sd_notify")]
    pub grace_max: Option<String>,

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
    #[arg(short = 'V', long = "version", action = ArgAction::Version)]
    pub version: Option<bool>,

    /// The program to run and its arguments
    #[arg(
        value_name = "PROGRAM",
        trailing_var_arg = true,
        value_parser = clap::value_parser!(OsString)
    )]
    pub command: Vec<OsString>,
}
