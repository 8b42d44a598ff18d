//! The app's drain endpoint, one answer at a time: the readiness rules of
//! one poll as a pure function of the response (status, content type, the
//! JSON pointer), and the numeric progress fields it carries.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::proto::http::{Failure, Response};
use crate::util::text::escape;

/// Numeric progress fields kept (and logged) per poll; a body with
/// thousands of them must not flood the log.
pub const MAX_PROGRESS_FIELDS: usize = 8;
/// Longest field name kept, in characters.
const MAX_KEY_CHARS: usize = 64;

/// What one poll said.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub ready: bool,
    /// Why it is not ready: a stable kind (for log-once) and a message.
    pub problem: Option<(String, String)>,
    /// Top-level numeric fields of a JSON body (e.g. `activeExecutions`),
    /// at most `MAX_PROGRESS_FIELDS`, names escaped for the log.
    pub numbers: BTreeMap<String, String>,
    /// A short description for the exit report.
    pub summary: String,
}

/// `application/json` or any `…+json` type, parameters ignored.
pub fn is_json(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || (essence.contains('/') && essence.ends_with("+json"))
}

/// A JSON pointer (RFC 6901) that names a field: starts with `/`, and every
/// `~` is `~0` or `~1`.
pub fn validate_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.starts_with('/') {
        return Err("a JSON pointer starts with '/', e.g. /readyForTermination".into());
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0') | Some('1')) {
            return Err("'~' in a JSON pointer must be written ~0 or ~1".into());
        }
    }
    Ok(())
}

fn not_ready(kind: &str, message: String, summary: String) -> Reading {
    Reading {
        ready: false,
        problem: Some((kind.to_string(), message)),
        numbers: BTreeMap::new(),
        summary,
    }
}

/// The readiness rules of one poll (docs/design/contract.md, "Drain sources").
pub fn evaluate(result: &Result<Response, Failure>, pointer: &str) -> Reading {
    let response = match result {
        Ok(response) => response,
        Err(failure) => {
            let text = failure.to_string();
            return not_ready(failure.kind.as_str(), text.clone(), text);
        }
    };
    let status = response.status;
    if !is_json(response.content_type.as_deref()) {
        let ready = (200..300).contains(&status);
        let summary = format!("HTTP {status}, not JSON");
        if ready {
            return Reading {
                ready,
                problem: None,
                numbers: BTreeMap::new(),
                summary,
            };
        }
        return not_ready(
            &format!("status_{}", crate::proto::http::status_class(status)),
            format!("HTTP {status}"),
            summary,
        );
    }
    let value: Value = match crate::proto::json::parse(&response.body) {
        Ok(value) => value,
        Err(e) => {
            return not_ready(
                "bad_json",
                format!("HTTP {status} with a JSON content type but an unparsable body ({e})"),
                format!("HTTP {status}, unparsable JSON"),
            )
        }
    };
    // Inserted one by one: `collect` into a map sorts a copy first, and
    // the binary would carry a sort for this one map (5 KiB).
    let mut numbers = BTreeMap::new();
    let fields = value.as_object().into_iter().flatten();
    for (k, v) in fields
        .filter(|(_, v)| v.is_number())
        .take(MAX_PROGRESS_FIELDS)
    {
        numbers.insert(escape(k, MAX_KEY_CHARS), v.to_string());
    }
    let mut summary = format!("HTTP {status}");
    match value.pointer(pointer) {
        Some(Value::Bool(ready)) => summary.push_str(&format!(", {pointer}={ready}")),
        _ => summary.push_str(&format!(", no boolean at {pointer}")),
    }
    for (k, v) in &numbers {
        summary.push_str(&format!(", {k}={v}"));
    }
    match value.pointer(pointer) {
        Some(Value::Bool(ready)) => Reading {
            ready: *ready,
            problem: None,
            numbers,
            summary,
        },
        _ => Reading {
            problem: Some((
                "no_boolean".into(),
                format!("HTTP {status} JSON body has no boolean at {pointer}"),
            )),
            ready: false,
            numbers,
            summary,
        },
    }
}

