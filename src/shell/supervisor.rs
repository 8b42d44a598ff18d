//! A run from start to end: the notify socket, the child, the reader
//! thread, the core and the loop that drives it (`event_loop.rs`), the
//! fallback after a panic of the loop (`fallback.rs`), and at the end the
//! last notify messages and the summary for the exit report; called
//! `dumb-init`, leaving the start directory as the child starts.
//! Nothing here may end the process while the child runs.

use std::net::TcpListener;
use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, error};

use crate::core::deadline::Deadline;
use crate::core::event::Input;
use crate::core::machine::Machine;
use crate::core::outcome::{Outcome, RunSummary, SpawnFailure};
use crate::core::settings::Config;
use crate::io::serve::{self, Shared};
use crate::io::signals::{Handled, Inherited};
use crate::io::threads::{self, Inbox};
use crate::io::{notify, spawn};
use crate::shell::event_loop::{drive, Shell};
use crate::shell::executor::Executor;
use crate::shell::fallback;
use crate::shell::lanes;
use crate::shell::publish::Publisher;

/// Starts the child and supervises it until the run is over.
///
/// In two steps that are never inlined here, so that their frames are not
/// on the stack together: a stack page touched once stays in the idle
/// process's private memory for its whole life.
pub fn run(
    config: &Config,
    signals: Handled,
    inherited: &'static Inherited,
    listener: Option<TcpListener>,
) -> (Outcome, RunSummary) {
    let started = Instant::now();
    match start(config, inherited, listener) {
        Ok(run) => supervise(config, &signals, run, started),
        Err(outcome) => (outcome, RunSummary::default()),
    }
}

/// What `start` hands the supervision: the child and the threads and
/// channels around it.
struct Started {
    pid: i32,
    outbox: threads::Outbox,
    inbox: Inbox,
    publisher: Option<Publisher>,
    /// The notify socket's address, when drainit reads one.
    address: Option<std::ffi::OsString>,
}

/// Everything before the child, then the child: the notify socket, the
/// threads drainit needs, the listener. Or why the run ends here.
#[inline(never)]
fn start(
    config: &Config,
    inherited: &'static Inherited,
    listener: Option<TcpListener>,
) -> Result<Started, Outcome> {
    // The notify socket exists before the child, which finds it in
    // NOTIFY_SOCKET; a socket that cannot be bound ends drainit here.
    let socket = match &config.notify {
        None => None,
        Some(n) => match notify::bind(n.socket.as_deref()) {
            Ok(socket) => Some(socket),
            Err(e) => {
                let at = n.socket.as_deref().map(|p| p.display().to_string());
                error!(
                    "cannot bind the notify socket{}: {e}",
                    at.map(|p| format!(" at {p}")).unwrap_or_default()
                );
                return Err(Outcome::SpawnFailed(SpawnFailure::Other));
            }
        },
    };
    let outer = socket
        .as_ref()
        .and_then(|_| std::env::var_os("NOTIFY_SOCKET"))
        .filter(|v| !v.is_empty());
    let address = socket.as_ref().map(|s| s.address.clone());
    if let Some(address) = &address {
        // No other thread reads the environment: the log writer (the only
        // one running yet) never does, and the rest start below.
        std::env::set_var("NOTIFY_SOCKET", address);
        debug!("notify socket: {}", address.to_string_lossy());
    }
    let (outbox, inbox) = threads::inbox();
    let child = Arc::new(AtomicI32::new(0));
    if let (Some(socket), Some(n)) = (socket, &config.notify) {
        let reader = notify::Reader {
            socket,
            outbox: outbox.clone(),
            access: n.access,
            child: Arc::clone(&child),
            outer,
            every: config.serve.map(|_| Duration::from_secs(1)),
        };
        if let Err(e) = notify::start(reader) {
            error!("cannot start the notify reader: {e}; notify messages are not read");
        }
    }
    lanes::start(config);
    let publisher = listener.and_then(|listener| start_listener(config, listener));
    // Called `dumb-init`, drainit leaves its start directory before the
    // child starts, and the child moves back into it: no moment in which
    // the child could see drainit still there.
    let start = config
        .compat
        .leave_start_directory
        .then(leave_start_directory)
        .flatten();
    // Every thread started above has blocked drainit's signals before the
    // child can send any.
    threads::wait_until_blocked();
    let spawned = spawn::spawn_in(
        &config.program,
        &config.args,
        inherited,
        start.as_ref().map(|dir| dir.as_fd()),
    );
    drop(start);
    let pid = match spawned {
        Ok(pid) => pid,
        Err(e) => {
            log::error!("cannot run {:?}: {}", config.program, e.source);
            return Err(Outcome::SpawnFailed(e.failure));
        }
    };
    child.store(pid, Ordering::Relaxed);
    debug!("started {:?} as pid {pid}", config.program);
    Ok(Started {
        pid,
        outbox,
        inbox,
        publisher,
        address,
    })
}

