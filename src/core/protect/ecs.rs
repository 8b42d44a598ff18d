//! ECS task scale-in protection, the back-end of `core::protect` for
//! Amazon ECS: on while the app is busy, renewed before it expires, off
//! when the app goes idle, through the ECS agent's task-protection
//! endpoint (`--ecs-protect`). Only changes and renewals are sent.

use std::time::{Duration, Instant};

use log::info;

use crate::core::complaints::{Complaints, Key};
use crate::core::deadline::Deadline;
use crate::core::protect::{Backend, Report};
use crate::core::settings::Config;
use crate::proto::ecs_body::{parse_protection_answer, protection_body, ProtectionAnswer};
use crate::proto::exchange::{Endpoint, Method, Request};
use crate::proto::http::{status_class, Failure, Response};
use crate::util::text::escape;

/// The ECS back-end, when `--ecs-protect` is on.
pub fn from_config(config: &Config) -> Option<Protection> {
    let p = config.ecs.as_ref()?.protect.as_ref()?;
    Some(Protection::new(&p.agent_uri, p.interval, p.minutes))
}

/// Task scale-in protection: on while the app is busy, renewed before it
/// expires, off when the app goes idle. Only changes and renewals are sent.
#[derive(Debug)]
pub struct Protection {
    pub state_url: String,
    pub interval: Duration,
    pub minutes: u32,
    pub next_poll: Option<Instant>,
    pub put_in_flight: bool,
    /// The state sent, and when, while its answer is awaited.
    sent: Option<(bool, Instant)>,
    /// What the agent last accepted; off until told otherwise (a new task
    /// starts unprotected).
    on: bool,
    /// When an accepted "on" must be renewed.
    renew_at: Option<Instant>,
    complaints: Complaints,
}

impl Protection {
    pub fn new(agent_uri: &str, interval: Duration, minutes: u32) -> Protection {
        Protection {
            state_url: format!(
                "{}/task-protection/v1/state",
                agent_uri.trim_end_matches('/')
            ),
            interval,
            minutes,
            next_poll: None,
            put_in_flight: false,
            sent: None,
            on: false,
            renew_at: None,
            complaints: Complaints::default(),
        }
    }

    /// Renew at half the protection's life, and at least two polls before
    /// it ends.
    fn renewal_after(&self) -> Duration {
        let life = Duration::from_secs(u64::from(self.minutes) * 60);
        (life / 2)
            .min(life.saturating_sub(self.interval * 2))
            .max(Duration::from_secs(1))
    }

    /// Given whether the app is busy, the state to send now, if any.
    /// What the agent last accepted.
    pub fn is_on(&self) -> bool {
        self.on
    }

    pub fn wanted(&self, busy: bool, now: Instant) -> Option<bool> {
        if self.put_in_flight {
            return None;
        }
        match (busy, self.on) {
            (true, false) => Some(true),
            (true, true) if self.renew_at.is_some_and(|at| now >= at) => Some(true),
            (false, true) => Some(false),
            _ => None,
        }
    }

    /// Records the agent's answer to a PUT of `enabled`.
    pub fn on_put(&mut self, enabled: bool, result: Result<Response, Failure>, sent_at: Instant) {
        self.put_in_flight = false;
        let response = match result {
            Ok(response) => response,
            Err(failure) => return self.complain(Key::Failed(failure.kind), &failure.to_string()),
        };
        match parse_protection_answer(response.status, &response.body) {
            ProtectionAnswer::Applied { expiration } if (200..300).contains(&response.status) => {
                if enabled {
                    info!(
                        "task scale-in protection on for {} min (expires {})",
                        self.minutes,
                        escape(expiration.as_deref().unwrap_or("?"), 40)
                    );
                    self.renew_at = Some(sent_at + self.renewal_after());
                } else {
                    info!("task scale-in protection off: the app is idle");
                    self.renew_at = None;
                }
                self.on = enabled;
            }
            // The agent's words are not keys: one key per kind of answer.
            ProtectionAnswer::Failure { reason } => self.complain(
                Key::Refused,
                &format!("agent refused: Reason {}", escape(&reason, 100)),
            ),
            ProtectionAnswer::Error { code, message } => self.complain(
                Key::Error,
                &format!(
                    "agent error {}: {}",
                    escape(&code, 100),
                    escape(&message, 200)
                ),
            ),
            ProtectionAnswer::Applied { .. } => self.complain(
                Key::Status(status_class(response.status)),
                &format!("HTTP {}", response.status),
            ),
            ProtectionAnswer::Unexpected(what) => {
                self.complain(Key::Unexpected(status_class(response.status)), &what)
            }
        }
    }
}

impl Backend for Protection {
    fn interval(&self) -> Duration {
        self.interval
    }

    fn request(&mut self, busy: bool, now: Instant) -> Option<Request> {
        let enabled = self.wanted(busy, now)?;
        self.put_in_flight = true;
        self.sent = Some((enabled, now));
        let body = protection_body(enabled, self.minutes)
            .to_string()
            .into_bytes();
        let endpoint = Endpoint::HttpUrl(self.state_url.clone());
        Some(Request::new(endpoint, Method::Put).with_body(Some(body)))
    }

    fn on_answer(&mut self, result: Result<Response, Failure>, _: Instant) {
        if let Some((enabled, sent_at)) = self.sent.take() {
            self.on_put(enabled, result, sent_at);
        }
    }

    fn is_on(&self) -> bool {
        self.on
    }

