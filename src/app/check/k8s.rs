//! `--check` with `--k8s-protect`: the pod's read as a run makes it, then
//! the busy patch a run would send after that read, both the core's own
//! requests and readings (`core::protect::k8s`); the patch goes as a merge
//! patch with `dryRun=All`, which goes through RBAC and admission and
//! changes nothing. Both through the shell's Kubernetes client. And the
//! deadline a run in this pod would use, and why (`deadline`, the one
//! place that says it).

use std::time::{Duration, Instant};

use super::Level;
use crate::core::deadline::{Deadline, Grace, GraceFrom};
use crate::core::protect::k8s::{from_config, Protection};
use crate::core::protect::Backend;
use crate::core::settings::Config;
use crate::proto::exchange::{Auth, Endpoint, Method, Request};
use crate::proto::http::{Failure, Kind, Response};
use crate::proto::k8s::{patch_body, verdict, Verdict};
use crate::proto::k8s_pod::{choose, Chosen, Pod as PodRead, PreStop};
use crate::proto::k8s_pod_read::read_pod;
use crate::util::time::millis;

/// What is asked of the API server, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The pod's `GET`, as a run's start sends it.
    Read,
    /// The busy patch, `dryRun=All`.
    Patch,
}

/// The pod a run would protect, and the core's back-end that reads it.
pub struct Pod {
    protection: Protection,
    namespace: String,
    name: String,
}

impl Pod {
    /// With `--k8s-protect` only.
    pub fn new(config: &Config) -> Option<Pod> {
        let k8s = config.k8s.as_ref()?;
        Some(Pod {
            protection: from_config(config)?,
            namespace: k8s.namespace.clone(),
            name: k8s.pod.clone(),
        })
    }

    /// The request of `step`: the read a run's start sends; the patch a
    /// busy answer would send after that read (the core's own, so every
    /// key it writes is in it), as a dry run. A pod that holds the busy
    /// values already would get no patch: the plain busy patch is sent.
    pub fn request(&mut self, config: &Config, step: Step) -> Request {
        let pod = |method| Request::new(Endpoint::K8sPod, method).with_auth(Auth::ServiceAccount);
        let busy = match step {
            Step::Read => return self.protection.start().unwrap_or(pod(Method::Get)),
            Step::Patch => self.protection.request(true, Instant::now()),
        };
        let mut patch = match (busy, config.k8s.as_ref()) {
            (Some(patch), _) if patch.method == Method::Patch => patch,
            (_, Some(k8s)) => {
                let body = patch_body(k8s.managed, true, k8s.cost);
                pod(Method::Patch).with_body(Some(body))
            }
            (_, None) => pod(Method::Patch),
        };
        patch.query.push(("dryRun", "All".into()));
        patch
    }

    /// What `step` is, as its findings name it.
    pub fn what(&self, step: Step) -> String {
        let pod = format!("pod {}/{}", self.namespace, self.name);
        match step {
            Step::Read => format!("--k8s-protect: {pod}"),
            Step::Patch => format!("--k8s-protect: the busy patch of {pod} (dry run)"),
        }
    }

    /// The findings of `step`'s answer, and the step that follows.
    pub fn answered(
        &mut self,
        config: &Config,
        step: Step,
        result: &Result<Response, Failure>,
        now: Instant,
    ) -> (Vec<(Level, String)>, Option<Step>) {
        let response = match result {
            Ok(response) => response,
            Err(f) if f.kind == Kind::Tls => {
                let text = format!("{f} (is the service account's ca.crt the cluster's CA?)");
                return (vec![(Level::Error, text)], None);
            }
            Err(f) => return (vec![(Level::Error, f.to_string())], None),
        };
        let said = match (verdict(response), step) {
            (Verdict::Applied, Step::Read) => {
                self.protection.on_answer(Ok(response.clone()), now);
                let learnt = self.protection.take_grace(false);
                let pod = read_pod(&response.body);
                let mut said = vec![(Level::Ok, "read".to_string())];
                if let Err(e) = &pod {
                    said.push((Level::Warn, e.clone()));
                }
                said.push(deadline(config, pod.ok().as_ref(), learnt));
                return (said, Some(Step::Patch));
            }
            (Verdict::Applied, Step::Patch) => (
                Level::Ok,
                "accepted (RBAC allows it, and an admission policy, if any, allowed it; nothing written)".into(),
            ),
            (Verdict::Unauthenticated, _) => (Level::Error, "401: the token was refused".into()),
            (Verdict::Forbidden(message), _) => (
                Level::Error,
                format!(
                    "403 Forbidden: the pod's service account needs get and patch on pods in namespace {} (a Role and a RoleBinding), or an admission policy refused: {message}",
                    self.namespace
                ),
            ),
            (Verdict::NoSuchPod, _) => (
                Level::Error,
                format!(
                    "404: no pod {} in namespace {} (a wrong POD_NAME?)",
                    self.name, self.namespace
                ),
            ),
            (Verdict::Refused(code, message), _) => (
                Level::Error,
                format!("{code}: the API server refused it: {message}"),
            ),
            (Verdict::Retry { .. } | Verdict::Unexpected(_), _) => {
                (Level::Error, format!("HTTP {}", response.status))
            }
        };
        (vec![said], None)
    }
}

