//! Bounded HTTP/1.1 for the drain, stop and ECS endpoints: plain `http://`
//! only, one deadline for the whole exchange (name lookup, connect, send,
//! response), no redirects followed. This file is the thin I/O shell: URLs,
//! name lookup under the deadline, the socket loop, and the worker entry
//! point that contains panics. What the server sends is judged by the pure
//! `decoder` (httparse for the head), which bounds every byte.
//!
//! A small client of our own rather than ureq 3: these endpoints are local
//! and simple, ureq adds about 256 KiB to the static binary (over its 1 MiB
//! budget), and it reads proxy variables from the environment by default,
//! which would send requests for the ECS agent's link-local address to a
//! proxy.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::proto::exchange::Request;
use crate::proto::http::*;
use crate::proto::http_decoder::{Decoder, Step};

/// Lookups of the app's names that may be outstanding at once (a hung
/// resolver keeps its thread; getaddrinfo cannot be cancelled).
pub const MAX_LOOKUPS: usize = 4;
/// Lookups of the platform's names that may be outstanding at once, beside
/// the app's.
pub const MAX_PLATFORM_LOOKUPS: usize = 2;

/// Whose name a lookup is for. Each has slots of its own, so names of the
/// app's endpoints that hang at the resolver (a drain URL's, at every poll)
/// never starve the platform's own requests, nor the other way round; all
/// lookup threads together stay within `MAX_LOOKUPS +
/// MAX_PLATFORM_LOOKUPS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookups {
    /// The app's endpoints: drain sources, `--stop-url` hooks,
    /// `--ready-url`, probes.
    App,
    /// The platform's endpoints: the Kubernetes API server (the ECS
    /// agent and metadata services are reached by address, with no lookup).
    Platform,
}

impl Lookups {
    fn slots(self) -> &'static Slots {
        static APP: Slots = Slots::new(MAX_LOOKUPS);
        static PLATFORM: Slots = Slots::new(MAX_PLATFORM_LOOKUPS);
        match self {
            Lookups::App => &APP,
            Lookups::Platform => &PLATFORM,
        }
    }
}

fn io_failure(e: &io::Error) -> Failure {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Failure::new(Kind::Refused, "connection refused"),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            Failure::new(Kind::Timeout, "timed out")
        }
        io::ErrorKind::ConnectionReset => Failure::new(Kind::Reset, "connection reset"),
        _ => Failure::new(Kind::Io, &format!("I/O error: {e}")),
    }
}

fn left(deadline: Instant) -> Result<Duration, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Failure::new(Kind::Timeout, "timed out"));
    }
    Ok(left)
}

/// Names with a lookup running, at most `bound` (one kind of `Lookups`).
struct Slots {
    names: Mutex<Vec<String>>,
    bound: usize,
}

impl Slots {
    const fn new(bound: usize) -> Slots {
        Slots {
            names: Mutex::new(Vec::new()),
            bound,
        }
    }

    /// A place for `host`'s lookup. One lookup per name at a time: a
    /// request that finds one running, or every place taken, fails at once
    /// (the next poll tries again).
    fn take(&'static self, host: &str) -> Result<Lookup, Failure> {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if names.iter().any(|n| n == host) {
            return Err(Failure::new(
                Kind::ResolverBusy,
                &format!("the lookup of {host} from an earlier request is still running"),
            ));
        }
        if names.len() >= self.bound {
            return Err(Failure::new(
                Kind::ResolverBusy,
                &format!("{} name lookups are still running", self.bound),
            ));
        }
        names.push(host.to_string());
        Ok(Lookup {
            slots: self,
            name: host.to_string(),
        })
    }
}

/// A name's place in its `Slots`, given up when its lookup ends.
struct Lookup {
    slots: &'static Slots,
    name: String,
}

impl Drop for Lookup {
    fn drop(&mut self) {
        let mut names = self
            .slots
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        names.retain(|n| *n != self.name);
    }
}

