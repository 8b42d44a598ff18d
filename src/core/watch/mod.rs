//! Stop triggers besides signals, as one part of the core: a platform's
//! watch asks its endpoint while the app runs (a timer slot of its own,
//! disarmed while its request is out and once the stop begins) and says
//! when the platform wants the app stopped. `ecs.rs`: the ECS task
//! metadata's `DesiredStatus: STOPPED`.

pub mod ecs;

use std::time::Instant;

use log::info;

use crate::core::asks::{Asks, Owner};
use crate::core::counters::RequestKind;
use crate::core::event::{Lane, Token};
use crate::core::settings::Config;
use crate::core::timers::{timer_kind, Slots};

timer_kind! {
    /// What the watch's timers are for.
    pub enum WatchTimer {
        /// The next ECS task metadata poll.
        EcsPoll,
    }
}
use crate::proto::exchange::Request;
use crate::proto::http::{Failure, Response};

/// A watch runs (the shell starts its request threads before the child).
pub fn active(config: &Config) -> bool {
    config
        .ecs
        .as_ref()
        .is_some_and(|e| e.metadata_uri.is_some())
}

/// The platform watch of a run.
#[derive(Debug)]
pub struct Watch {
    pub ecs: ecs::Watch,
    timers: Slots<WatchTimer>,
    /// The container request and the task poll out.
    container: Option<Token>,
    task: Option<Token>,
}

impl Watch {
    /// The watch, if the platform has one; it asks at once: its first
    /// answer is logged as the task's identity and already counts as a poll.
    pub fn new(config: &Config, now: Instant, asks: &mut Asks) -> Option<Watch> {
        let ecs = config.ecs.as_ref()?;
        let watch = ecs::Watch::new(ecs.metadata_uri.as_deref()?, ecs.interval);
        let (kind, interval) = (RequestKind::EcsMetadata, watch.interval);
        let request = Request::get(&watch.container_url);
        let container = asks.send(Owner::Watch, kind, Lane::Ecs, request, interval);
        let mut watch = Watch {
            ecs: watch,
            timers: Slots::default(),
            container: Some(container),
            task: None,
        };
        watch.poll(now, asks);
        Some(watch)
    }

    pub fn timer(&self, timer: WatchTimer) -> Option<Instant> {
        self.timers.get(timer)
    }

    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.next()
    }

    fn poll(&mut self, now: Instant, asks: &mut Asks) {
        let watch = &mut self.ecs;
        watch.in_flight = true;
        watch.next_poll = Some(now + watch.interval);
        self.timers.set(WatchTimer::EcsPoll, None);
        let (kind, request) = (RequestKind::EcsMetadata, Request::get(&watch.task_url));
        let task = asks.send(Owner::Watch, kind, Lane::Ecs, request, watch.interval);
        self.task = Some(task);
    }

    /// The poll, when due; none once the app no longer runs (`running`).
    pub fn on_time(&mut self, now: Instant, running: bool, asks: &mut Asks) {
        if !running {
            return self.end();
        }
        if self.timers.due(WatchTimer::EcsPoll, now) {
            self.poll(now, asks);
        }
    }

    /// The stop began: no poll is due any more.
    pub fn end(&mut self) {
        self.timers.set(WatchTimer::EcsPoll, None);
    }

    /// An answer; true when the platform wants the app stopped and it
    /// still runs (`running`).
    pub fn on_http(
        &mut self,
        token: Token,
        result: Result<Response, Failure>,
        running: bool,
    ) -> bool {
        if self.container == Some(token) {
            self.container = None;
            self.ecs.on_container(result);
            return false;
        }
        if self.task != Some(token) {
            return false;
        }
        self.task = None;
        let stopping = self.ecs.on_task(result);
        if !running {
            return false;
        }
        self.timers.set(WatchTimer::EcsPoll, self.ecs.next_poll);
        if stopping {
            info!("ECS says this task is stopping (DesiredStatus STOPPED): draining before the platform's signal");
        }
        stopping
    }
}
