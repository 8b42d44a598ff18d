//! The ECS pollers as the machine schedules them, while no stop began: the
//! task metadata watch (its `DesiredStatus: STOPPED` begins a stop) and
//! task scale-in protection (each URL and command source asked once per
//! `--protect-interval`; on while any is busy, off when all are idle).
//! Each poller's next poll is a timer in the table, disarmed while its
//! request is in flight and once the stop begins.

use std::time::Instant;

use log::info;

use crate::core::drain::get;
use crate::core::ecs::{Protection, Watch};
use crate::core::event::Answer;
use crate::core::machine::{Machine, Purpose};
use crate::core::sources::{self, Probe};
use crate::core::timeline::Event;
use crate::core::timers::Timer;
use crate::proto::drain_body;
use crate::proto::ecs_body::protection_body;
use crate::proto::http::{Failure, Response, Target};
use crate::util::text::escape;

impl Machine<'_> {
    /// Arms the ECS pollers. The metadata watch asks at once: its first
    /// answer is logged as the task's identity and already counts as a poll.
    pub(super) fn start_ecs(&mut self, now: Instant) {
        let Some(ecs) = &self.config.ecs else {
            return;
        };
        let (uri, protect, interval) =
            (ecs.metadata_uri.clone(), ecs.protect.clone(), ecs.interval);
        if let Some(uri) = uri {
            let watch = Watch::new(&uri, interval);
            let container = get(&watch.container_url);
            self.send(container, None, interval, Purpose::EcsContainer);
            self.watch = Some(watch);
            self.poll_ecs_task(now);
        }
        if let Some(p) = protect {
            self.protection = Some(Protection::new(&p.agent_uri, p.interval, p.minutes));
            self.timers.set(Timer::ProtectPoll, Some(now));
        }
    }

    /// The ECS pollers that are due; they work only while no stop began.
    pub(super) fn ecs_timers(&mut self, now: Instant) {
        if !self.timeline.is_running() {
            // A stop began or the child is gone: no poll is due any more,
            // and none may keep the loop awake.
            self.timers.set(Timer::EcsPoll, None);
            self.timers.set(Timer::ProtectPoll, None);
            return;
        }
        if self.timers.due(Timer::EcsPoll, now) {
            self.poll_ecs_task(now);
        }
        if self.timers.due(Timer::ProtectPoll, now) {
            self.poll_for_protection(now);
        }
    }

    /// The stop began: the pollers stop, and a command still asked for
    /// protection ends now, so the drain round never runs it beside itself.
    pub(super) fn end_protection(&mut self) {
        self.timers.set(Timer::EcsPoll, None);
        self.timers.set(Timer::ProtectPoll, None);
        self.kill_runs_where(|p| matches!(p, Purpose::ProtectPoll(_)), "the stop began");
        self.protect_round = (Vec::new(), 0);
        self.queued
            .retain(|p| !matches!(p, Purpose::ProtectPoll(_)));
        if let Some(protection) = &mut self.protection {
            protection.poll_in_flight = false;
        }
    }

    fn poll_ecs_task(&mut self, now: Instant) {
        let Some(watch) = &mut self.watch else {
            return;
        };
        watch.in_flight = true;
        watch.next_poll = Some(now + watch.interval);
        let (target, timeout) = (get(&watch.task_url), watch.interval);
        self.timers.set(Timer::EcsPoll, None);
        self.send(target, None, timeout, Purpose::EcsTask);
    }

    pub(super) fn on_ecs_task(&mut self, now: Instant, result: Result<Response, Failure>) {
        let Some(watch) = &mut self.watch else {
            return;
        };
        let stopping = watch.on_task(result);
        if !self.timeline.is_running() {
            return;
        }
        self.timers.set(Timer::EcsPoll, watch.next_poll);
        if stopping {
            info!("ECS says this task is stopping (DesiredStatus STOPPED): draining before the platform's signal");
            self.feed(now, Event::EcsStop);
        }
    }

    /// Task protection asks every URL and command source (files never
    /// drive protection) once per `--protect-interval`.
    fn poll_for_protection(&mut self, now: Instant) {
        let Some(protection) = &mut self.protection else {
            return;
        };
        protection.poll_in_flight = true;
        protection.next_poll = Some(now + protection.interval);
        self.timers.set(Timer::ProtectPoll, None);
        let asked: Vec<(usize, Probe)> = self
            .probes
            .iter()
            .cloned()
            .enumerate()
            .filter(|(_, p)| !matches!(p, Probe::File(_)))
            .collect();
        self.protect_round = (Vec::new(), asked.len());
        self.queued.extend(
            asked
                .into_iter()
                .map(|(index, _)| Purpose::ProtectPoll(index)),
        );
        self.pump(now);
    }

    pub(super) fn on_protect_poll(
        &mut self,
        now: Instant,
        index: usize,
        result: Result<Response, Failure>,
    ) {
        if self.protection.is_none() {
            return;
        }
        self.read_count(&result);
        let Some(protection) = &mut self.protection else {
            return;
        };
        let answer = match &result {
            Err(failure) => {
                let target = escape(&self.board.sources[index].target, 200);
                protection.complain(
                    &format!("drain_{}_{index}", failure.kind()),
                    &format!("drain endpoint {target}: {failure}"),
                );
                Answer::NoAnswer(failure.kind().to_string())
            }
            Ok(_) if drain_body::evaluate(&result, &self.config.drain_field).ready => Answer::Ready,
            Ok(_) => Answer::NotReady("busy".into()),
        };
        self.on_protect_answer(now, answer);
    }

    /// One source answered the protection poll; when all have, protection
    /// follows: busy while any source is busy, idle when all are idle; no
    /// answer is neither (an unrenewed protection simply expires).
    pub(super) fn on_protect_answer(&mut self, now: Instant, answer: Answer) {
        let (answers, due) = &mut self.protect_round;
        if *due == 0 {
            return; // no protection poll in flight: nothing to answer
        }
        answers.push(answer);
        *due -= 1;
        if *due > 0 {
            return;
        }
        let busy = sources::protect_busy(answers);
        let Some(protection) = &mut self.protection else {
            return;
        };
        protection.poll_in_flight = false;
        if !self.timeline.is_running() {
            return;
        }
        self.timers.set(Timer::ProtectPoll, protection.next_poll);
        let Some(enabled) = busy.and_then(|busy| protection.wanted(busy, now)) else {
            return;
        };
        protection.put_in_flight = true;
        let body = protection_body(enabled, protection.minutes)
            .to_string()
            .into_bytes();
        let target = Target {
            method: "PUT".into(),
            url: protection.state_url.clone(),
        };
        let timeout = protection.interval;
        let purpose = Purpose::ProtectPut {
            enabled,
            sent_at: now,
        };
        self.send(target, Some(body), timeout, purpose);
    }
}
