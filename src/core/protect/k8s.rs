//! The Kubernetes pod annotations, the back-end of `core::protect` for
//! Kubernetes (`--k8s-protect`): busy sets the managed annotations on
//! drainit's own pod, idle (after the hold) gives them back the template's
//! values (removing those it had none for; safe-to-evict "true" with
//! `--k8s-idle-safe-to-evict`), each with one merge `PATCH` of
//! `metadata.annotations` only, under the `resourceVersion` it was
//! computed from. What to write, and drainit's record of the template's
//! values and of the containers holding the pod busy, shared by every
//! drainit of the pod, are `core::protect::record`'s; this is the
//! exchange. A 409 (another drainit of the pod, or anyone, changed it) is
//! read again at once and the patch computed anew, `CONFLICTS` times at
//! most in a row; a 2xx patch's answer is the pod's new state, so no other
//! read is added, and a pod that stays busy or idle sends nothing.
//! Its one exchange with the API server is a small state (`State`: a
//! request out, idle, a request due at once, in backoff), the failures
//! since the last success a `Streak`, and what the start read taught a
//! `Read`: no flags.
//! At start one `GET` of the pod takes the keys and the record, drainit's
//! name among the pod's containers (`record::own_name`: none, and
//! protection stays off with one warning), and the pod's
//! `terminationGracePeriodSeconds` for the default `--grace`
//! (`Backend::take_grace`), unless it would not outlast
//! `--pre-stop-delay`; a failed read is sent again before any patch (a
//! patch needs the template's values).
//! Only changes are sent, and a patch without a clear answer (no answer, a
//! 5xx, a 409 past its retries) leaves what the pod holds unknown, so it
//! is read again before the next patch; a failure waits its backoff (a
//! 429, or a 503 that gives one, at least its `Retry-After`), a 401 is
//! retried once at once (the shell reads the token again for every
//! request), and each failure is said in one line until it changes. A
//! restore of the template the API server refuses (422) is sent once more
//! removing the keys instead. When the app crashes while the pod may hold
//! busy's values, one idle patch goes out beside whatever is in flight
//! (`Backend::on_crash`), read again and sent again on a 409 within the
//! crash's bound. The requests go out through the shell's Kubernetes
//! client (`io::k8s`): their endpoint is the pod (`Endpoint::K8sPod`).
//!
//! When a stop begins, one more read of the pod (`resourceVersion=0`, on
//! a slot of its own: `Backend::stop_read`) says whether it is being
//! deleted: its `deletionTimestamp` less the answer's `Date` (both the API
//! server's clock), counted from when the read was sent, is when the kill
//! comes (`core::deadline::Learnt`); a 404 for the pod read at start, or
//! another `uid`, is a force delete. With more than a minute left it is
//! read once more at half of it (a second, shorter delete).

use std::time::{Duration, Instant};

use log::{info, warn};

use crate::core::complaints::{Complaints, Key};
use crate::core::deadline::{Deadline, Grace, Learnt};
use crate::core::protect::record::{self, Held, Me};
use crate::core::protect::{Backend, Report};
use crate::core::settings::{Config, K8sConfig};
use crate::proto::exchange::{Auth, Endpoint, Method, Request};
use crate::proto::http::{Failure, Response};
use crate::proto::k8s::{backoff, pod_grace, verdict, Verdict, PATCH_ACCEPT};
use crate::proto::k8s_mounts::Mounted;
use crate::proto::k8s_pod_read::read_pod;
use crate::proto::k8s_record::Template;
use crate::util::time::millis;

mod grace;
mod keys;

/// How long the app must have been idle before the annotations come off:
/// a worker between two jobs keeps them.
pub const IDLE_HOLD: Duration = Duration::from_secs(30);
/// With more than this left to the kill, the pod is read once more at
/// half of it: a second, shorter delete sends no new SIGTERM.
pub const READ_AGAIN_PAST: Duration = Duration::from_secs(60);
/// Reads of the pod at the stop, at most.
const STOP_READS: u8 = 2;
/// 409s in a row read again and sent again at once; the next one waits
/// its backoff.
pub const CONFLICTS: u8 = 4;

/// The Kubernetes back-end, when `--k8s-protect` is on.
pub fn from_config(config: &Config) -> Option<Protection> {
    let k8s = config.k8s.as_ref()?;
    let mut protection = Protection::new(k8s, config.timeline.grace, config.grace_max);
    protection.delay = config.timeline.pre_stop_delay;
    protection.me.idle_safe_to_evict = k8s.idle_safe_to_evict;
    Some(protection)
}

/// A request the back-end sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// The pod's read at start (and again while no read succeeded).
    Read,
    /// The pod read again: after a 409, or a patch without a clear answer.
    Reread,
    /// A patch for an app that is busy (true) or idle.
    Patch(bool),
}

/// Where the back-end's one exchange with the API server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This request is out.
    Out(Sent),
    /// Nothing out: the next request goes when one is due.
    Idle,
    /// This request goes at once (`follow_up`): a 401's retry (the shell
    /// reads the token again for every request, once per `Streak`), a
    /// read after a 409 and the patch after it.
    Again(Sent),
    /// The last request failed: nothing goes out before `until`.
    Backoff { until: Instant },
}

/// The failures since the last success.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Streak {
    /// Failures in a row (the backoff doubles with each).
    count: u32,
    /// A 401 was retried at once already: the next one waits its backoff.
    token_retried: bool,
}

/// What the pod's read taught the back-end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// No read answered 2xx yet: it goes again whenever no patch is due.
    Pending,
    /// The pod was read; the grace learnt from its period, until it is
    /// handed to the timeline.
    Done { grace: Option<Grace> },
}

/// After a crash: the crash's own exchange, within `CRASH_BOUND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crash {
    /// No crash, or its exchange is over.
    None,
    /// This request of the crash's is out (`Sent::Reread` or
    /// `Sent::Patch(false)`); reads after 409s so far.
    Out(Sent, u8),
}

/// The pod annotations: set while the app is busy, the template's values
/// back once no drainit of the pod is busy.
#[derive(Debug)]
pub struct Protection {
    namespace: String,
    pod: String,
    interval: Duration,
    /// This drainit as the record names it, and what it sets.
    me: Me,
    /// Protection stays off: drainit does not know its container's name.
    off: bool,
    /// What the pod holds, as the API server last said (None: unknown,
    /// before the read and after a patch without a clear answer; it is
    /// read again before the next patch).
    held: Option<Held>,
    state: State,
    streak: Streak,
    /// 409s in a row.
    conflicts: u8,
    /// The app's state a read again is for: the patch it may need follows
    /// at once.
    pending: Option<bool>,
    /// A template whose restore the API server refused: restored by
    /// removing its keys instead (once).
    refused: Option<Template>,
    crash: Crash,
    /// The last failure said (one line until it changes).
    said: Option<Key>,
    /// The sources' failures to answer protection's poll, once per kind.
    sources: Complaints,
    /// The grace and `--grace-max` as configured, and whether each was
    /// given: what the pod's period checks or replaces (the grace that
    /// applies is `core::deadline`'s).
    grace: Option<Duration>,
    grace_max: Option<Duration>,
    grace_given: bool,
    grace_max_given: bool,
    /// The pod's `terminationGracePeriodSeconds`, once read.
    period: Option<u64>,
    read: Read,
    /// `--pre-stop-delay`: a grace from the pod not longer than it cuts
    /// the delay (said once at start).
    delay: Duration,
    /// `--k8s-container`: drainit's own container in the spec.
    container: Option<String>,
    /// The containers the kubelet's mounts name (`proto::k8s_mounts`).
    mounted: Vec<Mounted>,
    /// The pod's `metadata.uid` as the start read found it: another one
    /// at the stop is another pod of the same name.
    uid: Option<String>,
    /// The read at the stop out, and when it was sent.
    stop_sent: Option<Instant>,
    /// Reads sent at the stop so far.
    stop_reads: u8,
}

