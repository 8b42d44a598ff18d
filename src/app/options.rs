//! Every option of drainit, declared once: names, heading, value, default
//! and help. `cli` builds the clap arguments from this table, `config` reads
//! each option's variable and default through it, and `app::reference`
//! renders the Markdown options reference (docs/options.md, kept equal by a
//! test).
//!
//! Each option is a `static` (`options::GRACE`): code reads an option
//! through its constant, never by a name typed as a string, so a misspelt
//! option does not compile. Adding an option is one declaration here plus
//! its use in `config`.

/// Where `--help` and the reference list an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heading {
    General,
    Draining,
    Notify,
    Ecs,
    Kubernetes,
    Health,
}

impl Heading {
    /// The `--help` heading; `None` is clap's own "Options".
    pub fn title(self) -> Option<&'static str> {
        match self {
            Heading::General => None,
            Heading::Draining => Some("Draining"),
            Heading::Notify => Some("sd_notify"),
            Heading::Ecs => Some("Amazon ECS"),
            Heading::Kubernetes => Some("Kubernetes"),
            Heading::Health => Some("Health checks and metrics"),
        }
    }
}

/// How an option takes its value, on the command line and in its variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A switch; its variable takes 1/true/yes/on or 0/false/no/off.
    Flag,
    /// A switch counted per use (`-vv`); its variable takes the level.
    Count,
    /// One value.
    One,
    /// Repeatable; the variable holds a comma-separated list.
    Commas,
    /// Repeatable; the variable holds one value per line (commands, which
    /// contain commas).
    Lines,
    /// Prints the version and exits.
    Version,
    /// A switch that may take one value (`--probe [URL]`).
    Optional,
}

/// What an option is when it is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// Off, empty or unset.
    None,
    /// This text, parsed exactly as a typed value would be, is the value.
    Value(&'static str),
    /// This text is the value, but only in the case the words describe
    /// (shown as "[default: VALUE WORDS]").
    ValueWhen(&'static str, &'static str),
    /// Words only: `config` works the value out (e.g. "the --grace value").
    Said(&'static str),
}

/// One option.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// `--long`, also the clap id and the base of the variable's name.
    pub long: &'static str,
    pub short: Option<char>,
    pub heading: Heading,
    pub kind: Kind,
    /// The value's name in `--help` (`D` for a duration); "" for switches.
    pub value: &'static str,
    pub default: Default,
    /// Whether `DRAINIT_<LONG>` sets it too.
    pub var: bool,
    pub help: &'static str,
}

impl Opt {
    /// `DRAINIT_` and the long name in capitals, dashes as underscores; the
    /// one place a variable name is made.
    pub fn var(&self) -> Option<String> {
        self.var.then(|| env_var(self.long))
    }

    /// The default as `--help` shows it inside "[default: ...]".
    pub fn default_shown(&self) -> Option<String> {
        match self.default {
            Default::None => None,
            Default::Value(v) | Default::Said(v) => Some(v.to_string()),
            Default::ValueWhen(v, when) => Some(format!("{v} {when}")),
        }
    }

    /// The text a value default is parsed from; `None` where there is none.
    pub fn default_value(&self) -> Option<&'static str> {
        match self.default {
            Default::Value(v) | Default::ValueWhen(v, _) => Some(v),
            Default::None | Default::Said(_) => None,
        }
    }

    /// What `--help` adds after the text of a repeatable option.
    pub fn repeat_note(&self) -> &'static str {
        match self.kind {
            Kind::Commas if self.var => "(repeatable; comma-separated in the variable)",
            Kind::Lines => "(repeatable; one per line in the variable)",
            Kind::Commas => "(repeatable)",
            _ => "",
        }
    }
}

/// The variable of `--long`; see `Opt::var`.
pub fn env_var(long: &str) -> String {
    let mut var = String::from("DRAINIT_");
    var.extend(long.chars().map(|c| match c {
        '-' => '_',
        c => c.to_ascii_uppercase(),
    }));
    var
}

/// The option whose long name is `long`, for tools and tests that start
/// from a name (drainit itself reaches every option through its constant).
pub fn find(long: &str) -> Option<&'static Opt> {
    OPTIONS.iter().copied().find(|o| o.long == long)
}

/// Declares each option as a `static` of its own, named after its long
/// name (`--pre-stop-delay` is `PRE_STOP_DELAY`), so that code names an
/// option by a constant the compiler checks; and lists them all, in order,
/// in `OPTIONS`, from which the command line, the help, the man page and
/// the reference are made.
macro_rules! declare {
    ($($name:ident = $opt:expr;)*) => {
        $(pub static $name: Opt = $opt;)*
        /// Every option, in `--help` order within each heading.
        pub static OPTIONS: &[&Opt] = &[$(&$name),*];
        /// Each constant's name, to check it against its long name.
        #[cfg(test)]
        static NAMES: &[(&str, &Opt)] = &[$((stringify!($name), &$name)),*];
    };
}

