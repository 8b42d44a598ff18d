//! Timers, each kind an owner's own: the stop timeline's
//! (`timeline::Timer`), the watch's (`watch::WatchTimer`), protection's
//! (`protect::ProtectTimer`), each declared with `timer_kind!`, which also
//! sizes that owner's `Slots` from the enum itself (quinn-proto's
//! `TimerTable`): a new variant has its slot as soon as it compiles, and
//! no owner can arm another's timer. Each command run's kill time is an
//! entry of `RunTimers`, by token. Each part arms and disarms its own;
//! the machine's next wake-up is the earliest of its parts'
//! (`Machine::poll_timeout`). None armed, the shell sleeps until an input
//! comes and makes no wake-ups at all.

use std::fmt::Debug;
use std::time::Instant;

use crate::core::event::Token;

/// A kind of timer an owner keeps in fixed slots: declared with
/// `timer_kind!`, never by hand.
pub trait Kind: Copy + Debug + PartialEq + 'static {
    /// One slot per variant.
    type Table: Copy
        + Default
        + Debug
        + PartialEq
        + AsRef<[Option<Instant>]>
        + AsMut<[Option<Instant>]>;
    /// Every variant, in slot order.
    const ALL: &'static [Self];
    /// The variant's slot: its discriminant.
    fn index(self) -> usize;
}

/// Declares an owner's timer enum (unit variants only) and sizes its
/// `Slots` from it.
macro_rules! timer_kind {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident,)+
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $crate::core::timers::Kind for $name {
            type Table = [Option<std::time::Instant>; [$($name::$variant,)+].len()];
            const ALL: &'static [Self] = &[$($name::$variant,)+];
            fn index(self) -> usize {
                self as usize
            }
        }
    };
}
pub(crate) use timer_kind;

/// One owner's fixed timers: a slot per variant of its `Kind`. The owner
/// arms and disarms them itself; nothing copies them. `Copy`, so an owner
/// that is a plain value stays one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slots<K: Kind> {
    at: K::Table,
}

impl<K: Kind> Default for Slots<K> {
    fn default() -> Self {
        Slots {
            at: K::Table::default(),
        }
    }
}

impl<K: Kind> Slots<K> {
    /// Arms `timer` at `at`, or disarms it with None.
    pub fn set(&mut self, timer: K, at: Option<Instant>) {
        self.at.as_mut()[timer.index()] = at;
    }

    pub fn get(&self, timer: K) -> Option<Instant> {
        self.at.as_ref()[timer.index()]
    }

    /// Armed and due at `now`.
    pub fn due(&self, timer: K, now: Instant) -> bool {
        self.get(timer).is_some_and(|at| now >= at)
    }

    /// The earliest armed slot.
    pub fn next(&self) -> Option<Instant> {
        self.at
            .as_ref()
            .iter()
            .fold(None, |next, at| earliest(next, *at))
    }
}

/// The earlier of two moments, either of which may be unset.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The command runs' kill times, one entry per running command.
#[derive(Debug, Default)]
pub struct RunTimers {
    runs: Vec<(Token, Instant)>,
}

impl RunTimers {
    /// Arms the kill of run `token` at `at`, or disarms it with None.
    pub fn set(&mut self, token: Token, at: Option<Instant>) {
        self.runs.retain(|(t, _)| *t != token);
        if let Some(at) = at {
            self.runs.push((token, at));
        }
    }

    pub fn get(&self, token: Token) -> Option<Instant> {
        self.runs
            .iter()
            .find(|(t, _)| *t == token)
            .map(|(_, at)| *at)
    }

    /// The run kill timers due at `now`.
    pub fn runs_due(&self, now: Instant) -> Vec<Token> {
        self.runs
            .iter()
            .filter(|(_, at)| now >= *at)
            .map(|(t, _)| *t)
            .collect()
    }

    /// The earliest armed kill: when the shell must wake without an input.
    pub fn next(&self) -> Option<Instant> {
        self.runs
            .iter()
            .fold(None, |next, (_, at)| earliest(next, Some(*at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    timer_kind! {
        /// A kind for these tests.
        enum Three {
            A,
            B,
            C,
        }
    }

    #[test]
    fn the_earliest_armed_timer_wins_and_disarmed_ones_do_not_count() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut slots = Slots::<Three>::default();
        assert_eq!(Three::ALL, [Three::A, Three::B, Three::C]);
        assert_eq!(slots.next(), None, "nothing armed: no wake-up");
        slots.set(Three::A, Some(t0 + s(30)));
        slots.set(Three::C, Some(t0 + s(5)));
        assert_eq!(slots.next(), Some(t0 + s(5)));
        slots.set(Three::C, None);
        assert_eq!(slots.next(), Some(t0 + s(30)));
        assert!(slots.due(Three::A, t0 + s(30)));
        assert!(!slots.due(Three::A, t0 + s(29)));
        assert!(!slots.due(Three::B, t0 + s(99)), "never armed");
    }

    #[test]
    fn run_timers_are_kept_per_token() {
        let t0 = Instant::now();
        let mut timers = RunTimers::default();
        assert_eq!(timers.next(), None);
        timers.set(Token(1), Some(t0));
        timers.set(Token(2), Some(t0 + Duration::from_secs(1)));
        timers.set(Token(1), Some(t0 + Duration::from_secs(3)));
        assert_eq!(timers.runs_due(t0 + Duration::from_secs(2)), [Token(2)]);
        assert_eq!(timers.get(Token(1)), Some(t0 + Duration::from_secs(3)));
        assert_eq!(timers.next(), Some(t0 + Duration::from_secs(1)));
        timers.set(Token(2), None);
        assert_eq!(timers.next(), Some(t0 + Duration::from_secs(3)));
    }
}
