//! The platforms' settings: Amazon ECS (the task metadata watch and task
//! protection, from `--ecs*`, `--protect-*` and the variables the ECS
//! agent sets) and Kubernetes (the pod annotations from `--k8s-*`, the
//! service variables, `POD_NAME` or `HOSTNAME` and the service-account
//! namespace); which platform runs drainit is read in `kill`.

use super::env::{invalid, Env, Setting};
use super::kill::{Platform, Seen};
use super::{Notice, UsageError};
use crate::app::options;
use crate::app::values::*;
use crate::core::settings::{EcsConfig, K8sConfig, ProtectConfig};
use crate::proto::k8s::{self as api, Managed};
use crate::proto::k8s_host::api_address;

/// The variables the ECS agent sets to the task metadata endpoint, the
/// newest first.
const METADATA_VARS: [&str; 2] = [
    "ECS_CONTAINER_METADATA_URI_V4",
    "ECS_CONTAINER_METADATA_URI",
];

/// The ECS settings (None when neither the metadata watch nor task
/// protection is on), and the platform drainit runs on: ECS when a usable
/// metadata variable is set, whatever `--ecs` says.
pub(super) fn read(
    env: &Env<'_>,
    can_say_busy: bool,
    notices: &mut Vec<Notice>,
) -> Result<(Option<EcsConfig>, Seen), UsageError> {
    let mode = env.value_or_default(&options::ECS, parse_ecs_mode)?;
    let interval = env.value_or_default(&options::ECS_INTERVAL, parse_ecs_interval)?;
    let usable = metadata_uri(env, mode, notices)?;
    let platform = Seen::read(env, usable.is_some());
    let metadata_uri = match (mode, usable) {
        (EcsMode::Off, _) => None,
        (EcsMode::On, None) => {
            return Err(UsageError(
                "--ecs on needs ECS_CONTAINER_METADATA_URI_V4 (or ECS_CONTAINER_METADATA_URI), which is not set".into(),
            ))
        }
        (_, uri) => uri,
    };
    let protect = protect(env, mode, can_say_busy)?;
    if metadata_uri.is_none() && protect.is_none() {
        return Ok((None, platform));
    }
    let ecs = EcsConfig {
        metadata_uri,
        interval,
        protect,
    };
    Ok((Some(ecs), platform))
}

/// The task metadata endpoint, when its variable is set and usable. The
/// variable is the platform's, not the operator's: under auto, one that is
/// not a usable http:// URL is a warning and ECS stays off; with `--ecs
/// off` it is not read at all (nor judged).
fn metadata_uri(
    env: &Env<'_>,
    mode: EcsMode,
    notices: &mut Vec<Notice>,
) -> Result<Option<String>, UsageError> {
    let var = METADATA_VARS
        .into_iter()
        .find_map(|var| {
            env.get(var).transpose().map(|v| {
                v.map(|text| Setting {
                    text,
                    origin: var.to_string(),
                })
            })
        })
        .transpose()?;
    match var {
        None => Ok(None),
        Some(_) if mode == EcsMode::Off => Ok(None),
        Some(setting) => match parse_url(&setting.text) {
            Ok(url) => Ok(Some(url)),
            Err(e) if mode == EcsMode::On => Err(invalid(&setting.text, &setting.origin, &e)),
            Err(e) => {
                notices.push(Notice::Warn(format!(
                    "{} is not a usable http:// URL ({e}): ECS integration is off",
                    setting.origin
                )));
                Ok(None)
            }
        },
    }
}

/// Both protections asked for: one platform, one back-end.
const BOTH_PROTECT: &str = "--k8s-protect and --ecs-protect cannot be used together: choose the platform this container runs on";

/// `--ecs-protect`'s settings when it is on. Its interval and length are
/// checked whether or not it is: a bad value is a mistake even where it
/// has no effect yet.
fn protect(
    env: &Env<'_>,
    mode: EcsMode,
    can_say_busy: bool,
) -> Result<Option<ProtectConfig>, UsageError> {
    let interval = env.value_or_default(&options::PROTECT_INTERVAL, parse_ecs_interval)?;
    let minutes = env.value_or_default(&options::PROTECT_MINUTES, parse_protect_minutes)?;
    if !env.flag(&options::ECS_PROTECT)? {
        return Ok(None);
    }
    // The conflict first: off ECS, "ECS_AGENT_URI is not set" would hide it.
    if env.flag(&options::K8S_PROTECT)? {
        return Err(UsageError(BOTH_PROTECT.into()));
    }
    if mode == EcsMode::Off {
        return Err(UsageError(
            "--ecs-protect cannot be used with --ecs off".into(),
        ));
    }
    if !can_say_busy {
        return Err(UsageError(
            "--ecs-protect needs --drain-url or --drain-exec to know when the app is busy".into(),
        ));
    }
    let agent_uri = env.get("ECS_AGENT_URI")?.ok_or_else(|| {
        UsageError(
            "--ecs-protect needs ECS_AGENT_URI, which is not set (is this an ECS task?)".into(),
        )
    })?;
    let agent_uri = parse_url(&agent_uri).map_err(|e| invalid(&agent_uri, "ECS_AGENT_URI", &e))?;
    Ok(Some(ProtectConfig {
        agent_uri,
        interval,
        minutes,
    }))
}

/// `--k8s-cost`: a positive 32-bit integer (other pods have 0).
fn parse_k8s_cost(text: &str) -> Result<i32, String> {
    let t = text.trim();
    match t.parse::<i32>() {
        Ok(n) if n > 0 && t.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err("expected a whole number, 1-2147483647".into()),
    }
}

