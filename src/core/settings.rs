//! The settings a run goes by, validated: what `app::config` makes of the
//! command line and the environment, and what the core and shell read.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::proto::http::Target;
use crate::proto::k8s::Managed;
use crate::proto::k8s_host::Host;
use crate::proto::notify_msg::Access;

/// `Default` is for tests: a test builds the `Config` it needs from it, so
/// a new option's field touches no test that does not use it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Whether drainit is PID 1 of its namespace: known once, when the
    /// configuration is read, for everything that behaves differently.
    pub pid1: bool,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub subreaper: bool,
    pub pdeathsig: Option<i32>,
    pub verbosity: u8,
    pub warn_on_reap: bool,
    pub kill_process_group: bool,
    /// Exit codes of the child reported as 0 (tini's `-e`).
    pub remap_exit: Vec<u8>,
    /// dumb-init's `-r FROM:TO`; TO = 0 drops the signal.
    pub rewrite: Vec<(i32, i32)>,
    /// `DRAINIT_LOG`: an env_logger-style filter that overrides the verbosity.
    pub log_filter: Option<String>,
    pub log_format: LogFormat,

    /// The stop's rules and timings, as the timeline takes them: the
    /// stop signals, `--grace`, `--pre-stop-delay`, `--hook-timeout`,
    /// `--drain-interval`, `--ready-grace`, `--orphan-grace`, and whether
    /// there are stop hooks and drain sources.
    pub timeline: TimelineSettings,
    /// Each `--stop-url`, with `--stop-method`.
    pub stop_hooks: Vec<Target>,
    /// Each `--drain-url`.
    pub drain_urls: Vec<String>,
    pub drain_field: String,
    /// `--stop-exec`: commands run once when the stop hooks fire.
    pub stop_execs: Vec<Cmd>,
    /// `--drain-exec`: readiness by command.
    pub drain_execs: Vec<Cmd>,
    /// `--drain-timeout`: longest run of a drain command.
    pub drain_timeout: Duration,
    /// `--drain-file`: readiness by file.
    pub drain_files: Vec<PathBuf>,
    pub deadline_exit_code: u8,
    pub exit_report: Option<PathBuf>,
    /// Amazon ECS integration, when active.
    pub ecs: Option<EcsConfig>,
    /// `--k8s-protect`: the pod annotations while the app is busy.
    pub k8s: Option<K8sConfig>,
    /// `--notify`: receive the app's sd_notify messages.
    pub notify: Option<NotifyConfig>,
    /// `--max-runtime`: a stop begins once the app has run this long
    /// (from its start), as a stop signal's would.
    pub max_runtime: Option<Duration>,
    /// `--grace-max`: how far extensions may move the deadline from t0
    /// (equal to `grace` unless set).
    pub grace_max: Option<Duration>,
    /// `--serve`: where the health listener answers.
    pub serve: Option<SocketAddr>,
    /// `--ready-url`: the app's own readiness, asked for `/readyz`.
    pub ready_url: Option<String>,
    /// `--drain-count-field`: where the drain body holds the app's
    /// in-flight count.
    pub drain_count_field: Option<String>,
    /// `--emf`: the namespace of the exit's Embedded Metric Format line.
    pub emf: Option<String>,
    /// What validation has to say once logging runs (a default chosen for
    /// the platform, a platform variable ignored).
    pub notices: Vec<Notice>,
    /// What drainit keeps of dumb-init's behaviour when called by its name.
    pub compat: Compat,
}

/// dumb-init's own rules, which drainit follows when called `dumb-init`
/// (all off under any other name).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compat {
    /// When the child ends, SIGTERM (after `--rewrite`) to what it left in
    /// its process group: dumb-init's session mode.
    pub term_group_at_exit: bool,
    /// SIGTSTP, SIGTTIN and SIGTTOU are forwarded, then drainit stops
    /// itself (SIGSTOP) until a SIGCONT, which it forwards too.
    pub job_control_stops_self: bool,
    /// From the child's start on, drainit's own working directory is `/`
    /// (the child starts in drainit's start directory), so drainit holds
    /// no mount busy; relative paths were made absolute at start.
    pub leave_start_directory: bool,
}

