//! The one redaction rule for everything that leaves drainit (logs, the
//! exit report, `/status`, `/metrics`, EMF): a URL keeps its scheme, host,
//! port and path, loses its user-info and fragment, and each query value
//! becomes `REDACTED` (the key stays when it looks like a name, so the
//! operator still sees which parameter was sent); a URL that does not
//! parse as one leaves as `scheme://REDACTED` (or `REDACTED`), never in
//! part; of a command only its program name leaves, unless the operator
//! asks for whole commands, and even then every URL in it obeys the URL
//! rule. Pure functions, no I/O.

/// What replaces a secret.
pub const REDACTED: &str = "REDACTED";

/// The longest query key shown; a longer one is treated as a value.
const KEY_MAX: usize = 64;

/// How much of a command may leave drainit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Commands {
    /// The program name alone (the default).
    #[default]
    Program,
    /// The whole command, each URL in it redacted (an operator's opt-in).
    Full,
}

/// A URL as it may leave drainit: `http://user:pw@host:8080/p?token=x#f`
/// is `http://host:8080/p?token=REDACTED`.
pub fn url(text: &str) -> String {
    let Some((scheme, rest)) = split_scheme(text) else {
        return REDACTED.into();
    };
    let malformed = || format!("{scheme}://{REDACTED}");
    // The authority ends at the first '/', '?' or '#' (RFC 3986); a '\'
    // ends it too for browsers and some clients, so it may not hide there.
    let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if !valid_host_port(host_port) {
        return malformed();
    }
    let tail = tail.split_once('#').map_or(tail, |(before, _)| before);
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    if !path.bytes().all(url_byte) || path.contains('\\') {
        return malformed();
    }
    let mut out = format!("{scheme}://{host_port}{path}");
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_query(query));
    }
    out
}

/// A command as it may leave drainit: its program name (the first word,
/// as written), or with [`Commands::Full`] every word, URLs redacted.
/// Words split with shell quoting, as drainit runs them; a command that
/// does not split gives only what precedes its first space or quote.
pub fn command(text: &str, show: Commands) -> String {
    let words = shlex::split(text);
    match show {
        Commands::Program => {
            let first = match &words {
                Some(words) => words.first().cloned().unwrap_or_default(),
                None => text
                    .trim_start()
                    .split(|c: char| c.is_whitespace() || c == '\'' || c == '"')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            };
            program(&first)
        }
        Commands::Full => match words {
            Some(words) => {
                let shown: Vec<String> = words.iter().map(|w| in_text(w)).collect();
                shlex::try_join(shown.iter().map(String::as_str))
                    .unwrap_or_else(|_| shown.join(" "))
            }
            None => in_text(text),
        },
    }
}

