//! Text for log lines, reports and errors: escaping what outsiders send,
//! cutting the values an error echoes, the record of what was already
//! logged once, and the folding of lines that repeat.

use std::time::{Duration, Instant};

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

/// The most characters of one value an error echoes back (a usage error,
/// a `--check` finding): a value of 20,000 characters must not make a
/// line of 20 KB.
pub const ECHO_MAX: usize = 256;

/// `text` cut to `max` characters, an ellipsis marking the cut; as it is
/// when it is no longer.
pub fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((at, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..at])),
    }
}

/// A value as an error echoes it: cut to [`ECHO_MAX`] characters.
pub fn echo(text: &str) -> std::borrow::Cow<'_, str> {
    cut(text, ECHO_MAX)
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

/// At most `burst` log lines of a kind a second (one by default): the
/// lines folded in between are counted and said by the next one allowed.
/// Takes `now` as a value, so the core can use it too.
#[derive(Debug, Default, Clone)]
pub struct Fold {
    /// The start of the current second, and the lines said in it.
    window: Option<Instant>,
    said: u32,
    burst: u32,
    folded: u64,
}

impl Fold {
    /// A fold that lets `burst` lines through each second.
    pub fn with_burst(burst: u32) -> Fold {
        Fold {
            burst,
            ..Fold::default()
        }
    }

    /// The note for a line allowed now (empty, or how many were folded);
    /// None when this one is folded.
    pub fn allow(&mut self, now: Instant) -> Option<String> {
        let fresh = self.window.map_or(true, |t| {
            now.saturating_duration_since(t) >= Duration::from_secs(1)
        });
        if fresh {
            self.window = Some(now);
            self.said = 0;
        }
        if self.said >= self.burst.max(1) {
            self.folded += 1;
            return None;
        }
        self.said += 1;
        Some(match std::mem::take(&mut self.folded) {
            0 => String::new(),
            n => format!(" ({n} more like this folded)"),
        })
    }
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

    #[test]
    fn echoed_values_are_cut_to_their_bound_on_a_character() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "abc…");
        assert_eq!(cut("ééé€", 2), "éé…");
        let long = "x".repeat(20_000);
        let shown = echo(&long);
        assert_eq!(shown.chars().count(), ECHO_MAX + 1);
        assert!(shown.ends_with('…'));
        assert!(matches!(echo("short"), std::borrow::Cow::Borrowed("short")));
    }

    #[test]
    fn folded_lines_are_counted_and_said_once_a_second() {
        let t0 = Instant::now();
        let mut fold = Fold::default();
        assert_eq!(fold.allow(t0).as_deref(), Some(""));
        let folded = (1..=500)
            .filter(|i| fold.allow(t0 + Duration::from_millis(*i)).is_none())
            .count();
        assert_eq!(folded, 500);
        let note = fold.allow(t0 + Duration::from_secs(1)).unwrap();
        assert!(note.contains("500 more"), "{note}");
        assert_eq!(fold.allow(t0 + Duration::from_secs(2)).as_deref(), Some(""));
        // A burst: three a second, then folded.
        let mut fold = Fold::with_burst(3);
        let said = (0..100)
            .filter(|i| fold.allow(t0 + Duration::from_millis(*i)).is_some())
            .count();
        assert_eq!(said, 3);
    }
}