impl Protection {
    pub fn new(k8s: &K8sConfig, grace: Option<Duration>, grace_max: Option<Duration>) -> Self {
        Protection {
            namespace: k8s.namespace.clone(),
            pod: k8s.pod.clone(),
            interval: k8s.interval,
            me: Me {
                name: record::UNNAMED.to_string(),
                managed: k8s.managed,
                cost: k8s.cost,
                idle_safe_to_evict: false,
                containers: Vec::new(),
            },
            off: false,
            held: None,
            state: State::Idle,
            streak: Streak::default(),
            conflicts: 0,
            pending: None,
            refused: None,
            crash: Crash::None,
            said: None,
            sources: Complaints::default(),
            grace,
            grace_max,
            grace_given: k8s.grace_given,
            grace_max_given: k8s.grace_max_given,
            period: None,
            read: Read::Pending,
            delay: Duration::ZERO,
            container: k8s.container.clone(),
            mounted: k8s.mounted.clone(),
            uid: None,
            stop_sent: None,
            stop_reads: 0,
        }
    }

    fn request_for(&mut self, sent: Sent) -> Request {
        self.state = State::Out(sent);
        self.build(sent)
    }

    /// The request for `sent`: a read, or the patch that makes the pod
    /// hold what busy (or idle) wants, the record included, under the
    /// version it was computed from.
    fn build(&self, sent: Sent) -> Request {
        let (method, body) = match (sent, &self.held) {
            (Sent::Patch(busy), Some(held)) => {
                let want = self.want(held, busy);
                (Method::Patch, Some(record::patch(&self.me, held, &want)))
            }
            _ => (Method::Get, None),
        };
        let mut request = Request::new(Endpoint::K8sPod, method)
            .with_auth(Auth::ServiceAccount)
            .with_body(body);
        if request.method == Method::Patch {
            request.headers.push(("Accept", PATCH_ACCEPT.to_string()));
        }
        request
    }

    fn want(&self, held: &Held, busy: bool) -> record::Want {
        record::want(&self.me, held, busy, self.refused.as_ref())
    }

    /// The request due for an app busy (or idle): a read while what the
    /// pod holds is unknown, a patch when it holds something else.
    fn due(&self, busy: bool) -> Option<Sent> {
        match &self.held {
            None => Some(Sent::Reread),
            Some(held) if record::holds(held, &self.want(held, busy)) => None,
            Some(_) => Some(Sent::Patch(busy)),
        }
    }

    /// A failure: said once until a different one comes, then no request
    /// before the backoff (at least `after`).
    fn failed(&mut self, now: Instant, key: Key, message: &str, after: Option<Duration>) {
        self.streak.count = self.streak.count.saturating_add(1);
        let wait = backoff(self.streak.count).max(after.unwrap_or_default());
        self.state = State::Backoff { until: now + wait };
        self.pending = None;
        self.say(key, message);
    }

    /// A patch whose fate is unknown (no answer, a 5xx, a 429, a 409 past
    /// its retries, an unexpected status): the API server may have applied
    /// it, so what the pod holds is unknown and it is read again before
    /// the next patch. A clear refusal (401, 403, 404, 400, 415, 422)
    /// changed nothing and keeps the state.
    fn unknown_after(&mut self, sent: Option<Sent>) {
        if let Some(Sent::Patch(_)) = sent {
            self.held = None;
        }
    }

    fn say(&mut self, key: Key, message: &str) {
        if self.said != Some(key) {
            warn!(
                "Kubernetes pod protection: {message} (said once until it changes; retried with backoff)"
            );
            self.said = Some(key);
        }
    }

    fn applied(&mut self, sent: Option<Sent>, body: &[u8], now: Instant) {
        // A read between conflicts or failed patches clears no backoff:
        // patches that keep failing wait longer each time.
        if sent != Some(Sent::Reread) {
            self.streak = Streak::default();
            if self.said.take().is_some() {
                info!("Kubernetes pod protection: the API server accepts drainit's requests again");
            }
        }
        match sent {
            Some(Sent::Read) => {
                self.read = Read::Done { grace: None };
                if let Err(e) = self.read(body) {
                    // Keys not known: no patch until a read is understood
                    // (a patch needs the template's values).
                    self.read = Read::Pending;
                    self.failed(
                        now,
                        Key::UnexpectedStatus,
                        &format!("the pod's read: {e}; read again before any patch"),
                        None,
                    );
                }
            }
            Some(Sent::Reread) => match read_pod(body) {
                Ok(pod) => {
                    self.take_keys(&pod, None, false);
                    match self.pending.take().and_then(|busy| self.due(busy)) {
                        Some(sent) => self.state = State::Again(sent),
                        None => self.conflicts = 0,
                    }
                }
                Err(e) => self.failed(
                    now,
                    Key::UnexpectedStatus,
                    &format!("the pod's read: {e}"),
                    None,
                ),
            },
            Some(Sent::Patch(busy)) => {
                self.conflicts = 0;
                // The answer is the pod as patched (its metadata).
                let pod = read_pod(body).unwrap_or_default();
                self.take_keys(&pod, Some(busy), false);
                let (ns, pod) = (&self.namespace, &self.pod);
                match (busy, self.is_on()) {
                    (true, _) => info!("pod {ns}/{pod} protected: the app is busy"),
                    (false, true) => info!(
                        "pod {ns}/{pod}: the app is idle; another container's drainit keeps the pod protected"
                    ),
                    (false, false) => info!("pod {ns}/{pod} unprotected: the app is idle"),
                }
            }
            None => {}
        }
    }
}

impl Protection {
    /// The `kubernetes` object of the exit report and `/status`: the pod
    /// and namespace, whether the pod holds the annotations (as the API
    /// server last accepted), the grace that applies with where it came
    /// from (`option`, `pod`, `default` or `deletion`), the pod's period
    /// once read, and the deletion's period and kill time (ms after the
    /// stop began) once read at the stop.
    fn words(&self, deadline: &Deadline) -> serde_json::Value {
        serde_json::json!({
            "pod": self.pod,
            "namespace": self.namespace,
            "protected": self.is_on(),
            "grace_ms": deadline.grace_ms(),
            "grace_from": deadline.from().name(),
            "termination_grace_period_seconds": self.period,
            "deletion_grace_period_seconds": deadline.kill().and_then(|k| k.period),
            "kill_ms": deadline.kill().map(|k| k.ms()),
        })
    }
}

