//! Bounded HTTP for the drain, stop and ECS endpoints: plain `http://` only,
//! one overall timeout per request, no redirects followed, bodies capped at
//! 64 KiB. Requests run on short-lived worker threads so the event loop
//! never waits on the network.

use std::fmt;
use std::io;
use std::time::Duration;

/// Largest body drainit reads; drain and metadata bodies are tiny.
pub const BODY_LIMIT: u64 = 64 * 1024;

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

/// Why a request gave no usable response. Each kind is logged once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Refused,
    Timeout,
    TooLarge,
    Redirect(u16),
    /// Reset, closed mid-body, invalid HTTP, name not found...
    Broken(String),
}

impl Failure {
    /// A stable key for "log each distinct failure once".
    pub fn kind(&self) -> String {
        match self {
            Failure::Refused => "refused".into(),
            Failure::Timeout => "timeout".into(),
            Failure::TooLarge => "too_large".into(),
            Failure::Redirect(status) => format!("redirect_{status}"),
            Failure::Broken(_) => "broken".into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Refused => f.write_str("connection refused"),
            Failure::Timeout => f.write_str("timed out"),
            Failure::TooLarge => write!(f, "body larger than {} KiB", BODY_LIMIT / 1024),
            Failure::Redirect(status) => write!(f, "redirect ({status}), not followed"),
            Failure::Broken(why) => f.write_str(why),
        }
    }
}

/// Checks that a URL is a plain `http://` URL with a host; startup only.
pub fn validate_url(url: &str) -> Result<(), String> {
    let uri: ureq::http::Uri = url.parse().map_err(|e| format!("not a URL ({e})"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => return Err(format!("only http:// URLs are accepted, not {other}://")),
        None => return Err("expected an http:// URL".into()),
    }
    if uri.host().map(str::is_empty).unwrap_or(true) {
        return Err("the URL has no host".into());
    }
    Ok(())
}

fn classify_io(e: &io::Error) -> Failure {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Failure::Refused,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::Timeout,
        _ => Failure::Broken(format!("I/O error: {e}")),
    }
}

fn classify(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::BodyExceedsLimit(_) => Failure::TooLarge,
        ureq::Error::Io(io) => classify_io(&io),
        ureq::Error::ConnectionFailed => Failure::Refused,
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => Failure::Redirect(0),
        other => Failure::Broken(other.to_string()),
    }
}

/// Sends one request with `timeout` as the bound on the whole exchange.
pub fn send(target: &Target, body: Option<&[u8]>, timeout: Duration) -> Result<Response, Failure> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout.max(Duration::from_millis(1))))
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let mut builder = ureq::http::Request::builder()
        .method(target.method.as_str())
        .uri(target.url.as_str());
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(body.unwrap_or_default().to_vec())
        .map_err(|e| Failure::Broken(e.to_string()))?;
    let mut response = agent.run(request).map_err(classify)?;
    let status = response.status().as_u16();
    if (300..400).contains(&status) {
        return Err(Failure::Redirect(status));
    }
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .body_mut()
        .with_config()
        .limit(BODY_LIMIT)
        .read_to_vec()
        .map_err(classify)?;
    Ok(Response {
        status,
        content_type,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls() {
        assert!(validate_url("http://127.0.0.1:8080/drain").is_ok());
        assert!(validate_url("http://localhost/").is_ok());
        assert!(validate_url("http://[::1]:80/x?y=1").is_ok());
        for bad in [
            "https://127.0.0.1/",
            "ftp://x/",
            "127.0.0.1:80/x",
            "",
            "http://",
            "/drain",
            "http:///x",
            "unix:/run/x.sock",
        ] {
            assert!(validate_url(bad).is_err(), "{bad:?}");
        }
    }
}
