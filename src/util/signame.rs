//! Signal names and numbers: `TERM`, `SIGRTMIN+2` and `15` parsed, and the
//! conventional name of a number for logs, the exit report and metrics.
//!
//! Real-time signals are named by the kernel's numbering, the same in every
//! build: `SIGRTMIN` is signal 32 and `SIGRTMIN+N` is 32+N, up to
//! `SIGRTMAX` (64), whatever the C library reserves for itself at the
//! bottom of that range (32-33 for glibc, 32-34 for musl, whose own
//! `SIGRTMIN` is therefore 34 or 35). A name in a log or the exit report
//! parses back to the same number on both builds.

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

/// The kernel's first real-time signal, the base of `SIGRTMIN+N` names.
pub const KERNEL_RTMIN: i32 = 32;
/// The kernel's last signal, `SIGRTMAX`.
pub const KERNEL_RTMAX: i32 = 64;

/// The C library's first real-time signal free for applications: the
/// lowest number drainit accepts in options above 31.
pub fn rtmin() -> i32 {
    libc::SIGRTMIN()
}

pub fn rtmax() -> i32 {
    libc::SIGRTMAX()
}

/// Parses `TERM`, `SIGTERM`, `sigterm`, `15`, `RTMIN+2`, `SIGRTMAX-1`
/// (real-time names by the kernel's numbering: `RTMIN+2` is 34). Returns a
/// signal number from 1 to 31 or from the C library's SIGRTMIN to SIGRTMAX:
/// the numbers the C library reserves are refused, by number or by name.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("empty signal name".into());
    }
    let n = if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        trimmed.parse::<i32>().ok()
    } else {
        let upper = trimmed.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        match NAMES.iter().find(|(candidate, _)| *candidate == name) {
            Some(&(_, n)) => return Ok(n),
            None => {
                Some(parse_realtime(name).ok_or_else(|| format!("unknown signal '{trimmed}'"))?)
            }
        }
    };
    // Between 31 and the C library's SIGRTMIN it keeps signals for its own
    // threads; nothing can send or receive them through drainit.
    match n {
        Some(n) if (1..=31).contains(&n) || (rtmin()..=rtmax()).contains(&n) => Ok(n),
        Some(n) if (KERNEL_RTMIN..rtmin()).contains(&n) => Err(format!(
            "signal '{trimmed}' ({n}) is reserved by the C library; real-time signals free for applications are {}-{} ({} to SIGRTMAX)",
            rtmin(),
            rtmax(),
            signal_name(rtmin())
        )),
        _ => Err(format!(
            "signal number '{trimmed}' is not 1-31 or {}-{}",
            rtmin(),
            rtmax()
        )),
    }
}

/// `RTMIN`, `RTMIN+N`, `RTMAX`, `RTMAX-N` by the kernel's numbering;
/// anything from 32 to 64.
fn parse_realtime(name: &str) -> Option<i32> {
    let (base, rest) = if let Some(rest) = name.strip_prefix("RTMIN") {
        (KERNEL_RTMIN, rest)
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        (KERNEL_RTMAX, rest)
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
    (KERNEL_RTMIN..=KERNEL_RTMAX).contains(&n).then_some(n)
}

/// The conventional name of a signal (`SIGTERM`, `SIGRTMIN+3`), for logs,
/// the exit report and metrics: real-time signals by the kernel's
/// numbering, so one number has one name in every build.
pub fn signal_name(signo: i32) -> String {
    if let Some((name, _)) = NAMES
        .iter()
        .find(|(name, n)| *n == signo && *name != "IOT" && *name != "CLD")
    {
        return format!("SIG{name}");
    }
    match signo - KERNEL_RTMIN {
        0 => "SIGRTMIN".into(),
        k if (1..=KERNEL_RTMAX - KERNEL_RTMIN).contains(&k) => format!("SIGRTMIN+{k}"),
        // Not a signal: the number, as it came.
        _ => signo.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_time_names_follow_the_kernel_on_every_build() {
        assert_eq!(signal_name(32), "SIGRTMIN");
        assert_eq!(signal_name(33), "SIGRTMIN+1");
        assert_eq!(signal_name(34), "SIGRTMIN+2");
        assert_eq!(signal_name(35), "SIGRTMIN+3");
        assert_eq!(signal_name(64), "SIGRTMIN+32");
        assert_eq!(signal_name(65), "65");
        assert_eq!(signal_name(0), "0");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGCHLD), "SIGCHLD");
        assert_eq!(signal_name(libc::SIGABRT), "SIGABRT");
    }

    #[test]
    fn names_parse_back_to_their_number() {
        for n in (1..=31).chain(rtmin()..=rtmax()) {
            assert_eq!(parse_signal(&signal_name(n)), Ok(n), "{}", signal_name(n));
        }
        assert_eq!(parse_signal("RTMIN+3"), Ok(35));
        assert_eq!(parse_signal("SIGRTMIN+4"), Ok(36));
        assert_eq!(parse_signal("rtmax-1"), Ok(63));
        assert_eq!(parse_signal("SIGRTMAX"), Ok(64));
        assert_eq!(parse_signal("SIGRTMIN+32"), Ok(64));
    }

    #[test]
    fn the_c_librarys_own_numbers_are_refused_by_name_too() {
        for n in KERNEL_RTMIN..rtmin() {
            let e = parse_signal(&signal_name(n)).unwrap_err();
            assert!(e.contains("reserved"), "{n}: {e}");
            assert!(parse_signal(&n.to_string()).is_err(), "{n}");
        }
        for text in [
            "RTMIN+33", "RTMAX+1", "RTMIN-1", "RTMIN++1", "RTMIN+-1", "RTMAX--1", "RTMIN+ 1",
        ] {
            assert!(parse_signal(text).is_err(), "{text}");
        }
    }
}
