//! One sd_notify datagram as drainit reads it (sd_notify(3)): the pure
//! parser of `NAME=VALUE` lines, and who may send (`--notify-access`).

use std::time::Duration;

/// The longest STATUS kept, in bytes; longer text is cut.
pub const STATUS_MAX: usize = 256;

/// `--notify-access`: who may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Any process visible in drainit's PID namespace.
    All,
    /// Only the main child, as systemd's `NotifyAccess=main`.
    Main,
}

pub fn parse_access(text: &str) -> Result<Access, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "all" => Ok(Access::All),
        "main" => Ok(Access::Main),
        _ => Err("expected all or main".into()),
    }
}

/// What one datagram says; borrowed from it, nothing allocated. Where a
/// name repeats, the last line wins, as in systemd.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// `READY=1`.
    pub ready: bool,
    /// `STOPPING=1`.
    pub stopping: bool,
    /// `STATUS=...`, raw bytes (escaped only when logged).
    pub status: Option<&'a [u8]>,
    /// `EXTEND_TIMEOUT_USEC=N` with N a plain decimal that fits.
    pub extend: Option<Duration>,
    /// `X_DRAINIT_READY_FOR_TERMINATION=1`: the app has drained.
    pub drained: bool,
    /// The first name drainit does not know (logged once at debug).
    pub unknown: Option<&'a [u8]>,
}

/// Names of the protocol that drainit accepts and leaves alone.
const KNOWN_IGNORED: [&[u8]; 14] = [
    b"MAINPID",
    b"WATCHDOG",
    b"WATCHDOG_USEC",
    b"FDSTORE",
    b"FDSTOREREMOVE",
    b"FDNAME",
    b"FDPOLL",
    b"BARRIER",
    b"ERRNO",
    b"BUSERROR",
    b"RELOADING",
    b"MONOTONIC_USEC",
    b"EXIT_STATUS",
    b"NOTIFYACCESS",
];

/// Parses one datagram: newline-separated `NAME=VALUE` lines. Lines without
/// `=`, empty lines, unknown names and values other than the ones listed
/// change nothing.
/// What a message carries, for the counters: a fixed set of labels.
pub const KINDS: [&str; 6] = [
    "ready",
    "status",
    "stopping",
    "extend_timeout",
    "ready_for_termination",
    "other",
];

/// The `KINDS` a message carries; one with none of the first five is
/// "other".
pub fn kinds(m: &Message<'_>) -> [bool; 6] {
    let known = [
        m.ready,
        m.status.is_some(),
        m.stopping,
        m.extend.is_some(),
        m.drained,
    ];
    let other = !known.iter().any(|k| *k);
    [known[0], known[1], known[2], known[3], known[4], other]
}

pub fn parse(datagram: &[u8]) -> Message<'_> {
    let mut m = Message::default();
    for line in datagram.split(|&b| b == b'\n') {
        let Some(eq) = line.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (name, value) = (&line[..eq], &line[eq + 1..]);
        match name {
            b"READY" => m.ready |= value == b"1",
            b"STOPPING" => m.stopping |= value == b"1",
            b"STATUS" => m.status = Some(value),
            b"EXTEND_TIMEOUT_USEC" => {
                if let Some(us) = parse_usec(value) {
                    m.extend = Some(Duration::from_micros(us));
                }
            }
            b"X_DRAINIT_READY_FOR_TERMINATION" => m.drained |= value == b"1",
            _ if KNOWN_IGNORED.contains(&name) => {}
            _ => {
                if m.unknown.is_none() {
                    m.unknown = Some(name);
                }
            }
        }
    }
    m
}

/// A plain decimal that fits in u64: no sign, no space, not empty.
fn parse_usec(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 20 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}