/// `--k8s-container`: a container's name (a DNS-1123 label).
fn parse_container(text: &str) -> Result<String, String> {
    if !api::is_label(text) {
        let shown = crate::util::text::echo(text);
        return Err(format!("{shown:?} is not a container name"));
    }
    Ok(text.to_string())
}

/// The options that act on a Kubernetes pod only.
const K8S_ONLY: [&options::Opt; 5] = [
    &options::K8S_PROTECT,
    &options::K8S_CONTAINER,
    &options::K8S_COST,
    &options::K8S_ANNOTATIONS,
    &options::K8S_IDLE_SAFE_TO_EVICT,
];

/// `--k8s-protect`'s settings when it is on. Its cost and list are checked
/// whether or not it is. It cannot go with `--ecs-protect`: a container
/// runs on one platform, and one back-end acts on busy and idle. On a
/// platform that sets `KUBERNETES_*` but gives the app no pod of its own
/// to patch (Container Apps), the Kubernetes options are one warning.
pub(super) fn k8s(
    env: &Env<'_>,
    can_say_busy: bool,
    ecs_protect: bool,
    seen: Seen,
    notices: &mut Vec<Notice>,
) -> Result<Option<K8sConfig>, UsageError> {
    let cost = env.value_or_default(&options::K8S_COST, parse_k8s_cost)?;
    let container = env.value(&options::K8S_CONTAINER, parse_container)?;
    let managed = env.value_or_default(&options::K8S_ANNOTATIONS, Managed::parse)?;
    let interval = env.value_or_default(&options::PROTECT_INTERVAL, parse_ecs_interval)?;
    let idle_safe_to_evict = env.flag(&options::K8S_IDLE_SAFE_TO_EVICT)?;
    if seen.platform == Platform::ContainerApps {
        not_here(env, seen, notices)?;
        return Ok(None);
    }
    if !env.flag(&options::K8S_PROTECT)? {
        return Ok(None);
    }
    if idle_safe_to_evict && !managed.has(api::Annotation::SafeToEvict) {
        return Err(UsageError(
            "--k8s-idle-safe-to-evict needs safe-to-evict in --k8s-annotations".into(),
        ));
    }
    if cfg!(not(feature = "k8s")) {
        return Err(UsageError(
            "--k8s-protect needs the Kubernetes client, and this drainit was built without it (cargo feature k8s)".into(),
        ));
    }
    if ecs_protect {
        return Err(UsageError(BOTH_PROTECT.into()));
    }
    if !can_say_busy {
        return Err(UsageError(
            "--k8s-protect needs --drain-url or --drain-exec to know when the app is busy".into(),
        ));
    }
    let need = |e: String| UsageError(format!("--k8s-protect: {e}"));
    let (host, port) = api_address(
        env.get("KUBERNETES_SERVICE_HOST")?.as_deref(),
        env.get("KUBERNETES_SERVICE_PORT")?.as_deref(),
    )
    .map_err(need)?;
    let pod_name = env.get("POD_NAME")?;
    let pod = api::pod_name(pod_name.as_deref(), env.get("HOSTNAME")?.as_deref()).map_err(need)?;
    if pod_name.as_deref().map_or(true, str::is_empty) {
        // A pod with `spec.hostname` set has another HOSTNAME than its name.
        notices.push(Notice::Warn(format!(
            "--k8s-protect: POD_NAME is not set, so the pod is taken from HOSTNAME ({pod}), which is another name when the pod sets spec.hostname; set POD_NAME from the downward API (env: name: POD_NAME, valueFrom: fieldRef: fieldPath: metadata.name)"
        )));
    }
    let namespace = read_namespace().map_err(need)?;
    let names: Vec<&str> = managed.iter().map(|a| a.name()).collect();
    notices.push(Notice::Info(format!(
        "Kubernetes pod protection for {namespace}/{pod} ({}) while the app is busy",
        names.join(", ")
    )));
    Ok(Some(K8sConfig {
        host,
        port,
        namespace,
        pod,
        container,
        mounted: read_mounts(),
        interval,
        cost,
        managed,
        idle_safe_to_evict,
        grace_given: env.setting(&options::GRACE)?.is_some(),
        grace_max_given: env.setting(&options::GRACE_MAX)?.is_some(),
    }))
}

/// The Kubernetes options given where the app cannot reach its pod: one
/// warning naming them, and protection stays off.
fn not_here(env: &Env<'_>, seen: Seen, notices: &mut Vec<Notice>) -> Result<(), UsageError> {
    let mut given = Vec::new();
    for opt in K8S_ONLY {
        let set = match opt.kind {
            options::Kind::Flag => env.flag(opt)?,
            _ => env.setting(opt)?.is_some(),
        };
        if set {
            given.push(format!("--{}", opt.long));
        }
    }
    if !given.is_empty() {
        notices.push(Notice::Warn(format!(
            "{} ignored {}: it sets KUBERNETES_* but gives the app no access to the Kubernetes API that holds its pod; Kubernetes pod protection is off",
            given.join(", "),
            seen.name()
        )));
    }
    Ok(())
}

/// The service account's namespace (the file, read once at start).
#[cfg(feature = "k8s")]
fn read_namespace() -> Result<String, String> {
    crate::io::k8s::read_namespace()
}

#[cfg(not(feature = "k8s"))]
fn read_namespace() -> Result<String, String> {
    Err("built without the Kubernetes client".into())
}

/// The containers the kubelet's mounts name (read once at start).
#[cfg(feature = "k8s")]
fn read_mounts() -> Vec<crate::proto::k8s_mounts::Mounted> {
    crate::io::k8s::read_mounts()
}

#[cfg(not(feature = "k8s"))]
fn read_mounts() -> Vec<crate::proto::k8s_mounts::Mounted> {
    Vec::new()
}
