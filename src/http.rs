//! Bounded HTTP/1.1 for the drain, stop and ECS endpoints: plain `http://`
//! only, one deadline for the whole exchange (connect, send, headers, body),
//! no redirects followed, bodies capped at 64 KiB. Requests run on
//! short-lived worker threads, so the event loop never waits on the network.
//!
//! A small client of our own rather than ureq: these endpoints are local and
//! simple, and the ~120 KiB that ureq and the `http` crate added kept the
//! static binary above its 1 MiB budget.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Largest body drainit reads; drain and metadata bodies are tiny.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Largest response head (status line and headers).
const HEAD_LIMIT: usize = 16 * 1024;

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

/// Parses a plain `http://host[:port][/path][?query]` URL.
pub fn parse_url(url: &str) -> Result<Url, String> {
    if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err("the URL contains spaces or control characters".into());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("expected an http:// URL".into());
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(format!("only http:// URLs are accepted, not {scheme}://"));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        return Err("credentials in the URL are not supported".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("unclosed [ in the host")?;
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
    let port = match port {
        None => 80,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(format!("invalid port '{p}'")),
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

/// Checks that a URL is a plain `http://` URL with a host; startup only.
pub fn validate_url(url: &str) -> Result<(), String> {
    parse_url(url).map(|_| ())
}

fn io_failure(e: &io::Error) -> Failure {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Failure::Refused,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Failure::Timeout,
        io::ErrorKind::ConnectionReset => Failure::Broken("connection reset".into()),
        _ => Failure::Broken(format!("I/O error: {e}")),
    }
}

/// A connection whose every operation is bounded by one deadline.
struct Conn {
    stream: TcpStream,
    deadline: Instant,
    buf: Vec<u8>,
    pos: usize,
}

impl Conn {
    fn left(&self) -> Result<Duration, Failure> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Timeout);
        }
        Ok(left)
    }

    /// Reads more bytes into the buffer; false at end of stream.
    fn fill(&mut self) -> Result<bool, Failure> {
        let left = self.left()?;
        self.stream
            .set_read_timeout(Some(left))
            .map_err(|e| io_failure(&e))?;
        let mut chunk = [0u8; 8192];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_failure(&e)),
            }
        }
    }

    fn available(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// One CRLF-terminated line (without the CRLF), at most `max` bytes.
    fn line(&mut self, max: usize) -> Result<String, Failure> {
        loop {
            if let Some(i) = self.available().windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.available()[..i]).into_owned();
                self.pos += i + 2;
                return Ok(line);
            }
            if self.available().len() > max {
                return Err(Failure::Broken("response line too long".into()));
            }
            if !self.fill()? {
                return Err(Failure::Broken(
                    "connection closed before the response was complete".into(),
                ));
            }
        }
    }

    /// Exactly `n` bytes.
    fn exact(&mut self, n: usize) -> Result<Vec<u8>, Failure> {
        while self.available().len() < n {
            if !self.fill()? {
                return Err(Failure::Broken("connection closed mid-body".into()));
            }
        }
        let out = self.available()[..n].to_vec();
        self.pos += n;
        Ok(out)
    }

    /// Everything until the peer closes, within the body limit.
    fn until_closed(&mut self) -> Result<Vec<u8>, Failure> {
        while self.available().len() <= BODY_LIMIT {
            if !self.fill()? {
                return Ok(self.available().to_vec());
            }
        }
        Err(Failure::TooLarge)
    }

    fn chunked(&mut self) -> Result<Vec<u8>, Failure> {
        let mut body = Vec::new();
        loop {
            let line = self.line(1024)?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| Failure::Broken("invalid chunk size".into()))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line(HEAD_LIMIT)?.is_empty() {}
                return Ok(body);
            }
            if size > BODY_LIMIT - body.len() {
                return Err(Failure::TooLarge);
            }
            body.extend(self.exact(size)?);
            if !self.line(2)?.is_empty() {
                return Err(Failure::Broken("invalid chunk terminator".into()));
            }
        }
    }
}

fn connect(url: &Url, deadline: Instant) -> Result<TcpStream, Failure> {
    let addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| Failure::Broken(format!("cannot resolve {}: {e}", url.host)))?;
    let mut last = Failure::Broken(format!("no address for {}", url.host));
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Timeout);
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = io_failure(&e),
        }
    }
    Err(last)
}

