//! Each option's value, from the text typed (or set in its variable) to
//! the typed value, or the reason it is refused: one parser per kind of
//! value, the same for a flag, its variable and its declared default.

use std::path::PathBuf;
use std::time::Duration;

use crate::core::settings::{LogFormat, ProbeTarget};
use crate::io::signals;
use crate::proto::drain_body as drain;
use crate::proto::exchange::Method;
use crate::proto::http;

pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 1/true/yes/on or 0/false/no/off".into()),
    }
}

/// Parses `500ms`, `20s`, `2m` or a bare number of seconds (`20`, `0.5`),
/// to the nearest microsecond (a half rounds up), in integers: drainit
/// parses no float.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const HINT: &str = "expected a duration such as 500ms, 20s, 2m or a number of seconds";
    /// A year is far beyond any platform's stop timeout; anything longer
    /// is a typo.
    const LONGEST_US: u128 = 365 * 24 * 3_600 * 1_000_000;
    /// Decimals read; later ones are below a millionth of a microsecond.
    const DECIMALS: u32 = 15;
    let t = text.trim();
    let (number, unit_us) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1_000)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000_000)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000_000)
    } else {
        (t, 1_000_000)
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !digits(whole) || !digits(fraction) {
        return Err(HINT.into());
    }
    // The number in units of 10^-DECIMALS; its whole part saturates just
    // above the longest (in any unit it is then too long).
    let scale = 10u128.pow(DECIMALS);
    let whole = whole.bytes().fold(0u128, |n, b| {
        (n * 10 + u128::from(b - b'0')).min(LONGEST_US + 1)
    });
    let fraction = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(DECIMALS as usize)
        .fold(0u128, |n, b| n * 10 + u128::from(b - b'0'));
    let scaled = (whole * scale + fraction) * unit_us;
    let micros = (scaled + scale / 2) / scale;
    if scaled > LONGEST_US * scale {
        return Err("duration is too long".into());
    }
    Ok(Duration::from_micros(micros as u64))
}

pub fn parse_exit_code(text: &str) -> Result<u8, String> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected an exit code 0-255".into());
    }
    t.parse::<u8>()
        .map_err(|_| "expected an exit code 0-255".into())
}

/// `FROM:TO` as dumb-init reads it; TO may be 0 to drop the signal.
pub fn parse_rewrite(text: &str) -> Result<(i32, i32), String> {
    let (from, to) = text
        .split_once(':')
        .ok_or_else(|| "expected FROM:TO, e.g. TERM:QUIT or 15:0".to_string())?;
    let from = signals::parse_signal(from)?;
    if !signals::is_forwardable(from) {
        return Err(format!(
            "{} is never forwarded, so it cannot be rewritten",
            signals::signal_name(from)
        ));
    }
    let to = if to.trim() == "0" {
        0
    } else {
        signals::parse_signal(to)?
    };
    Ok((from, to))
}

/// `--grace`: a duration, or `0`/`none` for "never escalate".
pub fn parse_grace(text: &str) -> Result<Option<Duration>, String> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let d = parse_duration(text).map_err(|e| format!("{e}, or none"))?;
    Ok((!d.is_zero()).then_some(d))
}

/// `--max-runtime`: a duration of at least 1 ms; no maximum is the option
/// left unset, so `0` and `none` are refused rather than read as "never".
pub fn parse_max_runtime(text: &str) -> Result<Duration, String> {
    const UNSET: &str = "leave --max-runtime unset for no maximum";
    if text.trim().eq_ignore_ascii_case("none") {
        return Err(format!("none is not a maximum runtime; {UNSET}"));
    }
    let d = parse_duration(text)?;
    if d < Duration::from_millis(1) {
        return Err(format!("a maximum runtime must be at least 1ms; {UNSET}"));
    }
    Ok(d)
}

/// A poll period: a duration that is not zero.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_millis(1) {
        return Err("an interval must be at least 1ms".into());
    }
    Ok(d)
}

/// `TERM,INT`: signals that can be received and forwarded.
pub fn parse_signal_list(text: &str) -> Result<Vec<i32>, String> {
    text.split(',')
        .map(|name| {
            let signo = signals::parse_signal(name)?;
            if signals::is_forwardable(signo) {
                Ok(signo)
            } else {
                Err(format!(
                    "{} cannot be a stop signal",
                    signals::signal_name(signo)
                ))
            }
        })
        .collect()
}

pub fn parse_url(text: &str) -> Result<String, String> {
    http::validate_url(text.trim())?;
    Ok(text.trim().to_string())
}

pub fn parse_method(text: &str) -> Result<Method, String> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err("expected an HTTP method such as POST, PUT or GET".into());
    }
    Ok(Method::from(t.to_ascii_uppercase()))
}

pub fn parse_pointer(text: &str) -> Result<String, String> {
    drain::validate_pointer(text)?;
    Ok(text.to_string())
}

pub fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected text or json".into()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcsMode {
    Auto,
    On,
    Off,
}

pub fn parse_ecs_mode(text: &str) -> Result<EcsMode, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(EcsMode::Auto),
        "on" => Ok(EcsMode::On),
        "off" => Ok(EcsMode::Off),
        _ => Err("expected auto, on or off".into()),
    }
}

/// The agent rate-limits every container of an instance together, so
/// metadata polls are never more frequent than once a second.
pub fn parse_ecs_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_secs(1) {
        return Err("the ECS agent is rate-limited: at least 1s".into());
    }
    Ok(d)
}

pub fn parse_protect_minutes(text: &str) -> Result<u32, String> {
    let t = text.trim();
    match t.parse::<u32>() {
        Ok(n) if (1..=2880).contains(&n) && t.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err("expected whole minutes, 1-2880".into()),
    }
}

