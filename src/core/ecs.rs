//! Amazon ECS policy: the state of the metadata watch that turns
//! `DesiredStatus: STOPPED` into a stop, and the scale-in protection state
//! machine that keeps protection on while the app is busy.

use std::time::{Duration, Instant};

use log::{info, warn};

use crate::proto::ecs_body::{
    is_stopping, parse_container, parse_protection_answer, parse_task, Container, ProtectionAnswer,
    Task,
};
use crate::proto::http::{status_class, Failure, Response};
use crate::util::text::escape;

/// Logs each kind of endpoint failure once.
#[derive(Debug, Default)]
pub struct Complaints {
    logged: Vec<String>,
}

impl Complaints {
    pub fn once(&mut self, kind: &str, what: &str, message: &str) {
        if crate::util::text::first_time(&mut self.logged, kind) {
            warn!("{what}: {message} (logged once per kind; polling goes on)");
        }
    }
}

/// The metadata watch: when to poll, and what the answers mean.
#[derive(Debug)]
pub struct Watch {
    pub task_url: String,
    pub container_url: String,
    pub interval: Duration,
    pub next_poll: Option<Instant>,
    pub in_flight: bool,
    pub me: Option<Container>,
    pub task: Option<Task>,
    complaints: Complaints,
}

impl Watch {
    pub fn new(base: &str, interval: Duration) -> Watch {
        let base = base.trim_end_matches('/');
        Watch {
            task_url: format!("{base}/task"),
            container_url: base.to_string(),
            interval,
            next_poll: None,
            in_flight: false,
            me: None,
            task: None,
            complaints: Complaints::default(),
        }
    }

    pub fn on_container(&mut self, result: Result<Response, Failure>) {
        match result
            .map_err(|f| (f.kind().to_string(), f.to_string()))
            .and_then(|r| {
                if r.status != 200 {
                    return Err((
                        format!("container_status_{}", status_class(r.status)),
                        format!("HTTP {}", r.status),
                    ));
                }
                parse_container(&r.body).map_err(|e| ("container_malformed".to_string(), e))
            }) {
            Ok(me) => self.me = Some(me),
            Err((kind, message)) => self
                .complaints
                .once(&kind, "ECS container metadata", &message),
        }
    }

    /// Records a task answer; true when the task (or this container) is
    /// meant to stop.
    pub fn on_task(&mut self, result: Result<Response, Failure>) -> bool {
        self.in_flight = false;
        let parsed = result
            .map_err(|f| (f.kind().to_string(), f.to_string()))
            .and_then(|r| {
                if r.status != 200 {
                    return Err((
                        format!("status_{}", status_class(r.status)),
                        format!("HTTP {}", r.status),
                    ));
                }
                parse_task(&r.body).map_err(|e| ("malformed".to_string(), e))
            });
        match parsed {
            Ok(task) => {
                if self.task.is_none() {
                    info!(
                        "ECS task {} (family {}, revision {}, launch type {})",
                        escape(&task.task_arn, 200),
                        escape(&task.family, 100),
                        escape(&task.revision, 20),
                        escape(&task.launch_type, 20)
                    );
                }
                let stopping = is_stopping(&task, self.me.as_ref());
                self.task = Some(task);
                stopping
            }
            Err((kind, message)) => {
                self.complaints.once(&kind, "ECS task metadata", &message);
                false
            }
        }
    }
}

/// Task scale-in protection: on while the app is busy, renewed before it
/// expires, off when the app goes idle. Only changes and renewals are sent.
#[derive(Debug)]
pub struct Protection {
    pub state_url: String,
    pub interval: Duration,
    pub minutes: u32,
    pub next_poll: Option<Instant>,
    pub poll_in_flight: bool,
    pub put_in_flight: bool,
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
            poll_in_flight: false,
            put_in_flight: false,
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

    pub fn complain(&mut self, kind: &str, message: &str) {
        self.complaints.once(kind, "task protection", message);
    }

