//! Performs the core's actions: signals and kills, requests on worker
//! threads, commands and drain files. It keeps the tables that tie the
//! core's tokens to process ids, and queues the answers an action gives at
//! once (a failed kill, a file looked at) for the loop to hand back.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, error, info, warn};

use crate::core::event::{Action, Input, Lane, Token};
use crate::core::outcome::Ended;
use crate::core::rules;
use crate::core::settings::Config;
use crate::core::sources::exec::public_command;
use crate::io::threads::Outbox;
use crate::io::workers::Job;
use crate::io::{commands, http, procfs, signals};
use crate::proto::exchange::{Endpoint, Request};
use crate::proto::http::{Failure, Kind};
use crate::shell::lanes;
use crate::util::signame::signal_name;
use crate::util::time::millis;

pub struct Executor<'a> {
    config: &'a Config,
    /// The main child.
    pid: i32,
    /// drainit is PID 1 of its namespace (known once, at start).
    pid1: bool,
    outbox: Outbox,
    /// Commands running now: their pid (also their process group) and token.
    runs: Vec<(i32, Token)>,
    /// The errors of failed forwards already logged (a few errno values).
    forward_failures: Vec<i32>,
    /// The stop signal went out (what a fallback goes by).
    pub stop_sent: bool,
    /// Answers of the actions performed, for the core's next turn.
    pub answers: VecDeque<Input>,
}

