//! The one owner of "when the kill comes": the grace a stop gets
//! (`--grace`, `--grace-max`) as configured, or as learnt from the
//! platform at start (the pod's `terminationGracePeriodSeconds`,
//! `--k8s-protect`), where it came from, and a kill time learnt at the
//! stop itself (the pod's deletion: `learn_kill`). The `Machine` owns it
//! and the timeline goes by it (`Timeline::follow`); the fallback's core
//! and the last resort are handed it, so what the platform said outlives
//! a panic of the loop. The rules that turn a deletion into a deadline
//! are pure functions here (`deletion_deadline`, `Deadline::learn_kill`).

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
    /// The pod's deletion, read at the stop: its `deletionTimestamp` is
    /// the kill time.
    Deletion,
}

impl GraceFrom {
    /// Its name in the report and `/status` (`grace_from`).
    pub fn name(self) -> &'static str {
        match self {
            GraceFrom::Option => "option",
            GraceFrom::Pod => "pod",
            GraceFrom::Default => "default",
            GraceFrom::Deletion => "deletion",
        }
    }
}

/// A `--grace` (and `--grace-max`) the platform set after start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    pub grace: Duration,
    pub grace_max: Option<Duration>,
}

/// What a read of the platform at the stop says of the kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learnt {
    /// The pod is being deleted: the kill comes at `at`, and
    /// `deletionGracePeriodSeconds` was `period`.
    Kill { at: Instant, period: Option<u64> },
    /// The pod was force-deleted (a 404, or another uid): the kill comes
    /// within 2 s of `at` (when the answer came).
    Gone { at: Instant },
}

/// The kill time learnt at the stop, as the report says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    /// When the kill comes (for a force delete, 2 s after the answer).
    pub at: Instant,
    /// `deletionGracePeriodSeconds` (0 for a force delete).
    pub period: Option<u64>,
    /// The stop it was learnt in began then.
    pub since: Instant,
    /// The deadline the deletion gives (`deletion_deadline`): no
    /// extension moves the stop's past it.
    pub deadline: Instant,
}

impl Kill {
    /// The kill time in ms after the stop began, as the report says it.
    pub fn ms(&self) -> u64 {
        millis(self.at.saturating_duration_since(self.since))
    }
}

/// What `learn_kill` decided for the stop under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The stop's deadline now (None: it stays as it is).
    pub deadline: Option<Instant>,
    /// An explicit `--grace` (or `--grace none`) ended after the kill and
    /// was replaced: said in one WARN.
    pub replaced_option: bool,
}

/// The earliest the deadline from a deletion may be: 1 s after the stop
/// began.
pub const DELETION_FLOOR: Duration = Duration::from_secs(1);
/// The least margin left before the kill: the kubelet's own minimum.
pub const DELETION_MARGIN: Duration = Duration::from_secs(2);
/// How soon after a force delete the kill comes.
pub const FORCE_KILL: Duration = Duration::from_secs(2);

/// The deadline from a kill at `kill`, for a stop that began at `since`:
/// the kill less max(2 s, 10 % of the deletion's grace period `period`),
/// never earlier than 1 s after the stop began.
pub fn deletion_deadline(since: Instant, kill: Instant, period: Option<u64>) -> Instant {
    let period = Duration::from_secs(
        period
            .unwrap_or_default()
            .min(crate::proto::k8s::PERIOD_LIMIT_SECONDS),
    );
    let margin = (period / 10).max(DELETION_MARGIN);
    let floor = since + DELETION_FLOOR;
    kill.checked_sub(margin).map_or(floor, |d| d.max(floor))
}

/// The time a read of the platform at the stop may take: min(2 s, a
/// quarter of the time left to `deadline`), at least 1 ms.
pub fn stop_read_timeout(deadline: Option<Instant>, now: Instant) -> Duration {
    let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
    (left / 4)
        .min(Duration::from_secs(2))
        .max(Duration::from_millis(1))
}