/// `--notify-socket`: absolute, so it means the same for drainit and the app.
pub fn parse_socket_path(text: &str) -> Result<PathBuf, String> {
    if !text.starts_with('/') {
        return Err("expected an absolute path".into());
    }
    Ok(PathBuf::from(text))
}

pub fn parse_path(text: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(text))
}

pub fn parse_drain_file(text: &str) -> Result<PathBuf, String> {
    if text.trim().is_empty() {
        return Err("expected a file path".into());
    }
    Ok(PathBuf::from(text.trim()))
}

pub fn parse_verbosity(text: &str) -> Result<u8, String> {
    let t = text.trim();
    match t.parse::<u8>() {
        Ok(n) if t.bytes().all(|b| b.is_ascii_digit()) => Ok(n.min(4)),
        _ => Err("expected a verbosity level 0-4".into()),
    }
}

/// `--serve`: `ADDR:PORT` (an IPv6 address in brackets), or `:PORT` for
/// every IPv4 address.
pub fn parse_serve(text: &str) -> Result<std::net::SocketAddr, String> {
    let t = text.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Err(format!(
            "a port alone is not an address: write :{port} (every IPv4 address) or 127.0.0.1:{port} (this host only)"
        ));
    }
    let full = match t.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => t.to_string(),
    };
    full.parse()
        .map_err(|_| "expected ADDR:PORT, e.g. 0.0.0.0:9090 or [::1]:9090".into())
}

/// `--probe`'s target: `http://` URL or `tcp://HOST:PORT`.
pub fn parse_probe_target(text: &str) -> Result<ProbeTarget, String> {
    let t = text.trim();
    if let Some(rest) = t.strip_prefix("tcp://") {
        let rest = rest.trim_end_matches('/');
        let url = http::parse_url(&format!("http://{rest}/"))
            .map_err(|_| "expected tcp://HOST:PORT".to_string())?;
        if !rest.contains(':') || rest.ends_with(']') {
            return Err("expected tcp://HOST:PORT (the port is needed)".into());
        }
        return Ok(ProbeTarget::Tcp {
            host: url.host,
            port: url.port,
        });
    }
    http::validate_url(t).map_err(|e| format!("{e} (or tcp://HOST:PORT)"))?;
    Ok(ProbeTarget::Http(t.to_string()))
}

/// `--emf-namespace`: CloudWatch takes 1-255 characters of letters,
/// digits, spaces and `.-_/#:`.
pub fn parse_namespace(text: &str) -> Result<String, String> {
    let t = text.trim();
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-_/#: ".contains(c);
    if t.is_empty() || t.len() > 255 || !t.chars().all(allowed) {
        return Err("expected 1-255 characters: letters, digits, spaces and . - _ / # :".into());
    }
    Ok(t.to_string())
}

/// `--ready-url`: asked on `/readyz` requests, which anyone who reaches the
/// listener can send, so its host must need no name lookup (each lookup
/// would start a thread while the child runs): an IP address or localhost.
pub fn parse_ready_url(text: &str) -> Result<String, String> {
    let url = http::parse_url(text.trim())?;
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    if host != "localhost" && host.parse::<std::net::IpAddr>().is_err() {
        return Err(
            "the host must be an IP address or localhost (e.g. http://127.0.0.1:8080/ready)".into(),
        );
    }
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the duration parser did with floats, for comparison.
    fn by_float(text: &str) -> Option<Duration> {
        let t = text.trim();
        let (number, scale_ms) = match (
            t.strip_suffix("ms"),
            t.strip_suffix('s'),
            t.strip_suffix('m'),
        ) {
            (Some(n), _, _) => (n, 1.0),
            (_, Some(n), _) => (n, 1_000.0),
            (_, _, Some(n)) => (n, 60_000.0),
            _ => (t, 1_000.0),
        };
        let ok = number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && number.bytes().filter(|&b| b == b'.').count() <= 1
            && number.bytes().any(|b| b.is_ascii_digit());
        let ms = number.parse::<f64>().ok().filter(|_| ok)? * scale_ms;
        (ms.is_finite() && ms <= 365.0 * 24.0 * 3_600_000.0)
            .then(|| Duration::from_micros((ms * 1_000.0).round() as u64))
    }

    #[test]
    fn durations_parse_as_they_did_with_floats() {
        let mut texts: Vec<String> = [
            "0",
            "1",
            "20",
            "0.5",
            ".5",
            "1.",
            "500ms",
            "20s",
            "2m",
            " 3s ",
            "1.5s",
            "0.001ms",
            "0.0005ms",
            "0.0004ms",
            "2.5m",
            "0.000001",
            "0.0000005",
            "123.456789",
            "8s",
            "31536000",
            "31536000s",
            "31536001",
            "525600m",
            "525601m",
            "31536000000ms",
            "99999999999999999999999999999",
            "",
            ".",
            "s",
            "ms",
            "1..2",
            "1.2.3",
            "-1",
            "+1",
            "1e3",
            "1 s",
            "abc",
            "1h",
            "0x10",
            "1_000",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        for n in (0..20_000u32).step_by(7) {
            for unit in ["", "s", "ms", "m"] {
                texts.push(format!("{}.{:03}{unit}", n / 1000, n % 1000));
                texts.push(format!("{n}{unit}"));
            }
        }
        for text in &texts {
            assert_eq!(parse_duration(text).ok(), by_float(text), "{text:?}");
        }
        assert_eq!(
            parse_duration("31536001").unwrap_err(),
            "duration is too long"
        );
        assert!(parse_duration("1e3")
            .unwrap_err()
            .starts_with("expected a duration"));
    }
}
