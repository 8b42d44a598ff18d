//! `--drain-url`: a drain source asked by an HTTP GET on a request thread
//! (the round's lane, or protection's). Its body is read by
//! `proto::drain_body` (`--drain-field`), and it may carry the app's
//! in-flight count (`--drain-count-field`).

use crate::core::event::Answer;
use crate::core::settings::Config;
use crate::core::sources::{About, AnyKind, How, Kind, Read, Reply};
use crate::proto::drain_body;
use crate::proto::http::Target;

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

/// `url` without user-info, query or fragment.
pub fn public_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let rest = &rest[..end];
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{authority}{path}")
}

impl Kind for Url {
    fn about(&self) -> About {
        About {
            name: "url",
            target: self.url.clone(),
            public: public_url(&self.url),
            protects: true,
        }
    }

    fn ask(&self) -> How {
        How::Send(Target {
            method: "GET".into(),
            url: self.url.clone(),
        })
    }

    fn read(&self, reply: Reply<'_>) -> Read {
        let Reply::Http(result) = reply else {
            return Read::answer(Answer::NoAnswer("not a request".into()));
        };
        let reading = drain_body::evaluate(result, &self.field);
        let count = self
            .count_field
            .as_deref()
            .and_then(|pointer| Some((pointer, drain_body::count(result, pointer)?)));
        let mut summary = reading.summary.clone();
        if let Some((pointer, Ok(n))) = count {
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
        let failure = result.as_ref().err().map(|f| {
            let message = format!(
                "drain endpoint {}: {f}",
                crate::util::text::escape(&self.url, 200)
            );
            (f.kind().to_string(), message)
        });
        Read {
            answer,
            summary: Some(summary),
            count: count.map(|(pointer, c)| (pointer.to_string(), c)),
            failure,
        }
    }
}
