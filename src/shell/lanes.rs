//! The request threads, by lane, and their start before the child: each
//! lane (`core::event::Lane`) has a pool of its own, so drain polls never
//! wait behind a stuck ECS agent or hook, nor the other way round. Also
//! which set of lookup threads each lane's names use (`http::Lookups`),
//! and the start of those, before the child too.

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
    start_lookups(config, &hosts);
    let pool = if urls > 0 { &POLLS } else { &HOOKS };
    if !hosts.is_empty() {
        let _ = pool.submit(Box::new(move || http::check_hosts(hosts)));
    }
}

/// Starts the lookup threads the run's names need, before the child (see
/// `http::prestart_lookups`): one per different host name of the shared
/// set (the sources' and stop hooks' `hosts`, `--ready-url`, the ECS
/// agent's protection endpoint), and of the platforms' set (the
/// Kubernetes API server by name, the ECS task metadata). IP addresses
/// and `localhost` need none.
fn start_lookups(config: &Config, hosts: &[String]) {
    let ecs = config.ecs.as_ref();
    let shared = hosts
        .iter()
        .chain(config.ready_url.as_ref())
        .chain(ecs.and_then(|e| e.protect.as_ref()).map(|p| &p.agent_uri))
        .filter_map(|u| http::looked_up_host(u));
    let mut platform: Vec<String> = ecs
        .and_then(|e| e.metadata_uri.as_deref())
        .and_then(http::looked_up_host)
        .into_iter()
        .collect();
    if let Some(crate::proto::k8s_host::Host::Name(name)) = config.k8s.as_ref().map(|k| &k.host) {
        platform.push(name.clone());
    }
    for (set, names) in [
        (http::Lookups::Shared, distinct(shared)),
        (http::Lookups::Platform, distinct(platform.into_iter())),
    ] {
        if let Err(e) = http::prestart_lookups(set, names) {
            warn!("cannot start lookup threads ahead: {e}; they start when needed");
        }
    }
}

/// How many different host names (DNS names are case-insensitive).
fn distinct(names: impl Iterator<Item = String>) -> usize {
    let mut seen: Vec<String> = Vec::new();
    for name in names {
        let name = name.to_ascii_lowercase();
        if !seen.contains(&name) {
            seen.push(name);
        }
    }
    seen.len()
}

/// The set of lookup threads a lane's names use: the platform watch's
/// requests (the ECS task metadata) have the platforms' own, as the
/// Kubernetes client does (`http::connect_host`); the rest, the app's URLs,
/// share theirs.
pub fn lookups(lane: Lane) -> http::Lookups {
    match lane {
        Lane::Watch => http::Lookups::Platform,
        Lane::Poll | Lane::Protect | Lane::Hook => http::Lookups::Shared,
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