/// Free text (an error message, a command's word) with every URL in it
/// redacted: whatever from a `scheme://` up to the next space, quote,
/// bracket or angle bracket.
pub fn in_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters, digits, '+', '-', '.' just before.
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[at + 3..]
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '(' | ')' | '`')
            })
            .map_or(rest.len(), |i| at + 3 + i);
        out.push_str(&rest[..start]);
        if start < at && placeholder(&rest[at + 3..end]) {
            // A scheme and nothing after it ("only http:// URLs") or a
            // placeholder (`tcp://HOST:PORT`): drainit's own words, no
            // secret to hide (no user-info, query or path can be in one).
            out.push_str(&rest[start..end]);
        } else if start == at {
            // "://" with no scheme: no URL, but what follows is hidden too.
            out.push_str("://");
            out.push_str(REDACTED);
        } else {
            out.push_str(&url(&rest[start..end]));
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// What drainit's own words put after a scheme: nothing, or one of its
/// placeholders (`tcp://HOST:PORT`).
fn placeholder(after: &str) -> bool {
    matches!(after, "" | "HOST" | "HOST:PORT")
}

/// A value as an error may echo it back (a usage error, a `--check`
/// finding): every URL in it redacted, and a value with no scheme that
/// still looks like a URL with user-info or a query (`user:pw@host/x`,
/// `host/x?token=v`) redacted as if it had one.
pub fn value(text: &str) -> String {
    // A value that is a URL is redacted whole: a quote or a space inside
    // it (in a password, say) must not end it early and show the rest.
    if split_scheme(text.trim()).is_some() {
        return url(text.trim());
    }
    if text.contains("://") || !text.contains(['@', '?', '#']) {
        return in_text(text);
    }
    let shown = url(&format!("x://{text}"));
    match shown.strip_prefix("x://") {
        Some(rest) if rest != REDACTED => rest.to_string(),
        _ => REDACTED.into(),
    }
}

/// A program name as it may leave: as written, unless it carries an
/// assignment (`TOKEN=x`), user-info or a URL (then `REDACTED`).
fn program(word: &str) -> String {
    if word.contains('=') || word.contains('@') || word.contains("://") {
        return REDACTED.into();
    }
    word.to_string()
}

fn split_scheme(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once("://")?;
    let mut bytes = scheme.bytes();
    let first = bytes.next()?;
    (first.is_ascii_alphabetic()
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
    .then_some((scheme, rest))
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`; a name of letters, digits,
/// '-', '.', '_', '~' and %-escapes.
fn valid_host_port(authority: &str) -> bool {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((inside, after)) = v6.split_once(']') else {
            return false;
        };
        let (addr, zone) = inside.split_once("%25").unwrap_or((inside, ""));
        if addr.parse::<std::net::Ipv6Addr>().is_err()
            || !zone
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
        {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => ("x", port),
                None => return false,
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => (authority, "0"),
        }
    };
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'%'))
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
}

/// Bytes a path may hold as it leaves: printable ASCII but space, or
/// UTF-8 beyond it.
fn url_byte(b: u8) -> bool {
    b > b' ' && b != 0x7f
}

fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|item| match item.split_once('=') {
            Some((key, _)) if shown_key(key) => format!("{key}={REDACTED}"),
            Some(_) => format!("{REDACTED}={REDACTED}"),
            None if item.is_empty() => String::new(),
            // A bare item is a value (`?s3cr3t`).
            None => REDACTED.into(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn shown_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= KEY_MAX
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'[' | b']'))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_url_value_is_redacted_whole_whatever_its_password_holds() {
        for bad in [
            "http://admin:pa'ss@app/drain",
            "http://admin:pa ss@app/drain",
            "http://admin:pa)ss@app/drain?token=x",
            " http://admin:pa`ss@app/drain ",
        ] {
            let shown = value(bad);
            assert!(!shown.contains("ss@"), "{bad} -> {shown}");
            assert!(!shown.contains("pa"), "{bad} -> {shown}");
            assert!(!shown.contains("token=x"), "{bad} -> {shown}");
        }
        assert_eq!(command("http://u:p@h/x arg", Commands::Program), "REDACTED");
        assert_eq!(command("http://h/x arg", Commands::Program), "REDACTED");
    }

    use super::*;

    /// No secret word of `text` survives in `shown`.
    fn hides(shown: &str, secrets: &[&str]) {
        for secret in secrets {
            assert!(!shown.contains(secret), "{secret:?} leaked in {shown:?}");
        }
    }

    #[test]
    fn query_values_are_replaced_and_names_kept() {
        assert_eq!(
            url("http://app:8080/drain?token=s3cr3t"),
            "http://app:8080/drain?token=REDACTED"
        );
        assert_eq!(
            url("http://app/x?a=1&b=two&c="),
            "http://app/x?a=REDACTED&b=REDACTED&c=REDACTED"
        );
        // A bare item is a value; an odd key is a value too.
        assert_eq!(url("http://app/x?s3cr3t"), "http://app/x?REDACTED");
        assert_eq!(
            url("http://app/x?pass%3Dword=v&ok=1"),
            "http://app/x?REDACTED=REDACTED&ok=REDACTED"
        );
        let long = format!("http://app/?{}=v", "k".repeat(KEY_MAX + 1));
        assert_eq!(url(&long), "http://app/?REDACTED=REDACTED");
        // Empty items and an empty query stay empty.
        assert_eq!(url("http://app/x?"), "http://app/x?");
        assert_eq!(
            url("http://app/x?a=1&&b=2"),
            "http://app/x?a=REDACTED&&b=REDACTED"
        );
        // A query straight after the host.
        assert_eq!(url("http://app?k=v"), "http://app?k=REDACTED");
        // '=' inside the value.
        assert_eq!(url("http://a/?k=v=w"), "http://a/?k=REDACTED");
    }

    #[test]
    fn user_info_and_fragments_never_leave() {
        assert_eq!(url("http://user:pw@app:80/p"), "http://app:80/p");
        assert_eq!(url("http://pw@app/"), "http://app/");
        // The last '@' ends the user-info; an escaped one is no end.
        assert_eq!(url("http://u@x:p@w@app/"), "http://app/");
        assert_eq!(url("http://u%40x:pw@app/"), "http://app/");
        assert_eq!(url("http://app/p#token=x"), "http://app/p");
        assert_eq!(url("http://app/p?k=v#frag"), "http://app/p?k=REDACTED");
        assert_eq!(url("http://app#f?k=v"), "http://app");
        // '@' in a path is a path.
        assert_eq!(url("http://app/users/@me"), "http://app/users/@me");
        hides(
            &url("https://admin:hunter2@db.internal:5432/x?password=hunter3#hunter4"),
            &["admin", "hunter2", "hunter3", "hunter4"],
        );
    }

    #[test]
    fn ipv6_hosts_keep_their_brackets_and_port() {
        assert_eq!(
            url("http://[::1]:8080/drain?t=x"),
            "http://[::1]:8080/drain?t=REDACTED"
        );
        assert_eq!(
            url("http://u:p@[fe80::1%25eth0]/"),
            "http://[fe80::1%25eth0]/"
        );
        assert_eq!(url("http://[2001:db8::2]"), "http://[2001:db8::2]");
        assert_eq!(url("http://[::1]"), "http://[::1]");
    }

    #[test]
    fn malformed_urls_never_leak() {
        for (text, secret) in [
            // A '/' in the password ends the authority early: the host
            // would be the user and the port the password's start.
            ("http://user:pa/ss@host/", "pa"),
            ("http://user:pa/ss@host/", "user"),
            ("http://[::1:secret@host/", "secret"),
            ("http://[::1]secret@h/", "secret"),
            ("http://[not-v6]/", "not-v6"),
            ("http://host:80secret/", "secret"),
            ("http://host:123456/", "123456"),
            ("http://ho st/", "st"),
            ("http://host\\@secret/", "host"),
            ("http://host/pa th?x", "th"),
            ("http://host/a\nsecret", "secret"),
            ("http://[fe80::1%25bad!]/", "bad"),
            ("http:///secret", "secret"),
            ("http://:secret@/", "secret"),
        ] {
            hides(&url(text), &[secret]);
        }
        assert_eq!(url("http://user:pa/ss@host/"), "http://REDACTED");
        // No scheme at all: nothing of it.
        assert_eq!(url("user:pw@host/x?t=1"), "REDACTED");
        assert_eq!(url("://secret"), "REDACTED");
        assert_eq!(url("1http://secret"), "REDACTED");
        assert_eq!(url(""), "REDACTED");
    }

    #[test]
    fn commands_show_their_program_only() {
        let p = |t| command(t, Commands::Program);
        assert_eq!(p("check-drained --password hunter2"), "check-drained");
        assert_eq!(p("/usr/local/bin/ready 'a b'"), "/usr/local/bin/ready");
        assert_eq!(p("  curl -u admin:pw http://x/"), "curl");
        assert_eq!(p("'my prog' --key s3cr3t"), "my prog");
        assert_eq!(p(""), "");
        // Does not split (unclosed quote): the first word, cut at a quote.
        assert_eq!(p("prog --token 'abc"), "prog");
        assert_eq!(p("prog'abc --token x"), "prog");
        // An assignment or a URL as the program leaves nothing of itself.
        assert_eq!(p("TOKEN=abc prog"), "REDACTED");
        assert_eq!(p("user@host"), "REDACTED");
        hides(&p("http://h/x?t=s3cr3t arg"), &["s3cr3t"]);
    }

    #[test]
    fn whole_commands_when_asked_still_hide_url_secrets() {
        let f = |t| command(t, Commands::Full);
        assert_eq!(f("sh -c 'exit 3'"), "sh -c 'exit 3'");
        let shown = f("curl -fsS 'http://admin:pw@app:8080/ready?token=s3cr3t'");
        assert_eq!(shown, "curl -fsS 'http://app:8080/ready?token=REDACTED'");
        hides(&f("wget http://u:hunter2@x/ -O-"), &["hunter2", "u:"]);
        // Does not split: still no URL secret.
        hides(&f("curl 'http://x/?t=s3cr3t"), &["s3cr3t"]);
    }

    #[test]
    fn urls_inside_text_are_redacted_in_place() {
        assert_eq!(
            in_text("GET http://u:p@app/x?t=1 failed: refused"),
            "GET http://app/x?t=REDACTED failed: refused"
        );
        assert_eq!(
            in_text("(http://a/?k=v) and <https://b/#f>"),
            "(http://a/?k=REDACTED) and <https://b/>"
        );
        assert_eq!(in_text("no url here"), "no url here");
        // drainit's own words keep their schemes.
        assert_eq!(
            in_text("only http:// URLs are accepted, not https://"),
            "only http:// URLs are accepted, not https://"
        );
        assert_eq!(in_text("(or tcp://HOST:PORT)"), "(or tcp://HOST:PORT)");
        assert_eq!(in_text("x tcp://HOST:PW@h"), "x tcp://h");
        assert_eq!(in_text("x http://A:B:C"), "x http://REDACTED");
        assert_eq!(in_text("x http://ADMIN:SECRET y"), "x http://REDACTED y");
        assert_eq!(in_text("odd ://secret"), "odd ://REDACTED");
        hides(&in_text("x=http://host:pa/ss@h/"), &["pa", "ss"]);
        assert_eq!(
            in_text("two: http://a?x=1 http://b?y=2"),
            "two: http://a?x=REDACTED http://b?y=REDACTED"
        );
    }

    #[test]
    fn echoed_values_hide_secrets_with_or_without_a_scheme() {
        assert_eq!(value("25s"), "25s");
        assert_eq!(value("/readyForTermination"), "/readyForTermination");
        assert_eq!(value("http://u:pw@h/x?t=1"), "http://h/x?t=REDACTED");
        assert_eq!(value("user:pw@host/x?t=1"), "host/x?t=REDACTED");
        assert_eq!(
            value("host:8080/drain?token=s3cr3t"),
            "host:8080/drain?token=REDACTED"
        );
        hides(&value("a b@c?d=s3cr3t"), &["s3cr3t", "a b"]);
        hides(&value("ftp:/x@y?k=s3cr3t"), &["s3cr3t"]);
    }

    #[test]
    fn what_is_already_clean_leaves_unchanged() {
        for clean in [
            "http://127.0.0.1:8080/drain",
            "http://app/",
            "http://[::1]:9/x/y.z",
            "HTTP://APP/PATH",
            "http://a-b.c_d~e/%20x",
        ] {
            assert_eq!(url(clean), clean);
            assert_eq!(url(&url(clean)), clean, "idempotent");
        }
        let once = url("http://u:p@a/?k=v&x");
        assert_eq!(url(&once), once, "idempotent");
    }
}
