//! The receiver of systemd's notify protocol (sd_notify(3)): the socket the
//! app finds in `NOTIFY_SOCKET`, and the one reader thread that reads each
//! datagram with its sender's credentials, parses it (`proto::notify_msg`)
//! and hands it to the loop as an input, logs what the app says
//! (rate-limited) and relays READY/STATUS/STOPPING to an outer manager.
//! Who may send and which messages go to the loop at once are the core's
//! rules (`core::notify::refusal`, `Gather`); what a message means for the
//! stop is the core's to decide too. One fixed buffer: nothing here grows with
//! the number of messages.

use std::ffi::OsString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::core::event::Input;
use crate::core::notify::{refusal, Gather};
use crate::io::threads::Outbox;
use crate::proto::notify_msg::{parse, Access, Message, STATUS_MAX};
use crate::util::text::escape;

/// A datagram longer than this is dropped whole (and counted).
pub const MAX_DATAGRAM: usize = 4096;
/// App-caused log lines: at most this many per `LOG_WINDOW`.
const LOG_BURST: u32 = 10;
const LOG_WINDOW: Duration = Duration::from_secs(10);

/// The socket drainit receives on. Its file (with `--notify-socket`) is
/// removed when this is dropped.
pub struct Socket {
    fd: OwnedFd,
    /// The value of the child's `NOTIFY_SOCKET` (`@name` for an abstract one).
    pub address: OsString,
    path: Option<PathBuf>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `sockaddr_un` for an address as written in `NOTIFY_SOCKET`: `@name` is
/// abstract (a leading NUL), anything else a file system path.
fn sockaddr(address: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // A path needs room for its NUL; an abstract name does not.
    let room = addr.sun_path.len() - usize::from(address.first() != Some(&b'@'));
    if address.is_empty() || address.len() > room {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket address empty or too long",
        ));
    }
    for (i, &b) in address.iter().enumerate() {
        addr.sun_path[i] = if i == 0 && b == b'@' { 0 } else { b as _ };
    }
    let len = size_of::<libc::sa_family_t>() + address.len() + usize::from(address[0] != b'@');
    Ok((addr, len as libc::socklen_t))
}

/// Binds the notify socket: at `path`, replacing a stale socket file left
/// there, or at an abstract name the kernel picks (autobind), unique in the
/// network namespace, so two drainits of one ECS task never collide.
pub fn bind(path: Option<&Path>) -> io::Result<Socket> {
    // SAFETY: socket/setsockopt/bind/getsockname with valid buffers; the fd
    // is owned at once.
    unsafe {
        let raw = cvt(libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let fd = OwnedFd::from_raw_fd(raw);
        let on: libc::c_int = 1;
        cvt(libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            &on as *const _ as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        ))?;
        if let Some(path) = path {
            use std::os::unix::fs::FileTypeExt;
            // Only a socket is replaced: a regular file there is an error.
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                std::fs::remove_file(path)?;
            }
            let (addr, len) = sockaddr(path.as_os_str().as_bytes())?;
            cvt(libc::bind(
                raw,
                &addr as *const _ as *const libc::sockaddr,
                len,
            ))?;
            return Ok(Socket {
                fd,
                address: path.as_os_str().to_owned(),
                path: Some(path.to_owned()),
            });
        }
        // Autobind: an address of the family alone.
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let family = size_of::<libc::sa_family_t>() as libc::socklen_t;
        cvt(libc::bind(
            raw,
            &addr as *const _ as *const libc::sockaddr,
            family,
        ))?;
        let mut len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
        cvt(libc::getsockname(
            raw,
            &mut addr as *mut _ as *mut libc::sockaddr,
            &mut len,
        ))?;
        let name_len = (len as usize).saturating_sub(family as usize + 1);
        let mut address = vec![b'@'];
        address.extend(addr.sun_path[1..1 + name_len].iter().map(|&c| c as u8));
        Ok(Socket {
            fd,
            address: OsString::from_vec(address),
            path: None,
        })
    }
}

/// The app's last STATUS, as the reader keeps it to log changes only.
/// Fixed size: a flood overwrites, it never accumulates.
#[derive(Debug)]
pub struct Status {
    status: [u8; STATUS_MAX],
    status_len: Option<usize>,
}

impl Default for Status {
    fn default() -> Status {
        Status {
            status: [0; STATUS_MAX],
            status_len: None,
        }
    }
}

impl Status {
    /// The last STATUS, escaped for a log line.
    pub fn status(&self) -> Option<String> {
        self.status_len
            .map(|n| escape(&String::from_utf8_lossy(&self.status[..n]), STATUS_MAX))
    }

