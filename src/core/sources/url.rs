//! `--drain-url`: a drain source asked by an HTTP GET on a request thread
//! (the round's lane, or protection's). Its body is read by
//! `proto::drain_body` (`--drain-field`), and it may carry the app's
//! in-flight count (`--drain-count-field`).

use crate::core::event::Answer;
use crate::core::settings::Config;
use crate::core::sources::{About, AnyKind, How, Kind, Read, Reply};
use crate::proto::drain_body;
use crate::proto::exchange::Request;
use crate::util::redact;

/// The statuses that mean the URL itself is wrong (its path, port or
/// method), not that the app is busy.
pub const WRONG_URL: [u16; 4] = [401, 403, 404, 405];

/// The status besides 2xx a drain endpoint answers with (busy); an answer
/// in any other carries no in-flight count.
pub const DRAIN_BUSY: u16 = 503;

/// The in-flight count (`--drain-count-field`) as one answer carried it.
/// Anything but a number clears the count: no count is better than a
/// wrong one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A whole number at the pointer.
    Read(u64),
    /// A JSON answer in a drain status without a whole number there: why
    /// (said once).
    Bad(&'static str),
    /// An answer that cannot carry one: no answer at all, not JSON, an
    /// unparsable body, a status other than 2xx or 503.
    Unreadable,
}

pub struct Url {
    url: String,
    field: String,
    count_field: Option<String>,
}

/// The URL sources of a run, in the order given.
pub fn from_config(config: &Config) -> impl Iterator<Item = AnyKind> + '_ {
    config.drain_urls.iter().map(|url| -> AnyKind {
        AnyKind::Url(Url {
            url: url.clone(),
            field: config.drain_field.clone(),
            count_field: config.drain_count_field.clone(),
        })
    })
}

/// `url` as it may leave drainit (the report, the logs, `/status`): the
/// one redaction rule, `util::redact::url`.
pub fn public_url(url: &str) -> String {
    redact::url(url)
}

impl Kind for Url {
    fn about(&self) -> About {
        About {
            name: "url",
            target: public_url(&self.url),
            public: public_url(&self.url),
            protects: true,
        }
    }

    fn ask(&self) -> How {
        How::Send(Request::get(&self.url))
    }

    fn read(&self, reply: Reply<'_>) -> Read {
        let Reply::Http(result) = reply else {
            return Read::answer(Answer::NoAnswer("not a request".into()));
        };
        let reading = drain_body::evaluate(result, &self.field);
        let status = result.as_ref().ok().map(|r| r.status);
        // Only an answer in a drain status carries a count; any other
        // (no answer, a proxy's 502, an error page) clears it.
        let counts = status.is_some_and(|s| (200..300).contains(&s) || s == DRAIN_BUSY);
        let count = self.count_field.as_deref().map(|pointer| {
            let count = match drain_body::count(result, pointer) {
                Some(Ok(n)) if counts => Count::Read(n),
                Some(Err(why)) if counts => Count::Bad(why),
                _ => Count::Unreadable,
            };
            (pointer, count)
        });
        let mut summary = reading.summary.clone();
        if let Some((pointer, Count::Read(n))) = count {
            // Said once: a top-level count is among the body's numbers.
            if !reading
                .numbers
                .contains_key(pointer.trim_start_matches('/'))
            {
                summary.push_str(&format!(", in flight {n}"));
            }
        }
        let answer = match (result, reading.ready) {
            (_, true) => Answer::Ready,
            (Err(failure), false) => Answer::NoAnswer(failure.to_string()),
            (Ok(_), false) => Answer::NotReady(summary.clone()),
        };
        // A status that says the URL itself is wrong, in an answer that
        // did not decide by its body.
        let wrong_url =
            status.filter(|s| WRONG_URL.contains(s) && !reading.ready && reading.problem.is_some());
        let failure = result.as_ref().err().map(|f| {
            let message = format!(
                "drain endpoint {}: {f}",
                crate::util::text::escape(&public_url(&self.url), 200)
            );
            (f.kind, message)
        });
        let never_ready = reading
            .problem
            .as_ref()
            .is_some_and(|(kind, _)| kind == "bad_json" || kind == "no_boolean");
        Read {
            answer,
            summary: Some(summary),
            count: count.map(|(pointer, c)| (pointer.to_string(), c)),
            failure,
            wrong_url,
            never_ready,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::http::{Failure, Kind as FailureKind, Response};

    fn source() -> Url {
        Url {
            url: "http://u:pw@app/drain?token=s3cr3t".into(),
            field: "/readyForTermination".into(),
            count_field: Some("/activeExecutions".into()),
        }
    }

    fn reply(status: u16, content_type: &str, body: &str) -> Result<Response, Failure> {
        Ok(Response {
            status,
            content_type: Some(content_type.into()),
            body: body.as_bytes().to_vec(),
            ..Response::default()
        })
    }

    fn count(result: &Result<Response, Failure>) -> Count {
        source().read(Reply::Http(result)).count.unwrap().1
    }

    #[test]
    fn only_a_drain_status_with_a_number_carries_the_count() {
        let json = "application/json";
        let busy = r#"{"readyForTermination":false,"activeExecutions":7}"#;
        assert_eq!(count(&reply(503, json, busy)), Count::Read(7));
        assert_eq!(count(&reply(200, json, busy)), Count::Read(7));
        for unreadable in [
            reply(502, "text/html", "<html>7</html>"),
            reply(500, json, busy),
            reply(429, json, busy),
            reply(503, json, r#"{"activeExecutions":7"#),
            Err(Failure::new(FailureKind::Refused, "connection refused")),
            Err(Failure::new(FailureKind::Timeout, "timed out")),
        ] {
            assert_eq!(count(&unreadable), Count::Unreadable, "{unreadable:?}");
        }
        assert!(matches!(
            count(&reply(503, json, r#"{"readyForTermination":false}"#)),
            Count::Bad(_)
        ));
        assert!(matches!(
            count(&reply(200, json, r#"{"activeExecutions":"7"}"#)),
            Count::Bad(_)
        ));
    }

    #[test]
    fn wrong_url_statuses_unless_a_json_body_decides() {
        let wrong = |r: Result<Response, Failure>| source().read(Reply::Http(&r)).wrong_url;
        for status in WRONG_URL {
            assert_eq!(wrong(reply(status, "text/html", "no")), Some(status));
        }
        assert_eq!(wrong(reply(503, "text/plain", "busy")), None);
        assert_eq!(wrong(reply(500, "text/plain", "oops")), None);
        let decided = r#"{"readyForTermination":false}"#;
        assert_eq!(wrong(reply(404, "application/json", decided)), None);
        // A JSON 404 without the boolean is a wrong URL too.
        assert_eq!(wrong(reply(404, "application/json", "{}")), Some(404));
    }

    #[test]
    fn what_leaves_is_redacted() {
        let about = source().about();
        assert_eq!(about.target, "http://app/drain?token=REDACTED");
        assert_eq!(about.public, about.target);
        let refused = Err(Failure::new(FailureKind::Refused, "connection refused"));
        let (_, message) = source().read(Reply::Http(&refused)).failure.unwrap();
        assert_eq!(
            message,
            "drain endpoint http://app/drain?token=REDACTED: connection refused"
        );
    }
}