impl Backend for Protection {
    fn interval(&self) -> Duration {
        self.interval
    }

    fn idle_hold(&self) -> Duration {
        IDLE_HOLD
    }

    fn start(&mut self) -> Option<Request> {
        Some(self.request_for(Sent::Read))
    }

    fn request(&mut self, busy: bool, now: Instant) -> Option<Request> {
        match self.state {
            State::Out(_) | State::Again(_) => return None,
            State::Backoff { until } if now < until => return None,
            State::Backoff { .. } | State::Idle => {}
        }
        if self.read == Read::Pending {
            // A read that failed at start (a RoleBinding made after the
            // pod) is tried again before any patch: a patch needs the
            // template's values, and the pod's grace comes with them. A
            // stop polls no more, so it ends there.
            return Some(self.request_for(Sent::Read));
        }
        if self.off {
            return None;
        }
        let sent = self.due(busy)?;
        if sent == Sent::Reread {
            self.pending = Some(busy);
        }
        Some(self.request_for(sent))
    }

    fn on_answer(&mut self, result: Result<Response, Failure>, now: Instant) {
        let sent = match std::mem::replace(&mut self.state, State::Idle) {
            State::Out(sent) => Some(sent),
            _ => None,
        };
        let response = match result {
            Ok(response) => response,
            Err(failure) => {
                self.unknown_after(sent);
                return self.failed(now, Key::Failed(failure.kind), &failure.to_string(), None);
            }
        };
        let status = response.status;
        if status == 409 && self.conflict(sent) {
            return;
        }
        let verdict = verdict(&response);
        if matches!(verdict, Verdict::Retry { .. } | Verdict::Unexpected(_)) {
            self.unknown_after(sent);
        }
        match verdict {
            Verdict::Applied => self.applied(sent, &response.body, now),
            Verdict::Unauthenticated if !self.streak.token_retried => {
                // The token is read again for every request: retry at once.
                self.streak.token_retried = true;
                if let Some(sent) = sent {
                    self.state = State::Again(sent);
                }
                self.say(
                    Key::Unauthenticated,
                    "401: the token was refused; reading it again",
                );
            }
            Verdict::Unauthenticated => {
                self.failed(
                    now,
                    Key::Unauthenticated,
                    "401: the token was refused again",
                    None,
                )
            }
            Verdict::Forbidden(message) => self.failed(
                now,
                Key::Forbidden,
                &format!(
                    "403 Forbidden: the pod's service account needs get and patch on pods in namespace {} (a Role and a RoleBinding), or an admission policy refused: {message}",
                    self.namespace
                ),
                None,
            ),
            Verdict::NoSuchPod => self.failed(
                now,
                Key::NotFound,
                &format!(
                    "404: no pod {} in namespace {} (a wrong POD_NAME?)",
                    self.pod, self.namespace
                ),
                None,
            ),
            Verdict::Retry { after } => {
                let (key, message) = match status {
                    429 => (Key::TooMany, format!("HTTP {status}: retrying")),
                    409 => (
                        Key::Retry,
                        "HTTP 409: the pod keeps changing under drainit's patches; retrying".into(),
                    ),
                    _ => (Key::Retry, format!("HTTP {status}: retrying")),
                };
                self.failed(now, key, &message, after)
            }
            Verdict::Refused(422, message) if self.fall_back(sent, &message) => {}
            Verdict::Refused(code, message) => self.failed(
                now,
                Key::Refused,
                &format!("{code}: the API server refused the change: {message}"),
                None,
            ),
            Verdict::Unexpected(code) => self.failed(
                now,
                Key::UnexpectedStatus,
                &format!("unexpected HTTP {code}"),
                None,
            ),
        }
    }

    fn follow_up(&mut self) -> Option<Request> {
        let State::Again(sent) = self.state else {
            return None;
        };
        Some(self.request_for(sent))
    }

    fn take_grace(&mut self, stopping: bool) -> Option<Grace> {
        let Read::Done { grace } = &mut self.read else {
            return None;
        };
        let learnt = grace.take()?;
        let period = self.period.unwrap_or_default();
        if stopping {
            info!(
                "the pod's terminationGracePeriodSeconds ({period} s) came after the stop began: this stop keeps its deadline"
            );
            return None;
        }
        if learnt.grace == pod_grace(period) {
            info!(
                "--grace {} ms from the pod's terminationGracePeriodSeconds ({period} s), less a margin of 10 % or 2 s",
                millis(learnt.grace)
            );
        } else {
            info!(
                "--grace {} ms from the pod's spec: the shortest of its terminationGracePeriodSeconds ({period} s) and drainit's container's probes, less its preStop sleep and a margin of 10 % or 2 s",
                millis(learnt.grace)
            );
        }
        Some(learnt)
    }

    fn stop_read(&mut self, now: Instant) -> Option<Request> {
        if self.stop_sent.is_some() || self.stop_reads >= STOP_READS {
            return None;
        }
        self.stop_reads += 1;
        self.stop_sent = Some(now);
        let mut read = Request::new(Endpoint::K8sPod, Method::Get).with_auth(Auth::ServiceAccount);
        // Served from the API server's cache.
        read.query = vec![("resourceVersion", "0".into())];
        Some(read)
    }

    fn on_stop_answer(
        &mut self,
        result: Result<Response, Failure>,
        now: Instant,
    ) -> (Option<Learnt>, Option<Instant>) {
        let Some(sent) = self.stop_sent.take() else {
            return (None, None);
        };
        let learnt = self.read_at_stop(result, sent);
        let again = match learnt {
            Some(Learnt::Kill { at, .. }) if self.stop_reads < STOP_READS => {
                let left = at.saturating_duration_since(now);
                (left > READ_AGAIN_PAST).then(|| now + left / 2)
            }
            _ => None,
        };
        (learnt, again)
    }

    fn report(&self, deadline: &Deadline) -> Report {
        Report {
            protected: self.is_on(),
            top_level: false,
            gauge: (
                "drainit_k8s_protected",
                "1 while the pod holds drainit's annotations (as the API server last accepted).",
            ),
            requests: (
                "drainit_k8s_requests_total",
                "Requests to the Kubernetes API server (the pod's read and patches), by result.",
            ),
            words: Some(("kubernetes", self.words(deadline))),
        }
    }

    fn is_on(&self) -> bool {
        self.held
            .as_ref()
            .is_some_and(|held| record::is_on(&self.me, held))
    }

    fn on_crash(&mut self) -> Option<Request> {
        self.crash_request()
    }

    fn crash_waits(&self) -> bool {
        // The read at start: the pod may hold busy's values from an
        // earlier run of the container. A busy patch out: the idle one
        // goes after its answer, never beside it.
        matches!(
            self.state,
            State::Out(Sent::Read) | State::Out(Sent::Patch(true))
        )
    }

    fn crash_answered(&mut self, result: Option<Result<Response, Failure>>) -> Option<Request> {
        self.crash_answer(result)
    }