/// What of drainit's container shortens the pod's period, as the core's
/// rule takes it (`proto::k8s_pod::choose`, `spec_grace`): the container
/// chosen, its probes' periods and its preStop sleep.
fn spec_words(config: &Config, pod: &PodRead, period: u64) -> String {
    let name = config.k8s.as_ref().and_then(|k| k.container.as_deref());
    let (c, how) = match choose(&pod.containers, name, period) {
        Chosen::One(c) => (c, format!(" and container {}", c.name)),
        Chosen::Smallest(Some(c)) => (
            c,
            format!(
                " and container {}, the smallest grace of the pod's since nothing chose one (set --k8s-container)",
                c.name
            ),
        ),
        Chosen::Smallest(None) => return String::new(),
    };
    let mut words = how;
    for (probe, grace) in ["liveness", "startup"].iter().zip(c.probe_grace) {
        if let Some(g) = grace.filter(|g| *g < period) {
            words.push_str(&format!(", its {probe} probe's period {g} s"));
        }
    }
    match c.pre_stop {
        PreStop::Sleep(s) => words.push_str(&format!(", less its preStop sleep ({s} s)")),
        PreStop::Other => words.push_str(", its preStop hook's time coming out of the grace"),
        PreStop::None => {}
    }
    words
}

/// The deadline a run in this pod would use, and why: the one place that
/// says it, so that a rule the core adds for the grace (`learnt`, what
/// the core's back-end took from the pod) is said here too.
fn deadline(config: &Config, pod: Option<&PodRead>, learnt: Option<Grace>) -> (Level, String) {
    let mut deadline = Deadline::new(config);
    if let Some(learnt) = learnt {
        deadline.learn(learnt);
    }
    let grace = deadline.grace();
    let from = match deadline.from() {
        GraceFrom::Option => "--grace as given",
        GraceFrom::Pod => "from the pod",
        GraceFrom::Deletion => "from the pod's deletion",
        GraceFrom::Default => "drainit's default",
    };
    // In the unit the start line and `--grace` use: whole seconds as `s`.
    let shown = grace.map_or("none".into(), |g| match g.subsec_nanos() {
        0 => format!("{} s", g.as_secs()),
        _ => format!("{} ms", millis(g)),
    });
    let head = format!("the deadline would be {shown} ({from})");
    let period = pod.and_then(|p| p.grace_seconds);
    match (deadline.from(), period) {
        (GraceFrom::Pod, Some(p)) => (
            Level::Ok,
            format!(
                "{head}: the pod's terminationGracePeriodSeconds ({p} s){}, less a margin of 10 % or 2 s",
                pod.map_or(String::new(), |pod| spec_words(config, pod, p))
            ),
        ),
        (GraceFrom::Option, Some(p)) if grace.map_or(true, |g| g >= Duration::from_secs(p)) => (
            Level::Warn,
            format!("{head}, not below the pod's terminationGracePeriodSeconds ({p} s): the kubelet would kill the container first, and the exit report would be lost"),
        ),
        (GraceFrom::Option, Some(p)) => (
            Level::Ok,
            format!("{head}, below the pod's terminationGracePeriodSeconds ({p} s)"),
        ),
        (_, Some(p)) => (
            Level::Warn,
            format!("{head}: the pod's terminationGracePeriodSeconds ({p} s) less its margin is not longer than --pre-stop-delay"),
        ),
        (_, None) if pod.is_some_and(|p| p.grace_unreadable) => (
            Level::Warn,
            format!("{head}: the pod's terminationGracePeriodSeconds is not a whole number of seconds"),
        ),
        (_, None) => (
            Level::Info,
            format!("{head}: the pod gives no terminationGracePeriodSeconds"),
        ),
    }
}