    /// Keeps `text` (cut to `STATUS_MAX`); true when it differs.
    fn set_status(&mut self, text: &[u8]) -> bool {
        let text = &text[..text.len().min(STATUS_MAX)];
        if self.status_len.map(|n| &self.status[..n]) == Some(text) {
            return false;
        }
        self.status[..text.len()].copy_from_slice(text);
        self.status_len = Some(text.len());
        true
    }
}

/// drainit's own marker datagram; only drainit's pid can send it (the
/// kernel vouches for the pid), so an app cannot forge one.
const FLUSH: &[u8] = b"X_DRAINIT_FLUSH=1";

/// Sends the flush marker to the back of the socket's queue: the reader
/// answers `Input::NotifyFlushed` once it has read everything before it,
/// so the exit report counts the messages an app sent just before it
/// exited. False when it could not be sent (a full queue).
pub fn send_flush(address: &OsString) -> bool {
    let Ok((addr, len)) = sockaddr(address.as_bytes()) else {
        return false;
    };
    // SAFETY: a new socket, owned at once; sendto from a valid buffer.
    unsafe {
        let Ok(raw) = cvt(libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        )) else {
            return false;
        };
        let fd = OwnedFd::from_raw_fd(raw);
        libc::sendto(
            fd.as_raw_fd(),
            FLUSH.as_ptr() as *const libc::c_void,
            FLUSH.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            &addr as *const _ as *const libc::sockaddr,
            len,
        ) >= 0
    }
}

/// At most `LOG_BURST` app-caused lines per `LOG_WINDOW`; the rest counted
/// and reported with the next line allowed.
struct Limiter {
    window: Instant,
    used: u32,
    suppressed: u64,
}

impl Limiter {
    fn allow(&mut self, now: Instant) -> Option<String> {
        if now.duration_since(self.window) >= LOG_WINDOW {
            self.window = now;
            self.used = 0;
        }
        if self.used >= LOG_BURST {
            self.suppressed += 1;
            return None;
        }
        self.used += 1;
        let note = match std::mem::take(&mut self.suppressed) {
            0 => String::new(),
            n => format!(" ({n} notify log lines suppressed before this)"),
        };
        Some(note)
    }
}

/// The outer manager's socket (drainit's own `NOTIFY_SOCKET`), if any.
struct Relay {
    fd: OwnedFd,
    addr: libc::sockaddr_un,
    len: libc::socklen_t,
    failed: bool,
}

impl Relay {
    fn new(address: &OsString) -> io::Result<Relay> {
        let (addr, len) = sockaddr(address.as_bytes())?;
        // SAFETY: a new socket, owned at once.
        let fd = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::socket(
                libc::AF_UNIX,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            ))?)
        };
        Ok(Relay {
            fd,
            addr,
            len,
            failed: false,
        })
    }

    /// Passes READY/STATUS/STOPPING on; never blocks. A failure is said once.
    fn pass(&mut self, m: &Message<'_>, buf: &mut [u8; MAX_DATAGRAM + 64]) {
        let mut n = 0;
        let mut put = |part: &[u8]| {
            let end = (n + part.len()).min(buf.len());
            buf[n..end].copy_from_slice(&part[..end - n]);
            n = end;
        };
        if m.ready {
            put(b"READY=1\n");
        }
        if m.stopping {
            put(b"STOPPING=1\n");
        }
        if let Some(status) = m.status {
            put(b"STATUS=");
            put(status);
            put(b"\n");
        }
        if n == 0 {
            return;
        }
        // SAFETY: sendto from a valid buffer to a valid address.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                n,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                &self.addr as *const _ as *const libc::sockaddr,
                self.len,
            )
        };
        if sent < 0 && !self.failed {
            self.failed = true;
            warn!(
                "cannot relay to the outer NOTIFY_SOCKET: {} (said once)",
                io::Error::last_os_error()
            );
        }
    }
}

/// Everything the reader thread needs.
pub struct Reader {
    pub socket: Socket,
    /// Where every accepted, refused or dropped message goes.
    pub outbox: Outbox,
    pub access: Access,
    /// The main child, for `--notify-access main` (0 until it runs: the
    /// reader starts before it).
    pub child: std::sync::Arc<std::sync::atomic::AtomicI32>,
    /// drainit's own `NOTIFY_SOCKET`, to relay to.
    pub outer: Option<OsString>,
    /// With the health listener: counts and STATUS are handed over at
    /// least this often (at most one wake-up per period), not only with
    /// what the stop waits for.
    pub every: Option<Duration>,
}

