//! Signal names and numbers: `TERM`, `SIGRTMIN+2` and `15` parsed, and the
//! conventional name of a number for logs, the exit report and metrics.
//!
//! Real-time signals are named and parsed by one fixed numbering on every
//! build, Docker's, systemd's, bash's and glibc's: `SIGRTMIN` is signal 34
//! and `SIGRTMIN+N` is 34+N, up to `SIGRTMAX` (64), `SIGRTMAX-N` is 64-N.
//! 32 and 33, which both C libraries keep for themselves, have no
//! real-time name: they are named by their number and refused in options.
//! The static (musl) build follows the same numbering although musl's own
//! `SIGRTMIN` is 35: drainit only forwards 34, which musl keeps for
//! set*id across threads that drainit never does. A name in a log or the
//! exit report parses back to the same number on both builds.

pub const NAMES: [(&str, i32); 33] = [
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("IOT", libc::SIGIOT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("STKFLT", libc::SIGSTKFLT),
    ("CHLD", libc::SIGCHLD),
    ("CLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
];

/// `SIGRTMIN`, the base of `SIGRTMIN+N` names: 34 on every build.
pub const RTMIN: i32 = 34;
/// `SIGRTMAX`, the kernel's last signal.
pub const RTMAX: i32 = 64;

/// The C library's first real-time signal free for applications (34 with
/// glibc, 35 with musl): from 32 up to it, it blocks and may use signals
/// for its own threads.
pub fn rtmin() -> i32 {
    libc::SIGRTMIN()
}

pub fn rtmax() -> i32 {
    libc::SIGRTMAX()
}

/// Parses `TERM`, `SIGTERM`, `sigterm`, `15`, `RTMIN+2`, `SIGRTMAX-1`
/// (real-time names from `RTMIN` = 34: `RTMIN+3` is 37 on every build).
/// Returns a signal number from 1 to 31 or from 34 to 64: 32 and 33, the C
/// libraries' own, are refused.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    let trimmed = text.trim();
    let shown = crate::util::text::echo(trimmed);
    if trimmed.is_empty() {
        return Err("empty signal name".into());
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return match trimmed.parse::<i32>() {
            Ok(n) if (1..=31).contains(&n) || (RTMIN..=RTMAX).contains(&n) => Ok(n),
            Ok(32 | 33) => Err(format!(
                "signal '{shown}' is reserved by the C library; real-time signals are {RTMIN}-{RTMAX} (SIGRTMIN to SIGRTMAX)"
            )),
            _ => Err(format!(
                "signal number '{shown}' is not 1-31 or {RTMIN}-{RTMAX}"
            )),
        };
    }
    let upper = trimmed.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(&(_, n)) = NAMES.iter().find(|(candidate, _)| *candidate == name) {
        return Ok(n);
    }
    parse_realtime(name).ok_or_else(|| format!("unknown signal '{shown}'"))
}

/// `RTMIN`, `RTMIN+N`, `RTMAX`, `RTMAX-N` from 34 to 64.
fn parse_realtime(name: &str) -> Option<i32> {
    let (base, rest) = if let Some(rest) = name.strip_prefix("RTMIN") {
        (RTMIN, rest)
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        (RTMAX, rest)
    } else {
        return None;
    };
    let offset = |digits: &str| {
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse::<i32>().ok())
            .flatten()
    };
    let n = match rest.as_bytes().first() {
        None => base,
        Some(b'+') => base.checked_add(offset(&rest[1..])?)?,
        Some(b'-') => base.checked_sub(offset(&rest[1..])?)?,
        Some(_) => return None,
    };
    (RTMIN..=RTMAX).contains(&n).then_some(n)
}

/// The conventional name of a signal (`SIGTERM`, `SIGRTMIN+3`), for logs,
/// the exit report and metrics: real-time signals from `SIGRTMIN` = 34, so
/// one number has one name in every build.
pub fn signal_name(signo: i32) -> String {
    if let Some((name, _)) = NAMES
        .iter()
        .find(|(name, n)| *n == signo && *name != "IOT" && *name != "CLD")
    {
        return format!("SIG{name}");
    }
    match signo - RTMIN {
        0 => "SIGRTMIN".into(),
        k if (1..=RTMAX - RTMIN).contains(&k) => format!("SIGRTMIN+{k}"),
        // 32, 33 (the C libraries' own) or not a signal: the number, which
        // parses back (or is refused) the same way on every build.
        _ => signo.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_time_names_count_from_34_on_every_build() {
        assert_eq!(signal_name(32), "32");
        assert_eq!(signal_name(33), "33");
        assert_eq!(signal_name(34), "SIGRTMIN");
        assert_eq!(signal_name(35), "SIGRTMIN+1");
        assert_eq!(signal_name(37), "SIGRTMIN+3");
        assert_eq!(signal_name(64), "SIGRTMIN+30");
        assert_eq!(signal_name(65), "65");
        assert_eq!(signal_name(0), "0");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGCHLD), "SIGCHLD");
        assert_eq!(signal_name(libc::SIGABRT), "SIGABRT");
    }

    #[test]
    fn names_parse_back_to_their_number() {
        for n in (1..=31).chain(34..=64) {
            assert_eq!(parse_signal(&signal_name(n)), Ok(n), "{}", signal_name(n));
        }
        assert_eq!(parse_signal("RTMIN"), Ok(34));
        assert_eq!(parse_signal("SIGRTMIN+1"), Ok(35));
        assert_eq!(parse_signal("RTMIN+3"), Ok(37));
        assert_eq!(parse_signal("SIGRTMIN+4"), Ok(38));
        assert_eq!(parse_signal("rtmax-1"), Ok(63));
        assert_eq!(parse_signal("SIGRTMAX-30"), Ok(34));
        assert_eq!(parse_signal("SIGRTMAX"), Ok(64));
        assert_eq!(parse_signal("SIGRTMIN+30"), Ok(64));
        assert_eq!(parse_signal("34"), Ok(34));
    }

    #[test]
    fn the_c_librarys_own_numbers_are_refused() {
        for n in [32, 33] {
            let e = parse_signal(&signal_name(n)).unwrap_err();
            assert!(e.contains("reserved"), "{n}: {e}");
        }
        for text in [
            "RTMIN+31", "RTMAX+1", "RTMIN-1", "RTMIN-2", "RTMAX-31", "RTMIN++1", "RTMIN+-1",
            "RTMAX--1", "RTMIN+ 1",
        ] {
            assert!(parse_signal(text).is_err(), "{text}");
        }
    }
}
