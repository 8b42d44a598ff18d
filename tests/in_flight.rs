//! The app's in-flight count (`--drain-count-field`) is cleared whenever
//! the answer that should carry it cannot be read: a real drain endpoint
//! first reports 7, then fails each way (a proxy's 502 page, a cut JSON
//! body, an error status, the field missing, not a number, no answer in
//! time, connection refused); after each, `/status`, `/metrics` and at
//! last the exit report show no count, and a readable 7 brings it back.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// How the endpoint answers, by mode.
const COUNT: usize = 0;
const REFUSED: usize = 7;
const MODES: [(&str, &str); 8] = [
    (
        "503 Service Unavailable",
        "application/json|{\"readyForTermination\":false,\"activeExecutions\":7}",
    ),
    ("502 Bad Gateway", "text/html|<html>bad gateway 7</html>"),
    (
        "503 Service Unavailable",
        "application/json|{\"readyForTermination\":false,\"activeExecutions\":7",
    ),
    (
        "500 Internal Server Error",
        "application/json|{\"readyForTermination\":false,\"activeExecutions\":7}",
    ),
    (
        "503 Service Unavailable",
        "application/json|{\"readyForTermination\":false}",
    ),
    (
        "503 Service Unavailable",
        "application/json|{\"readyForTermination\":false,\"activeExecutions\":\"7\"}",
    ),
    ("hang", ""),
    ("refused", ""),
];

/// A drain endpoint answering by `mode`; in mode `REFUSED` it closes its
/// listening socket for good, so connections are refused.
fn endpoint(mode: Arc<AtomicUsize>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || loop {
        if mode.load(Ordering::SeqCst) == REFUSED {
            return;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let now = mode.load(Ordering::SeqCst);
                let mode = Arc::clone(&mode);
                std::thread::spawn(move || answer(stream, now, &mode));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    });
    port
}

/// Answers as `mode` says; a hanging answer holds the connection open,
/// silent, until the test has moved on to another mode (not a fixed time,
/// which drainit's request timeout might outlast on a loaded machine: the
/// close would then be seen instead of the timeout).
fn answer(mut stream: TcpStream, mode: usize, now: &AtomicUsize) {
    stream.set_nonblocking(false).unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (status, reply) = MODES[mode];
    if status == "hang" {
        while now.load(Ordering::SeqCst) == mode {
            std::thread::sleep(Duration::from_millis(10));
        }
        return;
    }
    let (content_type, body) = reply.split_once('|').unwrap();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut data = String::new();
    stream.read_to_string(&mut data).ok()?;
    Some(data.split_once("\r\n\r\n")?.1.to_string())
}

/// `/status`'s `in_flight` and `/metrics`' gauge, read together.
fn counts(port: u16) -> Option<(Value, Option<String>)> {
    let status: Value = serde_json::from_str(&get(port, "/status")?).ok()?;
    let metrics = get(port, "/metrics")?;
    let gauge = metrics
        .lines()
        .find(|l| l.starts_with("drainit_app_in_flight "))
        .map(|l| l["drainit_app_in_flight ".len()..].to_string());
    Some((status["in_flight"].clone(), gauge))
}

#[test]
fn the_count_is_cleared_by_every_answer_that_cannot_carry_it() {
    let scratch = Scratch::new("in-flight");
    let mode = Arc::new(AtomicUsize::new(COUNT));
    let drain = endpoint(Arc::clone(&mode));
    let serve = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let report = scratch.file("report.json");
    let mut d = drainit([
        "--serve",
        &format!("127.0.0.1:{serve}"),
        "--exit-report",
        path_str(&report),
        "--grace",
        "120s",
        "--drain-interval",
        "200ms",
        "--drain-count-field",
        "/activeExecutions",
        "--drain-url",
        &format!("http://127.0.0.1:{drain}/drain"),
    ])
    .with_args(sh(
        &scratch,
        "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
         while [ ! -e \"$D/quit\" ]; do sleep 0.05; done",
    ))
    .start();
    scratch.wait_file("ready");
    wait_for("the health listener", PATIENCE, || get(serve, "/healthz"));
    d.signal(libc::SIGTERM);
    for (failing, what) in MODES.iter().enumerate().skip(1) {
        mode.store(COUNT, Ordering::SeqCst);
        wait_for(&format!("a count of 7 before {what:?}"), PATIENCE, || {
            counts(serve).filter(|(status, gauge)| *status == 7 && gauge.as_deref() == Some("7"))
        });
        mode.store(failing, Ordering::SeqCst);
        wait_for(&format!("no count after {what:?}"), PATIENCE, || {
            counts(serve).filter(|(status, gauge)| status.is_null() && gauge.is_none())
        });
    }
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let report: Value = exit_report(&report);
    let in_flight = &report["in_flight"];
    assert_eq!(in_flight["last"], Value::Null, "{report}");
    assert_eq!(in_flight["at_stop"], 7, "{report}");
    assert_eq!(in_flight["max"], 7, "{report}");
    // Only a readable answer without a number is worth a warning.
    let stderr = d.stderr();
    let warned = stderr
        .matches("--drain-count-field /activeExecutions")
        .count();
    assert_eq!(warned, 1, "{stderr}");
}
