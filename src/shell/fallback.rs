//! After a panic of the event loop: a fresh core with no sources takes the
//! child over (`Machine::fallback`), driven by the same loop, so the stop
//! keeps one timeline and its deadline. Should that core panic too (a
//! panic that repeats on the same input), a last resort with no core at
//! all reaps, forwards, sends SIGKILL at the deadline and ends as the
//! timeline would: it invents no rule, it calls the timeline's own
//! (`core::rules`: the deadline, one rule for a received signal (forward
//! and rewrite, dumb-init's stop of itself), the double kill, a failed
//! kill as PID 1, a lost status, the child's end to an outcome and
//! dumb-init's signal to the group left). Both are handed the failed
//! core's owner of the deadline (`core::deadline`), so a grace learnt from
//! the platform is kept. The last resort counts what it forwards in the
//! core it reports from, and publishes that core's status. It restarts
//! itself after any panic of its own, and never returns while the child
//! may still run.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use log::error;

use crate::core::deadline::Deadline;
use crate::core::event::{Action, Input};
use crate::core::machine::Machine;
use crate::core::outcome::{Outcome, Trigger};
use crate::core::rules::{self, Escalation, Kill};
use crate::core::settings::Config;
use crate::io::reaper;
use crate::io::signals::{Handled, Received};
use crate::io::threads::Inbox;
use crate::shell::event_loop::{drive, Shell};
use crate::shell::executor::{kill_child, Executor};

/// Takes over from the failed core `old`; returns the outcome, and the
/// fallback's core when it has one to report from. Never inlined: its
/// frame is on the stack only after a panic.
#[inline(never)]
pub fn run<'a>(
    config: &'a Config,
    old: &mut Machine<'_>,
    exec: &mut Executor<'_>,
    signals: &Handled,
    inbox: &Inbox,
    shell: &mut Shell,
) -> (Outcome, Option<Box<Machine<'a>>>) {
    if let Some(outcome) = catch_unwind(AssertUnwindSafe(|| old.outcome())).unwrap_or(None) {
        return (outcome, None);
    }
    error!("the event loop failed; only forwarding signals and reaping until the child exits");
    // Nobody reads a hook's or a drain command's result any more.
    exec.kill_all_runs("the event loop failed");
    exec.answers.clear();
    let in_hand = shell.in_hand.take();
    // What the failed core learnt of the deadline (a platform's grace).
    let deadline = old.deadline_owner();
    let mut fresh = None;
    let mut in_hand_done = false;
    let driven = catch_unwind(AssertUnwindSafe(|| {
        let now = Instant::now();
        // The stop signal the fresh core sends now, if the app never got it.
        let resent = old.stop().filter(|_| !exec.stop_sent).map(|s| s.signal);
        let child = shell.child_status;
        let machine = fresh.insert(Box::new(Machine::fallback(
            config,
            old,
            exec.stop_sent,
            child,
            now,
        )));
        if let Some(r) = in_hand.filter(|r| r.from_outside() && resent != Some(r.signo)) {
            machine.handle(now, Input::Signal(r.signo));
        }
        in_hand_done = true;
        drive(machine, exec, signals, inbox, shell, false)
    }));
    match driven {
        Ok(outcome) => (outcome, fresh),
        Err(_) => {
            // The signal the first core failed on still reaches the app if
            // the fresh core failed on it too; one the fresh core failed on
            // later is not tried a third time.
            let pending = in_hand.filter(|_| !in_hand_done);
            let ways = Ways {
                config,
                deadline,
                signals,
                inbox,
            };
            // It reports from the core the run will report from.
            let outcome = match fresh.as_deref_mut() {
                Some(core) => last_resort(&ways, core, exec, shell, pending),
                None => last_resort(&ways, old, exec, shell, pending),
            };
            (outcome, fresh)
        }
    }
}

/// What the last resort goes by.
struct Ways<'w> {
    config: &'w Config,
    /// The failed core's grace, for a stop the last resort begins.
    deadline: Deadline,
    signals: &'w Handled,
    inbox: &'w Inbox,
}

/// What the last resort keeps across its own restarts.
struct Last {
    deadline: Option<Instant>,
    /// The SIGKILL sent at the deadline, once.
    kill: Option<Kill>,
}

