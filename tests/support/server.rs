//! A real HTTP server on 127.0.0.1 playing an app's drain endpoint or the
//! ECS agent: each request is recorded (method, path, body, arrival time)
//! and answered by a test-supplied function, which may also misbehave (hang
//! after accept, dribble, close mid-body, send an endless body).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub body: String,
    pub at: Instant,
}

/// How to answer.
pub enum Reply {
    /// status, content type, body
    Send(u16, &'static str, String),
    /// Accept, read the request, never answer (until the test ends).
    Hang,
    /// Headers promise a body, then one byte per `Duration`, forever.
    Dribble(Duration),
    /// Close the connection halfway through the promised body.
    CloseMidBody,
    /// A chunked body that never ends.
    Endless,
    /// Bytes that are not HTTP.
    Garbage,
    /// These exact bytes, then close.
    Raw(&'static str),
    /// A redirect to this location.
    Redirect(u16, String),
}

pub fn json(status: u16, body: &str) -> Reply {
    Reply::Send(status, "application/json", body.to_string())
}

type Handler = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

pub struct Server {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    /// Starts a server whose handler gets each request and its index.
    pub fn start(handler: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind test server");
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let seen2 = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let handler = Arc::clone(&handler);
                let seen = Arc::clone(&seen2);
                std::thread::spawn(move || serve(stream, &*handler, &seen));
            }
        });
        Server { addr, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// A URL on which nothing listens: connections are refused.
pub fn refusing_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/drain")
}

fn read_request(stream: &mut TcpStream) -> Option<(String, String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let header_end = loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(pos) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&data[..header_end]).to_string();
    let mut lines = head.lines();
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while data.len() < header_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[header_end..]).to_string();
    Some((method, path, body))
}

fn serve(mut stream: TcpStream, handler: &Handler, seen: &Mutex<Vec<Seen>>) {
    let Some((method, path, body)) = read_request(&mut stream) else {
        return;
    };
    let request = Seen {
        method,
        path,
        body,
        at: Instant::now(),
    };
    let index = {
        let mut all = seen.lock().unwrap();
        all.push(request.clone());
        all.len() - 1
    };
    match handler(&request, index) {
        Reply::Send(status, content_type, body) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        Reply::Hang => {
            std::thread::sleep(Duration::from_secs(600));
        }
        Reply::Dribble(every) => {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
            );
            loop {
                if stream.write_all(b" ").is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
        Reply::CloseMidBody => {
            let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"readyForTermination\":tr");
        }
        Reply::Endless => {
            let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n");
            let chunk = format!("{:x}\r\n{}\r\n", 4096, "x".repeat(4096));
            while stream.write_all(chunk.as_bytes()).is_ok() {}
        }
        Reply::Garbage => {
            let _ = stream.write_all(b"\x00\x01 this is not HTTP at all\r\n\r\n");
        }
        Reply::Raw(bytes) => {
            let _ = stream.write_all(bytes.as_bytes());
        }
        Reply::Redirect(status, location) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status} Moved\r\nlocation: {location}\r\ncontent-type: application/json\r\ncontent-length: 28\r\nconnection: close\r\n\r\n{{\"readyForTermination\":true}}"
            );
        }
    }
}
