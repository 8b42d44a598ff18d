//! The response decoder: a pure state machine over the bytes of one HTTP/1.1
//! exchange (bytes in; "need more", a decoded response or a failure out),
//! with no socket in it, so fuzz targets and property tests drive it
//! directly. The head is parsed by `httparse`; framing (Content-Length,
//! chunked, read-until-close) is ours.
//!
//! Every byte the server sends counts against `EXCHANGE_LIMIT`, whatever
//! part of the response it belongs to (interim heads, chunk-size lines,
//! extensions, trailers), and the decoder holds at most one head, one
//! chunk-size line and the body (`BODY_LIMIT`) in memory. Trailers are
//! skipped without being stored.

use crate::proto::http::{Failure, Kind, Response, BODY_LIMIT};

/// Most bytes one exchange may read, all parts together.
pub const EXCHANGE_LIMIT: usize = 128 * 1024;
/// Largest response head (status line and headers), and largest trailer line.
pub const HEAD_LIMIT: usize = 16 * 1024;
/// Largest chunk-size line, extensions included.
pub const CHUNK_LINE_LIMIT: usize = 4 * 1024;
/// Interim (1xx) responses skipped before the final one.
pub const INTERIM_LIMIT: u32 = 8;
/// Header fields per head.
const MAX_HEADERS: usize = 64;
/// Longest Content-Type kept; longer values are cut (a media type with its
/// parameters is far shorter).
pub const CONTENT_TYPE_LIMIT: usize = 256;

/// The bounds one decoder keeps: `Limits::DEFAULT` in drainit; property
/// tests pass small ones so that random input reaches every bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub exchange: usize,
    pub head: usize,
    pub chunk_line: usize,
    pub body: usize,
    pub interim: u32,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        exchange: EXCHANGE_LIMIT,
        head: HEAD_LIMIT,
        chunk_line: CHUNK_LINE_LIMIT,
        body: BODY_LIMIT,
        interim: INTERIM_LIMIT,
    };
}

/// What the decoder says after each call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    NeedMore,
    Done(Response),
    Failed(Failure),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length(usize),
    UntilClose,
    ChunkSize,
    ChunkData(usize),
    /// The CRLF after a chunk's data; true once the CR was seen.
    ChunkEnd(bool),
    /// Trailer lines up to the empty one; the current line's length.
    Trailers(usize),
    Over,
}

/// Decodes one response; feed it what the socket reads, then `finish` at
/// end of stream.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    state: State,
    /// The head or chunk-size line being collected (bounded).
    line: Vec<u8>,
    total: usize,
    interim: u32,
    head_request: bool,
    status: u16,
    content_type: Option<String>,
    body: Vec<u8>,
    /// Times the head was handed to httparse (see `run`).
    parses: u32,
}

fn fail(kind: Kind, detail: &str) -> Step {
    Step::Failed(Failure::new(kind, detail))
}

/// A failure at a bound: "`what` larger than N KiB" (one format for all).
fn too_large(kind: Kind, what: &str, limit: usize) -> Step {
    fail(kind, &format!("{what} larger than {} KiB", limit / 1024))
}

/// A decimal Content-Length: digits only (no sign, no spaces inside).
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// `chunk-size [ BWS ";" chunk-ext ]`: hex digits, then nothing or an
/// extension (which is ignored).
fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &line[digits..];
    let after_ws = rest.iter().position(|b| !matches!(b, b' ' | b'\t'));
    if let Some(i) = after_ws {
        if rest[i] != b';' {
            return None;
        }
    }
    Some(line[..digits].iter().fold(0u64, |n, d| {
        let v = (*d as char).to_digit(16).unwrap_or(0);
        n.saturating_mul(16).saturating_add(u64::from(v))
    }))
}

fn trim(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    &value[start..end.max(start)]
}

impl Decoder {
    /// `head_request`: the answer to a HEAD has no body whatever it says.
    pub fn new(head_request: bool) -> Decoder {
        Decoder::with_limits(head_request, Limits::DEFAULT)
    }

    pub fn with_limits(head_request: bool, limits: Limits) -> Decoder {
        Decoder {
            limits,
            state: State::Head,
            line: Vec::new(),
            total: 0,
            interim: 0,
            head_request,
            status: 0,
            content_type: None,
            body: Vec::new(),
            parses: 0,
        }
    }

