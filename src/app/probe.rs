//! `drainit --probe`: a health-check client for images with no curl. One
//! GET (or one TCP connect) within `--probe-timeout`, one line on stdout,
//! and exit 0 when healthy, 1 otherwise: never another code (Docker
//! reserves 2). It binds nothing, writes no file and reads no environment
//! but `DRAINIT_SERVE` (read by `config`).

use std::io::Write;
use std::time::Instant;

use crate::core::settings::{Probe, ProbeTarget};
use crate::proto::http::Target;
use crate::util::text::escape;
use crate::util::time::millis;

/// Runs the check; true when healthy.
pub fn run(probe: &Probe) -> bool {
    let started = Instant::now();
    let (healthy, what) = match &probe.target {
        ProbeTarget::Http(url) => {
            let target = Target {
                method: "GET".into(),
                url: url.clone(),
            };
            match crate::io::http::send_for_status(&target, probe.timeout) {
                Ok(status) => (
                    (200..300).contains(&status),
                    format!("HTTP {status} from {}", escape(url, 200)),
                ),
                Err(failure) => (false, format!("{} failed: {failure}", escape(url, 200))),
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
