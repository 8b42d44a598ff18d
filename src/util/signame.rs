//! Signal names and numbers: `TERM`, `SIGRTMIN+2` and `15` parsed, and the
//! conventional name of a number for logs and the exit report.

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

pub fn rtmin() -> i32 {
    libc::SIGRTMIN()
}

pub fn rtmax() -> i32 {
    libc::SIGRTMAX()
}

/// Parses `TERM`, `SIGTERM`, `sigterm`, `15`, `RTMIN+2`, `SIGRTMAX-1`.
/// Returns a signal number between 1 and SIGRTMAX.
pub fn parse_signal(text: &str) -> Result<i32, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("empty signal name".into());
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        // Between 31 and SIGRTMIN the C library keeps signals for its own
        // threads; nothing can send or receive them through drainit.
        return match trimmed.parse::<i32>() {
            Ok(n) if (1..=31).contains(&n) || (rtmin()..=rtmax()).contains(&n) => Ok(n),
            _ => Err(format!(
                "signal number '{trimmed}' is not 1-31 or {}-{}",
                rtmin(),
                rtmax()
            )),
        };
    }
    let upper = trimmed.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some(&(_, n)) = NAMES.iter().find(|(candidate, _)| *candidate == name) {
        return Ok(n);
    }
    parse_realtime(name).ok_or_else(|| format!("unknown signal '{trimmed}'"))
}

fn parse_realtime(name: &str) -> Option<i32> {
    let (base, rest) = if let Some(rest) = name.strip_prefix("RTMIN") {
        (rtmin(), rest)
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        (rtmax(), rest)
    } else {
        return None;
    };
    let n = match rest.as_bytes().first() {
        None => base,
        Some(b'+') => base.checked_add(rest[1..].parse::<i32>().ok()?)?,
        Some(b'-') => base.checked_sub(rest[1..].parse::<i32>().ok()?)?,
        Some(_) => return None,
    };
    (rtmin()..=rtmax()).contains(&n).then_some(n)
}

/// The conventional name of a signal (`SIGTERM`, `SIGRTMIN+3`), for logs and
/// the exit report.
pub fn signal_name(signo: i32) -> String {
    if let Some((name, _)) = NAMES
        .iter()
        .find(|(name, n)| *n == signo && *name != "IOT" && *name != "CLD")
    {
        return format!("SIG{name}");
    }
    if (rtmin()..=rtmax()).contains(&signo) {
        return match signo - rtmin() {
            0 => "SIGRTMIN".into(),
            k => format!("SIGRTMIN+{k}"),
        };
    }
    // Unnamed (the C library's reserved ones): the number, which parses back.
    signo.to_string()
}