const FLAG: Opt = Opt {
    long: "",
    short: None,
    heading: Heading::General,
    kind: Kind::Flag,
    value: "",
    default: Default::None,
    var: true,
    help: "",
};

const ONE: Opt = Opt {
    kind: Kind::One,
    ..FLAG
};

/// Under "Draining", with a duration `D` unless the entry names another value.
const DRAIN_D: Opt = Opt {
    heading: Heading::Draining,
    value: "D",
    ..ONE
};

declare! {
    // General: tini's and dumb-init's flags, then drainit's.
    SUBREAPER = Opt {
        long: "subreaper",
        short: Some('s'),
        help: "Register as a child subreaper (automatic when drainit is not PID 1)",
        ..FLAG
    };
    PDEATHSIG = Opt {
        long: "pdeathsig",
        short: Some('p'),
        value: "SIGNAL",
        help: "Signal drainit receives when its parent dies (PR_SET_PDEATHSIG)",
        ..ONE
    };
    VERBOSE = Opt {
        long: "verbose",
        short: Some('v'),
        kind: Kind::Count,
        default: Default::Said("1, 2 with a drain option"),
        help: "More output; each -v adds a level (0 off, 1 warnings, 2 info, 3 debug, \
               4 trace); the variable takes the level",
        ..FLAG
    };
    WARN_ON_REAP = Opt {
        long: "warn-on-reap",
        short: Some('w'),
        help: "Warn when a process other than the main child is reaped",
        ..FLAG
    };
    KILL_PROCESS_GROUP = Opt {
        long: "kill-process-group",
        short: Some('g'),
        help: "Deliver signals to the child's whole process group",
        ..FLAG
    };
    SINGLE_CHILD = Opt {
        long: "single-child",
        short: Some('c'),
        var: false,
        help: "dumb-init's single-child mode: signal only the child, drainit's default \
               (accepted for dumb-init users; beats the -g variables)",
        ..FLAG
    };
    REMAP_EXIT = Opt {
        long: "remap-exit",
        short: Some('e'),
        kind: Kind::Commas,
        value: "CODE",
        help: "Remap this exit code of the child (0-255) to 0",
        ..FLAG
    };
    REWRITE = Opt {
        long: "rewrite",
        short: Some('r'),
        kind: Kind::Commas,
        value: "FROM:TO",
        help: "Rewrite a received signal before forwarding it; TO=0 drops it",
        ..FLAG
    };
    LOG_FORMAT = Opt {
        long: "log-format",
        value: "FORMAT",
        default: Default::Value("text"),
        help: "Log format: text or json",
        ..ONE
    };
    LICENSE = Opt {
        long: "license",
        short: Some('l'),
        var: false,
        help: "Print the license and exit",
        ..FLAG
    };
    CHECK = Opt {
        long: "check",
        help: "Check the configuration and exit (1 on an error), starting no program: each \
               source asked once, within 15 s; findings on stdout, a summary last",
        ..FLAG
    };
    VERSION = Opt {
        long: "version",
        short: Some('V'),
        kind: Kind::Version,
        var: false,
        help: "Print the version and exit",
        ..FLAG
    };
    // Draining.
    GRACE = Opt {
        long: "grace",
        default: Default::ValueWhen(
            "8s",
            "with a drain option, or the platform's; else none",
        ),
        help: "Deadline from the start of a stop; then SIGKILL. 0/none never escalates. With a \
               drain option the default fits the platform's kill: 25s on ECS, Kubernetes and \
               Container Apps, 9s on Cloud Run, 4s on Fly.io and Nomad. With --k8s-protect it \
               is the pod's terminationGracePeriodSeconds less a margin",
        ..DRAIN_D
    };
    STOP_SIGNALS = Opt {
        long: "stop-signals",
        value: "LIST",
        default: Default::Value("TERM,INT"),
        help: "Received signals that begin a stop",
        ..DRAIN_D
    };
    PRE_STOP_DELAY = Opt {
        long: "pre-stop-delay",
        default: Default::Value("0"),
        help: "Wait this long before the stop hooks and signal",
        ..DRAIN_D
    };
    STOP_URL = Opt {
        long: "stop-url",
        kind: Kind::Commas,
        value: "URL",
        help: "Request sent once when the stop hooks fire (e.g. POST /shutdown)",
        ..DRAIN_D
    };
    STOP_METHOD = Opt {
        long: "stop-method",
        value: "M",
        default: Default::Value("POST"),
        help: "HTTP method of --stop-url",
        ..DRAIN_D
    };
    DRAIN_URL = Opt {
        long: "drain-url",
        kind: Kind::Commas,
        value: "URL",
        help: "The app's drain endpoint, polled during a stop",
        ..DRAIN_D
    };
    STOP_EXEC = Opt {
        long: "stop-exec",
        kind: Kind::Lines,
        value: "CMD",
        help: "Command run once when the stop hooks fire, split with shell quoting but no shell",
        ..DRAIN_D
    };
    HOOK_TIMEOUT = Opt {
        long: "hook-timeout",
        default: Default::Value("10s"),
        help: "Longest wait for the stop hooks before the stop signal goes out",
        ..DRAIN_D
    };
    DRAIN_EXEC = Opt {
        long: "drain-exec",
        kind: Kind::Lines,
        value: "CMD",
        help: "Readiness by command: exit 0 is ready, run every --drain-interval",
        ..DRAIN_D
    };
    DRAIN_TIMEOUT = Opt {
        long: "drain-timeout",
        default: Default::Value("5s"),
        help: "Longest run of a --drain-exec command, then it is killed",
        ..DRAIN_D
    };
    DRAIN_FILE = Opt {
        long: "drain-file",
        kind: Kind::Commas,
        value: "PATH",
        help: "Readiness by file: ready once PATH exists, written during the stop",
        ..DRAIN_D
    };
    DRAIN_FIELD = Opt {
        long: "drain-field",
        value: "PTR",
        default: Default::Value("/readyForTermination"),
        help: "JSON pointer to the readiness boolean",
        ..DRAIN_D
    };
    DRAIN_INTERVAL = Opt {
        long: "drain-interval",
        default: Default::Value("1s"),
        help: "Period of the rounds over the drain sources",
        ..DRAIN_D
    };
    READY_GRACE = Opt {
        long: "ready-grace",
        default: Default::Value("2s"),
        help: "Once the app is ready, time for the child to exit by itself",
        ..DRAIN_D
    };
    ORPHAN_GRACE = Opt {
        long: "orphan-grace",
        default: Default::Value("0"),
        help: "After the main child exits, SIGTERM what remains and wait up to D",
        ..DRAIN_D
    };
    MAX_RUNTIME = Opt {
        long: "max-runtime",
        help: "Begin a stop once the app has run this long (from its start), as a stop signal \
               would: drained, with --grace as its deadline. Not 0 or none (leave it unset)",
        ..DRAIN_D
    };
    DEADLINE_EXIT_CODE = Opt {
        long: "deadline-exit-code",
        value: "N",
        default: Default::Value("124"),
        help: "Exit code when the deadline passes and drainit kills the child",
        ..DRAIN_D
    };
    EXIT_REPORT = Opt {
        long: "exit-report",
        value: "PATH",
        help: "Write the JSON exit report here when drainit exits",
        ..DRAIN_D
    };
    // sd_notify.
    NOTIFY = Opt {
        long: "notify",
        heading: Heading::Notify,
        help: "Receive the app's sd_notify messages (NOTIFY_SOCKET): READY, STATUS, STOPPING, \
               EXTEND_TIMEOUT_USEC, X_DRAINIT_READY_FOR_TERMINATION",
        ..FLAG
    };
    NOTIFY_SOCKET = Opt {
        long: "notify-socket",
        heading: Heading::Notify,
        value: "PATH",
        default: Default::Said("an abstract name"),
        help: "Bind the notify socket at this absolute path (implies --notify)",
        ..ONE
    };
    NOTIFY_ACCESS = Opt {
        long: "notify-access",
        heading: Heading::Notify,
        value: "WHO",
        default: Default::Value("all"),
        help: "Who may send: all (any process in drainit's PID namespace) or main \
               (the main child only)",
        ..ONE
    };
    GRACE_MAX = Opt {
        long: "grace-max",
        heading: Heading::Notify,
        value: "D",
        default: Default::Said("the --grace value"),
        help: "Latest deadline EXTEND_TIMEOUT_USEC may reach, from the start of a stop",
        ..ONE
    };
    // Amazon ECS.
    ECS = Opt {
        long: "ecs",
        heading: Heading::Ecs,
        value: "MODE",
        default: Default::Value("auto"),
        help: "Amazon ECS integration: auto (when the metadata variable is set), on, off",
        ..ONE
    };
    ECS_INTERVAL = Opt {
        long: "ecs-interval",
        heading: Heading::Ecs,
        value: "D",
        default: Default::Value("5s"),
        help: "Task metadata poll period, at least 1s",
        ..ONE
    };
    ECS_PROTECT = Opt {
        long: "ecs-protect",
        heading: Heading::Ecs,
        help: "Keep task scale-in protection on while the --drain-url and --drain-exec \
               sources say the app is busy (drain files never count); needs ECS_AGENT_URI \
               and one such source",
        ..FLAG
    };
    PROTECT_INTERVAL = Opt {
        long: "protect-interval",
        heading: Heading::Ecs,
        value: "D",
        default: Default::Value("10s"),
        help: "How often --ecs-protect or --k8s-protect asks those sources, at least 1s",
        ..ONE
    };
    PROTECT_MINUTES = Opt {
        long: "protect-minutes",
        heading: Heading::Ecs,
        value: "M",
        default: Default::Value("60"),
        help: "Protection length per request, 1-2880 minutes",
        ..ONE
    };
    // Kubernetes.
    K8S_PROTECT = Opt {
        long: "k8s-protect",
        heading: Heading::Kubernetes,
        help: "Keep the pod-deletion-cost, safe-to-evict and do-not-disrupt annotations on this \
               pod while the --drain-url and --drain-exec sources say the app is busy (asked \
               every --protect-interval), and take the default --grace from the pod's \
               terminationGracePeriodSeconds; needs a service account that may get and patch \
               pods, and one such source",
        ..FLAG
    };
    K8S_CONTAINER = Opt {
        long: "k8s-container",
        heading: Heading::Kubernetes,
        value: "NAME",
        default: Default::None,
        help: "drainit's own container in the pod spec: its name in the record of the \
               containers holding the pod busy, and whose probes and preStop hook shorten \
               the default grace (default: the container the kubelet's mounts name, else \
               the pod's only container)",
        ..ONE
    };
    K8S_COST = Opt {
        long: "k8s-cost",
        heading: Heading::Kubernetes,
        value: "N",
        default: Default::Value("1000"),
        help: "The controller.kubernetes.io/pod-deletion-cost while busy, 1-2147483647",
        ..ONE
    };
    K8S_ANNOTATIONS = Opt {
        long: "k8s-annotations",
        heading: Heading::Kubernetes,
        value: "LIST",
        default: Default::Value("cost,safe-to-evict,do-not-disrupt"),
        help: "Which annotations --k8s-protect manages: any of cost, safe-to-evict, \
               do-not-disrupt (comma-separated), or all",
        ..ONE
    };
    K8S_IDLE_SAFE_TO_EVICT = Opt {
        long: "k8s-idle-safe-to-evict",
        heading: Heading::Kubernetes,
        help: "Set the safe-to-evict annotation to \"true\" while the app is idle, instead of \
               the template's value (--k8s-protect; for a pod with local storage)",
        ..FLAG
    };
    // Health checks and metrics.
    SERVE = Opt {
        long: "serve",
        heading: Heading::Health,
        value: "ADDR:PORT",
        help: "Answer GET /readyz, /healthz, /status and /metrics over HTTP on this address \
               (read-only; e.g. 0.0.0.0:9090)",
        ..ONE
    };
    READY_URL = Opt {
        long: "ready-url",
        heading: Heading::Health,
        value: "URL",
        help: "The app's own readiness endpoint: /readyz also answers 503 unless it answers 2xx",
        ..ONE
    };
    PROBE = Opt {
        long: "probe",
        heading: Heading::Health,
        kind: Kind::Optional,
        value: "URL",
        var: false,
        help:
            "Run as a health-check client, not an init: GET URL (or connect to tcp://HOST:PORT), \
               exit 0 on 2xx and 1 otherwise; without URL, /healthz of DRAINIT_SERVE",
        ..ONE
    };
    PROBE_TIMEOUT = Opt {
        long: "probe-timeout",
        heading: Heading::Health,
        value: "D",
        default: Default::Value("3s"),
        var: false,
        help: "With --probe: the longest the whole check may take",
        ..ONE
    };
    DRAIN_COUNT_FIELD = Opt {
        long: "drain-count-field",
        heading: Heading::Health,
        value: "PTR",
        help: "JSON pointer to the app's in-flight count in the drain body (e.g. \
               /activeExecutions): logged, reported and exported",
        ..ONE
    };
    EMF = Opt {
        long: "emf",
        heading: Heading::Health,
        help:
            "At exit, write the exit report as one CloudWatch Embedded Metric Format line on stderr",
        ..FLAG
    };
    EMF_NAMESPACE = Opt {
        long: "emf-namespace",
        heading: Heading::Health,
        value: "NAME",
        default: Default::Value("drainit"),
        help: "The CloudWatch namespace of --emf's metrics",
        ..ONE
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_constant_is_named_after_its_long_name() {
        assert_eq!(NAMES.len(), OPTIONS.len());
        for ((name, opt), listed) in NAMES.iter().zip(OPTIONS) {
            assert_eq!(*name, opt.long.to_ascii_uppercase().replace('-', "_"));
            assert!(std::ptr::eq(*opt, *listed), "{name} listed out of place");
        }
    }
}
