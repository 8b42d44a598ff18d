//! Amazon ECS bodies as values: the task metadata (v4/v3) drainit reads,
//! whether it says this task is stopping, and the task-protection request
//! and answers. Pure functions over bytes.

use serde_json::{json, Value};

use crate::util::text::escape;

/// What drainit needs from `${ECS_CONTAINER_METADATA_URI_V4}/task`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Task {
    pub task_arn: String,
    pub family: String,
    pub revision: String,
    pub launch_type: String,
    pub desired_status: String,
    /// The cluster's name (the last part of an ARN), and the service's
    /// where the metadata has it (agents since 1.63).
    pub cluster: String,
    pub service_name: String,
    /// (DockerId, Name, DesiredStatus) of each container.
    pub containers: Vec<(String, String, String)>,
}

/// This container, from `${ECS_CONTAINER_METADATA_URI_V4}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Container {
    pub docker_id: String,
    pub name: String,
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn object(body: &[u8]) -> Result<Value, String> {
    let value = crate::proto::json::parse(body).map_err(|e| format!("malformed JSON ({e})"))?;
    if !value.is_object() {
        return Err("expected a JSON object".into());
    }
    Ok(value)
}

pub fn parse_task(body: &[u8]) -> Result<Task, String> {
    let value = object(body)?;
    let desired_status = text(&value, "DesiredStatus");
    if desired_status.is_empty() {
        return Err("no DesiredStatus in the task metadata".into());
    }
    let containers = value
        .get("Containers")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .map(|c| {
                    (
                        text(c, "DockerId"),
                        text(c, "Name"),
                        text(c, "DesiredStatus"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Task {
        task_arn: text(&value, "TaskARN"),
        family: text(&value, "Family"),
        revision: text(&value, "Revision"),
        launch_type: text(&value, "LaunchType"),
        desired_status,
        cluster: text(&value, "Cluster")
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string(),
        service_name: text(&value, "ServiceName"),
        containers,
    })
}

pub fn parse_container(body: &[u8]) -> Result<Container, String> {
    let value = object(body)?;
    let container = Container {
        docker_id: text(&value, "DockerId"),
        name: text(&value, "Name"),
    };
    if container.docker_id.is_empty() && container.name.is_empty() {
        return Err("no DockerId or Name in the container metadata".into());
    }
    Ok(container)
}

/// True when the task, or this container, is meant to stop.
pub fn is_stopping(task: &Task, me: Option<&Container>) -> bool {
    if task.desired_status == "STOPPED" {
        return true;
    }
    let Some(me) = me else {
        return false;
    };
    task.containers.iter().any(|(id, name, desired)| {
        let mine = if me.docker_id.is_empty() {
            *name == me.name
        } else {
            *id == me.docker_id
        };
        mine && desired == "STOPPED"
    })
}

/// What the agent said to a task-protection PUT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtectionAnswer {
    /// `{"protection":{...}}`: applied; the expiration date if any.
    Applied { expiration: Option<String> },
    /// `{"failure":{"Reason":...}}`
    Failure { reason: String },
    /// `{"error":{"Code":...,"Message":...}}`
    Error { code: String, message: String },
    /// Anything else (429 text/plain from the rate limiter, garbage...).
    Unexpected(String),
}

pub fn parse_protection_answer(status: u16, body: &[u8]) -> ProtectionAnswer {
    let Ok(value) = crate::proto::json::parse(body) else {
        let text = String::from_utf8_lossy(body);
        return ProtectionAnswer::Unexpected(format!(
            "HTTP {status}: {}",
            escape(text.trim(), 120)
        ));
    };
    if let Some(p) = value.get("protection").filter(|p| p.is_object()) {
        return ProtectionAnswer::Applied {
            expiration: p
                .get("ExpirationDate")
                .and_then(Value::as_str)
                .map(String::from),
        };
    }
    if let Some(f) = value.get("failure").filter(|f| f.is_object()) {
        return ProtectionAnswer::Failure {
            reason: text(f, "Reason"),
        };
    }
    if let Some(e) = value.get("error").filter(|e| e.is_object()) {
        return ProtectionAnswer::Error {
            code: text(e, "Code"),
            message: text(e, "Message"),
        };
    }
    ProtectionAnswer::Unexpected(format!(
        "HTTP {status}: {}",
        escape(&value.to_string(), 120)
    ))
}

/// The PUT body for a protection state.
pub fn protection_body(enabled: bool, minutes: u32) -> Value {
    if enabled {
        json!({"ProtectionEnabled": true, "ExpiresInMinutes": minutes})
    } else {
        json!({"ProtectionEnabled": false})
    }
}