/// The addresses to try, in order. IP literals and `localhost` never wait
/// on a resolver (`localhost` is often served on ::1 only, so both).
/// Checks, once at start, that each URL's host name resolves; a name that
/// does not is one warning each (it may appear later: polls go on). Runs
/// on a request thread, so the child's start never waits for a resolver;
/// IP addresses and `localhost` need no lookup at all.
pub fn check_hosts(urls: Vec<String>) {
    let mut seen = Vec::new();
    let names = urls
        .iter()
        .filter_map(|u| parse_url(u).ok())
        .filter(|u| u.host.parse::<IpAddr>().is_err() && !u.host.eq_ignore_ascii_case("localhost"))
        .filter(|u| crate::util::text::first_time(&mut seen, &u.host));
    for crate::proto::http::Url { host, port, .. } in names {
        let deadline = Instant::now() + HOST_CHECK_TIMEOUT;
        if let Err(failure) = addresses(&host, port, deadline, Lookups::App) {
            log::warn!(
                "host {} of a drain or stop URL does not resolve now ({failure}); requests to it fail until it does",
                crate::util::text::escape(&host, 100)
            );
        }
    }
}

/// How long the start-up check waits for one name.
const HOST_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

fn addresses(
    host: &str,
    port: u16,
    deadline: Instant,
    lookups: Lookups,
) -> Result<Vec<SocketAddr>, Failure> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    if host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.") {
        return Ok(vec![
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port),
        ]);
    }
    lookup(host, port, deadline, lookups)
}

/// getaddrinfo on a detached thread, waited for until the deadline: it
/// cannot be cancelled, so a hung resolver keeps its thread, but never the
/// request. The thread is started by the request's own thread, so it sees
/// the files that one sees (`/etc/hosts`, `resolv.conf`: a thread of its
/// own mount namespace, as the tests make). One lookup per name at a time,
/// within the slots of `lookups` (`Slots::take`).
fn lookup(
    host: &str,
    port: u16,
    deadline: Instant,
    lookups: Lookups,
) -> Result<Vec<SocketAddr>, Failure> {
    let pending = lookups.slots().take(host)?;
    let slot = Arc::new(Slot::default());
    let reply = Reply(Arc::clone(&slot));
    let name = host.to_string();
    let spawned = crate::io::threads::spawn_thread(
        "drainit-dns",
        256 * 1024,
        Box::new(move || {
            let found = (name.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.collect::<Vec<_>>());
            // The name is free again before anyone hears the answer: a
            // request right after this one must not find it "still running".
            drop(pending);
            reply.send(found);
        }),
    );
    if let Err(e) = spawned {
        return Err(Failure::new(
            Kind::Internal,
            &format!("cannot start a lookup thread: {e}"),
        ));
    }
    let answer = slot.answer.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut answer, _) = slot
        .ready
        .wait_timeout_while(answer, left(deadline)?, |a| matches!(a, Answer::Pending))
        .unwrap_or_else(PoisonError::into_inner);
    match std::mem::replace(&mut *answer, Answer::Lost) {
        Answer::Found(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
        Answer::Found(Ok(_)) => Err(Failure::new(
            Kind::Resolve,
            &format!("no address for {host}"),
        )),
        Answer::Found(Err(e)) => Err(Failure::new(
            Kind::Resolve,
            &format!("cannot resolve {host}: {e}"),
        )),
        Answer::Pending => Err(Failure::new(
            Kind::Timeout,
            &format!("timed out resolving {host}"),
        )),
        Answer::Lost => Err(Failure::new(Kind::Internal, "the lookup thread failed")),
    }
}

/// Where a lookup thread leaves its one answer for the request waiting on
/// it. Not a std channel: this is the binary's only one, and a slot costs
/// a fraction of its code.
#[derive(Default)]
struct Slot {
    answer: Mutex<Answer>,
    ready: Condvar,
}

#[derive(Default)]
enum Answer {
    #[default]
    Pending,
    Found(io::Result<Vec<SocketAddr>>),
    /// The lookup thread ended without an answer (it panicked).
    Lost,
}

/// The lookup thread's end of a slot: its answer, or, dropped without one
/// (a panic unwinding), `Lost`; either way the waiter wakes.
struct Reply(Arc<Slot>);

impl Reply {
    fn send(self, found: io::Result<Vec<SocketAddr>>) {
        self.fill(Answer::Found(found));
    }

    fn fill(&self, answer: Answer) {
        let mut slot = self.0.answer.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*slot, Answer::Pending) {
            *slot = answer;
            drop(slot);
            self.0.ready.notify_one();
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        self.fill(Answer::Lost);
    }
}

/// Least time one address gets to connect, when the deadline allows.
const CONNECT_FLOOR: Duration = Duration::from_millis(100);

