//! The event loop: one thread waits in `sigtimedwait` for the signals it
//! blocked, with the core's next timer as its timeout; worker threads hand
//! their results over the inbox and wake it with a thread-directed SIGCHLD.
//! Every input goes to the core (`Machine::handle`); the actions that come
//! back are performed by the executor, whose own answers are handed back
//! in the next turn, never from inside an action.

use std::time::{Duration, Instant};

use log::debug;

use crate::core::event::Input;
use crate::core::machine::Machine;
use crate::core::outcome::{Ended, Outcome, Trigger};
use crate::io::signals::{Handled, Received};
use crate::io::threads::Inbox;
use crate::io::{logwriter, reaper};
use crate::shell::executor::Executor;
use crate::shell::publish::Publisher;
use crate::util::signame::signal_name;
use crate::util::text::Fold;

/// What the loop knows outside the core, for a fallback after a panic.
#[derive(Debug, Default)]
pub struct Shell {
    /// The signal being handled, until the core has it.
    pub in_hand: Option<Received>,
    /// The main child's status, as soon as it was reaped.
    pub child_status: Option<Ended>,
    /// The core's deadline after its last turn.
    pub deadline: Option<Instant>,
    /// What began the stop, when only the fallback's last resort knows.
    pub trigger: Option<Trigger>,
    /// Orphans the last resort reaped.
    pub orphans: u64,
    /// A signal drainit raised itself was already reported.
    own_signal_seen: bool,
    /// The debug line of each received signal, at most one a second.
    received: Fold,
    /// With `--serve`: where the core's status goes after each turn.
    pub publisher: Option<Publisher>,
}

/// The loop: perform what the core asks, hand it what the shell answered,
/// then wait for a signal, a worker's result or the next timer. `primary`:
/// the first core of the run (the fallback's core skips notify messages).
pub fn drive(
    machine: &mut Machine<'_>,
    exec: &mut Executor<'_>,
    signals: &Handled,
    inbox: &Inbox,
    shell: &mut Shell,
    primary: bool,
) -> Outcome {
    loop {
        // What the core asked when it was built or just before, and the
        // answers of what was performed (a failed kill, a file looked at).
        perform(machine, exec, shell);
        while let Some(input) = exec.answers.pop_front() {
            step(machine, exec, shell, input);
        }
        if let Some(publisher) = &mut shell.publisher {
            publisher.publish(machine, signals);
        }
        if let Some(outcome) = machine.outcome() {
            return outcome;
        }
        let timeout = machine
            .poll_timeout()
            .map(|at| at.saturating_duration_since(Instant::now()));
        let (mut got, mut quiet) = (false, false);
        if timeout != Some(Duration::ZERO) {
            if let Some(received) = wait_signal(signals, timeout) {
                got = true;
                quiet = on_signal(machine, exec, shell, received, primary);
            }
        }
        // Finished requests and notify messages: their wake-up was a
        // SIGCHLD, maybe this one.
        let mut handed = false;
        while machine.outcome().is_none() {
            let Some(input) = inbox.try_recv() else { break };
            step(machine, exec, shell, input);
            handed = true;
        }
        // A SIGCHLD that reaped nothing, with an empty inbox, was a
        // wake-up for the health listener's ask (or a forged one): the
        // publish at the top of the loop answers it; no tick unless a
        // timer is due. Nor after a wait the log's retry cut short.
        let due = machine
            .poll_timeout()
            .is_some_and(|at| at <= Instant::now());
        if (got && !quiet) || handed || due {
            step(machine, exec, shell, Input::Timeout);
        }
    }
}

/// Waits for a handled signal at most `timeout` (None: until one comes),
/// less while log lines wait for room in stderr: those are tried again
/// after the wait (`logwriter::retry_in`; only without a writer thread).
pub fn wait_signal(signals: &Handled, timeout: Option<Duration>) -> Option<Received> {
    let wait = match (timeout, logwriter::retry_in()) {
        (Some(t), Some(retry)) => Some(t.min(retry)),
        (t, None) => t,
        (None, retry) => retry,
    };
    let received = signals.wait(wait);
    logwriter::pump();
    received
}

/// Hands the core one input and performs at once what it asks: a signal
/// the core accepted is forwarded before anything else can fail.
fn step(machine: &mut Machine<'_>, exec: &mut Executor<'_>, shell: &mut Shell, input: Input) {
    machine.handle(Instant::now(), input);
    perform(machine, exec, shell);
}

fn perform(machine: &mut Machine<'_>, exec: &mut Executor<'_>, shell: &mut Shell) {
    while let Some(action) = machine.poll_action() {
        exec.execute(action);
    }
    shell.deadline = machine.deadline();
}

/// Takes one signal; true when it was a SIGCHLD that found nothing to
/// reap (a thread's wake-up, or one queued by anyone in the container).
fn on_signal(
    machine: &mut Machine<'_>,
    exec: &mut Executor<'_>,
    shell: &mut Shell,
    received: Received,
    primary: bool,
) -> bool {
    if received.signo == libc::SIGCHLD {
        // Every SIGCHLD is followed by reaping, whatever it carries: any
        // process in the container can queue one with drainit's pid and
        // any value, and a pending SIGCHLD swallows the kernel's next one
        // (SIGCHLD does not queue), so none may stand for "nothing to
        // reap". A wake-up costs one waitpid(WNOHANG) that finds nothing.
        return !reap(machine, exec, shell);
    }
    shell.in_hand = Some(received);
    crate::util::fault::point(if primary { "event_loop" } else { "fallback" });
    if !received.from_outside() {
        // drainit's own SIGPIPE (a write to a peer that went away: the log
        // writer thread's stays on that thread, and a direct log write
        // takes its own at once, so this is rare) and the like: never the
        // app's business. Said once: with a dead log reader, each line
        // would raise the next SIGPIPE, forever.
        if !std::mem::replace(&mut shell.own_signal_seen, true) {
            debug!(
                "not forwarding {}: drainit raised it itself (said once)",
                signal_name(received.signo)
            );
        }
        shell.in_hand = None;
        return false;
    }
    if log::log_enabled!(log::Level::Debug) {
        if let Some(note) = shell.received.allow(Instant::now()) {
            debug!(
                "received {} from pid {}{note}",
                signal_name(received.signo),
                received.sender
            );
        }
    }
    step(machine, exec, shell, Input::Signal(received.signo));
    shell.in_hand = None;
    false
}

/// Every child that ended goes to the core: the main child, a command the
/// core started, or an orphan. True when there was anything to tell it.
fn reap(machine: &mut Machine<'_>, exec: &mut Executor<'_>, shell: &mut Shell) -> bool {
    let reaped = reaper::reap_all();
    let told = !reaped.ended.is_empty() || reaped.none_left;
    let mut running = shell.child_status.is_none();
    // The main child's status is recorded before anything of the batch is
    // handed on, since that could fail: the fallback ends with it, even
    // after a panic on an orphan reaped before it.
    if running {
        if let Some(&(_, ended)) = reaped.ended.iter().find(|(pid, _)| *pid == exec.child()) {
            shell.child_status = Some(ended);
        }
    }
    for (pid, ended) in reaped.ended {
        let input = exec.reaped(pid, ended, running);
        if let Input::ChildExited(ended) = input {
            shell.child_status = Some(ended);
            running = false;
        }
        step(machine, exec, shell, input);
    }
    if reaped.none_left {
        step(machine, exec, shell, Input::NoneLeft);
    }
    told
}
