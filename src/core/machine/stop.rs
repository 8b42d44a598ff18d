//! The timeline's actions routed to the parts they concern, and the log
//! lines that mark the stop: the stop began (watch and protection end),
//! a signal forwarded (after `--rewrite`), the hooks fired or abandoned,
//! a round begun, the app ready, drainit escalating, the child's end, the
//! run's end; and a kill time learnt at the stop (the pod's deletion)
//! handed to the owner of the deadline and held by the timeline. Part of
//! `Machine`, which routes and decides nothing: every decision here is
//! the timeline's, a part's, `core::deadline`'s or `core::rules`.

use std::time::{Duration, Instant};

use log::{error, info, warn};

use crate::core::deadline::Learnt;
use crate::core::event::{Action, Note};
use crate::core::machine::Machine;
use crate::core::outcome::{Ended, Trigger};
use crate::core::rules;
use crate::core::sources::{Said, Stopping};
use crate::core::timeline::{self, Escalation, Event, Phase, Request};
use crate::util::signame::signal_name;
use crate::util::time::millis;

impl Machine<'_> {
    /// What the stop says about asking a source.
    pub(super) fn stopping(&self) -> Stopping {
        let stop = self.timeline.stop();
        Stopping {
            since: stop.map(|s| s.since),
            deadline: stop.and_then(|s| s.deadline),
        }
    }

    pub(super) fn perform_all(
        &mut self,
        now: Instant,
        actions: Vec<timeline::Action>,
        by_word: bool,
    ) {
        for action in actions {
            self.perform(now, action, by_word);
        }
    }

    /// One timeline action. `by_word`: it answers the app's own readiness
    /// word over the notify socket.
    fn perform(&mut self, now: Instant, action: timeline::Action, by_word: bool) {
        use timeline::Action as A;
        match action {
            A::StopBegan(trigger) => self.on_stop_began(now, trigger),
            A::Forward(signo) => self.forward(signo),
            A::Held(signo) => {
                if let Some(note) = self.held.allow(now) {
                    info!(
                        "holding {}: the app gets its stop signal after the pre-stop delay and the hook{note}",
                        signal_name(signo)
                    )
                }
            }
            A::Absorbed(signo) => info!(
                "absorbing {}: the stop already began from {}",
                signal_name(signo),
                self.timeline
                    .stop()
                    .map_or_else(String::new, |s| s.trigger.said())
            ),
            A::Send {
                ticket,
                request: Request::Hook,
                timeout,
            } => self
                .hooks
                .fire(ticket, timeout, self.config, &mut self.asks),
            A::Send {
                ticket,
                request: Request::Poll,
                ..
            } => {
                let stop = self.stopping();
                let said = self.sources.begin_round(now, ticket, stop, &mut self.asks);
                if let Some(Said::Round { ticket, ready }) = said {
                    self.raise(Event::Polled { ticket, ready }, false);
                }
            }
            A::HookAbandoned => {
                warn!("stop hook did not answer in time; sending the stop signal");
                self.hooks
                    .abandon(&mut self.asks, "the hook timeout ran out");
            }
            A::Ready { left } => self.on_ready(now, left, by_word),
            A::Kill(reason) => {
                self.abandon_all("drainit escalates");
                match reason {
                    // The designed end of a drained stop, not a failure.
                    Escalation::Ready => info!("drained, but the app did not exit within --ready-grace: ending it with SIGKILL (the stop still counts as drained)"),
                    Escalation::Deadline => {
                        warn!("deadline reached; sending SIGKILL to the child's process group")
                    }
                }
                self.asks.push(Action::KillChild);
            }
            A::TerminateOthers { .. } => self.asks.push(Action::TerminateOthers),
            A::Exit(outcome) => {
                // A crash's request to take protection off holds the end a
                // moment (`protect::CRASH_BOUND`).
                if self.protection.as_ref().is_some_and(|p| p.holds_exit()) {
                    self.held_exit = Some(outcome);
                } else {
                    self.outcome = Some(outcome);
                    self.asks.push(Action::Exit);
                }
            }
            A::KillStuck => {
                error!(
                    "the child (pid {}) is still not gone {} s after SIGKILL (stuck in the kernel?); {}",
                    self.pid,
                    timeline::KILL_WATCHDOG.as_secs(),
                    if self.pid1 {
                        "exiting now, which ends the namespace"
                    } else {
                        "waiting for it to exit"
                    }
                );
                self.raise(Event::KillFailed { pid1: self.pid1 }, false);
            }
            A::Extended { deadline, first } => {
                let since = self.timeline.stop().map_or(now, |s| s.since);
                if let Some(n) = &mut self.notify {
                    n.on_extended(now, since, deadline, first);
                }
            }
            A::NotifyIgnored => {
                if let Some(n) = &mut self.notify {
                    n.ignored();
                }
            }
        }
    }

    /// Nothing waits for a hook or a drain source any more: the round is
    /// dropped and every command killed.
    fn abandon_all(&mut self, why: &str) {
        self.sources.abandon_round();
        self.sources.kill_runs(&mut self.asks, true, why);
        self.sources.kill_runs(&mut self.asks, false, why);
        self.hooks.abandon(&mut self.asks, why);
    }

    fn on_stop_began(&mut self, now: Instant, trigger: Trigger) {
        self.summary.stop_trigger = Some(trigger);
        // The pollers stop, and a command still asked for protection ends
        // now, so the round never runs it beside itself.
        if let Some(watch) = &mut self.watch {
            watch.end();
        }
        if let Some(max) = &mut self.max_runtime {
            max.end();
        }
        if let Some(protection) = &mut self.protection {
            protection.end();
            protection.begin_stop(now);
        }
        self.sources.end_protection(&mut self.asks);
        let by = trigger.said();
        match self.timeline.stop().and_then(|s| s.deadline) {
            Some(deadline) => info!(
                "stop begins ({by}); deadline in {} ms",
                millis(deadline.saturating_duration_since(now))
            ),
            None => info!("stop begins ({by}); no deadline"),
        }
    }

    /// A read at the stop learnt when the kill comes: the owner of the
    /// deadline decides (`Deadline::learn_kill`), the timeline follows
    /// (its cap on extensions) and holds the stop's new deadline.
    pub(super) fn on_learnt(&mut self, now: Instant, learnt: Learnt) {
        let Some(stop) = self.timeline.stop() else {
            return;
        };
        let old = self.timeline.timer(timeline::Timer::Deadline);
        let change = self.deadline.learn_kill(stop.since, stop.deadline, learnt);
        self.timeline.follow(&self.deadline);
        let kill = self
            .deadline
            .kill()
            .map_or(0, |k| millis(k.at.saturating_duration_since(now)));
        let left = |d: Instant| millis(d.saturating_duration_since(now));
        match (learnt, change.deadline) {
            (Learnt::Gone { .. }, Some(d)) => warn!(
                "the pod was force-deleted: the kubelet's SIGKILL comes within 2 s; deadline in {} ms",
                left(d)
            ),
            (_, Some(d)) if change.replaced_option => warn!(
                "--grace {} ends after the pod's deletion kills the container (in {kill} ms): deadline in {} ms instead",
                stop.deadline
                    .map_or("none".to_string(), |s| format!("{} ms", millis(s.saturating_duration_since(stop.since)))),
                left(d)
            ),
            (_, Some(d)) => info!(
                "the pod is being deleted (deletionGracePeriodSeconds {}): the kubelet's SIGKILL comes in {kill} ms; deadline in {} ms",
                self.deadline
                    .kill()
                    .and_then(|k| k.period)
                    .map_or("unknown".to_string(), |p| p.to_string()),
                left(d)
            ),
            (_, None) => info!(
                "--grace ends before the pod's deletion kills the container (in {kill} ms): the deadline stays"
            ),
        }
        if let Some(d) = change.deadline.filter(|d| Some(*d) != old) {
            let mut out = Vec::new();
            self.timeline.hold(now, d, &mut out);
            self.timeline_ran = true;
            self.perform_all(now, out, false);
            self.run_events(now);
        }
        // A test's panic once the deletion is learnt: the fallback keeps it.
        crate::util::fault::point("deletion_learnt");
    }

    /// Forwards a received signal (after `--rewrite`) to the child or its
    /// group, while the child is there.
    fn forward(&mut self, signo: i32) {
        if !self.timeline.child_alive() {
            return;
        }
        let stop = self.timeline.stop().is_some_and(|s| s.signal == signo);
        let delivery = rules::delivery(self.config, signo);
        match delivery.sent {
            Some((sent, group)) => {
                self.counters.forwarded(sent);
                self.asks.push(Action::Forward {
                    signo: sent,
                    group,
                    stop,
                });
            }
            None => log::debug!("dropping {} as --rewrite asks", signal_name(signo)),
        }
        if delivery.stop_self {
            log::debug!(
                "stopping drainit itself after {}, as dumb-init does",
                signal_name(signo)
            );
            self.asks.push(Action::StopSelf);
        }
    }

    fn on_ready(&mut self, now: Instant, left: Duration, by_word: bool) {
        if let Some(stop) = self.timeline.stop() {
            self.summary.stop_to_ready_ms = Some(millis(now - stop.since));
        }
        if by_word {
            if let Some(n) = &mut self.notify {
                n.stop_to_ready_word_ms = self.summary.stop_to_ready_ms;
            }
            // The word is authoritative: the round in flight is dropped (the
            // timeline dropped its ticket), and a drain command still
            // running has nothing left to answer.
            self.sources.abandon_round();
            let why = "the app said it has drained";
            self.sources.kill_runs(&mut self.asks, true, why);
            return info!(
                "app says it has drained (X_DRAINIT_READY_FOR_TERMINATION=1); it has {} ms to exit by itself",
                millis(left)
            );
        }
        info!(
            "app reports ready ({}); it has {} ms to exit by itself",
            self.sources
                .last_drain
                .as_deref()
                .unwrap_or("every drain source was ready"),
            millis(left)
        );
    }

    pub(super) fn on_child_exit(&mut self, now: Instant, ended: Ended) {
        if !self.timeline.child_alive() {
            return;
        }
        let released = matches!(
            self.timeline.phase(),
            Phase::Killed {
                reason: Escalation::Ready,
                ..
            }
        );
        match ended {
            Ended::Exited(code) => info!("main child exited with status {code}"),
            Ended::Signaled(libc::SIGKILL) if released => {
                info!("main child ended by that SIGKILL after draining (outcome drained)")
            }
            Ended::Signaled(signo) => info!("main child was killed by {}", signal_name(signo)),
        }
        self.summary.child_status = Some(ended);
        self.abandon_all("the main child ended");
        if let Some(max) = &mut self.max_runtime {
            max.end();
        }
        if let Some(signo) = rules::signal_group_left(self.config) {
            log::debug!(
                "sending {} to what is left of the child's process group, as dumb-init does",
                signal_name(signo)
            );
            self.asks.push(Action::SignalGroupLeft { signo });
        }
        match self.timeline.stop() {
            Some(stop) => self.summary.stop_to_exit_ms = Some(millis(now - stop.since)),
            // A crash: protection comes off before drainit exits, so the
            // pod does not keep its node.
            None => {
                if let Some(protection) = &mut self.protection {
                    protection.on_crash(now, &mut self.asks);
                }
            }
        }
        self.feed(now, Event::ChildExited(ended));
    }

    /// The reaper found no child left. After the main child ended, that
    /// ends the orphan grace; before, the child's status was lost (only a
    /// panic of the loop can do that): forwarding to its pid could now
    /// reach a stranger, so the run ends.
    pub(super) fn on_none_left(&mut self, now: Instant) {
        if self.timeline.child_alive() {
            error!("the main child is gone and its status is lost; exiting");
            self.outcome = Some(rules::lost_status());
            return self.asks.push(Action::Exit);
        }
        info!("every remaining process has exited");
        self.feed(now, Event::OthersGone);
    }

    /// Notify messages: counted by notify; the readiness word and an
    /// extension go to the timeline. The fallback's core only counts.
    pub(super) fn on_note(&mut self, now: Instant, note: Note) {
        let stopping = self.timeline.stop().is_some();
        let counting_only = self.fallback || self.outcome.is_some();
        let Some(n) = &mut self.notify else {
            return;
        };
        let [extend, word] = n.on_note(now, note, self.started, stopping, counting_only);
        if let Some(extend) = extend {
            self.feed(now, extend);
        }
        if let Some(word) = word {
            self.raise(word, true);
            self.run_events(now);
        }
    }
}
