//! Building a `Machine` from nothing, and the fallback's core: after a
//! panic of the loop, a fresh `Machine` with
//! no sources, hooks, delay, ECS or notify reading takes over the stop the
//! failed one began (its start and deadline, extensions included), the
//! maximum runtime not yet reached, and the records for the exit report. It is a timeline like the first, so the
//! same rules hold.

use std::time::{Duration, Instant};

use std::collections::VecDeque;

use crate::core::asks::Asks;
use crate::core::counters::Counters;
use crate::core::deadline::Deadline;
use crate::core::event::Input;
use crate::core::hooks::Hooks;
use crate::core::machine::{settings, Machine};
use crate::core::outcome::Ended;
use crate::core::outcome::RunSummary;
use crate::core::settings::Config;
use crate::core::sources::Sources;
use crate::core::timeline::Timeline;
use crate::util::text::Fold;

impl<'a> Machine<'a> {
    /// After a panic of the core `old`: a fresh core with no sources, hooks,
    /// delay, ECS or notify reading, that takes over the stop `old` began
    /// (its deadline included) and what `old` recorded for the report.
    /// `signal_sent`: the shell did send the stop signal.
    pub fn fallback(
        config: &'a Config,
        old: &mut Machine<'_>,
        signal_sent: bool,
        child: Option<Ended>,
        now: Instant,
    ) -> Machine<'a> {
        let mut machine = Machine::minimal(config, old.pid, old.pid1, old.started, old.deadline);
        // The report's records move over; nothing asked by `old` is awaited.
        machine.summary = std::mem::take(&mut old.summary);
        machine.sources = Sources::after(&mut old.sources);
        machine.watch = old.watch.take();
        if let Some(watch) = &mut machine.watch {
            watch.end();
        }
        machine.notify = old.notify.take();
        // The maximum runtime still holds: a stop it begins is the
        // fallback's own.
        machine.max_runtime = old.max_runtime.take();
        machine.asks = Asks::after(&old.asks);
        machine.counters = old.counters.clone();
        machine.version = old.version.wrapping_add(1);
        if let Some(ended) = child {
            // The child is gone: nothing may be sent to its pid any more.
            machine.handle(now, Input::ChildExited(ended));
        } else if let Some(mut stop) = old.timeline.stop() {
            // A deletion learnt by `old` bounds the stop it hands over.
            stop.deadline = machine.deadline.bound(stop.deadline);
            let mut out = Vec::new();
            machine.timeline.resume(now, stop, signal_sent, &mut out);
            machine.perform_all(now, out, false);
        }
        machine
    }

    /// A core with no sources, hooks, delay, ECS, notify reading or orphan
    /// grace: the fallback's (and the one a panic while building the first
    /// core leaves). Its stops get `deadline`'s grace: what the failed core
    /// learnt from the platform is kept.
    pub fn minimal(
        config: &'a Config,
        pid: i32,
        pid1: bool,
        started: Instant,
        deadline: Deadline,
    ) -> Machine<'a> {
        let mut settings = settings(config, false);
        settings.hook = false;
        settings.pre_stop_delay = Duration::ZERO;
        settings.orphan_grace = Duration::ZERO;
        let timeline = Timeline::new(settings);
        let mut machine = Machine::empty(config, pid, pid1, started, timeline, deadline);
        machine.fallback = true;
        machine
    }

    pub(super) fn empty(
        config: &'a Config,
        pid: i32,
        pid1: bool,
        started: Instant,
        mut timeline: Timeline,
        deadline: Deadline,
    ) -> Machine<'a> {
        timeline.follow(&deadline);
        Machine {
            config,
            pid,
            pid1,
            started,
            timeline,
            deadline,
            hooks: Hooks::default(),
            sources: Sources::default(),
            watch: None,
            max_runtime: None,
            protection: None,
            notify: None,
            asks: Asks::default(),
            events: VecDeque::new(),
            outcome: None,
            held_exit: None,
            summary: RunSummary {
                child_pid: Some(pid),
                ..RunSummary::default()
            },
            held: Fold::default(),
            fallback: false,
            counters: Counters::default(),
            version: 0,
            timeline_ran: false,
        }
    }
}