    /// Bytes of memory the decoder holds now (buffer capacities).
    pub fn held(&self) -> usize {
        self.line.capacity()
            + self.body.capacity()
            + self.content_type.as_ref().map_or(0, String::capacity)
    }

    /// Times a head was parsed so far.
    pub fn parses(&self) -> u32 {
        self.parses
    }

    /// Bytes read so far.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Takes the next bytes from the server. After `Done` or `Failed` the
    /// exchange is over and further calls fail.
    pub fn feed(&mut self, input: &[u8]) -> Step {
        if self.state == State::Over {
            return fail(Kind::Internal, "response already decoded");
        }
        let room = self.limits.exchange - self.total;
        let over = input.len() > room;
        let input = &input[..input.len().min(room)];
        self.total += input.len();
        let step = self.run(input);
        let step = match step {
            Step::NeedMore if over => too_large(
                Kind::ExchangeTooLarge,
                "response (head, framing, body, trailers together)",
                self.limits.exchange,
            ),
            step => step,
        };
        if step != Step::NeedMore {
            self.state = State::Over;
            self.line = Vec::new();
        }
        step
    }

    /// The server closed the connection.
    pub fn finish(&mut self) -> Step {
        let step = match self.state {
            State::Over => fail(Kind::Internal, "response already decoded"),
            State::UntilClose => self.done(),
            State::Head if self.total == 0 => fail(Kind::Closed, "connection closed, no response"),
            // Bytes without a line feed since the last parse may still make
            // the head invalid: say so rather than "closed".
            State::Head if !self.line.is_empty() => match self.parse_head() {
                Err(step) => step,
                Ok(_) => fail(
                    Kind::Closed,
                    "connection closed before the response was complete",
                ),
            },
            _ => fail(
                Kind::Closed,
                "connection closed before the response was complete",
            ),
        };
        self.state = State::Over;
        step
    }

    fn done(&mut self) -> Step {
        self.state = State::Over;
        Step::Done(Response {
            status: self.status,
            content_type: self.content_type.take(),
            body: std::mem::take(&mut self.body),
            // Read from the head only by the clients that need them.
            retry_after: None,
            date: None,
        })
    }

