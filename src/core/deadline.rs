//! The one owner of "when the kill comes": the grace a stop gets
//! (`--grace`, `--grace-max`) as configured, or as learnt from the
//! platform at start (the pod's `terminationGracePeriodSeconds`,
//! `--k8s-protect`), and where it came from. The `Machine` owns it and
//! the timeline goes by it (`Timeline::follow`); the fallback's core and
//! the last resort are handed it, so what the platform said outlives a
//! panic of the loop. A kill time learnt at the stop itself (a pod's
//! deletion) belongs here too, beside the grace.

use std::time::{Duration, Instant};

use crate::core::rules;
use crate::core::settings::Config;
use crate::util::time::millis;

/// Where the grace that applies came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraceFrom {
    /// `--grace` was given (the platform only checks it).
    Option,
    /// The platform's period (the pod's `terminationGracePeriodSeconds`).
    Pod,
    /// drainit's default: nothing given, nothing learnt.
    Default,
}

impl GraceFrom {
    /// Its name in the report and `/status` (`grace_from`).
    pub fn name(self) -> &'static str {
        match self {
            GraceFrom::Option => "option",
            GraceFrom::Pod => "pod",
            GraceFrom::Default => "default",
        }
    }
}

/// A `--grace` (and `--grace-max`) the platform set after start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    pub grace: Duration,
    pub grace_max: Option<Duration>,
}

/// The grace every stop of the run gets, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// None: the stop never escalates (`--grace none`).
    grace: Option<Duration>,
    /// Extensions never move the deadline past the stop's start + this.
    grace_max: Option<Duration>,
    from: GraceFrom,
}

impl Deadline {
    /// As configured: `--grace`, `--grace-max`, and whether the grace was
    /// given (only the Kubernetes back-end tells; it is the only reader).
    pub fn new(config: &Config) -> Deadline {
        let given = config.k8s.as_ref().is_some_and(|k| k.grace_given);
        Deadline {
            grace: config.timeline.grace,
            grace_max: config.grace_max,
            from: if given {
                GraceFrom::Option
            } else {
                GraceFrom::Default
            },
        }
    }

    /// The platform's grace, learnt at start (a stop already under way
    /// keeps the deadline it has: the caller asks only before one).
    pub fn learn(&mut self, learnt: Grace) {
        self.grace = Some(learnt.grace);
        self.grace_max = learnt.grace_max;
        self.from = GraceFrom::Pod;
    }

    pub fn grace(&self) -> Option<Duration> {
        self.grace
    }

    pub fn grace_max(&self) -> Option<Duration> {
        self.grace_max
    }

    pub fn from(&self) -> GraceFrom {
        self.from
    }

    /// The grace in ms, as the reports say it.
    pub fn grace_ms(&self) -> Option<u64> {
        self.grace.map(millis)
    }

    /// The deadline of a stop that began at `since` (`rules::deadline`).
    pub fn at(&self, since: Instant) -> Option<Instant> {
        rules::deadline(since, self.grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_platform_says_replaces_the_configured_grace() {
        let mut config = crate::core::machine::tests::config();
        config.timeline.grace = Some(Duration::from_secs(25));
        config.grace_max = None;
        let mut d = Deadline::new(&config);
        assert_eq!((d.grace_ms(), d.from()), (Some(25_000), GraceFrom::Default));
        let t0 = Instant::now();
        assert_eq!(d.at(t0), Some(t0 + Duration::from_secs(25)));
        d.learn(Grace {
            grace: Duration::from_secs(108),
            grace_max: Some(Duration::from_secs(108)),
        });
        assert_eq!(d.at(t0), Some(t0 + Duration::from_secs(108)));
        assert_eq!(d.grace_max(), Some(Duration::from_secs(108)));
        assert_eq!(d.from().name(), "pod");
    }
}
