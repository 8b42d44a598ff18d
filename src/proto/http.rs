//! HTTP as plain values: the target of a request, the response drainit
//! keeps, the fixed set of failure kinds, and `http://` URL parsing. No I/O:
//! the client (`io::http`) and the decoder both speak in these types.

use std::fmt;
use std::time::{Duration, SystemTime};

pub use crate::proto::exchange::Method;

/// Largest body drainit reads; drain and metadata bodies are tiny.
pub const BODY_LIMIT: usize = 64 * 1024;
/// A plain `http://` URL and the method to ask it with: a `--stop-url`
/// hook as configured, and what the plain client (`io::http`) sends to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub method: Method,
    pub url: String,
}

/// A response as drainit needs it: the status, the body and its type, and
/// the headers the core reads, as values. The Kubernetes client fills
/// `retry_after` and `date`; the plain client, whose answers no core part
/// reads them from, leaves them None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// `Retry-After` in delta-seconds, already bounded by the client.
    pub retry_after: Option<Duration>,
    /// `Date`: the server's clock when it answered.
    pub date: Option<SystemTime>,
}

/// Why a request gave no usable response: a fixed set, so "log each kind
/// once" can never be flooded by what a server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Refused,
    Timeout,
    /// The name did not resolve.
    Resolve,
    /// A lookup of this name (or too many lookups) still running.
    ResolverBusy,
    Reset,
    /// Closed before the response was complete.
    Closed,
    /// Another I/O error (unreachable network...).
    Io,
    /// Not HTTP, or an HTTP head httparse rejects.
    Invalid,
    /// Content-Length, Transfer-Encoding or chunks that make no sense.
    Framing,
    /// The body is over `BODY_LIMIT`.
    TooLarge,
    HeadTooLarge,
    LineTooLong,
    /// All parts together over `decoder::EXCHANGE_LIMIT`.
    ExchangeTooLarge,
    TooManyInterim,
    Redirect,
    /// The TLS handshake failed (a certificate refused, no common suite).
    Tls,
    /// A bug in drainit (a panic in the request thread, contained).
    Internal,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Refused => "refused",
            Kind::Timeout => "timeout",
            Kind::Resolve => "resolve",
            Kind::ResolverBusy => "resolver_busy",
            Kind::Reset => "reset",
            Kind::Closed => "closed",
            Kind::Io => "io",
            Kind::Invalid => "invalid",
            Kind::Framing => "framing",
            Kind::TooLarge => "too_large",
            Kind::HeadTooLarge => "head_too_large",
            Kind::LineTooLong => "line_too_long",
            Kind::ExchangeTooLarge => "exchange_too_large",
            Kind::TooManyInterim => "too_many_interim",
            Kind::Redirect => "redirect",
            Kind::Tls => "tls",
            Kind::Internal => "internal",
        }
    }
}

/// A status code's class (`1xx` to `5xx`, else `other`): "log each kind
/// once" keys are built from these, never from the code itself, so a
/// server cannot mint hundreds of distinct warnings.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}

/// A failed request: its kind and a message written by drainit (any text
/// from the server in it is escaped and cut short, and any URL in it obeys
/// the redaction rule, `util::redact`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub detail: String,
}

impl Failure {
    pub fn new(kind: Kind, detail: &str) -> Failure {
        Failure {
            kind,
            detail: crate::util::text::escape(&crate::util::redact::in_text(detail), 200),
        }
    }

    /// The kind's name, for text only: decisions compare `kind`, the enum.
    pub fn kind(&self) -> &'static str {
        self.kind.as_str()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

/// An HTTP date in the one form servers must send (IMF-fixdate, RFC 9110
/// 5.6.7: `Sun, 06 Nov 1994 08:49:37 GMT`); anything else is None.
pub fn parse_date(text: &str) -> Option<SystemTime> {
    let mut parts = text.trim().split(' ');
    let (_weekday, day, month, year, time, zone) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if parts.next().is_some() || zone != "GMT" || day.len() != 2 || year.len() != 4 {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as u64 + 1;
    let number = |t: &str| -> Option<u64> {
        t.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (day, year) = (number(day)?, number(year)?);
    let mut hms = time.split(':').map(|t| number(t).filter(|_| t.len() == 2));
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if hms.next().is_some() || !(1..=31).contains(&day) || year < 1970 || h > 23 || m > 59 || s > 60
    {
        return None;
    }
    civil_time(year, month, day, h, m, s)
}

/// A UTC civil date and time (month 1 to 12), checked no further than
/// its caller did, as an instant; None before 1970 or past what a
/// `SystemTime` holds.
pub fn civil_time(year: u64, month: u64, day: u64, h: u64, m: u64, s: u64) -> Option<SystemTime> {
    if !(1..=12).contains(&month) {
        return None;
    }
    // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
    let (y, mo) = if month <= 2 {
        (year.checked_sub(1)?, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days
        .checked_mul(86_400)?
        .checked_add(h * 3_600 + m * 60 + s)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// The parts of an `http://` URL a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
    /// `host[:port]` as written, for the Host header.
    pub authority: String,
}

/// Parses a plain `http://host[:port][/path][?query]` URL. Its errors
/// quote no part of the URL but a scheme (they are echoed in usage errors
/// and logs, and the URL may carry a secret).
pub fn parse_url(url: &str) -> Result<Url, String> {
    if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err("the URL contains spaces or control characters".into());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("expected an http:// URL".into());
    };
    if !scheme.eq_ignore_ascii_case("http") {
        let shown = if scheme.len() <= 16 && scheme.bytes().all(|b| b.is_ascii_alphabetic()) {
            scheme
        } else {
            "this scheme"
        };
        return Err(format!("only http:// URLs are accepted, not {shown}://"));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("credentials in the URL are not supported".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed [ in the host")?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("the bracketed host is not an IPv6 address".into());
        }
        match after {
            "" => (host, None),
            _ => (
                host,
                Some(after.strip_prefix(':').ok_or("expected :port after ]")?),
            ),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".into());
    }
    if !authority.starts_with('[') && host.contains(':') {
        return Err(
            "too many ':' in the host (an IPv6 address goes in brackets: http://[::1]:8080/)"
                .into(),
        );
    }
    if !authority.starts_with('[') && host.contains(['[', ']']) {
        return Err("misplaced [ or ] in the host".into());
    }
    let port = match port {
        None => 80,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err("invalid port (1 to 65535 expected)".into()),
        },
    };
    let path = tail.split('#').next().unwrap_or("");
    let path = match path.chars().next() {
        None => "/".to_string(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    Ok(Url {
        host: host.to_string(),
        port,
        path,
        authority: authority.to_string(),
    })
}

/// Checks that a URL is a plain `http://` URL with a usable authority;
/// startup only.
pub fn validate_url(url: &str) -> Result<(), String> {
    parse_url(url).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_in_the_one_form_servers_send() {
        let at = |secs| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(parse_date("Sun, 06 Nov 1994 08:49:37 GMT"), at(784_111_777));
        assert_eq!(parse_date("Thu, 01 Jan 1970 00:00:00 GMT"), at(0));
        assert_eq!(
            parse_date("Sat, 29 Feb 2020 23:59:59 GMT"),
            at(1_583_020_799)
        );
        for bad in [
            "",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT x",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }
}