/// How long the next of `remaining` addresses may take to connect: an
/// equal share of the time left (at least `CONNECT_FLOOR`), so a first
/// address that swallows its SYN cannot use up the whole deadline.
fn connect_share(left: Duration, remaining: usize) -> Duration {
    let millis = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
    let share = Duration::from_millis(millis / remaining.max(1) as u64);
    share.max(CONNECT_FLOOR).min(left)
}

/// Tries every address in order within the deadline.
fn connect(addrs: &[SocketAddr], deadline: Instant) -> Result<TcpStream, Failure> {
    let mut last = Failure::new(Kind::Resolve, "no address");
    for (i, addr) in addrs.iter().enumerate() {
        let share = connect_share(left(deadline)?, addrs.len() - i);
        match TcpStream::connect_timeout(addr, share) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = io_failure(&e),
        }
    }
    Err(last)
}

fn request_bytes(target: &Target, url: &Url, headers: &str, body: Option<&[u8]>) -> Vec<u8> {
    let mut request = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: drainit/{}\r\nAccept: application/json, */*\r\n{headers}Connection: close\r\n",
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
    } else if target.method.sends_body() {
        request.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    } else {
        request.extend_from_slice(b"\r\n");
    }
    request
}

/// Sends one request; `timeout` bounds the whole exchange. The socket loop
/// only feeds the decoder; whatever the server sends, at most
/// `decoder::EXCHANGE_LIMIT` bytes are read.
pub fn send(target: &Target, body: Option<&[u8]>, timeout: Duration) -> Result<Response, Failure> {
    exchange(target, "", body, timeout, target.method == Method::Head)
}

/// One request whose answer's status is all that matters (a health
/// check): the body is never read, whatever its size or pace.
pub fn send_for_status(target: &Target, timeout: Duration) -> Result<u16, Failure> {
    exchange(target, "", None, timeout, true).map(|r| r.status)
}

/// A connection to `host:port` by the deadline: an IP literal or
/// `localhost` at once, a name looked up first as every request's is
/// (`lookup`, in the slots of `lookups`), each address tried in turn (the
/// Kubernetes client's connect, `io::tls`, with the platform's slots).
pub fn connect_host(
    host: &str,
    port: u16,
    deadline: Instant,
    lookups: Lookups,
) -> Result<TcpStream, Failure> {
    let addrs = addresses(host, port, deadline, lookups)?;
    connect(&addrs, deadline)
}

/// A TCP connect to `host:port` within `timeout` (`--probe tcp://`).
pub fn connect_only(host: &str, port: u16, timeout: Duration) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
    let addrs = addresses(host, port, deadline, Lookups::App)?;
    connect(&addrs, deadline).map(drop)
}

/// Sends one request; `head_only`: the answer ends with its head (a HEAD
/// request, or a GET whose body is of no interest).
fn exchange(
    target: &Target,
    headers: &str,
    body: Option<&[u8]>,
    timeout: Duration,
    head_only: bool,
) -> Result<Response, Failure> {
    let deadline = Instant::now() + timeout.max(Duration::from_millis(1));
    let url = parse_url(&target.url).map_err(|e| Failure::new(Kind::Internal, &e))?;
    let addrs = addresses(&url.host, url.port, deadline, Lookups::App)?;
    let mut stream = connect(&addrs, deadline)?;
    let _ = stream.set_nodelay(true);
    let io = |e: io::Error| io_failure(&e);
    stream
        .set_write_timeout(Some(left(deadline)?))
        .map_err(io)?;
    stream
        .write_all(&request_bytes(target, &url, headers, body))
        .map_err(io)?;
    let mut decoder = Decoder::new(head_only);
    let mut chunk = [0u8; 8192];
    loop {
        stream.set_read_timeout(Some(left(deadline)?)).map_err(io)?;
        let step = match stream.read(&mut chunk) {
            Ok(0) => decoder.finish(),
            Ok(n) => decoder.feed(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_failure(&e)),
        };
        match step {
            Step::NeedMore => continue,
            Step::Done(response) => return Ok(response),
            // The stream is dropped here: the connection goes with it.
            Step::Failed(failure) => return Err(failure),
        }
    }
}

thread_local! {
    /// True while this thread runs a contained request (`contain`): only
    /// then does the panic hook keep quiet.
    static IN_REQUEST: Cell<bool> = const { Cell::new(false) };
    /// Where this thread's contained request panicked, for the failure.
    static PANIC_AT: Cell<Option<String>> = const { Cell::new(None) };
}

/// Installs the panic hook; `main` calls it once, before any thread
/// starts. A panic inside a contained request is recorded (its location)
/// and reported once as an `internal` failure of that request, rather than
/// by the default hook's line on stderr at every poll. Any other panic goes
/// to the hook that was there before.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // try_with: a panic while this thread's locals are being torn
            // down must still reach a hook, not panic again.
            if IN_REQUEST.try_with(Cell::get).unwrap_or(false) {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                let _ = PANIC_AT.try_with(|cell| cell.set(at));
            } else if crate::io::logwriter::owns_stderr() {
                // Once the child runs, stderr is the log's: the message goes
                // through the writer like any line, never waiting (or, when
                // the log lets nothing through, nowhere).
                let thread = std::thread::current();
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                log::error!(
                    "thread '{}' panicked at {at}: {}",
                    thread.name().unwrap_or("?"),
                    panic_text(info.payload())
                );
            } else {
                previous(info);
            }
        }));
    });
}

/// The name request threads carry.
/// A panic's message, when it is text.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs `request` with any panic in it contained as an `internal` failure
/// (the panic hook keeps quiet and records where): the one containment of
/// every request drainit makes, plain, Kubernetes or `--ready-url`.
pub fn contain<T>(request: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    let _ = IN_REQUEST.try_with(|flag| flag.set(true));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(request));
    let _ = IN_REQUEST.try_with(|flag| flag.set(false));
    caught.unwrap_or_else(|_| {
        let at = PANIC_AT
            .try_with(Cell::take)
            .ok()
            .flatten()
            .unwrap_or_default();
        Err(Failure::new(
            Kind::Internal,
            &format!(
                "internal error in the request thread at {at} (a drainit bug; the request counts as failed)"
            ),
        ))
    })
}

/// One request, with any panic in it contained as an `internal` failure,
/// so PID 1 and the stop timeline go on (the release profile unwinds for
/// this).
pub fn run(request: &Request, url: &str, timeout: Duration) -> Result<Response, Failure> {
    contain(|| {
        crate::util::fault::point("http_worker");
        let target = Target {
            method: request.method.clone(),
            url: request.path_with_query(url),
        };
        let head_only = target.method == Method::Head;
        let headers = request.header_lines();
        exchange(
            &target,
            &headers,
            request.body.as_deref(),
            timeout,
            head_only,
        )
    })
}

/// Hands `work`'s result to `report` exactly once. Should the thread unwind
/// before that (a panic outside the contained request), a guard reports an
/// `internal` failure as it drops, so whoever waits for this request (the
/// in-flight flag of a poll) always hears back.
pub fn report_once<T, R: FnOnce(Result<T, Failure>)>(
    report: R,
    work: impl FnOnce() -> Result<T, Failure>,
) {
    struct Guard<T, R: FnOnce(Result<T, Failure>)>(Option<R>, std::marker::PhantomData<T>);
    impl<T, R: FnOnce(Result<T, Failure>)> Drop for Guard<T, R> {
        fn drop(&mut self) {
            if let Some(report) = self.0.take() {
                report(Err(Failure::new(
                    Kind::Internal,
                    "the request thread ended without a result (a drainit bug)",
                )));
            }
        }
    }
    let mut guard = Guard(Some(report), std::marker::PhantomData);
    let result = work();
    if let Some(report) = guard.0.take() {
        report(result);
    }
}

/// What a request thread runs: `request` to the plain `url`
/// (`Endpoint::HttpUrl`), its result handed to `report` once, whatever
/// happens.
pub fn run_and_report(
    request: &Request,
    url: &str,
    timeout: Duration,
    report: impl FnOnce(Result<Response, Failure>),
) {
    report_once(report, || run(request, url, timeout));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

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
            "http://::1/drain",
            "http://h:1:2/drain",
            "http://:80/",
            "http://[]/",
            "http://[nothost]/",
            "http://[::1]:0/",
            "http://[::1]:65536/",
            "http://h:/",
            "http://h]/",
        ] {
            assert!(validate_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn failure_kinds_are_stable() {
        let refused = io_failure(&io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(refused.kind, Kind::Refused);
        let blocked = io_failure(&io::Error::from(io::ErrorKind::WouldBlock));
        assert_eq!(blocked.kind, Kind::Timeout);
        let f = Failure::new(Kind::Invalid, "server said \"x\ny\"");
        assert!(!f.to_string().contains('\n'), "{f}");
    }

    #[test]
    fn literals_and_localhost_never_wait_on_a_resolver() {
        let past = Instant::now();
        let app = Lookups::App;
        assert_eq!(
            addresses("::1", 8, past, app).unwrap(),
            vec![SocketAddr::from(([0u16, 0, 0, 0, 0, 0, 0, 1], 8))]
        );
        assert_eq!(addresses("10.0.0.1", 8, past, app).unwrap().len(), 1);
        let local = addresses("LocalHost", 8, past, Lookups::Platform).unwrap();
        assert_eq!(local.len(), 2);
        assert!(local[0].is_ipv4() && local[1].is_ipv6());
    }

    #[test]
    fn addresses_share_the_connect_time() {
        let s = Duration::from_secs;
        assert_eq!(connect_share(s(3), 3), s(1));
        assert_eq!(connect_share(s(3), 1), s(3));
        assert_eq!(connect_share(s(1), 100), CONNECT_FLOOR);
        let little = Duration::from_millis(30);
        assert_eq!(connect_share(little, 2), little);
    }

    #[test]
    fn a_contained_panic_is_an_internal_failure() {
        install_panic_hook();
        let result: Result<Response, Failure> = contain(|| panic!("on purpose"));
        let failure = result.unwrap_err();
        assert_eq!(failure.kind, Kind::Internal);
        assert!(failure.detail.contains("src/io/http.rs:"), "{failure}");
        assert!(!IN_REQUEST.with(Cell::get), "the flag is cleared");
        // Without a panic, the request's own answer comes back.
        let refused: Result<Response, Failure> =
            contain(|| Err(Failure::new(Kind::Refused, "refused")));
        assert_eq!(refused.unwrap_err().kind, Kind::Refused);
    }

    #[test]
    fn a_thread_that_unwinds_still_reports() {
        install_panic_hook();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            report_once(
                move |result: Result<Response, Failure>| tx.send(result).unwrap(),
                || panic!("outside the contained request"),
            )
        });
        assert!(thread.join().is_err(), "the panic was not contained");
        let reported = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(reported.unwrap_err().kind, Kind::Internal);
        assert!(rx.try_recv().is_err(), "reported once");
    }

    #[test]
    fn a_lookup_thread_that_panics_still_wakes_the_waiter() {
        let slot = Arc::new(Slot::default());
        let reply = Reply(Arc::clone(&slot));
        let thread = std::thread::spawn(move || {
            let _reply = reply;
            panic!("on purpose");
        });
        assert!(thread.join().is_err());
        let answer = slot.answer.lock().unwrap();
        assert!(matches!(*answer, Answer::Lost));
    }

    #[test]
    fn a_finished_lookup_frees_its_name_before_answering() {
        // localhost through the resolver (/etc/hosts), not the shortcut.
        for lookups in [Lookups::App, Lookups::Platform] {
            for _ in 0..200 {
                let deadline = Instant::now() + Duration::from_secs(10);
                match lookup("localhost", 80, deadline, lookups) {
                    Ok(_) => {}
                    Err(f) => assert_ne!(f.kind, Kind::ResolverBusy, "{f}"),
                }
            }
        }
    }

    #[test]
    fn each_kind_of_lookup_has_slots_of_its_own() {
        static SLOTS: Slots = Slots::new(2);
        let a = SLOTS.take("a.test").unwrap();
        let again = SLOTS.take("a.test").err().unwrap();
        assert_eq!(again.kind, Kind::ResolverBusy);
        assert!(again.detail.contains("earlier request"), "{again}");
        let b = SLOTS.take("b.test").unwrap();
        let full = SLOTS.take("c.test").err().unwrap();
        assert!(full.detail.contains("2 name lookups"), "{full}");
        drop(a);
        let _c = SLOTS.take("c.test").unwrap();
        drop(b);
        // The app's and the platform's are not the same places.
        let (app, platform) = (Lookups::App.slots(), Lookups::Platform.slots());
        assert!(!std::ptr::eq(app, platform));
        assert_eq!(
            (app.bound, platform.bound),
            (MAX_LOOKUPS, MAX_PLATFORM_LOOKUPS)
        );
    }
}
