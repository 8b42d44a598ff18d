//! Stop triggers besides signals, as one part of the core: a platform's
//! watch asks its endpoint while the app runs (a timer slot of its own,
//! disarmed while its poll is out and once the stop begins) and says when
//! the platform wants the app stopped, with the trigger the stop carries
//! (`Event::PlatformStop`). A platform is one module implementing
//! `Backend`, one variant of `Platform` (named again in `each!`) and one
//! line in `backends`: `ecs.rs`, the ECS task metadata's `DesiredStatus:
//! STOPPED`.

pub mod ecs;

use std::time::{Duration, Instant};

use crate::core::asks::{Asks, Owner};
use crate::core::counters::RequestKind;
use crate::core::event::{Lane, Token};
use crate::core::outcome::Trigger;
use crate::core::settings::Config;
use crate::core::timers::{timer_kind, Slots};
use crate::proto::ecs_body::Task;
use crate::proto::exchange::Request;
use crate::proto::http::{Failure, Response};

timer_kind! {
    /// What the watch's timers are for.
    pub enum WatchTimer {
        /// The next poll of the platform.
        Poll,
    }
}

/// A platform that can say "stop" before its own signal comes.
pub trait Backend {
    /// How often it is asked; also the time a request may take.
    fn interval(&self) -> Duration;
    /// What its requests count as (`/metrics`, the report's counters).
    fn purpose(&self) -> RequestKind;
    /// A request sent once at start, beside the first poll (who drainit
    /// is on the platform), answered by `on_start`.
    fn start(&self) -> Option<Request> {
        None
    }
    fn on_start(&mut self, _result: Result<Response, Failure>) {}
    /// One poll, answered by `on_poll`: true when the platform wants the
    /// app stopped.
    fn poll(&self) -> Request;
    fn on_poll(&mut self, result: Result<Response, Failure>) -> bool;
    /// What the stop it begins is called.
    fn trigger(&self) -> Trigger;
    /// Says, once the answer begins a stop, what the platform said.
    fn announce(&self);
}

/// The platforms that can trigger a stop: one variant per back-end
/// (dispatched without a vtable).
#[derive(Debug)]
pub enum Platform {
    Ecs(ecs::Watch),
}

/// Runs `$body` with `$b` bound to the back-end inside `$platform`: the
/// one place besides `Platform` that names every variant.
macro_rules! each {
    ($platform:expr, $b:ident => $body:expr) => {
        match $platform {
            Platform::Ecs($b) => $body,
        }
    };
}

/// The run's watch back-end, if a platform has one: one line per
/// platform.
fn backends(config: &Config) -> Option<Platform> {
    ecs::from_config(config).map(Platform::Ecs)
}

/// A watch runs (the shell starts its request threads before the child).
pub fn active(config: &Config) -> bool {
    backends(config).is_some()
}

/// The platform watch of a run.
#[derive(Debug)]
pub struct Watch {
    platform: Platform,
    timers: Slots<WatchTimer>,
    next_poll: Option<Instant>,
    /// The start's request and the poll out.
    start: Option<Token>,
    poll: Option<Token>,
}

impl Watch {
    /// The watch, if the platform has one; it asks at once: its first
    /// answer already counts as a poll.
    pub fn new(config: &Config, now: Instant, asks: &mut Asks) -> Option<Watch> {
        let platform = backends(config)?;
        let start = each!(&platform, b => b.start()).map(|request| {
            let (kind, interval) = each!(&platform, b => (b.purpose(), b.interval()));
            asks.send(Owner::Watch, kind, Lane::Watch, request, interval)
        });
        let mut watch = Watch {
            platform,
            timers: Slots::default(),
            next_poll: None,
            start,
            poll: None,
        };
        watch.ask(now, asks);
        Some(watch)
    }

    /// The ECS task, once read: the exit report's and EMF's identity of
    /// the task.
    pub fn ecs_task(&self) -> Option<&Task> {
        match &self.platform {
            Platform::Ecs(ecs) => ecs.task.as_ref(),
        }
    }

    pub fn timer(&self, timer: WatchTimer) -> Option<Instant> {
        self.timers.get(timer)
    }

    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    fn ask(&mut self, now: Instant, asks: &mut Asks) {
        let interval = each!(&self.platform, b => b.interval());
        self.next_poll = Some(now + interval);
        self.timers.set(WatchTimer::Poll, None);
        let request = each!(&self.platform, b => b.poll());
        let kind = each!(&self.platform, b => b.purpose());
        self.poll = Some(asks.send(Owner::Watch, kind, Lane::Watch, request, interval));
    }

    /// The poll, when due; none once the app no longer runs (`running`).
    pub fn on_time(&mut self, now: Instant, running: bool, asks: &mut Asks) {
        if !running {
            return self.end();
        }
        if self.timers.due(WatchTimer::Poll, now) {
            self.ask(now, asks);
        }
    }

    /// The stop began: no poll is due any more.
    pub fn end(&mut self) {
        self.timers.set(WatchTimer::Poll, None);
    }

    /// An answer; the trigger when the platform wants the app stopped and
    /// it still runs (`running`).
    pub fn on_http(
        &mut self,
        token: Token,
        result: Result<Response, Failure>,
        running: bool,
    ) -> Option<Trigger> {
        if self.start == Some(token) {
            self.start = None;
            each!(&mut self.platform, b => b.on_start(result));
            return None;
        }
        if self.poll != Some(token) {
            return None;
        }
        self.poll = None;
        let stopping = each!(&mut self.platform, b => b.on_poll(result));
        if !running {
            return None;
        }
        self.timers.set(WatchTimer::Poll, self.next_poll);
        if !stopping {
            return None;
        }
        each!(&self.platform, b => b.announce());
        Some(each!(&self.platform, b => b.trigger()))
    }
}