    fn run(&mut self, input: &[u8]) -> Step {
        let mut i = 0;
        while i < input.len() {
            let rest = &input[i..];
            match self.state {
                State::Head if self.line.is_empty() && matches!(rest[0], b'\r' | b'\n') => {
                    // Empty lines before a status line (which httparse
                    // skips too) are not stored: they cannot grow the
                    // buffer that is parsed again and again below.
                    i += rest
                        .iter()
                        .take_while(|b| matches!(b, b'\r' | b'\n'))
                        .count();
                }
                State::Head => {
                    let take = rest.len().min(self.limits.head - self.line.len());
                    let had = self.line.len();
                    grow(&mut self.line, take, self.limits.head);
                    self.line.extend_from_slice(&rest[..take]);
                    // A head ends with an empty line: parse only when the new
                    // bytes (with the three before them) hold one, so a head
                    // sent a byte at a time is parsed once, not once per line.
                    // A full buffer is parsed once more so that an invalid
                    // head is named as such whatever the read sizes were.
                    let full = self.line.len() >= self.limits.head;
                    let tail = &self.line[had.saturating_sub(3)..];
                    let ends = tail.windows(2).any(|w| w == b"\n\n")
                        || tail.windows(3).any(|w| w == b"\n\r\n");
                    let end = if full || ends {
                        match self.parse_head() {
                            Ok(end) => end,
                            Err(step) => return step,
                        }
                    } else {
                        None
                    };
                    match end {
                        Some(len) => {
                            i += len.saturating_sub(had);
                            self.line.clear();
                            if self.status >= 200 {
                                // The final head: its buffer is not needed
                                // again (chunk-size lines are short).
                                self.line = Vec::new();
                            }
                            if let Some(step) = self.on_head_done() {
                                return step;
                            }
                        }
                        None if self.line.len() >= self.limits.head => {
                            return too_large(Kind::HeadTooLarge, "response head", self.limits.head)
                        }
                        None => i += take,
                    }
                }
                State::Length(left) | State::ChunkData(left) => {
                    let take = left.min(rest.len());
                    grow(&mut self.body, take, self.limits.body);
                    self.body.extend_from_slice(&rest[..take]);
                    i += take;
                    self.state = match (self.state, left - take) {
                        (State::Length(_), 0) => return self.done(),
                        (State::Length(_), n) => State::Length(n),
                        (_, 0) => State::ChunkEnd(false),
                        (_, n) => State::ChunkData(n),
                    };
                }
                State::UntilClose => {
                    if self.body.len() + rest.len() > self.limits.body {
                        return self.body_too_large();
                    }
                    grow(&mut self.body, rest.len(), self.limits.body);
                    self.body.extend_from_slice(rest);
                    i = input.len();
                }
                State::ChunkSize => {
                    let newline = rest.iter().position(|&b| b == b'\n');
                    let part = &rest[..newline.unwrap_or(rest.len())];
                    if self.line.len() + part.len() > self.limits.chunk_line {
                        return too_large(
                            Kind::LineTooLong,
                            "chunk-size line",
                            self.limits.chunk_line,
                        );
                    }
                    grow(&mut self.line, part.len(), self.limits.chunk_line);
                    self.line.extend_from_slice(part);
                    let Some(newline) = newline else {
                        return Step::NeedMore;
                    };
                    i += newline + 1;
                    if self.line.last() == Some(&b'\r') {
                        self.line.pop();
                    }
                    let size = parse_chunk_size(&self.line);
                    self.line.clear();
                    match size {
                        None => return fail(Kind::Framing, "invalid chunk size"),
                        Some(0) => self.state = State::Trailers(0),
                        Some(n) if n > (self.limits.body - self.body.len()) as u64 => {
                            return self.body_too_large()
                        }
                        Some(n) => self.state = State::ChunkData(n as usize),
                    }
                }
                State::ChunkEnd(cr) => {
                    i += 1;
                    self.state = match rest[0] {
                        b'\r' if !cr => State::ChunkEnd(true),
                        b'\n' => State::ChunkSize,
                        _ => return fail(Kind::Framing, "invalid chunk terminator"),
                    };
                }
                State::Trailers(mut len) => {
                    // Skipped byte by byte: nothing of a trailer is kept.
                    for &b in rest {
                        i += 1;
                        match b {
                            b'\n' if len == 0 => return self.done(),
                            b'\n' => len = 0,
                            b'\r' => {}
                            _ if len >= self.limits.head => {
                                return too_large(
                                    Kind::LineTooLong,
                                    "trailer line",
                                    self.limits.head,
                                )
                            }
                            _ => len += 1,
                        }
                    }
                    self.state = State::Trailers(len);
                }
                State::Over => return fail(Kind::Internal, "response already decoded"),
            }
        }
        Step::NeedMore
    }

    /// Parses the collected head: Some(length) when complete, and the
    /// status, content type and framing recorded.
    fn parse_head(&mut self) -> Result<Option<usize>, Step> {
        self.parses += 1;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(&self.line) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(fail(
                    Kind::HeadTooLarge,
                    &format!("more than {MAX_HEADERS} header fields"),
                ))
            }
            Err(e) => return Err(fail(Kind::Invalid, &format!("invalid HTTP response ({e})"))),
        };
        let status = response.code.unwrap_or(0);
        if status < 100 {
            return Err(fail(
                Kind::Invalid,
                &format!("invalid status code {status:03}"),
            ));
        }
        self.status = status;
        if (100..200).contains(&status) {
            return Ok(Some(len));
        }
        let (mut length, mut chunked, mut encodings) = (None, false, 0);
        for header in response.headers.iter() {
            let value = trim(header.value);
            if header.name.eq_ignore_ascii_case("content-type") {
                let value = &value[..value.len().min(CONTENT_TYPE_LIMIT)];
                self.content_type = Some(String::from_utf8_lossy(value).into_owned());
            } else if header.name.eq_ignore_ascii_case("content-length") {
                let n = parse_length(value)
                    .ok_or_else(|| fail(Kind::Framing, "invalid Content-Length"))?;
                if length.is_some_and(|m| m != n) {
                    return Err(fail(Kind::Framing, "conflicting Content-Length fields"));
                }
                length = Some(n);
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                if response.version == Some(0) {
                    // RFC 9112 6.1: faulty framing in an HTTP/1.0 message.
                    return Err(fail(
                        Kind::Framing,
                        "Transfer-Encoding in an HTTP/1.0 response",
                    ));
                }
                encodings += 1;
                chunked = value.eq_ignore_ascii_case(b"chunked");
                if !chunked || encodings > 1 {
                    return Err(fail(
                        Kind::Framing,
                        "unsupported Transfer-Encoding (only a single 'chunked')",
                    ));
                }
            }
        }
        self.state = if self.head_request || status == 204 || status == 304 {
            State::Over
        } else if chunked {
            // RFC 9112 6.3: chunked framing wins over a Content-Length.
            State::ChunkSize
        } else if let Some(n) = length {
            if n > self.limits.body as u64 {
                return Err(self.body_too_large());
            }
            if n == 0 {
                State::Over
            } else {
                // The size is known and within BODY_LIMIT: hold that, no more.
                self.body.reserve_exact(n as usize);
                State::Length(n as usize)
            }
        } else {
            State::UntilClose
        };
        Ok(Some(len))
    }

    /// After a complete head: skip an interim response, stop at a
    /// redirect, or finish a response without a body.
    fn on_head_done(&mut self) -> Option<Step> {
        match self.status {
            101 => Some(fail(Kind::Invalid, "unexpected 101 Switching Protocols")),
            100..=199 => {
                self.interim += 1;
                (self.interim > self.limits.interim).then(|| {
                    fail(
                        Kind::TooManyInterim,
                        &format!("more than {} interim (1xx) responses", self.limits.interim),
                    )
                })
            }
            // 304 Not Modified is no redirect: an answer without a body
            // (drainit sends no conditional requests), judged by its status.
            300..=303 | 305..=399 => Some(Step::Failed(Failure::new(
                Kind::Redirect,
                &format!("redirect ({}), not followed", self.status),
            ))),
            _ if self.state == State::Over => Some(self.done()),
            _ => None,
        }
    }
}

