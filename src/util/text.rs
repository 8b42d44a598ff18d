//! Text for log lines and reports: escaping what outsiders send, and the
//! record of what was already logged once.

/// Text from outside (an endpoint's keys, strings, reasons) made safe for a
/// log line: control characters, line separators and backslashes are
/// escaped, so it can never end the line or forge another, and it is cut to
/// `max` characters (an ellipsis marks the cut).
pub fn escape(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 3);
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                out.extend(c.escape_default())
            }
            c => out.push(c),
        }
    }
    out
}

/// True the first time `kind` is seen: a "logged once per kind" record.
/// The kinds come from fixed sets (failure kinds, ECS complaint kinds), so
/// a list stays short; it also costs less binary than a `BTreeSet`.
pub fn first_time(seen: &mut Vec<String>, kind: &str) -> bool {
    if seen.iter().any(|k| k == kind) {
        return false;
    }
    seen.push(kind.to_string());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_text_stays_on_one_line() {
        assert_eq!(escape("plain key", 64), "plain key");
        assert_eq!(escape("a\nforged line", 64), "a\\nforged line");
        assert_eq!(escape("\r\t\u{1b}[31m\u{0}", 64), "\\r\\t\\u{1b}[31m\\u{0}");
        assert_eq!(escape("back\\slash", 64), "back\\\\slash");
        assert_eq!(escape("\u{2028}\u{85}", 64), "\\u{2028}\\u{85}");
        assert_eq!(escape("abcdef", 3), "abc…");
        assert_eq!(escape("é€", 64), "é€");
        for text in ["x\ny", "\u{7f}", "\u{2029}z"] {
            assert!(
                !escape(text, 64).chars().any(|c| c.is_control()),
                "{text:?}"
            );
        }
    }
}