/// The app's in-flight count at `pointer` in a JSON drain body
/// (`--drain-count-field`): None when the answer is not a JSON body at all
/// (nothing to read), `Err` when the field is missing or not a whole
/// non-negative number (never a guess).
pub fn count(
    result: &Result<Response, Failure>,
    pointer: &str,
) -> Option<Result<u64, &'static str>> {
    let response = result.as_ref().ok()?;
    if !is_json(response.content_type.as_deref()) {
        return None;
    }
    let value = crate::proto::json::parse(&response.body).ok()?;
    Some(match value.pointer(pointer) {
        None => Err("no such field"),
        Some(v) => v.as_u64().ok_or("not a whole non-negative number"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::http::Kind;

    fn json(status: u16, body: &str) -> Result<Response, Failure> {
        Ok(Response {
            status,
            content_type: Some("application/json".into()),
            body: body.as_bytes().to_vec(),
            ..Response::default()
        })
    }

    fn plain(status: u16, content_type: Option<&str>) -> Result<Response, Failure> {
        Ok(Response {
            status,
            content_type: content_type.map(String::from),
            body: b"OK".to_vec(),
            ..Response::default()
        })
    }

    const FIELD: &str = "/readyForTermination";

    #[test]
    fn counts_are_whole_numbers_or_nothing() {
        let body = r#"{"activeExecutions":3,"x":{"n":1.5},"s":"4","neg":-1}"#;
        assert_eq!(count(&json(200, body), "/activeExecutions"), Some(Ok(3)));
        assert!(matches!(count(&json(200, body), "/x/n"), Some(Err(_))));
        assert!(matches!(count(&json(200, body), "/s"), Some(Err(_))));
        assert!(matches!(count(&json(200, body), "/neg"), Some(Err(_))));
        assert!(matches!(count(&json(200, body), "/missing"), Some(Err(_))));
        assert_eq!(count(&plain(200, Some("text/plain")), "/a"), None);
    }

    #[test]
    fn json_decides_by_the_boolean() {
        assert!(evaluate(&json(200, r#"{"readyForTermination":true}"#), FIELD).ready);
        assert!(!evaluate(&json(200, r#"{"readyForTermination":false}"#), FIELD).ready);
        // JSON decides even when the status says otherwise.
        assert!(evaluate(&json(503, r#"{"readyForTermination":true}"#), FIELD).ready);
        assert!(
            !evaluate(
                &json(503, r#"{"readyForTermination":false,"activeExecutions":3}"#),
                FIELD
            )
            .ready
        );
        assert!(evaluate(&json(200, r#"{"drain":{"done":true}}"#), "/drain/done").ready);
        assert!(evaluate(&json(200, r#"{"a/b":true}"#), "/a~1b").ready);
        assert!(evaluate(&json(200, r#"[false, true]"#), "/1").ready);
    }

    #[test]
    fn json_without_a_boolean_is_not_ready() {
        for body in [
            r#"{"readyForTermination":"true"}"#,
            r#"{"readyForTermination":1}"#,
            r#"{"readyForTermination":null}"#,
            r#"{}"#,
            r#"[]"#,
            r#"true"#,
            r#"{"readyForTermination":true"#,
            "",
            "not json",
            "\u{0}\u{1}garbage",
        ] {
            let r = evaluate(&json(200, body), FIELD);
            assert!(!r.ready, "{body:?}");
            assert!(r.problem.is_some(), "{body:?}");
        }
    }

    #[test]
    fn other_responses_decide_by_status() {
        assert!(evaluate(&plain(200, Some("text/plain")), FIELD).ready);
        assert!(evaluate(&plain(204, None), FIELD).ready);
        assert!(evaluate(&plain(299, Some("text/html")), FIELD).ready);
        for status in [100, 300, 404, 429, 500, 503] {
            assert!(
                !evaluate(&plain(status, Some("text/plain")), FIELD).ready,
                "{status}"
            );
        }
    }

    #[test]
    fn failures_are_not_ready() {
        for failure in [
            Failure::new(Kind::Refused, "refused"),
            Failure::new(Kind::Timeout, "timed out"),
            Failure::new(Kind::TooLarge, "too large"),
            Failure::new(Kind::Redirect, "redirect"),
            Failure::new(Kind::Reset, "reset"),
        ] {
            let r = evaluate(&Err(failure.clone()), FIELD);
            assert!(!r.ready);
            assert_eq!(r.problem.unwrap().0, failure.kind.as_str());
        }
    }

    #[test]
    fn json_content_types() {
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/problem+json",
            "application/vnd.api+json",
        ] {
            assert!(is_json(Some(ct)), "{ct}");
        }
        for ct in [
            "text/plain",
            "text/json+html",
            "json",
            "+json",
            "application/jsonx",
            "",
        ] {
            assert!(!is_json(Some(ct)), "{ct}");
        }
        assert!(!is_json(None));
    }

    #[test]
    fn numeric_fields_are_collected() {
        let r = evaluate(
            &json(
                503,
                r#"{"readyForTermination":false,"activeExecutions":3,"queue":1.5,"name":"x"}"#,
            ),
            FIELD,
        );
        assert_eq!(
            r.numbers.get("activeExecutions").map(String::as_str),
            Some("3")
        );
        assert_eq!(r.numbers.get("queue").map(String::as_str), Some("1.5"));
        assert!(!r.numbers.contains_key("name"));
        assert!(r.summary.contains("activeExecutions=3"), "{}", r.summary);
    }

    #[test]
    fn progress_fields_are_capped_and_escaped() {
        let mut body = String::from("{\"readyForTermination\":false");
        for i in 0..1000 {
            body.push_str(&format!(",\"f{i:05}\":{i}"));
        }
        body.push_str(",\"evil\\nkey\":1}");
        let r = evaluate(&json(200, &body), FIELD);
        assert_eq!(r.numbers.len(), MAX_PROGRESS_FIELDS);
        assert!(r.summary.len() < 1024, "{}", r.summary.len());
        let r = evaluate(&json(200, "{\"evil\\nkey\\u2028\":1}"), FIELD);
        let key = r.numbers.keys().next().unwrap();
        assert_eq!(key, "evil\\nkey\\u{2028}");
        assert!(!r.summary.contains('\n'));
    }

    #[test]
    fn pointers() {
        for ok in ["/readyForTermination", "/a/b", "/a~0b", "/a~1b", "/", "/0"] {
            assert!(validate_pointer(ok).is_ok(), "{ok}");
        }
        for bad in ["", "readyForTermination", "a/b", "/a~2", "/a~", "#/a"] {
            assert!(validate_pointer(bad).is_err(), "{bad}");
        }
    }
}