/// Makes room for `extra` more bytes, doubling as usual but never holding
/// capacity beyond `limit` (callers never need more than that).
fn grow(buf: &mut Vec<u8>, extra: usize, limit: usize) {
    let need = buf.len() + extra;
    if need > buf.capacity() {
        let target = need.max(buf.capacity() * 2).min(limit).max(need);
        buf.reserve_exact(target - buf.len());
    }
}

impl Decoder {
    fn body_too_large(&self) -> Step {
        too_large(Kind::TooLarge, "body", self.limits.body)
    }
}

/// Decodes a whole response given at once, then end of stream.
pub fn decode(bytes: &[u8], head_request: bool) -> Step {
    let mut decoder = Decoder::new(head_request);
    match decoder.feed(bytes) {
        Step::NeedMore => decoder.finish(),
        step => step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(bytes: &str) -> Response {
        match decode(bytes.as_bytes(), false) {
            Step::Done(r) => r,
            other => panic!("{bytes:?}: {other:?}"),
        }
    }

    fn kind(bytes: &[u8]) -> &'static str {
        match decode(bytes, false) {
            Step::Failed(f) => f.kind.as_str(),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
        }
    }

    #[test]
    fn framings() {
        let r = ok(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}junk",
        );
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        let r = ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2;x=y\r\nab\r\n1 ; e\r\nc\r\n0\r\nT: 1\r\n\r\n");
        assert_eq!(r.body, b"abc");
        assert_eq!(
            ok("HTTP/1.0 503 No\r\n\r\nuntil close").body,
            b"until close"
        );
        assert_eq!(
            ok("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n").body,
            b""
        );
        assert_eq!(ok("HTTP/1.1 200 OK\nContent-Length: 1\n\nx").body, b"x");
        let head = decode(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", true);
        assert!(matches!(head, Step::Done(r) if r.body.is_empty()));
    }

    #[test]
    fn interim_responses_are_skipped() {
        let r = ok("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"z"[..]));
        let many = "HTTP/1.1 100 Continue\r\n\r\n".repeat(INTERIM_LIMIT as usize + 1);
        assert_eq!(kind(many.as_bytes()), "too_many_interim");
        assert_eq!(kind(b"HTTP/1.1 101 Switching\r\n\r\n"), "invalid");
    }

    #[test]
    fn bad_framing_fails() {
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nabcde",
            "HTTP/1.1 200 OK\r\nContent-Length: 5 5\r\n\r\nabcde",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nabcde\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 5\r\nabcde\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nabcde\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n0\r\n\r\n",
        ] {
            assert_eq!(kind(bad.as_bytes()), "framing", "{bad:?}");
        }
        assert_eq!(kind(b"SSH-2.0-OpenSSH\r\n\r\n"), "invalid");
        assert_eq!(kind(b"HTTP/1.1 003 Odd\r\n\r\n"), "invalid");
        assert_eq!(kind(b""), "closed");
        assert_eq!(
            kind(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"),
            "closed"
        );
        assert_eq!(
            kind(b"HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n"),
            "redirect"
        );
    }

    #[test]
    fn bounds() {
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            BODY_LIMIT + 1
        );
        assert_eq!(kind(big.as_bytes()), "too_large");
        let huge =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffff\r\n";
        assert_eq!(kind(huge.as_bytes()), "too_large");
        let mut head = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        head.resize(HEAD_LIMIT + 10, b'a');
        assert_eq!(kind(&head), "head_too_large");
        let flood = format!(
            "HTTP/1.1 200 OK\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(kind(flood.as_bytes()), "head_too_large");
        let mut line = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1".to_vec();
        line.resize(line.len() + CHUNK_LINE_LIMIT + 1, b'0');
        assert_eq!(kind(&line), "line_too_long");
        let mut trailers = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
        while trailers.len() <= EXCHANGE_LIMIT {
            trailers.extend_from_slice(b"x-trailer: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert_eq!(kind(&trailers), "exchange_too_large");
        let mut ext = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        while ext.len() <= EXCHANGE_LIMIT {
            ext.extend_from_slice(format!("1;{}\r\nx\r\n", "e".repeat(3000)).as_bytes());
        }
        assert_eq!(kind(&ext), "exchange_too_large");
    }

    #[test]
    fn not_modified_is_an_answer_and_http_1_0_cannot_chunk() {
        let r = ok("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n");
        assert_eq!((r.status, r.body.len()), (304, 0));
        assert_eq!(
            kind(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            "framing"
        );
    }

    #[test]
    fn holds_no_more_than_its_bounds() {
        // A first piece of 3000 bytes: plain doubling would reach 96,000.
        let mut d = Decoder::new(false);
        let mut step = d.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        // The head buffer went with the final head.
        assert_eq!(d.held(), 0);
        let chunk = format!("bb8\r\n{}\r\n", "x".repeat(3000));
        while step == Step::NeedMore && d.total() < 60_000 {
            step = d.feed(chunk.as_bytes());
            assert!(d.held() <= BODY_LIMIT + CHUNK_LINE_LIMIT, "{}", d.held());
        }
        let mut d = Decoder::new(false);
        let long = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {}\r\n\r\n",
            "a".repeat(9000)
        );
        d.feed(long.as_bytes());
        assert!(d.held() <= CONTENT_TYPE_LIMIT, "{}", d.held());
        let mut d = Decoder::new(false);
        for _ in 0..HEAD_LIMIT / 10 {
            d.feed(b"X-A: bbbb\r");
            assert!(d.held() <= HEAD_LIMIT, "{}", d.held());
        }
    }

    #[test]
    fn a_head_fed_a_byte_at_a_time_is_parsed_once() {
        let mut bytes = "\r\n".repeat(4000).into_bytes();
        bytes.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        for i in 0..60 {
            bytes.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        let mut d = Decoder::new(false);
        let mut step = Step::NeedMore;
        for b in &bytes {
            step = d.feed(std::slice::from_ref(b));
        }
        assert!(
            matches!(step, Step::Done(ref r) if r.status == 200),
            "{step:?}"
        );
        assert_eq!(d.parses(), 1);
    }

    #[test]
    fn split_at_every_byte_gives_the_same_answer() {
        let whole = b"HTTP/1.1 103 Early\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n3;a=b\r\n{\"a\r\n2\r\n\":\r\n1\r\n1\r\n1\r\n}\r\n0\r\nT: x\r\n\r\n";
        let expected = decode(whole, false);
        assert!(matches!(&expected, Step::Done(r) if r.body == b"{\"a\":1}"));
        for cut in 0..=whole.len() {
            let mut d = Decoder::new(false);
            let mut step = d.feed(&whole[..cut]);
            if step == Step::NeedMore {
                step = d.feed(&whole[cut..]);
            }
            assert_eq!(step, expected, "cut at {cut}");
        }
        let mut d = Decoder::new(false);
        let mut step = Step::NeedMore;
        for b in whole.iter() {
            assert_eq!(step, Step::NeedMore);
            step = d.feed(std::slice::from_ref(b));
        }
        assert_eq!(step, expected);
    }
}
