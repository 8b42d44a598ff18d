//! Task protection as one part of the core: while the app runs, every
//! source that drives protection is asked once per interval (through
//! `core::sources`), and this decides, once per poll, whether the app is
//! busy, idle or unknown (`protect_busy`). A platform's back-end turns
//! busy or idle into its own request and reads the answer: `ecs.rs` (ECS
//! task scale-in protection). A new platform is one module implementing
//! `Backend` and one line in `backends`. Protection ends when the stop
//! begins.

pub mod ecs;

use std::time::{Duration, Instant};

use crate::core::asks::{Asks, Owner};
use crate::core::counters::RequestKind;
use crate::core::event::{Answer, Lane, Token};
use crate::core::settings::Config;
use crate::core::timers::{Slots, Timer};
use crate::proto::http::{Failure, Response, Target};

/// A platform that protects the app while it is busy.
pub trait Backend: std::fmt::Debug {
    /// How often the sources are asked (`--protect-interval`); also the
    /// time a request to the platform may take.
    fn interval(&self) -> Duration;
    /// Given that the app is busy (or idle) at `now`: the request that
    /// says so to the platform, if one is due (only changes and renewals
    /// are sent, one at a time).
    fn request(&mut self, busy: bool, now: Instant) -> Option<(Target, Vec<u8>)>;
    /// The platform answered the request.
    fn on_answer(&mut self, result: Result<Response, Failure>);
    /// Protection is on, as the platform last accepted.
    fn is_on(&self) -> bool;
    /// A failure worth saying once per `key`.
    fn complain(&mut self, key: &str, message: &str);
}

/// The run's protection back-end, if any platform asks for one: one line
/// per platform.
fn backends(config: &Config) -> Option<Box<dyn Backend>> {
    ecs::from_config(config)
}

/// Protection runs: a platform's back-end is configured (the shell starts
/// protection's request threads before the child).
pub fn active(config: &Config) -> bool {
    backends(config).is_some()
}

/// Task protection over several sources: busy while any source that
/// answered is not ready; idle when every one answered ready; None (leave
/// protection as it is) when a source gave no answer and no other said
/// busy.
pub fn protect_busy(answers: &[Answer]) -> Option<bool> {
    if answers.iter().any(|a| matches!(a, Answer::NotReady(_))) {
        return Some(true);
    }
    if answers.iter().all(Answer::is_ready) {
        return Some(false);
    }
    None
}

/// Protection while the app runs.
#[derive(Debug)]
pub struct Protection {
    backend: Box<dyn Backend>,
    /// The next poll; disarmed while one is out and once the stop began.
    timers: Slots<1>,
    next_poll: Option<Instant>,
    /// The poll out: answers so far, answers still due.
    round: Option<(Vec<Answer>, usize)>,
    /// The platform request out.
    request: Option<Token>,
}

impl Protection {
    /// Protection for the run, polled first at `now`.
    pub fn new(config: &Config, now: Instant) -> Option<Protection> {
        let mut timers = Slots::new([Timer::ProtectPoll]);
        timers.set(Timer::ProtectPoll, Some(now));
        Some(Protection {
            backend: backends(config)?,
            timers,
            next_poll: None,
            round: None,
            request: None,
        })
    }

    pub fn timer(&self, timer: Timer) -> Option<Instant> {
        self.timers.get(timer)
    }

    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Protection is on, as the platform last accepted.
    pub fn is_on(&self) -> bool {
        self.backend.is_on()
    }

    /// The poll is due: the interval it asks with, the next poll armed
    /// once this one is answered.
    pub fn due(&mut self, now: Instant) -> Option<Duration> {
        if !self.timers.due(Timer::ProtectPoll, now) {
            return None;
        }
        let interval = self.backend.interval();
        self.next_poll = Some(now + interval);
        self.timers.set(Timer::ProtectPoll, None);
        Some(interval)
    }

    /// The poll asked `n` sources.
    pub fn asked(&mut self, n: usize) {
        self.round = Some((Vec::new(), n));
    }

    /// One source answered the poll; when all have, busy or idle goes to
    /// the back-end, whose request goes out. No answer is neither (an
    /// unrenewed protection simply expires).
    pub fn on_answer(
        &mut self,
        now: Instant,
        answer: Answer,
        complaint: Option<(String, String)>,
        asks: &mut Asks,
    ) {
        if let Some((key, message)) = complaint {
            self.backend.complain(&key, &message);
        }
        let Some((answers, due)) = self.round.as_mut().filter(|(_, due)| *due > 0) else {
            return; // no poll in flight: nothing to answer
        };
        answers.push(answer);
        *due = due.saturating_sub(1);
        if *due > 0 {
            return;
        }
        let busy = protect_busy(answers);
        self.round = None;
        self.timers.set(Timer::ProtectPoll, self.next_poll);
        if self.request.is_some() {
            return;
        }
        let Some((target, body)) = busy.and_then(|busy| self.backend.request(busy, now)) else {
            return;
        };
        let (kind, timeout) = (RequestKind::ProtectUpdate, self.backend.interval());
        let token = asks.send(
            Owner::Protect,
            kind,
            Lane::Protect,
            target,
            Some(body),
            timeout,
        );
        self.request = Some(token);
    }

    /// The platform answered protection's request.
    pub fn on_http(&mut self, token: Token, result: Result<Response, Failure>) {
        if self.request == Some(token) {
            self.request = None;
        }
        self.backend.on_answer(result);
    }

    /// The stop began (or the child is gone): no poll is due any more, and
    /// none may keep the loop awake.
    pub fn end(&mut self) {
        self.timers.set(Timer::ProtectPoll, None);
        self.next_poll = None;
        self.round = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_ignores_sources_without_an_answer() {
        let no = || Answer::NoAnswer("refused".into());
        let busy = || Answer::NotReady("exit 1".into());
        assert_eq!(protect_busy(&[Answer::Ready, Answer::Ready]), Some(false));
        assert_eq!(protect_busy(&[Answer::Ready, busy()]), Some(true));
        assert_eq!(protect_busy(&[no(), busy()]), Some(true));
        assert_eq!(protect_busy(&[Answer::Ready, no()]), None);
        assert_eq!(protect_busy(&[no()]), None);
    }
}