impl<'a> Executor<'a> {
    pub fn new(config: &'a Config, pid: i32, pid1: bool, outbox: Outbox) -> Executor<'a> {
        Executor {
            config,
            pid,
            pid1,
            outbox,
            runs: Vec::new(),
            forward_failures: Vec::new(),
            stop_sent: false,
            answers: VecDeque::new(),
        }
    }

    pub fn execute(&mut self, action: Action) {
        match action {
            Action::Forward { signo, group, stop } => self.forward(signo, group, stop),
            Action::KillChild => self.kill_child(),
            Action::TerminateOthers => {
                if procfs::terminate_others(self.pid1) {
                    info!(
                        "waiting up to {} ms for the remaining processes",
                        millis(self.config.timeline.orphan_grace)
                    );
                } else {
                    self.answers.push_back(Input::OthersGone);
                }
            }
            Action::SignalGroupLeft { signo } => procfs::signal_group_left(self.pid, signo),
            Action::StopSelf => signals::stop_self(),
            Action::Send {
                token,
                lane,
                request,
                timeout,
            } => self.send(token, lane, request, timeout),
            Action::StartRun { token, cmd } => {
                crate::util::fault::point("start_run");
                match commands::start(&cmd) {
                    Ok(pid) => {
                        debug!("started {} as pid {pid}", public_command(&cmd.text));
                        self.runs.push((pid, token));
                    }
                    Err(e) => {
                        warn!("cannot run {}: {e}", public_command(&cmd.text));
                        self.answers.push_back(Input::RunFailed { token });
                    }
                }
            }
            Action::KillRun(token) => {
                if let Some(&(pid, _)) = self.runs.iter().find(|(_, t)| *t == token) {
                    commands::kill_group(pid);
                }
            }
            Action::CheckFile { token, path, since } => {
                // The stop's start on the wall clock, which file times use.
                let ago = Instant::now().saturating_duration_since(since);
                let began = SystemTime::now()
                    .checked_sub(ago)
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                let seen = commands::look_at_file(&path, began);
                self.answers.push_back(Input::File { token, seen });
            }
            Action::Exit => {}
        }
    }

    /// A request on a thread of `lane`, by the client its endpoint names.
    fn send(&mut self, token: Token, lane: Lane, request: Request, timeout: Duration) {
        let outbox = self.outbox.clone();
        let job: Job = match &request.endpoint {
            Endpoint::HttpUrl(url) => {
                let url = url.clone();
                Box::new(move || {
                    http::run_and_report(&request, &url, timeout, |result| {
                        outbox.send(Input::Http { token, result })
                    })
                })
            }
            Endpoint::K8sPod => match self.k8s_job(token, request, timeout) {
                Ok(job) => job,
                Err(detail) => {
                    let result = Err(Failure::new(Kind::Internal, detail));
                    return self.answers.push_back(Input::Http { token, result });
                }
            },
        };
        self.submit(lane, token, job);
    }

    /// Starts a request's job on a thread of `lane`.
    fn submit(&mut self, lane: Lane, token: Token, job: Job) {
        if let Err(e) = lanes::pool(lane).submit(job) {
            // Answered like any failed request.
            let detail = format!("cannot start a request thread: {e}");
            let result = Err(Failure::new(Kind::Internal, &detail));
            self.answers.push_back(Input::Http { token, result });
        }
    }

    /// The job of a request to drainit's own pod (`--k8s-protect`): the
    /// Kubernetes client over TLS, within the client's own time bound.
    #[cfg(feature = "k8s")]
    fn k8s_job(&self, token: Token, request: Request, timeout: Duration) -> Result<Job, &str> {
        use crate::io::k8s;
        let config = self
            .config
            .k8s
            .as_ref()
            .ok_or("no Kubernetes pod configured")?;
        let place = k8s::Place {
            host: config.host.clone(),
            port: config.port,
            namespace: config.namespace.clone(),
            pod: config.pod.clone(),
        };
        let timeout = timeout.min(k8s::REQUEST_TIMEOUT);
        let outbox = self.outbox.clone();
        Ok(Box::new(move || {
            k8s::run_and_report(&place, &request, timeout, |result| {
                // The core reads no clock: an answer without a `Date`
                // header is dated by the local one.
                let result = result.map(|mut r| {
                    r.date.get_or_insert_with(std::time::SystemTime::now);
                    r
                });
                outbox.send(Input::Http { token, result })
            })
        }))
    }

    /// Without the `k8s` feature no core part names the pod.
    #[cfg(not(feature = "k8s"))]
    fn k8s_job(&self, _: Token, _: Request, _: Duration) -> Result<Job, &str> {
        Err("this build has no Kubernetes client")
    }

    /// What a reaped pid was: the main child (while `child_running`), a
    /// command (whatever it left in its group goes with it), or an orphan.
    pub fn reaped(&mut self, pid: i32, ended: Ended, child_running: bool) -> Input {
        if pid == self.pid && child_running {
            return Input::ChildExited(ended);
        }
        if let Some(at) = self.runs.iter().position(|(p, _)| *p == pid) {
            let (pid, token) = self.runs.swap_remove(at);
            commands::kill_group(pid);
            return Input::RunEnded { token, ended };
        }
        Input::OrphanReaped { pid }
    }

    /// SIGKILL to every command's group; they stay in the table until
    /// reaped, so none is taken for an orphan.
    pub fn kill_all_runs(&mut self, why: &str) {
        for &(pid, _) in &self.runs {
            debug!("killing command pid {pid}: {why}");
            commands::kill_group(pid);
        }
    }

    /// The main child's pid.
    pub fn child(&self) -> i32 {
        self.pid
    }

    /// drainit is PID 1 of its namespace.
    pub fn pid1(&self) -> bool {
        self.pid1
    }

    /// Sends `signo` to the child, or its group; a failure is logged once
    /// per kind.
    pub fn signal_child(&mut self, signo: i32, group: bool) {
        self.forward(signo, group, false);
    }

    /// Forwards a signal to the child or its group.
    fn forward(&mut self, signo: i32, group: bool, stop: bool) {
        self.stop_sent |= stop;
        let target = if group { -self.pid } else { self.pid };
        // SAFETY: kill has no memory effects; the PID has not been reaped
        // (the core forwards only while the child is alive, and the reaper
        // runs on this same thread).
        if unsafe { libc::kill(target, signo) } != 0 {
            // tini exits on EPERM here, throwing away the platform's grace
            // period; a failed forward is only worth a warning, once per
            // kind of failure: a storm of signals must not become a storm
            // of log lines.
            let error = io::Error::last_os_error();
            let errno = error.raw_os_error().unwrap_or(0);
            if !self.forward_failures.contains(&errno) {
                self.forward_failures.push(errno);
                warn!(
                    "forwarding {} to {} {}: {error} (said once for this error)",
                    signal_name(signo),
                    if group { "process group" } else { "pid" },
                    self.pid,
                );
            }
        }
    }

    /// SIGKILL to the child's process group, and to the child itself in
    /// case it left the group (`kill_child`). If neither can be sent
    /// (EPERM: a setuid child, drainit not root), that is said loudly and
    /// the core decides: never a silent hang.
    fn kill_child(&mut self) {
        if let Err(error) = kill_child(self.pid) {
            let pid1 = self.pid1;
            error!(
                "cannot kill the child (pid {}): {error}; {}",
                self.pid,
                if pid1 {
                    "exiting now, which ends the namespace"
                } else {
                    "waiting for it to exit"
                }
            );
            self.answers.push_back(Input::KillFailed);
        }
    }
}

/// The double kill (`core::rules::kill_targets`): SIGKILL to the child's
/// process group, then to the child; only the child's own kill decides
/// (a group kill succeeds when any member was signalled). The loop and the
/// last resort both kill through here.
pub fn kill_child(pid: i32) -> io::Result<()> {
    let [group, child] = rules::kill_targets(pid);
    // SAFETY: kill has no memory effects; the child is not reaped yet (the
    // reaper runs on the caller's thread, which checks first).
    if unsafe { libc::kill(group, libc::SIGKILL) } != 0 {
        // Only the rest of the group: the child itself decides below.
        debug!(
            "SIGKILL to process group {pid}: {}",
            io::Error::last_os_error()
        );
    }
    // SAFETY: as above.
    if unsafe { libc::kill(child, libc::SIGKILL) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
