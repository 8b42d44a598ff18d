//! The stop's rules as pure functions, one copy for every path that keeps
//! a child: the timeline (and so the fallback's core, which is a
//! timeline too) and the shell's last resort, which runs with no core at
//! all. What a stop's deadline is, what a received signal becomes, how the
//! child is killed and which kill counts, what a failed kill means, what a
//! lost status means, and which outcome a child's end gives.

use std::time::{Duration, Instant};

use crate::core::outcome::{Ended, Outcome};
use crate::core::settings::Config;

/// Why drainit sent SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escalation {
    /// The app reported ready and `--ready-grace` ran out.
    Ready,
    /// The deadline passed.
    Deadline,
}

/// The kill drainit sent, as the child's end is judged by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    pub reason: Escalation,
    /// It reached nothing (the child's own kill failed).
    pub failed: bool,
}

/// The deadline of a stop that began at `since`: `--grace` later; None
/// never escalates.
pub fn deadline(since: Instant, grace: Option<Duration>) -> Option<Instant> {
    grace.and_then(|g| since.checked_add(g))
}

/// The time a request or command may take: `limit`, never past the
/// deadline (at least 1 ms). A hook gets at most half the time left
/// (`half`), so the stop signal always comes well before the deadline.
pub fn time_left(limit: Duration, deadline: Option<Instant>, now: Instant, half: bool) -> Duration {
    let left = deadline.map_or(limit, |d| {
        let left = d.saturating_duration_since(now);
        if half {
            left / 2
        } else {
            left
        }
    });
    limit.min(left).max(Duration::from_millis(1))
}

/// A received signal begins a stop.
pub fn is_stop_signal(stop_signals: &[i32], signo: i32) -> bool {
    stop_signals.contains(&signo)
}

/// What a received signal becomes on its way to the child: the signal
/// sent (after `--rewrite`; None: dropped) and whether it goes to the
/// child's process group (`-g`).
pub fn forwarded(config: &Config, signo: i32) -> Option<(i32, bool)> {
    config
        .rewritten(signo)
        .map(|sent| (sent, config.kill_process_group))
}

/// What a received signal asks of whoever keeps the child: the core
/// (`core/machine/stop.rs`) and the shell's last resort alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// The signal sent and whether to the child's group (`forwarded`);
    /// None: dropped by `--rewrite`. A signal sent is counted
    /// (`Counters::forwarded`) by whoever sends it.
    pub sent: Option<(i32, bool)>,
    /// drainit stops itself after the forward (`stops_itself`).
    pub stop_self: bool,
}

/// The one rule for a received signal on its way to a live child.
pub fn delivery(config: &Config, signo: i32) -> Delivery {
    Delivery {
        sent: forwarded(config, signo),
        stop_self: stops_itself(config, signo),
    }
}

/// What the ended child left in its process group gets, called
/// `dumb-init` in its session mode: SIGTERM after `--rewrite` (dropped by
/// a rewrite to 0), as dumb-init forwards it. None otherwise: the group
/// is left to `--orphan-grace` and the kernel.
pub fn signal_group_left(config: &Config) -> Option<i32> {
    if !(config.compat.term_group_at_exit && config.kill_process_group) {
        return None;
    }
    config.rewritten(libc::SIGTERM)
}

/// Called `dumb-init`, a job-control signal (SIGTSTP, SIGTTIN, SIGTTOU) is
/// forwarded (after `--rewrite`, even a rewrite to 0) and then drainit
/// stops itself, so a shell's Ctrl-Z suspends both; under its own name
/// drainit is never stopped.
pub fn stops_itself(config: &Config, signo: i32) -> bool {
    config.compat.job_control_stops_self
        && [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU].contains(&signo)
}

/// The double kill: SIGKILL to the child's process group first (the rest
/// of the group), then to the child itself in case it left the group. A
/// group kill succeeds when any member was signalled, so only the last,
/// the child's own, decides whether the kill failed.
pub fn kill_targets(child: i32) -> [i32; 2] {
    [-child, child]
}

/// A kill that reached nothing: as PID 1, the run ends at once with the
/// deadline's outcome (exiting ends the namespace, and the kernel kills
/// what drainit could not; the deadline code even after "ready": the app
/// did not end). Otherwise None: drainit waits for the child.
pub fn failed_kill(pid1: bool) -> Option<Outcome> {
    pid1.then_some(Outcome::Deadline)
}