/// Starts the reader thread.
pub fn start(reader: Reader) -> io::Result<()> {
    crate::io::threads::spawn_thread(
        "drainit-notify",
        128 * 1024,
        Box::new(move || loop {
            // `run` never returns. Should it panic (the hook logs it), the
            // socket must still be read, or an app blocked in a send to
            // a full queue would hang: read on after a pause that bounds
            // the log lines a repeating panic could cost.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.run()));
            std::thread::sleep(Duration::from_millis(100));
        }),
    )
}

/// What the receive of one datagram gave.
enum Received {
    /// `len` bytes from a sender with this pid (0: outside our namespace).
    Datagram { len: usize, pid: Option<i32> },
    /// Longer than `MAX_DATAGRAM`.
    TooLong,
}

/// Receives one datagram. The control buffer holds credentials only: the
/// kernel then installs no passed file descriptor (it sets MSG_CTRUNC and
/// drops them); any that still arrive are closed at once.
fn receive(fd: RawFd, buf: &mut [u8; MAX_DATAGRAM]) -> io::Result<Received> {
    const CRED_SPACE: usize = 64;
    // u64 words: cmsghdr alignment.
    let mut control = [0u64; CRED_SPACE / 8];
    // SAFETY: CMSG_SPACE is a size computation.
    let control_len = unsafe { libc::CMSG_SPACE(size_of::<libc::ucred>() as u32) } as usize;
    debug_assert!(control_len <= CRED_SPACE);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; every pointer set below outlives
    // the call; the cmsg walk stays inside `control` (CMSG_NXTHDR checks).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = control_len as _;
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_TRUNC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut pid = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
            if level == libc::SOL_SOCKET && kind == libc::SCM_CREDENTIALS {
                let cred = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::ucred);
                pid = Some(cred.pid);
            } else if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                let bytes = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..bytes / size_of::<libc::c_int>() {
                    libc::close(std::ptr::read_unaligned(data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        // With MSG_TRUNC, recvmsg returns the datagram's real length.
        if n as usize > buf.len() || msg.msg_flags & libc::MSG_TRUNC != 0 {
            return Ok(Received::TooLong);
        }
        Ok(Received::Datagram {
            len: n as usize,
            pid,
        })
    }
}

/// Waits at most `timeout` for `fd` to have a datagram; false when the
/// time ran out (an error counts as readable: `receive` reports it).
fn readable_within(fd: std::os::fd::RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) != 0 }
}

impl Reader {
    /// Hands what was gathered to the loop, if anything.
    fn hand_over(&self, gather: &mut Gather) {
        if let Some(note) = gather.take(Instant::now()) {
            self.outbox.send(Input::Notify(note));
        }
    }

