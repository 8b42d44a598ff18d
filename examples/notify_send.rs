//! A tiny sd_notify sender for the notify tests, where `systemd-notify` is
//! missing (and for what it cannot do): sends datagrams to `$NOTIFY_SOCKET`
//! (`@name` abstract, else a path).
//!
//! - `notify_send MSG...`: each MSG is one datagram; `\n` in it is a newline.
//! - `notify_send --fd MSG`: passes a pipe's write end with the message, as
//!   `systemd-notify`'s barrier does, and waits up to 5 s for the receiver
//!   to let it go; exit 1 if it kept it.
//! - `notify_send --stamp FILE MSG`: writes CLOCK_MONOTONIC ns to FILE just
//!   before sending (latency measurements).
//! - `notify_send --flood N`: N datagrams of garbage, oversized messages and
//!   words that must change nothing; prints how many were sent.

#[path = "common/mod.rs"]
mod common;

use std::mem::size_of;
use std::os::unix::ffi::OsStrExt;

fn address() -> (libc::sockaddr_un, libc::socklen_t) {
    let target = std::env::var_os("NOTIFY_SOCKET").expect("NOTIFY_SOCKET is not set");
    let bytes = target.as_bytes();
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(!bytes.is_empty() && bytes.len() < addr.sun_path.len());
    for (i, &b) in bytes.iter().enumerate() {
        addr.sun_path[i] = if i == 0 && b == b'@' { 0 } else { b as _ };
    }
    let len = size_of::<libc::sa_family_t>() + bytes.len() + usize::from(bytes[0] != b'@');
    (addr, len as libc::socklen_t)
}

/// Sends one datagram, with `fd` passed along if given; blocks while the
/// receiver's queue is full.
fn send(sock: i32, payload: &[u8], fd: Option<i32>) -> bool {
    let (addr, len) = address();
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut control = [0u64; 4];
    // SAFETY: every pointer in msg outlives the call.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = &addr as *const _ as *mut libc::c_void;
        msg.msg_namelen = len;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if let Some(fd) = fd {
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = libc::CMSG_SPACE(4) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut i32, fd);
        }
        libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) >= 0
    }
}

fn unescape(text: &str) -> Vec<u8> {
    text.replace("\\n", "\n").into_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // SAFETY: a new socket.
    let sock = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    assert!(sock >= 0, "socket: {}", std::io::Error::last_os_error());
    match args.first().map(String::as_str) {
        Some("--fd") => {
            let mut pipe = [0; 2];
            // SAFETY: pipe2 into a local array.
            assert_eq!(
                unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) },
                0
            );
            if !send(sock, &unescape(&args[1]), Some(pipe[1])) {
                std::process::exit(1);
            }
            // SAFETY: closes our copy; waits on the read end for the hang-up.
            let hung_up = unsafe {
                libc::close(pipe[1]);
                let mut pfd = libc::pollfd {
                    fd: pipe[0],
                    events: 0,
                    revents: 0,
                };
                libc::poll(&mut pfd, 1, 5_000) == 1 && pfd.revents & libc::POLLHUP != 0
            };
            std::process::exit(if hung_up { 0 } else { 1 });
        }
        Some("--stamp") => {
            let payload = unescape(&args[2]);
            std::fs::write(&args[1], common::monotonic_ns().to_string()).expect("stamp file");
            std::process::exit(if send(sock, &payload, None) { 0 } else { 1 });
        }
        Some("--flood") => {
            let n: u64 = args[1].parse().expect("a count");
            let big = vec![b'S'; 5_000];
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut garbage = [0u8; 300];
            let mut sent = 0u64;
            for i in 0..n {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                for (j, b) in garbage.iter_mut().enumerate() {
                    *b = seed.rotate_left(j as u32) as u8;
                }
                let status = format!("STATUS=flood {i}");
                let payload: &[u8] = match i % 8 {
                    0 => &big,
                    1 => &garbage[..(seed % 300) as usize],
                    2 => b"X_DRAINIT_READY_FOR_TERMINATION=2\nREADY=0\nMAINPID=1",
                    3 => b"EXTEND_TIMEOUT_USEC=-1\nEXTEND_TIMEOUT_USEC=99999999999999999999999",
                    4 => b"no equals sign\n\n\n=\nFOO=bar",
                    5 => status.as_bytes(),
                    6 => b"WATCHDOG=1\nFDSTORE=1\nBARRIER=1",
                    // Valid, but never past the deadline: wakes drainit's
                    // loop and moves nothing.
                    _ if i % 16 == 7 => b"EXTEND_TIMEOUT_USEC=1000",
                    _ => b"",
                };
                if send(sock, payload, None) {
                    sent += 1;
                }
            }
            println!("{sent}");
        }
        _ => {
            for message in &args {
                if !send(sock, &unescape(message), None) {
                    eprintln!("notify_send: {}", std::io::Error::last_os_error());
                    std::process::exit(1);
                }
            }
        }
    }
}
