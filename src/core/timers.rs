//! Timers, keyed by what each is for: the stop timeline's, the ECS
//! pollers', each command run's kill time. Each part of the core owns its
//! slots (`Slots`, or a `Timers` table with per-run entries) and arms and
//! disarms them itself; the machine's next wake-up is the earliest of its
//! parts' (`Machine::poll_timeout`). None armed, the shell sleeps until an
//! input comes and makes no wake-ups at all.

use std::time::Instant;

use crate::core::event::Token;

/// What a timer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The stop's deadline.
    Deadline,
    /// The end of `--pre-stop-delay`.
    PreStop,
    /// The hooks' time is up.
    Hook,
    /// The next drain round.
    Round,
    /// `--ready-grace` is over: the ready app is killed.
    ReadyKill,
    /// `--orphan-grace` is over.
    OrphanGrace,
    /// A SIGKILLed child is still not gone.
    Watchdog,
    /// The next ECS task metadata poll.
    EcsPoll,
    /// The next task-protection poll.
    ProtectPoll,
    /// A command run's time is up.
    RunKill(Token),
}

/// The timers the stop timeline owns: the deadline, then its phases'.
pub const TIMELINE: [Timer; 7] = [
    Timer::Deadline,
    Timer::PreStop,
    Timer::Hook,
    Timer::Round,
    Timer::ReadyKill,
    Timer::OrphanGrace,
    Timer::Watchdog,
];

/// One owner's fixed timers: a slot per fixed `Timer` (the owner arms
/// only its own). The owner arms and disarms them itself; nothing copies
/// them. `Copy`, so an owner that is a plain value stays one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Slots {
    at: [Option<Instant>; 9],
}

impl Slots {
    /// Arms `timer` at `at`, or disarms it with None.
    pub fn set(&mut self, timer: Timer, at: Option<Instant>) {
        if let Some(i) = slot(timer) {
            self.at[i] = at;
        }
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        slot(timer).and_then(|i| self.at[i])
    }

    /// Armed and due at `now`.
    pub fn due(&self, timer: Timer, now: Instant) -> bool {
        self.get(timer).is_some_and(|at| now >= at)
    }

    /// The earliest armed slot.
    pub fn next(&self) -> Option<Instant> {
        self.at.iter().fold(None, |next, at| earliest(next, *at))
    }
}

/// The earlier of two moments, either of which may be unset.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The table: one slot per fixed timer, one entry per running command.
#[derive(Debug, Default)]
pub struct Timers {
    fixed: Slots,
    runs: Vec<(Token, Instant)>,
}

fn slot(timer: Timer) -> Option<usize> {
    Some(match timer {
        Timer::Deadline => 0,
        Timer::PreStop => 1,
        Timer::Hook => 2,
        Timer::Round => 3,
        Timer::ReadyKill => 4,
        Timer::OrphanGrace => 5,
        Timer::Watchdog => 6,
        Timer::EcsPoll => 7,
        Timer::ProtectPoll => 8,
        Timer::RunKill(_) => return None,
    })
}

impl Timers {
    /// Arms `timer` at `at`, or disarms it with None.
    pub fn set(&mut self, timer: Timer, at: Option<Instant>) {
        match (slot(timer), timer) {
            (Some(_), _) => self.fixed.set(timer, at),
            (None, Timer::RunKill(token)) => {
                self.runs.retain(|(t, _)| *t != token);
                if let Some(at) = at {
                    self.runs.push((token, at));
                }
            }
            (None, _) => {}
        }
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        match (slot(timer), timer) {
            (Some(_), _) => self.fixed.get(timer),
            (None, Timer::RunKill(token)) => self
                .runs
                .iter()
                .find(|(t, _)| *t == token)
                .map(|(_, at)| *at),
            (None, _) => None,
        }
    }

    /// Armed and due at `now`.
    pub fn due(&self, timer: Timer, now: Instant) -> bool {
        self.get(timer).is_some_and(|at| now >= at)
    }

    /// The run kill timers due at `now`.
    pub fn runs_due(&self, now: Instant) -> Vec<Token> {
        self.runs
            .iter()
            .filter(|(_, at)| now >= *at)
            .map(|(t, _)| *t)
            .collect()
    }

    /// The earliest armed timer: when the shell must wake without an input.
    pub fn next(&self) -> Option<Instant> {
        let runs = self
            .runs
            .iter()
            .fold(None, |next, (_, at)| earliest(next, Some(*at)));
        earliest(self.fixed.next(), runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_earliest_armed_timer_wins_and_disarmed_ones_do_not_count() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut timers = Timers::default();
        assert_eq!(timers.next(), None, "nothing armed: no wake-up");
        timers.set(Timer::Deadline, Some(t0 + s(30)));
        timers.set(Timer::EcsPoll, Some(t0 + s(5)));
        timers.set(Timer::RunKill(Token(3)), Some(t0 + s(2)));
        assert_eq!(timers.next(), Some(t0 + s(2)));
        timers.set(Timer::RunKill(Token(3)), None);
        assert_eq!(timers.next(), Some(t0 + s(5)));
        timers.set(Timer::EcsPoll, None);
        assert_eq!(timers.next(), Some(t0 + s(30)));
        assert!(timers.due(Timer::Deadline, t0 + s(30)));
        assert!(!timers.due(Timer::Deadline, t0 + s(29)));
        assert!(!timers.due(Timer::Hook, t0 + s(99)), "never armed");
    }

    #[test]
    fn run_timers_are_kept_per_token() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.set(Timer::RunKill(Token(1)), Some(t0));
        timers.set(Timer::RunKill(Token(2)), Some(t0 + Duration::from_secs(1)));
        timers.set(Timer::RunKill(Token(1)), Some(t0 + Duration::from_secs(3)));
        assert_eq!(timers.runs_due(t0 + Duration::from_secs(2)), [Token(2)]);
        assert_eq!(
            timers.get(Timer::RunKill(Token(1))),
            Some(t0 + Duration::from_secs(3))
        );
    }
}
