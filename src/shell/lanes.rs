//! The request threads, by lane, and their start before the child: each
//! lane (`core::event::Lane`) has a pool of its own, so drain polls never
//! wait behind a stuck ECS agent or hook, nor the other way round.

use log::warn;

use crate::core::event::Lane;
use crate::core::settings::Config;
use crate::core::sources::{self, MAX_POLLS};
use crate::core::{protect, watch};
use crate::io::http;
use crate::io::workers::Pool;

/// The request threads, by lane: drain polls as many as the core runs at
/// once, protection as many plus two (the platform's own request, and its
/// read at the stop or the crash's request beside it), two for the ECS
/// metadata (the container and
/// the task requests of the start go out together), and the hooks'.
static POLLS: Pool = Pool::new("drainit-poll", MAX_POLLS);
static PROTECT: Pool = Pool::new("drainit-protect", MAX_POLLS + 2);
static WATCH: Pool = Pool::new("drainit-ecs", 2);
static HOOKS: Pool = Pool::new("drainit-hook", MAX_POLLS);

/// Starts, before the child does, every request thread the run can need:
/// one per source asked by an HTTP request (`sources::threads`: the
/// sources whose `ask` is `How::Send`; at most `MAX_POLLS`) for drain
/// rounds; for task protection as many plus one for the platform's own
/// request, which may still be out while the next poll asks the sources
/// (so one even with no URL source: a drain command's protection still
/// sends to the agent), plus one for its read at the stop, which never
/// waits behind them; two for ECS; one per stop URL. No thread is then
/// born while the child runs (see `Pool::prestart`), and the start-up
/// check of the URLs' host names runs on one of them. A new kind of
/// source needs nothing here.
pub fn start(config: &Config) {
    let (urls, hosts) = sources::threads(config);
    let (protect, watch) = (protect::active(config), watch::active(config));
    let pools: [(&'static Pool, usize); 4] = [
        (&POLLS, urls),
        (&PROTECT, if protect { urls + 2 } else { 0 }),
        (&WATCH, if watch { 2 } else { 0 }),
        (&HOOKS, config.stop_hooks.len()),
    ];
    for (pool, n) in pools {
        if let Err(e) = pool.prestart(n) {
            warn!("cannot start request threads ahead: {e}; they start when needed");
        }
    }
    let hosts: Vec<String> = hosts
        .into_iter()
        .chain(config.stop_hooks.iter().map(|t| t.url.clone()))
        .collect();
    let pool = if urls > 0 { &POLLS } else { &HOOKS };
    if !hosts.is_empty() {
        let _ = pool.submit(Box::new(move || http::check_hosts(hosts)));
    }
}

/// The pool of a lane.
pub fn pool(lane: Lane) -> &'static Pool {
    match lane {
        Lane::Poll => &POLLS,
        Lane::Protect => &PROTECT,
        Lane::Watch => &WATCH,
        Lane::Hook => &HOOKS,
    }
}