    fn complain(&mut self, key: Key, message: &str) {
        // A source that did not answer protection's poll.
        self.sources.once(key, "pod protection", message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::k8s::{Managed, COST_KEY, DO_NOT_DISRUPT_KEY, SAFE_TO_EVICT_KEY};
    use crate::proto::k8s_record::{BUSY_KEY, RECORD_KEY, WROTE_KEY};
    use std::time::SystemTime;

    fn config(grace_given: bool) -> K8sConfig {
        K8sConfig {
            host: "10.96.0.1".parse().unwrap(),
            port: 443,
            namespace: "jobs".into(),
            pod: "worker-1".into(),
            container: None,
            mounted: Vec::new(),
            interval: Duration::from_secs(10),
            cost: 1000,
            managed: Managed::ALL,
            idle_safe_to_evict: false,
            grace_given,
            grace_max_given: false,
        }
    }

    /// The run's deadline with `--grace` `secs` (given or the default).
    fn deadline(given: bool, secs: u64) -> Deadline {
        let mut run = crate::core::machine::tests::config();
        run.timeline.grace = Some(Duration::from_secs(secs));
        run.k8s = Some(config(given));
        Deadline::new(&run)
    }

    fn ok(body: &str) -> Result<Response, Failure> {
        Ok(Response {
            status: 200,
            body: body.as_bytes().to_vec(),
            ..Response::default()
        })
    }

    fn status(status: u16) -> Result<Response, Failure> {
        Ok(Response {
            status,
            body: br#"{"kind":"Status","message":"no"}"#.to_vec(),
            ..Response::default()
        })
    }

    const BUSY_POD: &str = r#"{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1000","cluster-autoscaler.kubernetes.io/safe-to-evict":"false","karpenter.sh/do-not-disrupt":"true"}},"spec":{"terminationGracePeriodSeconds":60}}"#;

    /// The patch that marks a pod busy whose template set none of the
    /// keys (its record parsed).
    fn busy_patch() -> serde_json::Value {
        serde_json::json!({"metadata": {"annotations": {
            COST_KEY: "1000", SAFE_TO_EVICT_KEY: "false", DO_NOT_DISRUPT_KEY: "true",
            RECORD_KEY: {COST_KEY: null, SAFE_TO_EVICT_KEY: null, DO_NOT_DISRUPT_KEY: null,
                BUSY_KEY: [record::UNNAMED], WROTE_KEY: ["cost", "safe-to-evict", "do-not-disrupt"]}}}})
    }

    /// The patch that gives such a pod its template's values back.
    fn idle_patch() -> serde_json::Value {
        serde_json::json!({"metadata": {"annotations": {
            COST_KEY: null, SAFE_TO_EVICT_KEY: null, DO_NOT_DISRUPT_KEY: null, RECORD_KEY: null}}})
    }

    /// The pod holds what idle wants, as far as the back-end knows.
    fn is_idle(p: &Protection) -> bool {
        p.held
            .as_ref()
            .is_some_and(|h| record::holds(h, &p.want(h, false)))
    }

    /// A request's body, the record in it parsed.
    fn body(request: Request) -> serde_json::Value {
        let request = &request;
        let mut v: serde_json::Value =
            serde_json::from_slice(request.body.as_ref().unwrap()).unwrap();
        if let Some(text) = v["metadata"]["annotations"][RECORD_KEY].as_str() {
            v["metadata"]["annotations"][RECORD_KEY] = serde_json::from_str(text).unwrap();
        }
        v
    }

    #[test]
    fn start_reads_the_pod_and_only_changes_are_sent() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), Some(Duration::from_secs(25)), None);
        let read = p.start().unwrap();
        assert_eq!(
            (read.endpoint, read.method, read.auth),
            (Endpoint::K8sPod, Method::Get, Auth::ServiceAccount)
        );
        assert!(read.headers.is_empty(), "the read takes the whole pod");
        assert_eq!(p.request(true, t0), None, "the read is out");
        p.on_answer(ok(r#"{"spec":{"terminationGracePeriodSeconds":30}}"#), t0);
        assert!(is_idle(&p));
        assert_eq!(p.request(false, t0), None, "idle and clean: nothing");
        let busy = p.request(true, t0).unwrap();
        assert_eq!(busy.method, Method::Patch);
        assert_eq!(busy.headers, [("Accept", PATCH_ACCEPT.to_string())]);
        assert_eq!(body(busy), busy_patch());
        assert_eq!(p.request(false, t0), None, "one request out");
        p.on_answer(ok("{}"), t0);
        assert!(p.is_on());
        assert_eq!(p.request(true, t0), None, "busy and on: nothing");
        let idle = p.request(false, t0).unwrap();
        assert_eq!(body(idle), idle_patch());
        p.on_answer(ok("{}"), t0);
        assert!(!p.is_on());
    }

    #[test]
    fn keys_found_with_drainits_record_are_drainits_and_idle_restores_the_template() {
        let t0 = Instant::now();
        let busy = r#""controller.kubernetes.io/pod-deletion-cost":"1000","cluster-autoscaler.kubernetes.io/safe-to-evict":"false","karpenter.sh/do-not-disrupt":"true""#;
        // This drainit's own record: busy already, nothing to send.
        let record = r#"{\"cluster-autoscaler.kubernetes.io/safe-to-evict\":\"true\",\"controller.kubernetes.io/pod-deletion-cost\":null,\"karpenter.sh/do-not-disrupt\":null,\"drainit.dev/busy\":[\"drainit\"],\"drainit.dev/wrote\":[\"cost\",\"safe-to-evict\",\"do-not-disrupt\"]}"#;
        // An earlier release's (no busy list): busy names itself, once.
        let earlier = r#"{\"cluster-autoscaler.kubernetes.io/safe-to-evict\":\"true\"}"#;
        for (text, sends) in [(record, false), (earlier, true)] {
            let pod = format!(
                r#"{{"metadata":{{"resourceVersion":"5","annotations":{{{busy},"drainit.dev/template-annotations":"{text}"}}}}}}"#
            );
            let mut p = Protection::new(&config(false), None, None);
            p.start();
            p.on_answer(ok(&pod), t0);
            assert!(p.is_on());
            let busy = p.request(true, t0);
            assert_eq!(busy.is_some(), sends, "{text}");
            if let Some(busy) = busy {
                let b = body(busy);
                assert_eq!(b["metadata"]["resourceVersion"], "5");
                let record = &b["metadata"]["annotations"][RECORD_KEY];
                assert_eq!(
                    record[BUSY_KEY],
                    serde_json::json!([record::UNNAMED]),
                    "{b}"
                );
                assert_eq!(record[SAFE_TO_EVICT_KEY], "true", "{b}");
                p.on_answer(ok(&pod.replace("\"5\"", "\"6\"")), t0);
                // (The answer is the pod as before: nothing learnt of it.)
            }
            let restore = p.request(false, t0).expect("idle restores the template");
            assert_eq!(
                body(restore)["metadata"]["annotations"],
                serde_json::json!({
                    COST_KEY: null, SAFE_TO_EVICT_KEY: "true", DO_NOT_DISRUPT_KEY: null, RECORD_KEY: null})
            );
            p.on_answer(ok("{}"), t0);
            assert!(is_idle(&p) && !p.is_on());
            assert_eq!(p.request(false, t0), None);
        }
    }

    #[test]
    fn keys_found_without_a_record_are_the_templates_whatever_their_values() {
        let t0 = Instant::now();
        // Busy's own values, from the template: nothing to write, ever.
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(ok(BUSY_POD), t0);
        assert!(p.is_on());
        assert_eq!(p.request(true, t0), None);
        assert_eq!(p.request(false, t0), None, "idle keeps the template's");
        // Other values: busy overwrites them and records them in the same
        // patch; idle puts them back and removes the record.
        let mut q = Protection::new(&config(false), None, None);
        q.start();
        q.on_answer(
            ok(r#"{"metadata":{"annotations":{"karpenter.sh/do-not-disrupt":"false","controller.kubernetes.io/pod-deletion-cost":"-100"}}}"#),
            t0,
        );
        assert!(is_idle(&q) && !q.is_on());
        assert_eq!(q.request(false, t0), None);
        let busy = q.request(true, t0).unwrap();
        let record = serde_json::json!({COST_KEY: "-100", SAFE_TO_EVICT_KEY: null,
            DO_NOT_DISRUPT_KEY: "false", BUSY_KEY: [record::UNNAMED], WROTE_KEY: ["cost", "safe-to-evict", "do-not-disrupt"]});
        assert_eq!(
            body(busy),
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: "1000", SAFE_TO_EVICT_KEY: "false", DO_NOT_DISRUPT_KEY: "true", RECORD_KEY: record}}})
        );
        q.on_answer(ok("{}"), t0);
        assert!(q.is_on());
        let back = q.request(false, t0).unwrap();
        assert_eq!(
            body(back),
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: "-100", SAFE_TO_EVICT_KEY: null, DO_NOT_DISRUPT_KEY: "false", RECORD_KEY: null}}})
        );
        // A record drainit cannot read: the template is not known, and idle
        // removes the keys and the record.
        let mut r = Protection::new(&config(false), None, None);
        r.start();
        r.on_answer(
            ok(r#"{"metadata":{"annotations":{"karpenter.sh/do-not-disrupt":"true","drainit.dev/template-annotations":"[1]"}}}"#),
            t0,
        );
        assert_eq!(body(r.request(false, t0).unwrap()), idle_patch());
    }

    #[test]
    fn idle_safe_to_evict_says_true_when_idle_and_keeps_the_template() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), None, None);
        p.me.idle_safe_to_evict = true;
        p.start();
        p.on_answer(
            ok(r#"{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/safe-to-evict":"false"}}}"#),
            t0,
        );
        assert!(!is_idle(&p), "the template says false");
        let idle_patch = p.request(false, t0).expect("idle says true");
        let record = serde_json::json!({COST_KEY: null, SAFE_TO_EVICT_KEY: "false",
            DO_NOT_DISRUPT_KEY: null, BUSY_KEY: [], WROTE_KEY: ["safe-to-evict"]});
        assert_eq!(
            body(idle_patch),
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: null, SAFE_TO_EVICT_KEY: "true", DO_NOT_DISRUPT_KEY: null, RECORD_KEY: record}}})
        );
        p.on_answer(ok("{}"), t0);
        assert!(is_idle(&p));
        assert_eq!(p.request(false, t0), None);
        assert!(p.request(true, t0).is_some());
        // A template that says true already: idle is the template.
        let mut q = Protection::new(&config(false), None, None);
        q.me.idle_safe_to_evict = true;
        q.start();
        q.on_answer(
            ok(r#"{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/safe-to-evict":"true"}}}"#),
            t0,
        );
        assert_eq!(q.request(false, t0), None);
    }

    #[test]
    fn a_crash_takes_protection_off_when_it_may_be_on() {
        let t0 = Instant::now();
        let read = |p: &mut Protection, pod: &str| {
            p.start();
            p.on_answer(ok(pod), t0);
        };
        // Never read: nothing known, nothing sent.
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        assert_eq!(p.on_crash(), None);
        // Idle: nothing to take off.
        read(&mut p, "{}");
        assert_eq!(p.on_crash(), None);
        // A busy patch out: it may land, so the idle patch goes, but after
        // its answer, never beside it (it could land last).
        p.request(true, t0).unwrap();
        assert_eq!(p.on_crash(), None, "not beside the busy patch");
        assert!(p.crash_waits(), "its answer is waited for");
        p.on_answer(ok("{}"), t0);
        assert!(p.is_on());
        let crash = p.on_crash().expect("protected");
        assert_eq!(body(crash.clone()), idle_patch());
        assert_eq!(crash.headers, [("Accept", PATCH_ACCEPT.to_string())]);
        p.crash_answered(Some(ok("{}")));
        assert!(is_idle(&p));
        // Unknown after a lost patch: sent.
        p.request(true, t0).unwrap();
        p.on_answer(status(500), t0);
        assert!(p.on_crash().is_some(), "unknown");
        // A template holding busy's values: nothing to take off.
        let mut q = Protection::new(&config(false), None, None);
        read(&mut q, BUSY_POD);
        assert_eq!(q.on_crash(), None);
    }

    #[test]
    fn a_failed_read_leaves_the_state_unknown_and_the_grace_as_it_was() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), Some(Duration::from_secs(25)), None);
        p.start();
        p.on_answer(
            Err(Failure::new(crate::proto::http::Kind::Timeout, "t")),
            t0,
        );
        assert_eq!(p.take_grace(false), None);
        let report = p.words(&deadline(false, 25));
        assert_eq!(report["grace_from"], "default");
        assert_eq!(report["grace_ms"], 25_000);
        assert_eq!(p.request(false, t0), None, "backoff");
        assert!(p.request(false, t0 + Duration::from_secs(1)).is_some());
    }

    /// A pod at `rv` holding `annotations` (a JSON object).
    fn pod_at(rv: u32, annotations: serde_json::Value) -> Result<Response, Failure> {
        ok(
            &serde_json::json!({"metadata": {"resourceVersion": rv.to_string(),
            "annotations": annotations}})
            .to_string(),
        )
    }

    /// What a pod busy with this drainit's values holds (the template set
    /// none of the keys).
    fn busy_pod() -> serde_json::Value {
        let record = serde_json::json!({COST_KEY: null, SAFE_TO_EVICT_KEY: null,
            DO_NOT_DISRUPT_KEY: null, BUSY_KEY: [record::UNNAMED]});
        serde_json::json!({COST_KEY: "1000", SAFE_TO_EVICT_KEY: "false",
            DO_NOT_DISRUPT_KEY: "true", RECORD_KEY: record.to_string()})
    }

    #[test]
    fn a_patch_without_a_clear_answer_is_read_again_before_the_next_one() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(120);
        let timeout = || Err(Failure::new(crate::proto::http::Kind::Timeout, "t"));
        for lost in [timeout(), status(500), status(429), status(302)] {
            for applied in [true, false] {
                let mut p = Protection::new(&config(false), None, None);
                p.start();
                p.on_answer(pod_at(1, serde_json::json!({})), t0);
                assert!(is_idle(&p));
                p.request(true, t0).unwrap();
                // Perhaps applied: read again, so that busy's annotations
                // never stay on an idle pod.
                p.on_answer(lost.clone(), t0);
                let read = p.request(false, later).expect("read again");
                assert_eq!(read.method, Method::Get);
                let there = match applied {
                    true => pod_at(2, busy_pod()),
                    false => pod_at(1, serde_json::json!({})),
                };
                p.on_answer(there, later);
                match applied {
                    true => {
                        let idle = p.follow_up().expect("the idle patch at once");
                        let b = body(idle);
                        assert_eq!(b["metadata"]["resourceVersion"], "2");
                        assert_eq!(
                            b["metadata"]["annotations"],
                            idle_patch()["metadata"]["annotations"]
                        );
                        p.on_answer(pod_at(3, serde_json::json!({})), later);
                    }
                    false => assert_eq!(p.follow_up(), None, "nothing to undo"),
                }
                assert!(is_idle(&p));
                assert_eq!(p.request(false, later), None);
            }
        }
        // A clear refusal changed nothing: the state stays.
        for refused in [403, 404, 422] {
            let mut p = Protection::new(&config(false), None, None);
            p.start();
            p.on_answer(ok("{}"), t0);
            p.request(true, t0).unwrap();
            p.on_answer(status(refused), t0);
            assert!(is_idle(&p), "{refused}");
            assert_eq!(p.request(false, later), None, "{refused}");
        }
    }

    #[test]
    fn a_conflict_is_read_again_and_sent_again_at_once() {
        let t0 = Instant::now();
        let mut named = config(false);
        named.container = Some("app".into());
        let spec = r#"{"metadata":{"resourceVersion":"1"},"spec":{"containers":[{"name":"app"},{"name":"side"}]}}"#;
        let mut p = Protection::new(&named, None, None);
        p.start();
        p.on_answer(ok(spec), t0);
        let busy = body(p.request(true, t0).unwrap());
        assert_eq!(busy["metadata"]["resourceVersion"], "1");
        // The sidecar's drainit turned busy first, with a higher cost.
        p.on_answer(status(409), t0);
        assert_eq!(p.request(true, t0), None, "nothing but the read");
        let read = p.follow_up().expect("read at once");
        assert_eq!((read.method, read.body), (Method::Get, None));
        let side = serde_json::json!({COST_KEY: null, SAFE_TO_EVICT_KEY: null,
            DO_NOT_DISRUPT_KEY: null, BUSY_KEY: ["side"]});
        let sides = serde_json::json!({COST_KEY: "5000", SAFE_TO_EVICT_KEY: "false",
            DO_NOT_DISRUPT_KEY: "true", RECORD_KEY: side.to_string()});
        p.on_answer(pod_at(2, sides), t0);
        let again = body(p.follow_up().expect("the patch anew"));
        assert_eq!(again["metadata"]["resourceVersion"], "2");
        let annotations = &again["metadata"]["annotations"];
        assert_eq!(annotations[COST_KEY], "5000", "the highest");
        assert_eq!(
            annotations[RECORD_KEY][BUSY_KEY],
            serde_json::json!(["side", "app"])
        );
        // Conflicts without end: CONFLICTS reads, then the backoff.
        for _ in 0..CONFLICTS - 1 {
            p.on_answer(status(409), t0);
            p.follow_up().expect("read");
            p.on_answer(pod_at(2, serde_json::json!({})), t0);
            p.follow_up().expect("patch");
        }
        p.on_answer(status(409), t0);
        assert_eq!(p.follow_up(), None);
        let State::Backoff { until: first } = p.state else {
            panic!("{:?}", p.state)
        };
        assert_eq!(p.held, None, "unknown: read before the next patch");
        // The pod keeps changing: the reads between conflicts clear no
        // backoff, so each round waits longer than the last.
        let mut waits = vec![first - t0];
        let mut t = first;
        for _ in 0..3 {
            let read = p.request(true, t).expect("read after the backoff");
            assert_eq!(read.method, Method::Get);
            p.on_answer(pod_at(2, serde_json::json!({})), t);
            p.follow_up().expect("patch");
            for _ in 0..CONFLICTS {
                p.on_answer(status(409), t);
                p.follow_up().expect("read");
                p.on_answer(pod_at(2, serde_json::json!({})), t);
                p.follow_up().expect("patch");
            }
            p.on_answer(status(409), t);
            let State::Backoff { until } = p.state else {
                panic!("{:?}", p.state)
            };
            waits.push(until - t);
            t = until;
        }
        assert!(waits.windows(2).all(|w| w[1] > w[0]), "{waits:?}");
    }

    #[test]
    fn a_refused_restore_falls_back_once_to_removing_the_keys() {
        let t0 = Instant::now();
        let record = serde_json::json!({COST_KEY: "-5", SAFE_TO_EVICT_KEY: "true",
            DO_NOT_DISRUPT_KEY: null, BUSY_KEY: [record::UNNAMED]});
        let mut planted = busy_pod();
        planted[RECORD_KEY] = record.to_string().into();
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(pod_at(4, planted), t0);
        let restore = body(p.request(false, t0).unwrap());
        assert_eq!(restore["metadata"]["annotations"][COST_KEY], "-5");
        p.on_answer(status(422), t0);
        let removal = body(p.follow_up().expect("the keys removed at once"));
        assert_eq!(
            removal["metadata"]["annotations"],
            idle_patch()["metadata"]["annotations"]
        );
        // Refused too: the backoff, and the same removal after it, never
        // the refused values again.
        p.on_answer(status(422), t0);
        assert_eq!(p.follow_up(), None, "once");
        let later = body(p.request(false, t0 + Duration::from_secs(5)).unwrap());
        assert_eq!(later, removal);
        p.on_answer(pod_at(5, serde_json::json!({})), t0);
        assert!(is_idle(&p) && !p.is_on());
    }

    #[test]
    fn a_crash_patch_in_conflict_is_read_again_and_sent_again() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(pod_at(1, serde_json::json!({})), t0);
        p.request(true, t0).unwrap();
        p.on_answer(pod_at(2, busy_pod()), t0);
        let crash = body(p.on_crash().expect("protected"));
        assert_eq!(crash["metadata"]["resourceVersion"], "2");
        // Another drainit of the pod turned busy meanwhile.
        let read = p.crash_answered(Some(status(409))).expect("read again");
        assert_eq!(read.method, Method::Get);
        let record = serde_json::json!({COST_KEY: null, SAFE_TO_EVICT_KEY: null,
            DO_NOT_DISRUPT_KEY: null, BUSY_KEY: ["drainit", "side"]});
        let mut both = busy_pod();
        both[RECORD_KEY] = record.to_string().into();
        let again = body(
            p.crash_answered(Some(pod_at(3, both)))
                .expect("the patch anew"),
        );
        assert_eq!(again["metadata"]["resourceVersion"], "3");
        let annotations = &again["metadata"]["annotations"];
        assert_eq!(
            annotations[RECORD_KEY][BUSY_KEY],
            serde_json::json!(["side"])
        );
        assert_eq!(annotations[COST_KEY], "1000", "kept for the sidecar");
        assert_eq!(
            p.crash_answered(Some(pod_at(4, serde_json::json!({})))),
            None
        );
        // Conflicts without end stop at CONFLICTS reads.
        let mut q = Protection::new(&config(false), None, None);
        q.start();
        q.on_answer(pod_at(2, busy_pod()), t0);
        q.on_crash().unwrap();
        for _ in 0..CONFLICTS {
            q.crash_answered(Some(status(409))).expect("read");
            q.crash_answered(Some(pod_at(2, busy_pod())))
                .expect("patch");
        }
        assert_eq!(q.crash_answered(Some(status(409))), None);
    }

    #[test]
    fn a_crash_while_a_busy_patch_waits_on_its_read_sends_no_busy_patch() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(pod_at(1, serde_json::json!({})), t0);
        p.request(true, t0).unwrap();
        // Another drainit patched first: the busy patch waits on a read.
        p.on_answer(status(409), t0);
        let read = p.follow_up().expect("the read");
        assert_eq!(read.method, Method::Get);
        // The app crashes with that read out.
        let crash = p.on_crash();
        // The read's answer comes: the busy patch is not sent after the
        // app's end.
        p.on_answer(pod_at(2, serde_json::json!({})), t0);
        assert_eq!(p.follow_up(), None, "no busy patch after the crash");
        if let Some(crash) = crash {
            assert_eq!(crash.method, Method::Get, "what the pod holds is unknown");
        }
    }

    #[test]
    fn protection_stays_off_when_drainit_does_not_know_its_container() {
        let t0 = Instant::now();
        let two = r#"{"spec":{"containers":[{"name":"app","command":["/drainit"]},{"name":"side","args":["/bin/drainit"]}]}}"#;
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(ok(two), t0);
        assert_eq!(p.request(true, t0), None);
        assert_eq!(p.on_crash(), None);
        // Named: on.
        let mut named = config(false);
        named.container = Some("side".into());
        let mut q = Protection::new(&named, None, None);
        q.start();
        q.on_answer(ok(two), t0);
        let busy = body(q.request(true, t0).unwrap());
        assert_eq!(
            busy["metadata"]["annotations"][RECORD_KEY][BUSY_KEY],
            serde_json::json!(["side"])
        );
    }

    #[test]
    fn a_failed_read_is_tried_again_before_any_patch() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut p = Protection::new(&config(false), Some(s(25)), None);
        p.start();
        p.on_answer(status(403), t0);
        // The template's values are not known: no patch, the read again.
        let read = p.request(true, t0 + s(2)).unwrap();
        assert_eq!(read.method, Method::Get);
        p.on_answer(status(403), t0 + s(2));
        assert_eq!(p.request(true, t0 + s(2)), None, "its backoff");
        let read = p.request(true, t0 + s(4)).unwrap();
        assert_eq!(read.method, Method::Get);
        p.on_answer(ok(BUSY_POD), t0 + s(4));
        assert_eq!(p.take_grace(false).unwrap().grace, s(54));
        assert_eq!(p.request(true, t0 + s(6)), None, "read once");
    }

    #[test]
    fn the_grace_comes_from_the_pod_unless_given() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), Some(Duration::from_secs(25)), None);
        p.start();
        p.on_answer(ok(BUSY_POD), t0);
        let grace = p.take_grace(false).unwrap();
        assert_eq!(grace.grace, Duration::from_secs(54));
        assert_eq!(grace.grace_max, Some(Duration::from_secs(54)));
        let mut owner = deadline(false, 25);
        owner.learn(grace);
        let report = p.words(&owner);
        assert_eq!(report["grace_from"], "pod");
        assert_eq!(report["grace_ms"], 54_000);
        assert_eq!(report["termination_grace_period_seconds"], 60);
        assert_eq!(p.take_grace(false), None, "once");
        // Too late for a stop under way.
        let mut late = Protection::new(&config(false), Some(Duration::from_secs(25)), None);
        late.start();
        late.on_answer(ok(BUSY_POD), t0);
        assert_eq!(late.take_grace(true), None);
        let report = late.words(&deadline(false, 25));
        assert_eq!(report["grace_from"], "default");
        assert_eq!(report["termination_grace_period_seconds"], 60);
        // Given: checked, never changed.
        let mut given = Protection::new(&config(true), Some(Duration::from_secs(90)), None);
        given.start();
        given.on_answer(ok(BUSY_POD), t0);
        assert_eq!(given.take_grace(false), None);
        let report = given.words(&deadline(true, 90));
        assert_eq!(report["grace_from"], "option");
        assert_eq!(report["grace_ms"], 90_000);
    }

    #[test]
    fn a_pod_grace_inside_the_pre_stop_delay_is_taken_and_cuts_the_delay() {
        let t0 = Instant::now();
        let pod = |period: u64| {
            ok(&format!(
                r#"{{"spec":{{"terminationGracePeriodSeconds":{period}}}}}"#
            ))
        };
        let mut p = Protection::new(&config(false), Some(Duration::from_secs(30)), None);
        p.delay = Duration::from_secs(10);
        p.start();
        p.on_answer(pod(10), t0);
        // The grace is kept; the timeline cuts the delay at the stop.
        assert_eq!(p.take_grace(false).unwrap().grace, Duration::from_secs(8));
        assert_eq!(p.period, Some(10));
    }

    #[test]
    fn the_default_grace_comes_from_drainits_container_in_the_spec() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let spec = r#"{"spec":{"terminationGracePeriodSeconds":30,"containers":[
            {"name":"app","command":["/drainit"],"livenessProbe":{"terminationGracePeriodSeconds":12},
             "lifecycle":{"preStop":{"sleep":{"seconds":3}}}},
            {"name":"side","lifecycle":{"preStop":{"exec":{"command":["x"]}}}}]}}"#;
        // The one that runs drainit: min(30, 12) less 3 s of sleep, less 2 s.
        let mut p = Protection::new(&config(false), Some(s(25)), None);
        p.start();
        p.on_answer(ok(spec), t0);
        assert_eq!(p.take_grace(false).unwrap().grace, s(7));
        // Named: the other one, whose exec hook is not counted.
        let mut named = config(false);
        named.container = Some("side".into());
        let mut p = Protection::new(&named, Some(s(25)), None);
        p.start();
        p.on_answer(ok(spec), t0);
        assert_eq!(p.take_grace(false).unwrap().grace, s(27));
        // A name that is none of them: the smallest.
        named.container = Some("nope".into());
        let mut p = Protection::new(&named, Some(s(25)), None);
        p.start();
        p.on_answer(ok(spec), t0);
        assert_eq!(p.take_grace(false).unwrap().grace, s(7));
        // Named by the kubelet's mounts: the sidecar's drainit takes its
        // own container's grace, not the app's.
        let mut mounted = config(false);
        mounted.mounted = vec![crate::proto::k8s_mounts::Mounted {
            pod_uid: "u-9".into(),
            container: "side".into(),
        }];
        let with_uid = spec.replacen("{\"spec\"", "{\"metadata\":{\"uid\":\"u-9\"},\"spec\"", 1);
        let mut p = Protection::new(&mounted, Some(s(25)), None);
        p.start();
        p.on_answer(ok(&with_uid), t0);
        assert_eq!(p.take_grace(false).unwrap().grace, s(27));
        // Given: checked against the pod's period, never changed.
        let mut p = Protection::new(&config(true), Some(s(20)), None);
        p.start();
        p.on_answer(ok(spec), t0);
        assert_eq!(p.take_grace(false), None);
    }

    const UID: &str = r#""uid":"u-1""#;

    fn dated(body: &str, status: u16, date: SystemTime) -> Result<Response, Failure> {
        Ok(Response {
            status,
            body: body.as_bytes().to_vec(),
            date: Some(date),
            ..Response::default()
        })
    }

    /// A back-end whose start read found pod `u-1`.
    fn started(t0: Instant) -> Protection {
        let mut p = Protection::new(&config(false), Some(Duration::from_secs(27)), None);
        p.start();
        p.on_answer(
            ok(&format!(
                r#"{{"metadata":{{{UID}}},"spec":{{"terminationGracePeriodSeconds":30}}}}"#
            )),
            t0,
        );
        p
    }

    #[test]
    fn the_read_at_the_stop_learns_the_kill_from_the_api_servers_clock() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        // The server's clock ahead, on time, behind: its two times cancel.
        for (date, stamp) in [
            ((8, 0, 30), "2027-01-15T08:00:40Z"),
            ((8, 0, 0), "2027-01-15T08:00:10Z"),
            ((7, 59, 30), "2027-01-15T07:59:40Z"),
        ] {
            let mut p = started(t0);
            let read = p.stop_read(t0).unwrap();
            assert_eq!(
                (&read.method, &read.endpoint),
                (&Method::Get, &Endpoint::K8sPod)
            );
            assert_eq!(read.query, vec![("resourceVersion", "0".to_string())]);
            assert_eq!(p.stop_read(t0), None, "one out at a time");
            let date = crate::proto::http::civil_time(2027, 1, 15, date.0, date.1, date.2).unwrap();
            let body = format!(
                r#"{{"metadata":{{{UID},"deletionTimestamp":"{stamp}","deletionGracePeriodSeconds":10}}}}"#
            );
            let (learnt, again) = p.on_stop_answer(dated(&body, 200, date), t0 + s(1));
            // Counted from when the read was sent.
            assert_eq!(
                learnt,
                Some(Learnt::Kill {
                    at: t0 + s(10),
                    period: Some(10)
                }),
                "{stamp}"
            );
            assert_eq!(again, None, "10 s left: read once");
        }
    }

    #[test]
    fn a_long_deletion_is_read_once_more_at_half_of_it() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut p = started(t0);
        p.stop_read(t0).unwrap();
        let date = crate::proto::http::civil_time(2027, 1, 15, 8, 0, 0).unwrap();
        let body = format!(
            r#"{{"metadata":{{{UID},"deletionTimestamp":"2027-01-15T08:02:00Z","deletionGracePeriodSeconds":120}}}}"#
        );
        let (_, again) = p.on_stop_answer(dated(&body, 200, date), t0);
        assert_eq!(again, Some(t0 + s(60)));
        assert!(p.stop_read(t0 + s(60)).is_some());
        let (learnt, again) = p.on_stop_answer(dated(&body, 200, date), t0 + s(60));
        assert!(learnt.is_some());
        assert_eq!(again, None, "twice at most");
        assert_eq!(p.stop_read(t0 + s(90)), None);
    }

    #[test]
    fn a_force_delete_a_failure_and_no_deletion_at_the_stop() {
        let t0 = Instant::now();
        let date = SystemTime::UNIX_EPOCH;
        // 404 for the pod read at start: force-deleted.
        let mut p = started(t0);
        p.stop_read(t0).unwrap();
        let (learnt, _) = p.on_stop_answer(status(404), t0);
        assert_eq!(learnt, Some(Learnt::Gone { at: t0 }));
        // Made again under another uid: force-deleted too.
        let mut p = started(t0);
        p.stop_read(t0).unwrap();
        let other = r#"{"metadata":{"uid":"u-2"}}"#;
        assert_eq!(
            p.on_stop_answer(dated(other, 200, date), t0).0,
            Some(Learnt::Gone { at: t0 })
        );
        // A pod never found at start: a 404 changes nothing.
        let mut never = Protection::new(&config(false), None, None);
        never.start();
        never.on_answer(status(404), t0);
        never.stop_read(t0).unwrap();
        assert_eq!(never.on_stop_answer(status(404), t0).0, None);
        // A 500, a timeout, no deletion: the deadline stays.
        for answer in [
            status(500),
            Err(Failure::new(crate::proto::http::Kind::Timeout, "t")),
            dated(
                &format!(
                    r#"{{"metadata":{{{UID}}},"status":{{"conditions":[{{"type":"DisruptionTarget","status":"True","reason":"TerminationByKubelet"}}]}}}}"#
                ),
                200,
                date,
            ),
        ] {
            let mut p = started(t0);
            p.stop_read(t0).unwrap();
            assert_eq!(p.on_stop_answer(answer, t0), (None, None));
        }
    }

    #[test]
    fn answers_wait_their_backoff_and_a_401_is_retried_once_at_once() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(ok("{}"), t0);
        p.request(true, t0).unwrap();
        p.on_answer(status(401), t0);
        let again = p.follow_up().unwrap();
        assert_eq!(again.method, Method::Patch);
        p.on_answer(status(401), t0);
        assert_eq!(p.follow_up(), None, "once");
        assert_eq!(p.request(true, t0), None, "backoff after the second 401");
        assert!(p.request(true, t0 + s(1)).is_some());
        // 429 waits at least its Retry-After.
        let mut answer = status(429).unwrap();
        answer.retry_after = Some(s(20));
        p.on_answer(Ok(answer), t0);
        assert_eq!(p.request(true, t0 + s(19)), None);
        assert!(p.request(true, t0 + s(20)).is_some());
        // So does a 503 that gives one.
        let mut answer = status(503).unwrap();
        answer.retry_after = Some(s(30));
        p.on_answer(Ok(answer), t0);
        assert_eq!(p.request(true, t0 + s(29)), None);
        assert!(p.request(true, t0 + s(30)).is_some());
        // 403, 404, 422, 5xx: backoff, doubling.
        for code in [403, 404, 422, 500, 409] {
            p.on_answer(status(code), t0);
            assert!(!p.is_on(), "{code}");
            assert_eq!(p.request(true, t0), None, "{code}");
            assert!(p.request(true, t0 + s(61)).is_some(), "{code}");
        }
        // After the 500 the pod is read again, then patched at once.
        p.on_answer(ok("{}"), t0);
        assert_eq!(p.follow_up().unwrap().method, Method::Patch);
        p.on_answer(ok("{}"), t0);
        assert!(p.is_on());
        assert_eq!((p.streak, p.state), (Streak::default(), State::Idle));
    }
}
