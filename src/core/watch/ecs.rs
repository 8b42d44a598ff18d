//! The ECS metadata watch, a stop trigger besides signals: the task
//! metadata endpoint (`ECS_CONTAINER_METADATA_URI_V4`) is polled while the
//! app runs, and `DesiredStatus: STOPPED` (of the task, or of this
//! container) begins the stop before the platform's signal comes. Here:
//! what to ask and what the answers mean (`watch::Backend`);
//! `watch/mod.rs` schedules it.

use std::time::Duration;

use log::info;

use crate::core::complaints::{Complaints, Key};
use crate::core::counters::RequestKind;
use crate::core::outcome::Trigger;
use crate::core::settings::Config;
use crate::core::watch::Backend;
use crate::proto::ecs_body::{is_stopping, parse_container, parse_task, Container, Task};
use crate::proto::exchange::Request;
use crate::proto::http::{status_class, Failure, Response};
use crate::util::text::escape;

/// The ECS watch, when the task metadata endpoint is known.
pub fn from_config(config: &Config) -> Option<Watch> {
    let ecs = config.ecs.as_ref()?;
    Some(Watch::new(ecs.metadata_uri.as_deref()?, ecs.interval))
}

/// The metadata watch: what to ask, and what the answers mean.
#[derive(Debug)]
pub struct Watch {
    pub task_url: String,
    pub container_url: String,
    pub interval: Duration,
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
            me: None,
            task: None,
            complaints: Complaints::default(),
        }
    }

    pub fn on_container(&mut self, result: Result<Response, Failure>) {
        match result
            .map_err(|f| (Key::Failed(f.kind), f.to_string()))
            .and_then(|r| {
                if r.status != 200 {
                    return Err((
                        Key::ContainerStatus(status_class(r.status)),
                        format!("HTTP {}", r.status),
                    ));
                }
                parse_container(&r.body).map_err(|e| (Key::ContainerMalformed, e))
            }) {
            Ok(me) => self.me = Some(me),
            Err((key, message)) => self
                .complaints
                .once(key, "ECS container metadata", &message),
        }
    }

    /// Records a task answer; true when the task (or this container) is
    /// meant to stop.
    pub fn on_task(&mut self, result: Result<Response, Failure>) -> bool {
        let parsed = result
            .map_err(|f| (Key::Failed(f.kind), f.to_string()))
            .and_then(|r| {
                if r.status != 200 {
                    return Err((
                        Key::Status(status_class(r.status)),
                        format!("HTTP {}", r.status),
                    ));
                }
                parse_task(&r.body).map_err(|e| (Key::Malformed, e))
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
            Err((key, message)) => {
                self.complaints.once(key, "ECS task metadata", &message);
                false
            }
        }
    }
}

impl Backend for Watch {
    fn interval(&self) -> Duration {
        self.interval
    }

    fn purpose(&self) -> RequestKind {
        RequestKind::Watch
    }

    fn start(&self) -> Option<Request> {
        Some(Request::get(&self.container_url))
    }

    fn on_start(&mut self, result: Result<Response, Failure>) {
        self.on_container(result)
    }

    fn poll(&self) -> Request {
        Request::get(&self.task_url)
    }

    fn on_poll(&mut self, result: Result<Response, Failure>) -> bool {
        self.on_task(result)
    }

    fn trigger(&self) -> Trigger {
        Trigger::Ecs
    }

    fn announce(&self) {
        info!("ECS says this task is stopping (DesiredStatus STOPPED): draining before the platform's signal");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = include_str!("../../../tests/fixtures/ecs/task-v4.json");
    const CONTAINER: &str = include_str!("../../../tests/fixtures/ecs/container-v4.json");

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
    fn status_codes_cannot_flood_the_log_once_keys() {
        let answer = |status| {
            Ok(Response {
                status,
                content_type: None,
                body: b"x".to_vec(),
                ..Response::default()
            })
        };
        let mut watch = Watch::new("http://127.0.0.1:1/v4/x", Duration::from_secs(1));
        for status in 100..1000 {
            watch.on_container(answer(status));
            watch.on_task(answer(status));
        }
        // Per URL: six status classes and "malformed" (the 200 body).
        assert!(
            watch.complaints.logged.len() <= 14,
            "{:?}",
            watch.complaints.logged
        );
    }
}