    fn report(&self, _: &Deadline) -> Report {
        Report {
            protected: self.is_on(),
            top_level: true,
            gauge: (
                "drainit_ecs_task_protected",
                "1 while ECS task scale-in protection is on (as the agent last accepted).",
            ),
            requests: (
                "drainit_ecs_protection_requests_total",
                "Task-protection updates sent to the ECS agent, by result.",
            ),
            words: None,
        }
    }

    fn complain(&mut self, key: Key, message: &str) {
        self.complaints.once(key, "task protection", message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_cannot_flood_the_log_once_keys() {
        let answer = |status| {
            Ok(Response {
                status,
                content_type: None,
                body: b"x".to_vec(),
                ..Response::default()
            })
        };
        let mut protection = Protection::new("http://127.0.0.1:1", Duration::from_secs(1), 5);
        for status in 100..1000 {
            protection.on_put(true, answer(status), Instant::now());
        }
        assert!(
            protection.complaints.logged.len() <= 6,
            "{:?}",
            protection.complaints.logged
        );
    }

    #[test]
    fn protection_answers() {
        let ok = include_str!("../../../tests/fixtures/ecs/task-protection-ok.json");
        assert_eq!(
            parse_protection_answer(200, ok.as_bytes()),
            ProtectionAnswer::Applied {
                expiration: Some("2022-10-06T02:29:16Z".into())
            }
        );
        let failure = include_str!("../../../tests/fixtures/ecs/task-protection-failure.json");
        assert_eq!(
            parse_protection_answer(200, failure.as_bytes()),
            ProtectionAnswer::Failure {
                reason: "TASK_NOT_VALID".into()
            }
        );
        let denied = include_str!("../../../tests/fixtures/ecs/task-protection-access-denied.json");
        assert!(
            matches!(parse_protection_answer(400, denied.as_bytes()), ProtectionAnswer::Error { code, .. } if code == "AccessDeniedException")
        );
        let timeout = include_str!("../../../tests/fixtures/ecs/task-protection-timeout.json");
        assert!(
            matches!(parse_protection_answer(500, timeout.as_bytes()), ProtectionAnswer::Error { code, .. } if code == "RequestCanceled")
        );
        assert!(matches!(
            parse_protection_answer(429, b"Too Many Requests"),
            ProtectionAnswer::Unexpected(_)
        ));
        assert!(matches!(
            parse_protection_answer(500, b"\"internal error\""),
            ProtectionAnswer::Unexpected(_)
        ));
        assert!(matches!(
            parse_protection_answer(200, b"{}"),
            ProtectionAnswer::Unexpected(_)
        ));
    }

    #[test]
    fn protection_state_machine() {
        let t0 = Instant::now();
        let mut p = Protection::new("http://127.0.0.1:1/api/x/", Duration::from_secs(10), 60);
        assert_eq!(
            p.state_url,
            "http://127.0.0.1:1/api/x/task-protection/v1/state"
        );
        assert_eq!(p.wanted(false, t0), None, "idle and off: nothing to send");
        assert_eq!(p.wanted(true, t0), Some(true));
        let ok = Response {
            status: 200,
            content_type: Some("application/json".into()),
            body: br#"{"protection":{"ProtectionEnabled":true}}"#.to_vec(),
            ..Response::default()
        };
        p.on_put(true, Ok(ok.clone()), t0);
        assert!(p.on);
        assert_eq!(
            p.wanted(true, t0 + Duration::from_secs(60)),
            None,
            "busy and on: not re-sent"
        );
        assert_eq!(
            p.wanted(true, t0 + Duration::from_secs(30 * 60)),
            Some(true),
            "renewed at half-life"
        );
        assert_eq!(p.wanted(false, t0 + Duration::from_secs(61)), Some(false));
        p.on_put(false, Ok(ok), t0);
        assert!(!p.on);
        assert_eq!(p.wanted(false, t0), None);
        // A refused PUT changes nothing, so it is retried.
        let refused = Response {
            status: 200,
            content_type: None,
            body: br#"{"failure":{"Reason":"TASK_NOT_VALID"}}"#.to_vec(),
            ..Response::default()
        };
        p.on_put(true, Ok(refused), t0);
        assert!(!p.on);
        assert_eq!(p.wanted(true, t0), Some(true));
        // One-minute protection polled every 10 s renews at 30 s.
        let short = Protection::new("http://x", Duration::from_secs(10), 1);
        assert_eq!(short.renewal_after(), Duration::from_secs(30));
        let tight = Protection::new("http://x", Duration::from_secs(25), 1);
        assert_eq!(tight.renewal_after(), Duration::from_secs(10));
    }

    #[test]
    fn protection_bodies() {
        assert_eq!(
            protection_body(true, 60).to_string(),
            r#"{"ExpiresInMinutes":60,"ProtectionEnabled":true}"#
        );
        assert_eq!(
            protection_body(false, 60).to_string(),
            r#"{"ProtectionEnabled":false}"#
        );
    }

    #[test]
    fn agent_text_cannot_forge_log_lines() {
        for body in ["rate limited\n[drainit] WARN  forged", "{\"x\":\"a\\nb\"}"] {
            let ProtectionAnswer::Unexpected(text) = parse_protection_answer(429, body.as_bytes())
            else {
                panic!("{body:?}");
            };
            assert!(!text.contains('\n'), "{text:?}");
        }
        let long = "x".repeat(70_000);
        let ProtectionAnswer::Unexpected(text) = parse_protection_answer(500, long.as_bytes())
        else {
            panic!("long body");
        };
        assert!(text.len() < 200, "{}", text.len());
    }
}
