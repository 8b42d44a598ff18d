//! A small app to watch a drain: it serves its drain state on
//! `http://127.0.0.1:$DEMO_PORT/drain` (default 8080), and on SIGTERM stops
//! taking new jobs and finishes the in-flight ones, one per second, before it
//! reports `readyForTermination: true`. It then keeps running, so drainit
//! ends it after `--ready-grace` (outcome `drained`, exit 0). Run it under
//! drainit as the README shows.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn main() {
    let jobs: u32 = std::env::var("DEMO_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let port = std::env::var("DEMO_PORT").unwrap_or_else(|_| "8080".into());
    let active = Arc::new(AtomicU32::new(jobs));
    let stopping = Arc::new(AtomicBool::new(false));

    // Block SIGTERM in every thread and take it synchronously in one.
    // SAFETY: plain libc signal-mask calls before any thread exists.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let (a, s) = (active.clone(), stopping.clone());
    std::thread::spawn(move || {
        let mut signo = 0;
        // SAFETY: waits on a valid set for a blocked signal.
        unsafe { libc::sigwait(&set, &mut signo) };
        say(format!(
            "[demo] SIGTERM: no new jobs; finishing {} in flight",
            a.load(Ordering::SeqCst)
        ));
        s.store(true, Ordering::SeqCst);
        while a.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_secs(1));
            let left = a.fetch_sub(1, Ordering::SeqCst) - 1;
            say(format!("[demo] finished a job, {left} left"));
        }
        say("[demo] all work done: ready for termination".into());
    });

    let listener = match TcpListener::bind(format!("127.0.0.1:{port}")) {
        Ok(listener) => listener,
        Err(e) => {
            say(format!(
                "[demo] cannot listen on 127.0.0.1:{port}: {e} (set DEMO_PORT to another port)"
            ));
            std::process::exit(1);
        }
    };
    say(format!(
        "[demo] serving http://127.0.0.1:{port}/drain with {jobs} jobs in flight"
    ));
    for stream in listener.incoming().flatten() {
        let mut stream = stream;
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf);
        let n = active.load(Ordering::SeqCst);
        let ready = stopping.load(Ordering::SeqCst) && n == 0;
        let body = format!("{{\"readyForTermination\":{ready},\"activeExecutions\":{n}}}");
        let status = if ready {
            "200 OK"
        } else {
            "503 Service Unavailable"
        };
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

/// One line to stderr in one write: unbuffered, `eprintln!` writes each
/// piece of its format on its own, and drainit's lines land between them.
fn say(line: String) {
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
