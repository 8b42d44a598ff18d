//! The stop timeline's words: the ticket that names a request, what a
//! request is for, the events the timeline takes, the actions it returns,
//! and the phase it says it is in.

use std::time::{Duration, Instant};

use crate::core::outcome::{Ended, Outcome, Trigger};
use crate::core::rules::Escalation;

/// Names one request; an answer whose ticket is no longer awaited is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(pub(super) u32);

impl Ticket {
    /// Any ticket, for the unit tests of modules that track tickets.
    #[cfg(test)]
    pub fn for_test(n: u32) -> Ticket {
        Ticket(n)
    }
}

/// What a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The `--stop-url` hook.
    Hook,
    /// One poll of `--drain-url`.
    Poll,
}

/// Something that happened, as the supervisor saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// A signal another process sent (never SIGCHLD).
    Signal(i32),
    /// A platform's watch (`core::watch`) or `--max-runtime`
    /// (`core::max_runtime`) says the app is to stop.
    PlatformStop(Trigger),
    /// The main child ended.
    ChildExited(Ended),
    /// No process is left besides drainit (after the main child ended).
    OthersGone,
    /// The hook answered (any answer or failure: it is over).
    HookDone(Ticket),
    /// A drain poll came back, ready or not (a failure is not ready).
    Polled { ticket: Ticket, ready: bool },
    /// The escalation's SIGKILL reached neither the group nor the pid.
    KillFailed { pid1: bool },
    /// Time passed: fire whatever timer is due.
    Tick,
    /// The app's own word over the notify socket that it has drained
    /// (`X_DRAINIT_READY_FOR_TERMINATION=1`), received at `at`.
    NotifyReady { at: Instant },
    /// `EXTEND_TIMEOUT_USEC`: received at `at`, asks for `by` from then.
    Extend { at: Instant, by: Duration },
}

/// What the supervisor must do, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// t0: a stop began (for the log and the exit report).
    StopBegan(Trigger),
    /// Forward this received signal to the child (after `--rewrite`).
    Forward(i32),
    /// A stop signal arrived before the app got its own: not forwarded.
    Held(i32),
    /// The platform's stop signal after an ECS-triggered stop: dropped once.
    Absorbed(i32),
    /// Start a request; its answer comes back as an event with this ticket.
    Send {
        ticket: Ticket,
        request: Request,
        timeout: Duration,
    },
    /// The hook did not answer in time; its answer will be ignored.
    HookAbandoned,
    /// The app reported ready; it has this long to exit by itself.
    Ready { left: Duration },
    /// SIGKILL to the child's group and pid.
    Kill(Escalation),
    /// SIGTERM to every remaining process (`--orphan-grace`); the supervisor
    /// answers `OthersGone` if there is none.
    TerminateOthers { wait: Duration },
    /// The run is over.
    Exit(Outcome),
    /// The child is still not reaped `KILL_WATCHDOG` after SIGKILL (stuck
    /// in the kernel, D state): the supervisor says so and answers
    /// `KillFailed`, as for a kill that could not be sent.
    KillStuck,
    /// An extension moved the deadline here (`first`: the first of the stop).
    Extended { deadline: Instant, first: bool },
    /// A readiness word that does not count (before the stop signal was
    /// forwarded, or outside a stop).
    NotifyIgnored,
}

/// Where the run is, as others see it: each variant carries the moment it
/// waits for, read from the timeline's timer slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// The child runs; signals are forwarded as they come.
    Running,
    /// A stop began; the hook and the stop signal wait for the delay.
    PreStop { until: Instant },
    /// The hook is in flight; the stop signal follows its answer, or
    /// `give_up_at`.
    Hook { ticket: Ticket, give_up_at: Instant },
    /// The stop signal was forwarded; the drain URL is polled (next at
    /// `next_poll`) until the app is ready, the child exits or the deadline.
    Draining { next_poll: Option<Instant> },
    /// The app reported ready; the child may exit by itself until `kill_at`.
    Ready { kill_at: Instant },
    /// SIGKILL was sent (`failed`: it reached nothing); waiting for the child.
    Killed { reason: Escalation, failed: bool },
    /// The child is gone; the others got SIGTERM and have until `until`.
    OrphanGrace { until: Instant, outcome: Outcome },
    /// Nothing left to wait for.
    Done { outcome: Outcome },
}
