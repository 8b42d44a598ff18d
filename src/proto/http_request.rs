//! The health listener's side of HTTP, sans-IO: a request head parsed with
//! httparse (the parser the client's decoder uses), within a fixed size,
//! and an answer rendered as bytes. Only the method and the path matter;
//! headers, query strings and bodies are never read into anything.

/// A request head larger than this gets 431 and the connection closes.
pub const HEAD_LIMIT: usize = 8 * 1024;
/// Header lines httparse may hold; more is 431 as well.
pub const MAX_HEADERS: usize = 64;

/// The methods the listener tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// What the bytes read so far are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole head yet (and within `HEAD_LIMIT`).
    Partial,
    /// A whole head: the method and the path without its query.
    Request { method: Method, path: String },
    /// Answer with this status and close (400, 431).
    Refuse(u16),
}

/// Parses the bytes of one connection's head so far.
pub fn parse(bytes: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Complete(len)) if len > HEAD_LIMIT => Parsed::Refuse(431),
        Ok(httparse::Status::Complete(_)) => {
            let method = match request.method {
                Some("GET") => Method::Get,
                Some("HEAD") => Method::Head,
                _ => Method::Other,
            };
            let target = origin_form(request.path.unwrap_or("/"));
            let path = target.split(['?', '#']).next().unwrap_or("/");
            Parsed::Request {
                method,
                path: path.chars().take(256).collect(),
            }
        }
        Ok(httparse::Status::Partial) if bytes.len() > HEAD_LIMIT => Parsed::Refuse(431),
        Ok(httparse::Status::Partial) => Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => Parsed::Refuse(431),
        Err(_) if bytes.len() > HEAD_LIMIT => Parsed::Refuse(431),
        Err(_) => Parsed::Refuse(400),
    }
}

/// The path of a request target: an absolute-form target
/// (`http://host:port/readyz`, which HTTP/1.1 servers must accept) is
/// answered like its origin form (`/readyz`); an authority alone is `/`.
fn origin_form(target: &str) -> &str {
    let scheme = target
        .split_once("://")
        .filter(|(scheme, _)| {
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
        })
        .map(|(_, rest)| rest);
    match scheme {
        None => target,
        Some(rest) => match rest.find(['/', '?', '#']) {
            Some(at) if rest[at..].starts_with('/') => &rest[at..],
            _ => "/",
        },
    }
}

/// The reason phrase of the statuses the listener sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// One whole answer: status line, a few fixed headers, and the body
/// unless the request was HEAD. Every answer closes its connection.
pub fn render(status: u16, content_type: &str, body: &[u8], head: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n{}\r\n",
        reason(status),
        body.len(),
        if status == 405 { "Allow: GET, HEAD\r\n" } else { "" },
    )
    .into_bytes();
    if !head {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_head_gives_method_and_path_without_query() {
        let p = parse(b"GET /readyz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(
            p,
            Parsed::Request {
                method: Method::Get,
                path: "/readyz".into()
            }
        );
        let p = parse(b"HEAD /healthz HTTP/1.0\r\n\r\n");
        assert!(matches!(
            p,
            Parsed::Request {
                method: Method::Head,
                ..
            }
        ));
        let p = parse(b"POST /readyz HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
        assert!(matches!(
            p,
            Parsed::Request {
                method: Method::Other,
                ..
            }
        ));
    }

    #[test]
    fn absolute_form_is_answered_like_origin_form() {
        let path = |target: &str| match parse(format!("GET {target} HTTP/1.1\r\n\r\n").as_bytes()) {
            Parsed::Request { path, .. } => path,
            other => panic!("{target}: {other:?}"),
        };
        assert_eq!(path("http://10.0.0.1:8080/readyz"), "/readyz");
        assert_eq!(path("HTTP://example.com/status?x=1"), "/status");
        assert_eq!(path("https://h/healthz#f"), "/healthz");
        assert_eq!(path("http://h"), "/");
        assert_eq!(path("http://h?x=/readyz"), "/");
        assert_eq!(path("/readyz"), "/readyz");
        // Not a scheme the listener knows: a path that matches nothing.
        assert_eq!(path("ftp://h/readyz"), "ftp://h/readyz");
    }

    #[test]
    fn partial_heads_wait_and_big_ones_are_refused() {
        assert_eq!(parse(b"GET /readyz HTTP/1.1\r\nHo"), Parsed::Partial);
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(HEAD_LIMIT + 1, b'a');
        assert_eq!(parse(&big), Parsed::Refuse(431));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend(format!("X{i}: y\r\n").bytes());
        }
        many.extend(b"\r\n");
        assert_eq!(parse(&many), Parsed::Refuse(431));
        assert_eq!(parse(b"\x16\x03\x01garbage\r\n\r\n"), Parsed::Refuse(400));
    }

    #[test]
    fn answers_close_and_head_has_no_body() {
        let a = render(200, "text/plain", b"ok\n", false);
        let text = String::from_utf8(a).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nok\n"));
        let h = String::from_utf8(render(200, "text/plain", b"ok\n", true)).unwrap();
        assert!(h.contains("Content-Length: 3\r\n") && h.ends_with("\r\n\r\n"));
        let m = String::from_utf8(render(405, "text/plain", b"x\n", false)).unwrap();
        assert!(m.contains("Allow: GET, HEAD\r\n"));
    }
}
