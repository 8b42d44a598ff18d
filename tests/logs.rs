//! Every log line drainit can print at info level or above is on the
//! troubleshooting page (docs/troubleshooting.md). The test reads the
//! source, not the binary: each `error!`, `warn!` and `info!` in `src/`
//! whose format string is a literal gives its fixed parts (the text
//! between the `{…}` placeholders), and each fixed part with a few words in
//! it must appear on the page (whitespace and markdown's `\|` aside). It
//! follows the messages, not where they are: moving a line to another
//! file or function changes nothing, rewording it needs the page too.
//!
//! A message whose whole text comes from a variable (`info!("{line}")`)
//! has no fixed part to look for; lines logged through the logger's own
//! notes (`N log lines were dropped…`) are checked by their own tests.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The log macros whose lines a user sees by default or with a drain
/// option (debug and trace are for developers).
const MACROS: &[&str] = &["error!", "warn!", "info!"];

/// A fixed part needs this many letters to be worth looking for: `": "` or
/// `" ms"` say nothing about which line it is.
const MIN_LETTERS: usize = 4;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A Rust string literal at the start of `text` (`"…"`, `r"…"`, `r#"…"#`),
/// unescaped; None when `text` does not start with one.
fn string_literal(text: &str) -> Option<String> {
    if let Some(raw) = text.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        let body = raw[hashes..].strip_prefix('"')?;
        let end = body.find(&format!("\"{}", "#".repeat(hashes)))?;
        return Some(body[..end].to_string());
    }
    let mut chars = text.strip_prefix('"')?.chars().peekable();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                '\n' => {
                    // A continuation: the newline and the next line's
                    // leading whitespace are not part of the string.
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        chars.next();
                    }
                }
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(u8::from_str_radix(&hex, 16).ok()? as char);
                }
                'u' => {
                    let code: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    out.push(char::from_u32(
                        u32::from_str_radix(code.trim_start_matches('{'), 16).ok()?,
                    )?);
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// The text of a format string between its placeholders (`{}`, `{x:?}`);
/// `{{` and `}}` are literal braces.
fn fixed_parts(format: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
                parts.last_mut().unwrap().push(c);
            }
            ('{', _) => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                parts.push(String::new());
            }
            (c, _) => parts.last_mut().unwrap().push(c),
        }
    }
    parts
}

fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One log call: where, which macro, and its format string (None when the
/// format is not a literal).
struct Call {
    place: String,
    level: &'static str,
    format: Option<String>,
}

fn calls_in(name: &str, source: &str) -> Vec<Call> {
    let mut calls = Vec::new();
    for level in MACROS {
        let mut from = 0;
        while let Some(found) = source[from..].find(level) {
            let at = from + found;
            from = at + level.len();
            // A whole name (`warn!`, `log::warn!`), not `unwarn!`.
            let before = source[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
            if source[line_start..at].trim_start().starts_with("//") {
                continue;
            }
            let Some(args) = source[from..].trim_start().strip_prefix('(') else {
                continue;
            };
            let mut args = args.trim_start();
            if let Some(rest) = args.strip_prefix("target:") {
                // `target: EXPR, "format"`: the expression has no comma.
                args = rest.split_once(',').map_or("", |(_, r)| r).trim_start();
            }
            let line = source[..at].matches('\n').count() + 1;
            calls.push(Call {
                place: format!("{name}:{line}"),
                level,
                format: string_literal(args),
            });
        }
    }
    calls
}

#[test]
fn every_log_line_is_on_the_troubleshooting_page() {
    let page_path = Path::new(ROOT).join("docs/troubleshooting.md");
    let page = normalise(
        &std::fs::read_to_string(&page_path)
            .unwrap()
            .replace("\\|", "|"),
    );
    let mut files = Vec::new();
    rust_files(&Path::new(ROOT).join("src"), &mut files);
    files.sort();
    let mut checked = 0;
    let mut missing = Vec::new();
    for file in files {
        let name = file.strip_prefix(ROOT).unwrap().display().to_string();
        let source = std::fs::read_to_string(&file).unwrap();
        for call in calls_in(&name, &source) {
            let Some(format) = call.format else {
                continue;
            };
            for part in fixed_parts(&format) {
                let part = normalise(&part);
                if part.chars().filter(char::is_ascii_alphabetic).count() < MIN_LETTERS {
                    continue;
                }
                checked += 1;
                if !page.contains(&part) {
                    missing.push(format!(
                        "  {} {}(\"{}\")\n      not on the page: \"{part}\"",
                        call.place,
                        call.level,
                        format.escape_debug()
                    ));
                }
            }
        }
    }
    // The scan must find the log calls: a change of style (another macro
    // name) would otherwise make this test pass on nothing.
    assert!(checked >= 60, "only {checked} fixed parts found in src/");
    assert!(
        missing.is_empty(),
        "{} log line part(s) are not in docs/troubleshooting.md; add each line \
         (placeholders as …) with what it means and what to do:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_scan_reads_format_strings_as_rustc_does() {
    let source = "fn f() {\n    // warn!(\"a comment\")\n    log::warn!(\n        \"cannot start {what}: {e}; \\\n         it goes on {{braces}}\"\n    );\n    info!(target: REPORT, \"{report}\");\n    error!(\"{}\", msg);\n    info!(r#\"raw \"quoted\" {x:?} text\"#);\n}\n";
    let calls = calls_in("f.rs", source);
    let formats: Vec<(String, &str, Option<String>)> = calls
        .into_iter()
        .map(|c| (c.place, c.level, c.format))
        .collect();
    assert_eq!(
        formats,
        vec![
            ("f.rs:8".into(), "error!", Some("{}".into())),
            (
                "f.rs:3".into(),
                "warn!",
                Some("cannot start {what}: {e}; it goes on {{braces}}".into())
            ),
            ("f.rs:7".into(), "info!", Some("{report}".into())),
            (
                "f.rs:9".into(),
                "info!",
                Some("raw \"quoted\" {x:?} text".into())
            ),
        ]
    );
    assert_eq!(
        fixed_parts("cannot start {what}: {e}; it goes on {{braces}}"),
        vec!["cannot start ", ": ", "; it goes on {braces}"]
    );
}
