//! `drainit --probe`: a health-check client for images with no curl. One
//! GET (or one TCP connect) within `--probe-timeout`, one line on stdout,
//! and exit 0 when healthy, 1 otherwise: never another code (Docker
//! reserves 2). It binds nothing, writes no file and reads no environment
//! but `DRAINIT_SERVE` (read by `config`). A listener bound to an
//! unspecified address answers on loopback over IPv4 and IPv6, and either
//! may be missing (IPv6 disabled on the host): a loopback or unspecified
//! address is tried over both families, whichever answers.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::core::settings::{Probe, ProbeTarget};
use crate::proto::http::Target;
use crate::util::text::escape;
use crate::util::time::millis;

/// Runs the check; true when healthy.
pub fn run(probe: &Probe) -> bool {
    let started = Instant::now();
    let (healthy, what) = match &probe.target {
        ProbeTarget::Http(given) => {
            let deadline = started + probe.timeout;
            let mut tries = loopbacks(given).into_iter();
            let mut url = tries.next().unwrap_or_else(|| given.clone());
            let mut also = None;
            loop {
                let target = Target {
                    method: "GET".into(),
                    url: url.clone(),
                };
                let left = deadline.saturating_duration_since(Instant::now());
                match crate::io::http::send_for_status(&target, left.max(Duration::from_millis(1)))
                {
                    Ok(status) => {
                        break (
                            (200..300).contains(&status),
                            format!(
                                "HTTP {status} from {}",
                                escape(&crate::util::redact::url(&url), 200)
                            ),
                        )
                    }
                    // Nothing listens over this family: the other one.
                    Err(failure) if unreachable(&failure) && tries.len() > 0 => {
                        url = tries.next().unwrap_or_default();
                        also = Some(url.clone());
                    }
                    // The address the operator gave is the one named; the
                    // other family's, tried after it, is said as such.
                    Err(failure) => {
                        let shown = |u: &str| escape(&crate::util::redact::url(u), 200);
                        let other = also
                            .as_deref()
                            .filter(|a| *a != given.as_str())
                            .map(|a| format!(" (and over the other IP family, {})", shown(a)))
                            .unwrap_or_default();
                        break (false, format!("{} failed: {failure}{other}", shown(given)));
                    }
                }
            }
        }
        ProbeTarget::Tcp { host, port } => {
            match crate::io::http::connect_only(host, *port, probe.timeout) {
                Ok(()) => (true, format!("connected to {host}:{port}")),
                Err(failure) => (false, format!("connect to {host}:{port} failed: {failure}")),
            }
        }
    };
    let line = format!(
        "{}: {what} in {} ms\n",
        if healthy { "healthy" } else { "unhealthy" },
        millis(started.elapsed())
    );
    let _ = std::io::stdout().lock().write_all(line.as_bytes());
    healthy
}

/// A URL whose host is loopback or unspecified, over IPv4 and IPv6 (its own
/// family first); empty for any other URL.
fn loopbacks(url: &str) -> Vec<String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Vec::new();
    };
    let (v4, v6) = ("127.0.0.1", "[::1]");
    let (first, second, host_len) = if let Some(h) = ["127.0.0.1", "0.0.0.0"]
        .into_iter()
        .find(|h| rest.starts_with(&format!("{h}:")))
    {
        (v4, v6, h.len())
    } else if let Some(h) = ["[::1]", "[::]"]
        .into_iter()
        .find(|h| rest.starts_with(&format!("{h}:")))
    {
        (v6, v4, h.len())
    } else {
        return Vec::new();
    };
    let tail = &rest[host_len..];
    vec![
        format!("http://{first}{tail}"),
        format!("http://{second}{tail}"),
    ]
}

/// The failure says nothing answers at that address (not that something
/// answered badly): another address may still.
fn unreachable(failure: &crate::proto::http::Failure) -> bool {
    use crate::proto::http::Kind;
    matches!(failure.kind, Kind::Refused | Kind::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_unspecified_hosts_are_tried_over_both_families() {
        assert_eq!(
            loopbacks("http://[::1]:9090/healthz"),
            ["http://[::1]:9090/healthz", "http://127.0.0.1:9090/healthz"]
        );
        assert_eq!(
            loopbacks("http://[::]:9090/healthz"),
            ["http://[::1]:9090/healthz", "http://127.0.0.1:9090/healthz"]
        );
        assert_eq!(
            loopbacks("http://0.0.0.0:80/x"),
            ["http://127.0.0.1:80/x", "http://[::1]:80/x"]
        );
        assert!(loopbacks("http://10.0.0.1:80/x").is_empty());
        assert!(loopbacks("http://127.0.0.10:80/x").is_empty());
        assert!(loopbacks("https://[::1]:80/x").is_empty());
    }
}