/// The child's supervision, from the core's start to the summary.
#[inline(never)]
fn supervise(
    config: &Config,
    signals: &Handled,
    run: Started,
    started: Instant,
) -> (Outcome, RunSummary) {
    let Started {
        pid,
        outbox,
        inbox,
        publisher,
        address,
    } = run;
    let pid1 = config.pid1;
    let mut exec = Executor::new(config, pid, pid1, outbox);
    let mut shell = Shell::default();
    shell.publisher = publisher;
    let mut machine = new_core(config, pid, pid1, started);
    // PID 1 must not die of its own bug: a panic in the loop (the release
    // profile unwinds) leaves the child to the fallback.
    let looped = catch_unwind(AssertUnwindSafe(|| {
        drive(&mut machine, &mut exec, signals, &inbox, &mut shell, true)
    }));
    let (outcome, mut fallback_machine) = match looped {
        Ok(outcome) => (outcome, None),
        Err(_) => fallback::run(config, &mut machine, &mut exec, signals, &inbox, &mut shell),
    };
    // No command outlives drainit, whatever ended the run.
    exec.kill_all_runs("drainit is exiting");
    let core = fallback_machine.as_deref_mut().unwrap_or(&mut machine);
    let summary = wind_up(config, core, &mut shell, &inbox, address.as_ref(), pid);
    (outcome, summary)
}

/// The core for the run. Built inside a guard: should building it fail, a
/// minimal one (no sources, no ECS) keeps the child supervised.
#[inline(never)]
fn new_core(config: &Config, pid: i32, pid1: bool, started: Instant) -> Machine<'_> {
    catch_unwind(AssertUnwindSafe(|| {
        Machine::new(config, pid, pid1, started)
    }))
    .unwrap_or_else(|_| {
        error!("the event loop failed to start; only forwarding signals and reaping");
        Machine::minimal(config, pid, pid1, started, Deadline::new(config))
    })
}

/// After the loop: the last health state, the app's last notify messages,
/// and the summary for the exit report.
#[inline(never)]
fn wind_up(
    config: &Config,
    core: &mut Machine<'_>,
    shell: &mut Shell,
    inbox: &Inbox,
    address: Option<&std::ffi::OsString>,
    pid: i32,
) -> RunSummary {
    if let Some(publisher) = &mut shell.publisher {
        let _ = catch_unwind(AssertUnwindSafe(|| publisher.finish(core)));
    }
    if let Some(address) = address {
        // What the app sent just before it ended still counts.
        if notify::send_flush(address) {
            let wait = Duration::from_millis(200);
            let _ = catch_unwind(AssertUnwindSafe(|| {
                take_notify_until_flushed(core, inbox, wait)
            }));
        }
        if let Some(path) = config.notify.as_ref().and_then(|n| n.socket.as_ref()) {
            let _ = std::fs::remove_file(path);
        }
    }
    let mut summary =
        catch_unwind(AssertUnwindSafe(|| core.summary())).unwrap_or_else(|_| RunSummary {
            child_pid: Some(pid),
            ..RunSummary::default()
        });
    // What only the shell saw (after a panic of the core).
    summary.child_status = summary.child_status.or(shell.child_status);
    summary.stop_trigger = summary.stop_trigger.or(shell.trigger);
    summary.orphans_reaped += shell.orphans;
    summary
}

/// Called `dumb-init`: drainit moves to `/` (`/proc/1/cwd` is `/`), so a
/// volume mounted at its start directory can be unmounted once the child
/// is done with it. Returns the start directory, open for the child to
/// move back into (closed once it started: drainit keeps no hold on it).
/// The paths drainit keeps were made absolute at start (`app::main`); a
/// failure keeps the directory, as dumb-init does.
fn leave_start_directory() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_PATH: a directory drainit may search but not read is kept too.
    let start = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(".");
    let start = match start {
        Ok(start) => start,
        Err(e) => {
            debug!("cannot open the start directory ({e}); drainit stays in it");
            return None;
        }
    };
    match std::env::set_current_dir("/") {
        Ok(()) => Some(start),
        Err(e) => {
            debug!("cannot leave the start directory for /: {e}");
            None
        }
    }
}

/// Starts the health listener on the loop's thread (its asks wake this
/// thread); a failure is one line and the run goes on without it.
fn start_listener(config: &Config, listener: TcpListener) -> Option<Publisher> {
    let addr = listener.local_addr().ok();
    let started = Shared::new().and_then(|shared| {
        let waker = threads::Waker::for_this_thread();
        serve::start(
            listener,
            Arc::clone(&shared),
            waker,
            config.ready_url.clone(),
        )?;
        Ok(shared)
    });
    match started {
        Ok(shared) => {
            if let Some(addr) = addr {
                log::info!("health listener on {addr}: /readyz, /healthz, /status, /metrics");
            }
            Some(Publisher::new(shared))
        }
        Err(e) => {
            error!("cannot start the health listener: {e}; drainit goes on without it");
            None
        }
    }
}

/// Hands the core the notify messages read before the flush marker.
fn take_notify_until_flushed(core: &mut Machine<'_>, inbox: &Inbox, wait: Duration) {
    let until = Instant::now() + wait;
    while let Some(input) = inbox.recv_timeout(until.saturating_duration_since(Instant::now())) {
        match input {
            Input::NotifyFlushed => return,
            Input::Notify(_) => core.handle(Instant::now(), input),
            _ => {}
        }
    }
}