/// Reaps, forwards, and keeps the deadline with no core at all (`core`
/// only counts what is forwarded, for the report and `/metrics`).
fn last_resort(
    ways: &Ways<'_>,
    core: &mut Machine<'_>,
    exec: &mut Executor<'_>,
    shell: &mut Shell,
    pending: Option<Received>,
) -> Outcome {
    error!(
        "the fallback failed too; reaping, forwarding and keeping the deadline without the core"
    );
    let mut last = Last {
        // The loop's last deadline, never past a deletion's learnt since.
        deadline: ways.deadline.bound(shell.deadline),
        kill: None,
    };
    if let Some(r) = pending.filter(Received::from_outside) {
        forward(ways, core, exec, shell, &mut last, r.signo);
    }
    loop {
        let turns = catch_unwind(AssertUnwindSafe(|| {
            turns(ways, core, exec, shell, &mut last)
        }));
        if let Ok(outcome) = turns {
            return outcome;
        }
    }
}

fn turns(
    ways: &Ways<'_>,
    core: &mut Machine<'_>,
    exec: &mut Executor<'_>,
    shell: &mut Shell,
    last: &mut Last,
) -> Outcome {
    loop {
        // Nobody reads results now, but the notify reader must never wait
        // for a full inbox (an app in a blocking sd_notify would).
        while ways.inbox.try_recv().is_some() {}
        if let Some(ended) = shell.child_status {
            error!("main child ended ({ended:?}) after the event loop failed; exiting");
            if let Some(signo) = rules::signal_group_left(ways.config) {
                exec.execute(Action::SignalGroupLeft { signo });
            }
            return rules::child_outcome(last.kill, ended);
        }
        let reaped = reaper::reap_all();
        for (pid, ended) in reaped.ended {
            match exec.reaped(pid, ended, shell.child_status.is_none()) {
                Input::ChildExited(ended) => shell.child_status = Some(ended),
                Input::OrphanReaped { .. } => shell.orphans += 1,
                _ => {}
            }
        }
        if shell.child_status.is_some() {
            continue;
        }
        if reaped.none_left {
            // The child is gone and its status was lost: forwarding to its
            // pid could reach a stranger.
            error!("the main child is gone and its status is lost; exiting");
            return rules::lost_status();
        }
        let deadline = last.deadline.filter(|_| last.kill.is_none());
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            // The kill first, the log line last: should logging panic, the
            // restarted loop finds the kill done, not skipped.
            crate::util::fault::point("last_resort_kill");
            let failed = kill_child(exec.child()).is_err();
            last.kill = Some(Kill {
                reason: Escalation::Deadline,
                failed,
            });
            error!("deadline reached after the event loop failed; sent SIGKILL to the child's process group");
            if let Some(outcome) = rules::failed_kill(exec.pid1()).filter(|_| failed) {
                return outcome;
            }
            continue;
        }
        let timeout = deadline.map(|d| d.saturating_duration_since(now));
        let Some(received) = super::event_loop::wait_signal(ways.signals, timeout) else {
            continue;
        };
        if received.signo != libc::SIGCHLD {
            crate::util::fault::point("last_resort");
            if received.from_outside() {
                forward(ways, core, exec, shell, last, received.signo);
            }
        }
    }
}

/// Forwards as the core would (`rules::delivery`: after `--rewrite`, to
/// the group with `-g`, counted; called `dumb-init`, drainit then stops
/// itself after a job-control signal); a stop signal with no deadline yet
/// starts one (the failed core's grace).
fn forward(
    ways: &Ways<'_>,
    core: &mut Machine<'_>,
    exec: &mut Executor<'_>,
    shell: &mut Shell,
    last: &mut Last,
    signo: i32,
) {
    let config = ways.config;
    if last.deadline.is_none() && rules::is_stop_signal(&config.timeline.stop_signals, signo) {
        last.deadline = ways.deadline.at(Instant::now());
        shell.trigger.get_or_insert(Trigger::Signal(signo));
    }
    let delivery = rules::delivery(config, signo);
    if let Some((sent, group)) = delivery.sent {
        exec.signal_child(sent, group);
        core.count_forwarded(sent);
    }
    if delivery.stop_self {
        exec.execute(Action::StopSelf);
    }
    if let Some(publisher) = &mut shell.publisher {
        publisher.publish_status(core);
    }
}