/// Sends one request; `timeout` bounds the whole exchange.
pub fn send(target: &Target, body: Option<&[u8]>, timeout: Duration) -> Result<Response, Failure> {
    let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
    let url = parse_url(&target.url).map_err(Failure::Broken)?;
    let stream = connect(&url, deadline)?;
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        stream,
        deadline,
        buf: Vec::new(),
        pos: 0,
    };
    let mut request = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: drainit/{}\r\nAccept: application/json, */*\r\nConnection: close\r\n",
        target.method,
        url.path,
        url.authority,
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes();
    if let Some(body) = body {
        request.extend(
            format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .bytes(),
        );
        request.extend_from_slice(body);
    } else if matches!(target.method.as_str(), "POST" | "PUT" | "PATCH") {
        request.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    } else {
        request.extend_from_slice(b"\r\n");
    }
    let left = conn.left()?;
    conn.stream
        .set_write_timeout(Some(left))
        .map_err(|e| io_failure(&e))?;
    conn.stream
        .write_all(&request)
        .map_err(|e| io_failure(&e))?;

    let status_line = conn.line(HEAD_LIMIT)?;
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let status = match code.parse::<u16>() {
        Ok(n) if version.starts_with("HTTP/1.") && (100..=999).contains(&n) && code.len() == 3 => n,
        _ => return Err(Failure::Broken("invalid HTTP response".into())),
    };
    let (mut content_type, mut length, mut chunked, mut head) =
        (None, None, false, status_line.len());
    loop {
        let line = conn.line(HEAD_LIMIT)?;
        head += line.len() + 2;
        if head > HEAD_LIMIT {
            return Err(Failure::Broken("response headers too large".into()));
        }
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(Failure::Broken("invalid HTTP header".into()));
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(value.to_string()),
            "content-length" => {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| Failure::Broken("invalid Content-Length".into()))?,
                )
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    if (300..400).contains(&status) {
        return Err(Failure::Redirect(status));
    }
    let body = if status == 204
        || status == 304
        || (100..200).contains(&status)
        || target.method == "HEAD"
    {
        Vec::new()
    } else if chunked {
        conn.chunked()?
    } else if let Some(n) = length {
        if n > BODY_LIMIT {
            return Err(Failure::TooLarge);
        }
        conn.exact(n)?
    } else {
        conn.until_closed()?
    };
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
    fn parses_http_urls() {
        let u = parse_url("http://127.0.0.1:8080/drain?x=1#frag").unwrap();
        assert_eq!(
            (
                u.host.as_str(),
                u.port,
                u.path.as_str(),
                u.authority.as_str()
            ),
            ("127.0.0.1", 8080, "/drain?x=1", "127.0.0.1:8080")
        );
        let u = parse_url("HTTP://localhost").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("localhost", 80, "/")
        );
        let u = parse_url("http://[::1]:9000/v4/abc/task").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 9000, "/v4/abc/task")
        );
        let u = parse_url("http://169.254.170.2?q").unwrap();
        assert_eq!(u.path, "/?q");
        assert_eq!(parse_url("http://[fe80::1]/").unwrap().port, 80);
    }

    #[test]
    fn only_http_urls() {
        for bad in [
            "https://127.0.0.1/",
            "ftp://x/",
            "127.0.0.1:80/x",
            "",
            "http://",
            "/drain",
            "http:///x",
            "unix:/run/x.sock",
            "http://host:0/",
            "http://host:99999/",
            "http://host:80x/",
            "http://user:pw@host/",
            "http://[::1/",
            "http://[::1]x/",
            "http://host/a b",
            "http://host/\n",
        ] {
            assert!(validate_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn failure_kinds_are_stable() {
        assert_eq!(Failure::Redirect(302).kind(), "redirect_302");
        assert_eq!(
            Failure::Broken("x".into()).kind(),
            Failure::Broken("y".into()).kind()
        );
        assert_eq!(
            io_failure(&io::Error::from(io::ErrorKind::ConnectionRefused)),
            Failure::Refused
        );
        assert_eq!(
            io_failure(&io::Error::from(io::ErrorKind::WouldBlock)),
            Failure::Timeout
        );
    }
}