/// What the timeline needs from the configuration, as it takes it
/// (`core::timeline::Settings`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimelineSettings {
    /// Received signals that begin a stop; the first is the one forwarded
    /// after an ECS-triggered stop.
    pub stop_signals: Vec<i32>,
    /// `--grace`: the deadline from t0, None never escalates.
    pub grace: Option<Duration>,
    pub pre_stop_delay: Duration,
    /// The grace is a platform's default that `pre_stop_delay` (with the
    /// hook's timeout) does not fit in: a stop cuts the delay, as for a
    /// grace the platform gave (`Timeline::follow`).
    pub delay_gives_way: bool,
    /// A stop hook (`--stop-url`, `--stop-exec`) is configured. The core
    /// derives it from `Config::stop_hooks` and `stop_execs`, as `drain`
    /// from the sources (`machine::settings`): what the configuration
    /// stores here is not read.
    pub hook: bool,
    /// Longest wait for the hook's answer (then capped, see `hook_timeout`).
    pub hook_timeout: Duration,
    /// A drain endpoint is configured.
    pub drain: bool,
    pub drain_interval: Duration,
    pub ready_grace: Duration,
    pub orphan_grace: Duration,
}

/// A line for the log at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    Info(String),
    Warn(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyConfig {
    /// `--notify-socket`: a file system path instead of an abstract name.
    pub socket: Option<PathBuf>,
    pub access: Access,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcsConfig {
    /// `ECS_CONTAINER_METADATA_URI_V4` (or v3); None with `--ecs off`.
    pub metadata_uri: Option<String>,
    pub interval: Duration,
    pub protect: Option<ProtectConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectConfig {
    pub agent_uri: String,
    pub interval: Duration,
    pub minutes: u32,
}

/// `--k8s-protect`: drainit's pod, the API server that holds it, and
/// what the protection writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct K8sConfig {
    /// The API server (`KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT`):
    /// an address or a name, looked up only when a request is sent.
    pub host: Host,
    pub port: u16,
    /// The service account's namespace and the pod's name.
    pub namespace: String,
    pub pod: String,
    /// `--k8s-container`: drainit's own container in the pod's spec.
    pub container: Option<String>,
    /// The containers the kubelet's mounts in drainit's mount namespace
    /// name (its own, on a real kubelet), read at start.
    pub mounted: Vec<crate::proto::k8s_mounts::Mounted>,
    /// `--protect-interval`.
    pub interval: Duration,
    /// `--k8s-cost`: the pod-deletion cost while busy.
    pub cost: i32,
    /// `--k8s-annotations`.
    pub managed: Managed,
    /// `--k8s-idle-safe-to-evict`: idle sets safe-to-evict "true".
    pub idle_safe_to_evict: bool,
    /// `--grace` was given: the pod's period only checks it (a warning
    /// when it is not below); otherwise the pod's period sets it.
    pub grace_given: bool,
    /// `--grace-max` was given (otherwise it follows the grace).
    pub grace_max_given: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Config {
    /// The signal actually forwarded for a received one (after `-r`);
    /// `None` when a rewrite to 0 drops it.
    pub fn rewritten(&self, signo: i32) -> Option<i32> {
        match self.rewrite.iter().rev().find(|(from, _)| *from == signo) {
            Some((_, 0)) => None,
            Some((_, to)) => Some(*to),
            None => Some(signo),
        }
    }
}

/// A command as the operator wrote it, split into words, its program found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// As typed (for logs, the exit report and duplicate detection).
    pub text: String,
    /// The words, the first as typed (it becomes argv[0]).
    pub argv: Vec<String>,
    /// The program to exec, resolved against `PATH` once at start.
    pub program: PathBuf,
    /// The directory it runs in when drainit left its start directory
    /// (called `dumb-init`): the one the child was started in. None: the
    /// directory drainit is in, which is the child's start directory.
    pub dir: Option<PathBuf>,
}

/// What `--probe` checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeTarget {
    /// One GET; 2xx is healthy.
    Http(String),
    /// A completed connect is healthy.
    Tcp { host: String, port: u16 },
}

/// `drainit --probe`: a health-check client run, not an init.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub target: ProbeTarget,
    pub timeout: Duration,
}