/// The grace every stop of the run gets, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// None: the stop never escalates (`--grace none`).
    grace: Option<Duration>,
    /// Extensions never move the deadline past the stop's start + this.
    grace_max: Option<Duration>,
    from: GraceFrom,
    /// The kill time learnt at the stop (the pod's deletion), if any.
    kill: Option<Kill>,
    /// The deadline the stop of `kill` began with, before any read.
    began: Option<Instant>,
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
            kill: None,
            began: None,
        }
    }

    /// The platform's grace, learnt at start (a stop already under way
    /// keeps the deadline it has: the caller asks only before one).
    pub fn learn(&mut self, learnt: Grace) {
        self.grace = Some(learnt.grace);
        self.grace_max = learnt.grace_max;
        self.from = GraceFrom::Pod;
    }

    /// A kill time learnt at the stop that began at `since`, whose
    /// deadline is `current` (None: none). The deadline becomes the
    /// deletion's (`deletion_deadline`; a force delete: 1 s after the
    /// stop began) whatever the grace was, shorter or longer, except an
    /// explicit `--grace` that ends at or before the kill, which is kept.
    /// A later read of the same stop only ever moves the kill and the
    /// deadline earlier (a delete can only shorten a grace); every kill
    /// is capped at the stop's start plus `deletionGracePeriodSeconds`,
    /// and without a readable period the deadline is never later than
    /// the one the stop began with.
    /// From then on no extension moves the deadline past the deletion's
    /// (`cap`).
    pub fn learn_kill(
        &mut self,
        since: Instant,
        current: Option<Instant>,
        learnt: Learnt,
    ) -> Change {
        // An earlier read of this stop: a delete only ever shortens a
        // grace, so what it taught stands against a later read.
        let earlier = self.kill.filter(|k| k.since == since);
        if earlier.is_none() {
            self.began = current;
        }
        let mut kill = match learnt {
            Learnt::Kill { at, period } => {
                // Never past the stop's start plus the deletion's period
                // (the kubelet counts it from before the stop began).
                let at = period.map_or(at, |p| {
                    let p = p.min(crate::proto::k8s::PERIOD_LIMIT_SECONDS);
                    at.min(since + Duration::from_secs(p))
                });
                let mut deadline = deletion_deadline(since, at, period);
                if period.is_none() && earlier.is_none() {
                    // Nothing bounds the timestamp: never later than the
                    // deadline the stop began with (on a later read, the
                    // earlier one's bounds it).
                    if let Some(began) = self.began {
                        deadline = deadline.min(began);
                    }
                }
                Kill {
                    at,
                    period,
                    since,
                    deadline,
                }
            }
            Learnt::Gone { at } => Kill {
                at: at + FORCE_KILL,
                period: Some(0),
                since,
                deadline: since + DELETION_FLOOR,
            },
        };
        if let Some(e) = earlier {
            // The kill kept, with the period of the read that gave it.
            if e.at <= kill.at {
                kill.at = e.at;
                kill.period = e.period;
            }
            kill.deadline = kill.deadline.min(e.deadline);
        }
        let by_kill = kill.deadline;
        self.kill = Some(kill);
        let option = self.from == GraceFrom::Option;
        let kept = option && current.is_some_and(|d| d <= kill.at);
        if kept {
            return Change {
                deadline: None,
                replaced_option: false,
            };
        }
        self.from = GraceFrom::Deletion;
        let grace = by_kill.saturating_duration_since(since);
        self.grace = Some(grace);
        self.grace_max = Some(grace);
        Change {
            deadline: Some(by_kill),
            replaced_option: option,
        }
    }

    /// The latest an extension may move the deadline of a stop: the
    /// deletion's deadline, once a kill time is known.
    pub fn cap(&self) -> Option<Instant> {
        self.kill.map(|k| k.deadline)
    }

    /// The deadline of the stop under way, `current`, as a deletion
    /// learnt at the stop bounds it: never past the deletion's deadline
    /// once that replaced the grace (a core that failed before it moved
    /// its stop's deadline, a shell's deadline from an earlier turn).
    pub fn bound(&self, current: Option<Instant>) -> Option<Instant> {
        match (self.from, self.kill) {
            (GraceFrom::Deletion, Some(k)) => {
                Some(current.map_or(k.deadline, |d| d.min(k.deadline)))
            }
            _ => current,
        }
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

    /// The kill time learnt at the stop, if any.
    pub fn kill(&self) -> Option<Kill> {
        self.kill
    }

    /// The grace in ms, as the reports say it.
    pub fn grace_ms(&self) -> Option<u64> {
        self.grace.map(millis)
    }

    /// The deadline of a stop that began at `since` (`rules::deadline`),
    /// never past a kill time learnt (the last resort's, after a panic).
    pub fn at(&self, since: Instant) -> Option<Instant> {
        let by_grace = rules::deadline(since, self.grace);
        match (by_grace, self.cap()) {
            (Some(d), Some(cap)) => Some(d.min(cap.max(since + DELETION_FLOOR))),
            (None, Some(cap)) => Some(cap.max(since + DELETION_FLOOR)),
            (d, None) => d,
        }
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

    /// A run's deadline: `--grace` given (`secs`), or the default 27 s.
    fn given(secs: Option<u64>) -> Deadline {
        Deadline {
            grace: Some(Duration::from_secs(secs.unwrap_or(27))),
            grace_max: None,
            from: if secs.is_some() {
                GraceFrom::Option
            } else {
                GraceFrom::Default
            },
            kill: None,
            began: None,
        }
    }

    #[test]
    fn a_later_read_only_ever_moves_the_kill_earlier() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut d = given(None);
        let first = Learnt::Kill {
            at: t0 + s(62),
            period: Some(62),
        };
        let change = d.learn_kill(t0, Some(t0 + s(27)), first);
        assert_eq!(
            change.deadline,
            Some(t0 + s(62) - Duration::from_millis(6_200))
        );
        // A Date that lags on the second read: the kill it gives is later.
        let lagging = Learnt::Kill {
            at: t0 + s(92),
            period: Some(62),
        };
        let before = d.kill().unwrap();
        let change = d.learn_kill(t0, change.deadline, lagging);
        assert_eq!(change.deadline, Some(before.deadline));
        assert_eq!(d.kill().unwrap().at, before.at);
        // A kill past the stop's start plus the period is capped there.
        let mut d = given(None);
        let far = Learnt::Kill {
            at: t0 + s(300),
            period: Some(30),
        };
        d.learn_kill(t0, Some(t0 + s(27)), far);
        assert_eq!(d.kill().unwrap().at, t0 + s(30));
        assert_eq!(d.cap(), Some(t0 + s(27)));
    }

    #[test]
    fn a_deletion_without_a_period_never_moves_the_deadline_later() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut d = given(None);
        let unbounded = Learnt::Kill {
            at: t0 + s(365 * 24 * 3600),
            period: None,
        };
        let change = d.learn_kill(t0, Some(t0 + s(27)), unbounded);
        assert_eq!(change.deadline, Some(t0 + s(27)));
        // Nor on a second read.
        let change = d.learn_kill(t0, change.deadline, unbounded);
        assert_eq!(change.deadline, Some(t0 + s(27)));
        // A sooner one still moves it earlier.
        let sooner = Learnt::Kill {
            at: t0 + s(10),
            period: None,
        };
        let mut later = given(None);
        let long = Learnt::Kill {
            at: t0 + s(120),
            period: Some(120),
        };
        let first = later.learn_kill(t0, Some(t0 + s(27)), long).deadline;
        assert_eq!(first, Some(t0 + s(108)));
        // A later answer without a period is bounded by the first read,
        // not pulled back to the deadline the stop began with.
        assert_eq!(later.learn_kill(t0, first, unbounded).deadline, first);
        assert_eq!(later.kill().unwrap().period, Some(120));
        assert_eq!(
            d.learn_kill(t0, Some(t0 + s(27)), sooner).deadline,
            Some(t0 + s(8))
        );
    }

    #[test]
    fn the_deadline_from_a_deletion() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        // 10 % of the deletion's period, at least 2 s, before the kill.
        assert_eq!(deletion_deadline(t0, t0 + s(10), Some(10)), t0 + s(8));
        assert_eq!(deletion_deadline(t0, t0 + s(60), Some(60)), t0 + s(54));
        assert_eq!(deletion_deadline(t0, t0 + s(30), None), t0 + s(28));
        // Never earlier than 1 s after the stop began.
        assert_eq!(deletion_deadline(t0, t0 + s(2), Some(2)), t0 + s(1));
        assert_eq!(deletion_deadline(t0 + s(5), t0, Some(30)), t0 + s(6));
        assert_eq!(deletion_deadline(t0, t0, Some(u64::MAX)), t0 + s(1));
        // The read at the stop: min(2 s, a quarter of the time left).
        assert_eq!(stop_read_timeout(Some(t0 + s(4)), t0), s(1));
        assert_eq!(stop_read_timeout(Some(t0 + s(30)), t0), s(2));
        assert_eq!(stop_read_timeout(None, t0), s(2));
        assert_eq!(
            stop_read_timeout(Some(t0), t0 + s(1)),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn a_deletion_replaces_a_default_or_pod_grace_shorter_or_longer() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        for (start, kill, want) in [(27, 10, 8), (8, 60, 54)] {
            let mut d = given(None);
            d.learn(Grace {
                grace: s(start),
                grace_max: Some(s(start)),
            });
            let change = d.learn_kill(
                t0,
                Some(t0 + s(start)),
                Learnt::Kill {
                    at: t0 + s(kill),
                    period: Some(kill),
                },
            );
            assert_eq!(change.deadline, Some(t0 + s(want)));
            assert!(!change.replaced_option);
            assert_eq!(d.from().name(), "deletion");
            assert_eq!(d.grace(), Some(s(want)));
            assert_eq!(d.cap(), Some(t0 + s(want)));
            assert_eq!(d.kill().unwrap().ms(), kill * 1000);
            assert_eq!(d.kill().unwrap().period, Some(kill));
            // The last resort's deadline for the stop keeps it.
            assert_eq!(d.at(t0), Some(t0 + s(want)));
        }
    }

    #[test]
    fn an_explicit_grace_before_the_kill_is_kept_one_after_it_replaced() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let kill = Learnt::Kill {
            at: t0 + s(20),
            period: Some(20),
        };
        // Ends at the kill: kept (the cap still holds extensions).
        let mut d = given(Some(20));
        assert_eq!(d.from(), GraceFrom::Option);
        let change = d.learn_kill(t0, Some(t0 + s(20)), kill);
        assert_eq!(change.deadline, None);
        assert_eq!((d.from(), d.grace()), (GraceFrom::Option, Some(s(20))));
        assert_eq!(d.cap(), Some(t0 + s(18)));
        // Ends after it, or none: replaced, said once.
        for grace in [Some(21), None] {
            let mut d = given(Some(21));
            d.grace = grace.map(s);
            let current = grace.map(|g| t0 + s(g));
            let change = d.learn_kill(t0, current, kill);
            assert_eq!(change.deadline, Some(t0 + s(18)), "{grace:?}");
            assert!(change.replaced_option);
            assert_eq!(d.from(), GraceFrom::Deletion);
        }
        // A second, shorter delete moves a kept grace's kill earlier.
        let mut d = given(Some(15));
        assert_eq!(d.learn_kill(t0, Some(t0 + s(15)), kill).deadline, None);
        let sooner = Learnt::Kill {
            at: t0 + s(10),
            period: Some(10),
        };
        let change = d.learn_kill(t0, Some(t0 + s(15)), sooner);
        assert_eq!(change.deadline, Some(t0 + s(8)));
        assert!(change.replaced_option);
    }

    #[test]
    fn a_force_delete_leaves_one_second() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut d = given(None);
        let gone = Learnt::Gone {
            at: t0 + Duration::from_millis(300),
        };
        let change = d.learn_kill(t0, Some(t0 + s(27)), gone);
        assert_eq!(change.deadline, Some(t0 + s(1)));
        assert_eq!(d.kill().unwrap().period, Some(0));
        assert_eq!(d.cap(), Some(t0 + s(1)));
        // What a fallback or the last resort takes over is bounded by it.
        assert_eq!(d.bound(Some(t0 + s(27))), Some(t0 + s(1)));
        assert_eq!(d.bound(None), Some(t0 + s(1)));
        assert_eq!(given(None).bound(Some(t0 + s(27))), Some(t0 + s(27)));
        // An explicit grace shorter than that is kept.
        let mut short = given(None);
        short.from = GraceFrom::Option;
        short.grace = Some(Duration::from_millis(500));
        let current = Some(t0 + Duration::from_millis(500));
        assert_eq!(short.learn_kill(t0, current, gone).deadline, None);
    }
}