    /// Reads, checks the sender, parses and hands each message to the loop;
    /// what a message means for the stop is the core's to decide. Logs what
    /// the app says (rate-limited) and relays to an outer manager.
    fn run(&self) {
        let mut buf = [0u8; MAX_DATAGRAM];
        let mut relay_buf = [0u8; MAX_DATAGRAM + 64];
        let mut relay = self.outer.as_ref().and_then(|a| match Relay::new(a) {
            Ok(r) => Some(r),
            Err(e) => {
                warn!("cannot relay to the outer NOTIFY_SOCKET: {e}");
                None
            }
        });
        let mut limit = Limiter {
            window: Instant::now(),
            used: 0,
            suppressed: 0,
        };
        let mut last = Status::default();
        // Read but not handed over yet; the core's rules say when.
        let mut gather = Gather::new(Instant::now(), self.every);
        let mut said_unknown = false;
        let mut said_stopping = false;
        let fd = self.socket.fd.as_raw_fd();
        loop {
            if let Some(due) = gather.due() {
                let left = due.saturating_duration_since(Instant::now());
                if !readable_within(fd, left) {
                    self.hand_over(&mut gather);
                    continue;
                }
            }
            let received = match receive(fd, &mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if limit.allow(Instant::now()).is_some() {
                        warn!("notify socket: {e}");
                    }
                    // Never a busy loop on an error that repeats.
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let now = Instant::now();
            let (len, pid) = match received {
                Received::TooLong => {
                    gather.dropped();
                    if let Some(note) = limit.allow(now) {
                        debug!("notify message over {MAX_DATAGRAM} bytes dropped{note}");
                    }
                    continue;
                }
                Received::Datagram { len, pid } => (len, pid),
            };
            if pid == Some(std::process::id() as i32) && &buf[..len] == FLUSH {
                // Everything read before the marker goes with it.
                self.hand_over(&mut gather);
                self.outbox.send(Input::NotifyFlushed);
                continue;
            }
            let child = self.child.load(std::sync::atomic::Ordering::Relaxed);
            if let Some(who) = refusal(pid, self.access, child) {
                gather.refused();
                if let Some(note) = limit.allow(now) {
                    warn!("refused a notify message from {who}{note}");
                }
                continue;
            }
            let m = parse(&buf[..len]);
            let status_changed = m.status.is_some_and(|s| last.set_status(s));
            if gather.accepted(now, &m) {
                self.hand_over(&mut gather);
            }
            if let Some(r) = &mut relay {
                r.pass(&m, &mut relay_buf);
            }
            // Logging last: the loop already has what matters. The limiter
            // first: a suppressed line costs no allocation.
            if status_changed {
                if let (Some(note), Some(status)) = (limit.allow(now), last.status()) {
                    info!("app status: {status}{note}");
                }
            }
            if m.stopping && !said_stopping {
                said_stopping = true;
                info!("app is stopping (STOPPING=1)");
            }
            if let (Some(name), false) = (m.unknown, said_unknown) {
                said_unknown = true;
                debug!(
                    "unknown notify name {} ignored (said once)",
                    escape(&String::from_utf8_lossy(name), 64)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::notify_msg::parse_access;

    #[test]
    fn each_word() {
        assert!(parse(b"READY=1").ready);
        assert!(parse(b"STOPPING=1\n").stopping);
        assert_eq!(
            parse(b"STATUS=busy: 3 left").status,
            Some(&b"busy: 3 left"[..])
        );
        assert_eq!(parse(b"STATUS=").status, Some(&b""[..]));
        assert_eq!(
            parse(b"EXTEND_TIMEOUT_USEC=5000000").extend,
            Some(Duration::from_secs(5))
        );
        assert!(parse(b"X_DRAINIT_READY_FOR_TERMINATION=1").drained);
    }

    #[test]
    fn several_lines_last_status_wins() {
        let m =
            parse(b"READY=1\nSTATUS=a\nSTATUS=b\nMAINPID=7\nX_DRAINIT_READY_FOR_TERMINATION=1\n");
        assert!(m.ready && m.drained && !m.stopping);
        assert_eq!(m.status, Some(&b"b"[..]));
        assert_eq!(m.unknown, None, "MAINPID is known and ignored");
    }

    #[test]
    fn what_changes_nothing() {
        for text in [
            &b""[..],
            b"\n\n",
            b"READY",
            b"READY=0",
            b"READY=1 ",
            b"ready=1",
            b"X_DRAINIT_READY_FOR_TERMINATION=2",
            b"X_DRAINIT_READY_FOR_TERMINATION=true",
            b"EXTEND_TIMEOUT_USEC=",
            b"EXTEND_TIMEOUT_USEC=-5",
            b"EXTEND_TIMEOUT_USEC=+5",
            b"EXTEND_TIMEOUT_USEC=18446744073709551616",
            b"EXTEND_TIMEOUT_USEC=1e6",
            b"EXTEND_TIMEOUT_USEC= 5",
            b"WATCHDOG=1\nFDSTORE=1\nBARRIER=1\nMAINPID=1",
            b"=1",
        ] {
            let m = parse(text);
            assert!(
                !m.ready && !m.stopping && !m.drained && m.extend.is_none() && m.status.is_none(),
                "{:?} -> {m:?}",
                String::from_utf8_lossy(text)
            );
        }
        assert_eq!(
            parse(b"EXTEND_TIMEOUT_USEC=18446744073709551615").extend,
            Some(Duration::from_micros(u64::MAX))
        );
    }

    #[test]
    fn unknown_names_are_noted_once() {
        assert_eq!(parse(b"FOO=1\nBAR=2").unknown, Some(&b"FOO"[..]));
        assert_eq!(parse(b"=1").unknown, Some(&b""[..]));
    }

    /// Property: any bytes parse without panic, and a readiness word or an
    /// extension is never read out of a datagram that lacks its exact line.
    #[test]
    fn arbitrary_bytes() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let alphabet = b"READYSTOPINGX_DRAINT=0123456789\n\r -+";
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 80) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    let r = seed.rotate_left(i as u32 * 7);
                    if r % 5 == 0 {
                        (r >> 8) as u8
                    } else {
                        alphabet[(r >> 16) as usize % alphabet.len()]
                    }
                })
                .collect();
            let m = parse(&bytes);
            let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
            assert_eq!(m.ready, lines.contains(&&b"READY=1"[..]));
            assert_eq!(
                m.drained,
                lines.contains(&&b"X_DRAINIT_READY_FOR_TERMINATION=1"[..])
            );
            if m.extend.is_some() {
                assert!(lines.iter().any(|l| l.starts_with(b"EXTEND_TIMEOUT_USEC=")));
            }
        }
    }

