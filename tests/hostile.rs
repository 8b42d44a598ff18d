//! The hostile-server suite: the shipped (static musl, release) drainit as
//! PID 1 against raw-socket servers on loopback that send what no honest
//! endpoint would (endless trailers, headers, interim responses, chunk-size
//! lines), a resolver that never answers, and a request thread that panics.
//! Each flood must leave drainit's peak RSS under 2 MiB and the deadline
//! where `--grace` put it.

mod support;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// What a hostile server sends after reading the request: `prefix` once,
/// then `unit` over and over until drainit hangs up (or `unit` is empty:
/// then it closes).
#[derive(Clone, Copy)]
struct Script {
    prefix: &'static str,
    unit: &'static str,
}

struct Hostile {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    sent: Arc<AtomicU64>,
}

impl Hostile {
    fn start(bind: &str, script: Script) -> Hostile {
        let listener = TcpListener::bind(bind).expect("bind hostile server");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let (c, s) = (Arc::clone(&connections), Arc::clone(&sent));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    let _ = serve(stream, script, &s);
                });
            }
        });
        Hostile {
            addr,
            connections,
            sent,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn serve(mut stream: TcpStream, script: Script, sent: &AtomicU64) -> io::Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
    }
    stream.write_all(script.prefix.as_bytes())?;
    sent.fetch_add(script.prefix.len() as u64, Ordering::Relaxed);
    if script.unit.is_empty() {
        return Ok(());
    }
    let block = script.unit.repeat((16 * 1024 / script.unit.len()).max(1));
    loop {
        stream.write_all(block.as_bytes())?;
        sent.fetch_add(block.len() as u64, Ordering::Relaxed);
    }
}

/// The app: ignores TERM (so only the deadline ends it) and says when it
/// is up.
const STUBBORN: &str = "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not a number of ms: {v}"))
}