/// The child is gone and its status was lost (only a panic of the loop can
/// do that): forwarding to its pid could now reach a stranger, so the run
/// ends, as if the child had been killed.
pub fn lost_status() -> Outcome {
    Outcome::Signaled(libc::SIGKILL)
}

/// The outcome of the child's end, given the kill drainit sent, if any. A
/// kill that reached nothing ends with the deadline code whatever the
/// child did (docs/design/contract.md); a SIGKILL after drainit's own is
/// the escalation's outcome; otherwise the child's own status wins, even
/// after "ready" and after a kill that found it already exiting.
pub fn child_outcome(kill: Option<Kill>, ended: Ended) -> Outcome {
    match (kill, ended) {
        (Some(Kill { failed: true, .. }), _) => Outcome::Deadline,
        (Some(Kill { reason, .. }), Ended::Signaled(libc::SIGKILL)) => match reason {
            Escalation::Ready => Outcome::Drained,
            Escalation::Deadline => Outcome::Deadline,
        },
        (_, Ended::Exited(code)) => Outcome::Exited(code),
        (_, Ended::Signaled(signo)) => Outcome::Signaled(signo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KILLED: Ended = Ended::Signaled(libc::SIGKILL);

    #[test]
    fn the_childs_end_gives_one_outcome_whoever_judges_it() {
        let kill = |reason, failed| Some(Kill { reason, failed });
        assert_eq!(child_outcome(None, Ended::Exited(3)), Outcome::Exited(3));
        assert_eq!(
            child_outcome(None, KILLED),
            Outcome::Signaled(libc::SIGKILL)
        );
        let deadline = kill(Escalation::Deadline, false);
        assert_eq!(child_outcome(deadline, KILLED), Outcome::Deadline);
        // The child exited by itself just as the kill went out: its code.
        assert_eq!(
            child_outcome(deadline, Ended::Exited(7)),
            Outcome::Exited(7)
        );
        let ready = kill(Escalation::Ready, false);
        assert_eq!(child_outcome(ready, KILLED), Outcome::Drained);
        let failed = kill(Escalation::Ready, true);
        assert_eq!(child_outcome(failed, Ended::Exited(0)), Outcome::Deadline);
    }

    #[test]
    fn a_failed_kill_ends_the_run_only_as_pid1() {
        assert_eq!(failed_kill(true), Some(Outcome::Deadline));
        assert_eq!(failed_kill(false), None);
        assert_eq!(lost_status(), Outcome::Signaled(libc::SIGKILL));
        assert_eq!(kill_targets(42), [-42, 42]);
        let t0 = Instant::now();
        assert_eq!(deadline(t0, None), None);
        assert_eq!(
            deadline(t0, Some(Duration::from_secs(2))),
            Some(t0 + Duration::from_secs(2))
        );
    }

    #[test]
    fn dumb_inits_rules_only_when_called_so() {
        use crate::core::settings::Compat;
        let mut config = crate::core::machine::tests::config();
        assert_eq!(signal_group_left(&config), None);
        assert!(!stops_itself(&config, libc::SIGTSTP));
        config.compat = Compat {
            term_group_at_exit: true,
            job_control_stops_self: true,
            leave_start_directory: true,
        };
        // The group is signalled only in session mode (-g).
        assert_eq!(signal_group_left(&config), None);
        config.kill_process_group = true;
        assert_eq!(signal_group_left(&config), Some(libc::SIGTERM));
        config.rewrite = vec![(libc::SIGTERM, libc::SIGQUIT)];
        assert_eq!(signal_group_left(&config), Some(libc::SIGQUIT));
        config.rewrite = vec![(libc::SIGTERM, 0)];
        assert_eq!(signal_group_left(&config), None);
        for signo in [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
            assert!(stops_itself(&config, signo));
        }
        for signo in [libc::SIGCONT, libc::SIGTERM, libc::SIGSTOP, libc::SIGINT] {
            assert!(!stops_itself(&config, signo));
        }
    }

    #[test]
    fn run_timeouts_stop_at_the_deadline() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(time_left(s(5), None, now, false), s(5));
        assert_eq!(time_left(s(5), Some(now + s(2)), now, false), s(2));
        assert_eq!(
            time_left(s(5), Some(now), now, false),
            Duration::from_millis(1)
        );
    }
}
