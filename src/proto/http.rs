//! HTTP as plain values: the target of a request, the response drainit
//! keeps, the fixed set of failure kinds, and `http://` URL parsing. No I/O:
//! the client (`io::http`) and the decoder both speak in these types.

use std::fmt;

/// Largest body drainit reads; drain and metadata bodies are tiny.
pub const BODY_LIMIT: usize = 64 * 1024;
/// What a request is sent to and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub method: String,
    pub url: String,
}

/// A response as drainit needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
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

    /// A stable key for "log each distinct failure once".
    pub fn kind(&self) -> &'static str {
        self.kind.as_str()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
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