fn flags(scratch: &Scratch, url: &str, interval: &str, grace: &str) -> Vec<String> {
    [
        "--drain-url",
        url,
        "--drain-interval",
        interval,
        "--grace",
        grace,
        "--exit-report",
        path_str(&scratch.file("report.json")),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn vm_kib(pid: i32, field: &str) -> Option<u64> {
    status_field(pid, field)?
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .ok()
}

/// The binary under test: the shipped static build, or another one given
/// in `HOSTILE_BINARY` (to show that a test fails on an older drainit).
fn shipped() -> String {
    std::env::var("HOSTILE_BINARY").unwrap_or_else(|_| built(Build::Static))
}

/// Stops drainit, then follows its peak RSS (VmHWM) until it exits;
/// returns the exit code and the peak in KiB.
fn stop_and_watch(d: &mut Drainit) -> (i32, u64) {
    let pid = d.pid();
    d.signal(libc::SIGTERM);
    let mut peak = 0;
    loop {
        if let Some(hwm) = vm_kib(pid, "VmHWM") {
            peak = peak.max(hwm);
        }
        if d.try_code().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (d.wait_code(), peak)
}

const GRACE_MS: u64 = 3_000;
const CHUNKED: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

/// One flood: drainit polls every second during a 3 s grace; every poll
/// must fail at the bound (the app never drains), memory stays small and
/// the deadline holds to 50 ms. Returns the peak and idle RSS (KiB).
fn flood(name: &str, script: Script) -> (u64, u64) {
    let server = Hostile::start("127.0.0.1:0", script);
    let scratch = Scratch::new(name);
    let mut d = drainit(flags(&scratch, &server.url("/drain"), "1s", "3s"))
        .binary(&shipped())
        .with_args(sh(&scratch, STUBBORN))
        .start();
    scratch.wait_file("ready");
    let idle = vm_kib(d.pid(), "VmHWM").unwrap_or(0);
    let (code, peak) = stop_and_watch(&mut d);
    let r = exit_report(scratch.file("report.json"));
    eprintln!(
        "{name}: peak RSS {peak} KiB (idle {idle} KiB), {} polls, {} KiB offered, stop_to_exit {} ms",
        server.connections(),
        server.sent.load(Ordering::Relaxed) / 1024,
        r["stop_to_exit_ms"]
    );
    assert_eq!(code, 124, "{name}: {}", d.stderr());
    assert!(
        server.connections() >= 2,
        "{name}: polled {} times",
        server.connections()
    );
    assert!(peak > 0 && peak < 2048, "{name}: peak RSS {peak} KiB");
    let to_exit = ms(&r["stop_to_exit_ms"]);
    assert!(
        (GRACE_MS..GRACE_MS + 50).contains(&to_exit),
        "{name}: stop_to_exit_ms {to_exit}"
    );
    (peak, idle)
}

#[test]
fn trailer_flood_after_the_last_chunk() {
    flood(
        "trailer-flood",
        Script {
            prefix: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\n{\"readyForTermination\":true}\r\n0\r\n",
            unit: "x-trailer: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        },
    );
}

#[test]
fn one_byte_chunks_with_3_kib_extensions() {
    // `1;e=eee...` (3 KiB of extension), then one byte of data.
    let unit = format!("1;e={}\r\nx\r\n", "e".repeat(3 * 1024));
    flood(
        "extension-chunks",
        Script {
            prefix: CHUNKED,
            unit: Box::leak(unit.into_boxed_str()),
        },
    );
}

/// Extensions short enough for any line limit: only the bound on the whole
/// exchange stops these (64 K one-byte chunks would be 64 MiB of framing).
#[test]
fn one_byte_chunks_with_1_kib_extensions() {
    let unit = format!("1;e={}\r\nx\r\n", "e".repeat(1000));
    flood(
        "extension-chunks-1k",
        Script {
            prefix: CHUNKED,
            unit: Box::leak(unit.into_boxed_str()),
        },
    );
}

#[test]
fn header_flood() {
    flood(
        "header-flood",
        Script {
            prefix: "HTTP/1.1 200 OK\r\n",
            unit: "X-Flood: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        },
    );
}

#[test]
fn one_endless_header_line() {
    flood(
        "endless-header",
        Script {
            prefix: "HTTP/1.1 200 OK\r\nX-Long: ",
            unit: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        },
    );
}

#[test]
fn endless_100_continue() {
    flood(
        "endless-continue",
        Script {
            prefix: "",
            unit: "HTTP/1.1 100 Continue\r\n\r\n",
        },
    );
}

#[test]
fn endless_chunk_size_line() {
    flood(
        "endless-chunk-size",
        Script {
            prefix: CHUNKED,
            unit: "00000000000000000000000000000000",
        },
    );
}

/// A 64 KiB JSON body built to cost the most memory per byte once parsed.
/// Besides the 2 MiB budget, the peak may rise at most 256 KiB over idle:
/// parsing any one body has a ceiling (src/proto/json.rs), however it is built.
fn json_body_flood(name: &str, body: String) {
    assert!(body.len() <= 64 * 1024, "{name}: {} bytes", body.len());
    let prefix = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (peak, idle) = flood(
        name,
        Script {
            prefix: Box::leak(prefix.into_boxed_str()),
            unit: "",
        },
    );
    assert!(
        peak < idle + 256,
        "{name}: peak {peak} KiB, idle {idle} KiB"
    );
}

#[test]
fn json_array_of_32k_numbers() {
    let mut body = "[0".to_string();
    while body.len() + 3 <= 64 * 1024 {
        body.push_str(",0");
    }
    body.push(']');
    json_body_flood("json-array", body);
}

#[test]
fn json_object_with_thousands_of_keys() {
    // 8-byte entries `"kXYZ":0,` with distinct keys: about 7,000 of them.
    let mut body = "{\"readyForTermination\":false".to_string();
    let mut i = 0u32;
    while body.len() + 12 <= 64 * 1024 {
        body.push_str(&format!(",\"{}\":0", base62(i)));
        i += 1;
    }
    body.push('}');
    json_body_flood("json-keys", body);
}

#[test]
fn json_nested_64_k_deep() {
    let body = "[".repeat(32 * 1024) + &"]".repeat(32 * 1024);
    json_body_flood("json-deep", body);
}

fn base62(mut n: u32) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut s = String::new();
    loop {
        s.push(DIGITS[(n % 62) as usize] as char);
        n /= 62;
        if n == 0 {
            return s;
        }
    }
}

/// A stop where the endpoint answers ready: drainit must exit 0 with the
/// outcome `drained` and a time to readiness in its report. The app ignores
/// TERM and never exits by itself, so nothing but the endpoint's answer can
/// end this run before the 20 s grace.
fn drains_with(server: &Hostile, url: &str, launch: Launch) {
    let scratch = Scratch::new("drains");
    let mut d = launch
        .with_args(flags(&scratch, url, "100ms", "20s"))
        .with_args(sh(&scratch, STUBBORN))
        .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    let code = d.wait_code();
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(code, 0, "{r} {}", d.stderr());
    assert_eq!(r["outcome"], "drained", "{r}");
    assert!(server.connections() >= 1);
    assert!(
        r["stop_to_ready_ms"].is_u64(),
        "the endpoint said ready: {r}"
    );
    assert!(ms(&r["stop_to_exit_ms"]) < 10_000, "{r}");
}

/// False (with a line saying so) when this machine has no IPv6 loopback.
/// In CI the tests that need ::1 must run, so there it is a failure.
fn has_ipv6_loopback(test: &str) -> bool {
    if TcpListener::bind("[::1]:0").is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: no IPv6 loopback (::1) on this CI machine"
    );
    eprintln!("{test}: SKIPPED, this machine has no IPv6 loopback (::1)");
    false
}

/// A TCP socket bound to 127.0.0.1:`port` that never listens: a connection
/// there is refused, and no other process can take the port meanwhile.
fn refusing_port(port: u16) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let rc = libc::bind(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(
            rc,
            0,
            "bind 127.0.0.1:{port}: {}",
            io::Error::last_os_error()
        );
        owned
    }
}

const EARLY_HINTS_THEN_READY: Script = Script {
    prefix: "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 28\r\n\r\n{\"readyForTermination\":true}",
    unit: "",
};

#[test]
fn early_hints_then_ready_json_drains_with_0() {
    let server = Hostile::start("127.0.0.1:0", EARLY_HINTS_THEN_READY);
    drains_with(
        &server,
        &server.url("/drain"),
        drainit(Vec::<String>::new()).binary(&shipped()),
    );
}

#[test]
fn ipv6_literal_urls_work() {
    if !has_ipv6_loopback("ipv6_literal_urls_work") {
        return;
    }
    let server = Hostile::start("[::1]:0", EARLY_HINTS_THEN_READY);
    let url = format!("http://[::1]:{}/drain", server.addr.port());
    drains_with(
        &server,
        &url,
        drainit(Vec::<String>::new()).binary(&shipped()),
    );
}

#[test]
fn authorities_that_cannot_work_are_usage_errors() {
    for url in [
        "http://::1/drain",
        "http://h:1:2/drain",
        "http://:8080/drain",
        "http://h:0/drain",
        "http://h:65536/drain",
        "http://[nothost]/drain",
    ] {
        assert_usage_error(&["--drain-url", url], &[], "--drain-url");
        assert_usage_error(&[], &[("DRAINIT_STOP_URL", url)], "DRAINIT_STOP_URL");
    }
}

/// A nameserver that never answers: a UDP socket on port 53 of a loopback
/// address chosen at random (all of 127/8 is loopback), so that concurrent
/// runs of this suite, on this machine or in parallel worktrees, never
/// clash over a fixed address. It counts the queries it swallows.
struct DeadResolver {
    address: String,
    queries: Arc<AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl DeadResolver {
    fn start() -> DeadResolver {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
            ^ std::process::id().rotate_left(16);
        let mut last = None;
        for attempt in 0u32..50 {
            let n = seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9));
            let address = format!(
                "127.{}.{}.{}",
                1 + n % 250,
                (n >> 8) % 256,
                2 + (n >> 16) % 250
            );
            match UdpSocket::bind((address.as_str(), 53)) {
                Ok(sink) => return DeadResolver::serve(address, sink),
                Err(e) => last = Some(e),
            }
        }
        panic!("bind a loopback :53 (tests run as root): {last:?}");
    }

    fn serve(address: String, sink: UdpSocket) -> DeadResolver {
        let queries = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (q, s) = (Arc::clone(&queries), Arc::clone(&stop));
        sink.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s.load(Ordering::SeqCst) {
                // Swallowed: no answer, and no ICMP error cuts the wait short.
                if sink.recv_from(&mut buf).is_ok() {
                    q.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        DeadResolver {
            address,
            queries,
            stop,
        }
    }

    fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

impl Drop for DeadResolver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// drainit as PID 1 in a mount namespace where /etc/resolv.conf names a
/// nameserver that never answers and /etc/hosts is empty: every lookup
/// through getaddrinfo hangs (musl retries after 15 s, gives up after 30).
fn with_dead_resolver(scratch: &Scratch) -> (Launch, DeadResolver) {
    let resolver = DeadResolver::start();
    std::fs::write(
        scratch.file("resolv.conf"),
        format!(
            "nameserver {}\noptions timeout:30 attempts:2\n",
            resolver.address
        ),
    )
    .unwrap();
    std::fs::write(scratch.file("hosts"), "").unwrap();
    let script = format!(
        "mount --bind '{0}/resolv.conf' /etc/resolv.conf && mount --bind '{0}/hosts' /etc/hosts && exec \"$0\" \"$@\"",
        scratch.path.display()
    );
    let launch = drainit(["-c".to_string(), script, shipped()]).binary("/bin/sh");
    (launch, resolver)
}

#[test]
fn localhost_never_waits_on_a_resolver_and_tries_ipv6_too() {
    if !has_ipv6_loopback("localhost_never_waits_on_a_resolver") {
        return;
    }
    let scratch = Scratch::new("localhost");
    let (launch, resolver) = with_dead_resolver(&scratch);
    // Served on ::1 only: 127.0.0.1 refuses (its port held, not listening),
    // ::1 answers.
    let server = Hostile::start("[::1]:0", EARLY_HINTS_THEN_READY);
    let _held = refusing_port(server.addr.port());
    let url = format!("http://localhost:{}/drain", server.addr.port());
    drains_with(&server, &url, launch);
    assert_eq!(resolver.queries(), 0, "localhost went to the resolver");
}

#[test]
fn a_hung_resolver_fails_polls_at_their_timeout_and_never_holds_the_next_back() {
    let scratch = Scratch::new("dead-dns");
    let (launch, resolver) = with_dead_resolver(&scratch);
    let mut d = launch
        .with_args(flags(
            &scratch,
            "http://drain.hung.test:8080/drain",
            "200ms",
            "3s",
        ))
        .with_args(sh(&scratch, STUBBORN))
        .start();
    scratch.wait_file("ready");
    let pid = d.pid();
    d.signal(libc::SIGTERM);
    // drainit's threads while it polls: the loop, one request at a time,
    // and at most MAX_LOOKUPS (4) lookups that may hang.
    let mut threads = 0;
    while d.try_code().is_none() {
        if let Some(n) = status_field(pid, "Threads").and_then(|t| t.trim().parse().ok()) {
            threads = u64::max(threads, n);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    let to_exit = ms(&r["stop_to_exit_ms"]);
    assert!(
        (GRACE_MS..GRACE_MS + 50).contains(&to_exit),
        "stop_to_exit_ms {to_exit}"
    );
    // A poll every 200 ms for 3 s: the first waits out its timeout, the
    // rest find the lookup still running and fail at once.
    let polls = r["drain_polls"].as_u64().unwrap_or(0);
    assert!(polls >= 8, "only {polls} polls completed: {r}");
    // The resolver really was asked, and only by the one lookup that hung
    // through the whole run (an A and an AAAA query; musl's first retry
    // comes after 15 s): had lookups failed at once, each of the polls
    // would have asked again.
    let queries = resolver.queries();
    eprintln!("hung resolver: {polls} polls, {queries} DNS queries, at most {threads} threads");
    assert!(
        (1..=4).contains(&queries),
        "{queries} DNS queries for {polls} polls"
    );
    assert!((2..=6).contains(&threads), "{threads} threads");
}

#[test]
fn a_panicking_request_thread_is_contained() {
    let server = Hostile::start("127.0.0.1:0", EARLY_HINTS_THEN_READY);
    let scratch = Scratch::new("worker-panic");
    let mut d = drainit(flags(&scratch, &server.url("/drain"), "200ms", "2s"))
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "http_worker")
        .with_args(sh(&scratch, STUBBORN))
        .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    // Not wait_code: it rejects any "panicked" on stderr, and drainit's
    // own warning names the contained panic.
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(124), "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    let to_exit = ms(&r["stop_to_exit_ms"]);
    assert!(
        (2_000..2_050).contains(&to_exit),
        "stop_to_exit_ms {to_exit}"
    );
    // Every poll panicked before sending, and every one came back as a
    // failed poll, so polling went on.
    assert_eq!(server.connections(), 0);
    let polls = r["drain_polls"].as_u64().unwrap_or(0);
    assert!(polls >= 5, "only {polls} polls completed: {r}");
    let stderr = d.stderr();
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("internal error"))
        .count();
    assert_eq!(warnings, 1, "logged once: {stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
}