    #[test]
    fn status_is_cut_and_change_detected() {
        let mut s = Status::default();
        assert!(s.set_status(b"one"));
        assert!(!s.set_status(b"one"));
        assert!(s.set_status(&[b'x'; 1000]));
        assert_eq!(s.status_len, Some(STATUS_MAX));
        assert!(s.set_status(b"a\nforged"));
        assert_eq!(s.status().unwrap(), "a\\nforged");
    }

    #[test]
    fn limiter_bounds_lines_per_window() {
        let t0 = Instant::now();
        let mut l = Limiter {
            window: t0,
            used: 0,
            suppressed: 0,
        };
        let allowed = (0..100).filter(|_| l.allow(t0).is_some()).count();
        assert_eq!(allowed, LOG_BURST as usize);
        let note = l.allow(t0 + LOG_WINDOW).unwrap();
        assert!(note.contains("90"), "{note}");
    }

    #[test]
    fn access_values() {
        assert_eq!(parse_access("all"), Ok(Access::All));
        assert_eq!(parse_access("MAIN"), Ok(Access::Main));
        assert!(parse_access("exec").is_err());
        assert!(parse_access("").is_err());
    }

    #[test]
    fn addresses() {
        let (a, len) = sockaddr(b"@x").unwrap();
        assert_eq!(a.sun_path[0], 0);
        assert_eq!(len as usize, size_of::<libc::sa_family_t>() + 2);
        let (_, len) = sockaddr(b"/run/n").unwrap();
        assert_eq!(len as usize, size_of::<libc::sa_family_t>() + 7);
        assert!(sockaddr(b"").is_err());
        assert!(sockaddr(&[b'a'; 200]).is_err());
    }

    /// Real sockets: a datagram with credentials arrives with our pid, a
    /// passed descriptor is never installed, and an oversized one is dropped.
    #[test]
    fn receive_keeps_no_descriptor() {
        let socket = bind(None).unwrap();
        assert!(socket.address.as_bytes().starts_with(b"@"));
        let (addr, len) = sockaddr(socket.address.as_bytes()).unwrap();
        let sender = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0) };
        assert!(sender >= 0);
        let mut pipe = [0; 2];
        assert_eq!(
            unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        // A datagram with SCM_RIGHTS carrying the pipe's write end.
        unsafe {
            let payload = b"READY=1";
            let mut iov = libc::iovec {
                iov_base: payload.as_ptr() as *mut _,
                iov_len: payload.len(),
            };
            let mut control = [0u64; 4];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = &addr as *const _ as *mut _;
            msg.msg_namelen = len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut _;
            msg.msg_controllen = libc::CMSG_SPACE(4) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut i32, pipe[1]);
            assert!(libc::sendmsg(sender, &msg, 0) > 0);
            libc::close(pipe[1]);
        }
        let mut buf = [0u8; MAX_DATAGRAM];
        match receive(socket.fd.as_raw_fd(), &mut buf).unwrap() {
            Received::Datagram { len, pid } => {
                assert_eq!(&buf[..len], b"READY=1");
                assert_eq!(pid, Some(std::process::id() as i32));
            }
            Received::TooLong => panic!("short datagram taken as too long"),
        }
        // The only copy of the write end went with the message: the read end
        // sees end-of-file (not EAGAIN), so no copy was installed here.
        let mut byte = [0u8; 1];
        assert_eq!(
            unsafe { libc::read(pipe[0], byte.as_mut_ptr() as *mut _, 1) },
            0
        );
        let big = vec![b'x'; MAX_DATAGRAM + 1];
        unsafe {
            libc::sendto(
                sender,
                big.as_ptr() as *const _,
                big.len(),
                0,
                &addr as *const _ as *const libc::sockaddr,
                len,
            );
            libc::close(sender);
            libc::close(pipe[0]);
        }
        assert!(matches!(
            receive(socket.fd.as_raw_fd(), &mut buf).unwrap(),
            Received::TooLong
        ));
    }

    #[test]
    fn path_socket_replaces_a_stale_one_and_is_removed() {
        let dir = std::env::temp_dir().join(format!("drainit-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("n.sock");
        drop(std::os::unix::net::UnixDatagram::bind(&path).unwrap());
        assert!(path.exists(), "a stale socket file");
        let socket = bind(Some(&path)).unwrap();
        assert_eq!(socket.address, path.as_os_str());
        drop(socket);
        assert!(!path.exists());
        std::fs::write(&path, b"not a socket").unwrap();
        assert!(bind(Some(&path)).is_err(), "a regular file is not replaced");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