    /// Records the agent's answer to a PUT of `enabled`.
    pub fn on_put(&mut self, enabled: bool, result: Result<Response, Failure>, sent_at: Instant) {
        self.put_in_flight = false;
        let response = match result {
            Ok(response) => response,
            Err(failure) => {
                return self.complain(&format!("put_{}", failure.kind()), &failure.to_string())
            }
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
                "agent_failure",
                &format!("agent refused: Reason {}", escape(&reason, 100)),
            ),
            ProtectionAnswer::Error { code, message } => self.complain(
                "agent_error",
                &format!(
                    "agent error {}: {}",
                    escape(&code, 100),
                    escape(&message, 200)
                ),
            ),
            ProtectionAnswer::Applied { .. } => self.complain(
                &format!("status_{}", status_class(response.status)),
                &format!("HTTP {}", response.status),
            ),
            ProtectionAnswer::Unexpected(what) => self.complain(
                &format!("unexpected_{}", status_class(response.status)),
                &what,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ecs_body::protection_body;

    const TASK: &str = include_str!("../../tests/fixtures/ecs/task-v4.json");
    const CONTAINER: &str = include_str!("../../tests/fixtures/ecs/container-v4.json");

    #[test]
    fn parses_the_documented_task() {
        let task = parse_task(TASK.as_bytes()).unwrap();
        assert_eq!(
            task.task_arn,
            "arn:aws:ecs:us-west-2:111122223333:task/default/158d1c8083dd49d6b527399fd6414f5c"
        );
        assert_eq!(task.family, "curltest");
        assert_eq!(task.revision, "26");
        assert_eq!(task.launch_type, "EC2");
        assert_eq!(task.desired_status, "RUNNING");
        assert_eq!(task.containers.len(), 2);
        assert_eq!(task.containers[1].1, "curl");
        assert!(!is_stopping(&task, None));
    }

    #[test]
    fn parses_the_documented_container() {
        let me = parse_container(CONTAINER.as_bytes()).unwrap();
        assert_eq!(me.name, "curl");
        assert!(me.docker_id.starts_with("ea32192c"));
    }

    #[test]
    fn stopping_by_task_or_by_this_container() {
        let stopped = TASK.replacen(
            "\"DesiredStatus\": \"RUNNING\"",
            "\"DesiredStatus\": \"STOPPED\"",
            1,
        );
        assert!(is_stopping(&parse_task(stopped.as_bytes()).unwrap(), None));
        // Only the curl container (the last RUNNING) is meant to stop.
        let idx = TASK.rfind("\"DesiredStatus\": \"RUNNING\"").unwrap();
        let mut mine = TASK.to_string();
        mine.replace_range(
            idx..idx + "\"DesiredStatus\": \"RUNNING\"".len(),
            "\"DesiredStatus\": \"STOPPED\"",
        );
        let task = parse_task(mine.as_bytes()).unwrap();
        assert_eq!(task.desired_status, "RUNNING");
        let me = Container {
            docker_id: "ee08638adaaf009d78c248913f629e38299471d45fe7dc944d1039077e3424ca".into(),
            name: "curl".into(),
        };
        assert!(is_stopping(&task, Some(&me)));
        let other = Container {
            docker_id: "598cba581fe3f939459eaba1e071d5c93bb2c49b7d1ba7db6bb19deeb70d8e38".into(),
            name: "~internal~ecs~pause".into(),
        };
        assert!(!is_stopping(&task, Some(&other)));
        let by_name = Container {
            docker_id: String::new(),
            name: "curl".into(),
        };
        assert!(is_stopping(&task, Some(&by_name)));
    }

    #[test]
    fn garbage_metadata_is_an_error() {
        for body in [
            "",
            "{",
            "[]",
            "null",
            "\"Not Found\"",
            "{}",
            "{\"DesiredStatus\": 5}",
            "<html>",
        ] {
            assert!(parse_task(body.as_bytes()).is_err(), "{body:?}");
        }
        for body in ["", "{}", "[1]", "\"error\""] {
            assert!(parse_container(body.as_bytes()).is_err(), "{body:?}");
        }
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

    #[test]
    fn status_codes_cannot_flood_the_log_once_keys() {
        let answer = |status| {
            Ok(Response {
                status,
                content_type: None,
                body: b"x".to_vec(),
            })
        };
        let mut watch = Watch::new("http://127.0.0.1:1/v4/x", Duration::from_secs(1));
        let mut protection = Protection::new("http://127.0.0.1:1", Duration::from_secs(1), 5);
        for status in 100..1000 {
            watch.on_container(answer(status));
            watch.on_task(answer(status));
            protection.on_put(true, answer(status), Instant::now());
        }
        // Per URL: six status classes and "malformed" (the 200 body).
        assert!(
            watch.complaints.logged.len() <= 14,
            "{:?}",
            watch.complaints.logged
        );
        assert!(
            protection.complaints.logged.len() <= 6,
            "{:?}",
            protection.complaints.logged
        );
    }

    #[test]
    fn protection_answers() {
        let ok = include_str!("../../tests/fixtures/ecs/task-protection-ok.json");
        assert_eq!(
            parse_protection_answer(200, ok.as_bytes()),
            ProtectionAnswer::Applied {
                expiration: Some("2022-10-06T02:29:16Z".into())
            }
        );
        let failure = include_str!("../../tests/fixtures/ecs/task-protection-failure.json");
        assert_eq!(
            parse_protection_answer(200, failure.as_bytes()),
            ProtectionAnswer::Failure {
                reason: "TASK_NOT_VALID".into()
            }
        );
        let denied = include_str!("../../tests/fixtures/ecs/task-protection-access-denied.json");
        assert!(
            matches!(parse_protection_answer(400, denied.as_bytes()), ProtectionAnswer::Error { code, .. } if code == "AccessDeniedException")
        );
        let timeout = include_str!("../../tests/fixtures/ecs/task-protection-timeout.json");
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
}
