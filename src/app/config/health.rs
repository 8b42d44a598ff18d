//! Health checks and metrics: the listener's settings (`--serve`,
//! `--ready-url`, `--drain-count-field`, `--emf`), and `--probe`, the
//! health-check client run that reads nothing else.

use std::net::SocketAddr;

use super::env::{default, invalid, Env};
use super::UsageError;
use crate::app::options;
use crate::app::values::*;
use crate::core::settings::{Probe, ProbeTarget};

/// What the health listener and the exit's metrics go by.
pub(super) struct Health {
    pub serve: Option<SocketAddr>,
    pub ready_url: Option<String>,
    pub drain_count_field: Option<String>,
}

/// `--serve` and what needs it, and `--drain-count-field`, which needs a
/// drain URL to read the count from.
pub(super) fn read(env: &Env<'_>, has_drain_url: bool) -> Result<Health, UsageError> {
    let serve = env.value(&options::SERVE, parse_serve)?;
    let ready_url = env.value(&options::READY_URL, parse_ready_url)?;
    if ready_url.is_some() && serve.is_none() {
        return Err(UsageError(
            "--ready-url needs --serve: it is asked for /readyz".into(),
        ));
    }
    let drain_count_field = env.value(&options::DRAIN_COUNT_FIELD, parse_pointer)?;
    if drain_count_field.is_some() && !has_drain_url {
        return Err(UsageError(
            "--drain-count-field needs --drain-url: the count is read from its body".into(),
        ));
    }
    Ok(Health {
        serve,
        ready_url,
        drain_count_field,
    })
}

/// `--emf`'s namespace when it is on; checked even without `--emf`: a bad
/// value is a mistake anyway.
pub(super) fn emf(env: &Env<'_>) -> Result<Option<String>, UsageError> {
    let namespace = env.value_or_default(&options::EMF_NAMESPACE, parse_namespace)?;
    Ok(env.flag(&options::EMF)?.then_some(namespace))
}

/// `--probe`: reads only its target, `--probe-timeout` and the address
/// `--serve` or `DRAINIT_SERVE` gives (for the default target); never
/// another variable, so nothing else in the image can break the check.
pub(super) fn probe(env: &Env<'_>, url: &str) -> Result<Probe, UsageError> {
    let timeout = match env.raw.value(&options::PROBE_TIMEOUT) {
        Some(text) => parse_interval(&text).map_err(|e| invalid(&text, "--probe-timeout", &e))?,
        None => default(&options::PROBE_TIMEOUT, parse_interval)?,
    };
    let target = if url.trim().is_empty() {
        let Some(addr) = env.value(&options::SERVE, parse_serve)? else {
            return Err(UsageError(
                "--probe without a URL checks --serve's /healthz, and neither --serve nor DRAINIT_SERVE is set".into(),
            ));
        };
        ProbeTarget::Http(format!("http://{}/healthz", loopback_for(addr)))
    } else {
        parse_probe_target(url).map_err(|e| invalid(url, "--probe", &e))?
    };
    Ok(Probe { target, timeout })
}

/// Where a probe reaches a listener bound to `addr`: an unspecified
/// address (0.0.0.0, ::) is every address, loopback included.
fn loopback_for(addr: SocketAddr) -> SocketAddr {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}
