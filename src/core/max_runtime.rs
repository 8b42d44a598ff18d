//! `--max-runtime`: a stop trigger on the core's own clock. One timer
//! slot, armed at the run's start plus the maximum; when it is due while
//! the app runs and no stop has begun, it gives the trigger once and the
//! stop begins as a stop signal's would (`Trigger::MaxRuntime`, fed to the timeline as
//! `Event::PlatformStop`). Any stop, and the child's end, disarm it: a stop
//! is never restarted.

use std::time::{Duration, Instant};

use crate::core::outcome::Trigger;
use crate::core::timers::{timer_kind, Slots};

timer_kind! {
    /// What the maximum runtime's timer is for.
    pub enum MaxRuntimeTimer {
        /// The app has run `--max-runtime`.
        Reached,
    }
}

/// The maximum runtime of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxRuntime {
    max: Duration,
    timers: Slots<MaxRuntimeTimer>,
}

impl MaxRuntime {
    /// Armed at `started` + `max`, if a maximum is set. One past what an
    /// `Instant` holds never comes.
    pub fn new(max: Option<Duration>, started: Instant) -> Option<MaxRuntime> {
        let max = max?;
        let mut timers = Slots::default();
        timers.set(MaxRuntimeTimer::Reached, started.checked_add(max));
        Some(MaxRuntime { max, timers })
    }

    /// `--max-runtime` as configured.
    pub fn max(&self) -> Duration {
        self.max
    }

    pub fn timer(&self, timer: MaxRuntimeTimer) -> Option<Instant> {
        self.timers.get(timer)
    }

    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// A stop began, or the app is gone: the maximum no longer matters.
    pub fn end(&mut self) {
        self.timers.set(MaxRuntimeTimer::Reached, None);
    }

    /// The stop's trigger when the maximum is due at `now` and the app
    /// still runs with no stop begun (`running`); once.
    pub fn on_time(&mut self, now: Instant, running: bool) -> Option<Trigger> {
        if !running {
            self.end();
            return None;
        }
        if !self.timers.due(MaxRuntimeTimer::Reached, now) {
            return None;
        }
        self.end();
        Some(Trigger::MaxRuntime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_fires_once_at_the_start_plus_the_maximum() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(MaxRuntime::new(None, t0), None, "no maximum: no timer");
        let mut max = MaxRuntime::new(Some(s(3)), t0).unwrap();
        assert_eq!(max.next_timer(), Some(t0 + s(3)));
        assert_eq!(max.on_time(t0 + s(2), true), None, "not yet");
        assert_eq!(max.on_time(t0 + s(3), true), Some(Trigger::MaxRuntime));
        assert_eq!(max.next_timer(), None, "disarmed");
        assert_eq!(max.on_time(t0 + s(4), true), None, "once");
    }

    #[test]
    fn a_stop_begun_or_a_child_gone_disarms_it() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut max = MaxRuntime::new(Some(s(3)), t0).unwrap();
        assert_eq!(max.on_time(t0 + s(5), false), None, "not running");
        assert_eq!(max.next_timer(), None);
        let mut max = MaxRuntime::new(Some(s(3)), t0).unwrap();
        max.end();
        assert_eq!(max.on_time(t0 + s(5), true), None);
    }

    #[test]
    fn a_maximum_past_what_an_instant_holds_never_comes() {
        let max = MaxRuntime::new(Some(Duration::MAX), Instant::now()).unwrap();
        assert_eq!(max.next_timer(), None);
    }
}
