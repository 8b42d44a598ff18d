//! The Kubernetes pod annotations, the back-end of `core::protect` for
//! Kubernetes (`--k8s-protect`): busy sets the managed annotations on
//! drainit's own pod, idle (after the hold) gives them back the template's
//! values (removing those it had none for; safe-to-evict "true" with
//! `--k8s-idle-safe-to-evict`), each with one merge `PATCH` of
//! `metadata.annotations` only (`proto::k8s::annotations_patch`). What a
//! patch overwrites of the template is recorded in drainit's own
//! annotation (`proto::k8s::RECORD_KEY`) in the same patch, and the record
//! goes when the template's values are back: with no record on the pod,
//! the keys found are the template's; with one, they are drainit's from an
//! earlier run of the container and the record holds the template's.
//! Its one exchange with the API server is a small state (`State`:
//! reading, idle, patching, a 401's retry, in backoff), the failures since
//! the last success a `Streak`, and what the start read taught a `Read`:
//! no flags.
//! At start one `GET` of the pod takes the keys and the record, and the
//! pod's `terminationGracePeriodSeconds` for the default `--grace`
//! (`Backend::take_grace`), unless it would not outlast
//! `--pre-stop-delay`; a failed read is sent again before any patch (a
//! patch needs the template's values).
//! Only changes are sent, and a patch without a clear answer (no answer, a
//! 409, a 5xx) leaves what the pod holds unknown, so the next answer is
//! sent whatever it is; a failure waits its backoff (a 429, or a 503 that
//! gives one, at least its `Retry-After`), a 401 is retried once at once
//! (the shell reads the token again for every request), and each failure
//! is said in one line until it changes. When the app crashes while the
//! pod may hold busy's values, one idle patch goes out beside whatever is
//! in flight (`Backend::on_crash`). The requests go out through the
//! shell's Kubernetes client (`io::k8s`): their endpoint is the pod
//! (`Endpoint::K8sPod`).
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
use crate::core::protect::{Backend, Report};
use crate::core::settings::{Config, K8sConfig};
use crate::proto::exchange::{Auth, Endpoint, Method, Request};
use crate::proto::http::{Failure, Response};
use crate::proto::k8s::{
    annotations_patch, backoff, choose, pod_grace, read_pod, read_record, record_text, spec_grace,
    verdict, Annotation, Chosen, Managed, Pod, PreStop, Values, Verdict, ANNOTATION_LIMIT,
    PATCH_ACCEPT, PERIOD_LIMIT_SECONDS, RECORD_KEY,
};
use crate::util::time::millis;

/// How long the app must have been idle before the annotations come off:
/// a worker between two jobs keeps them.
pub const IDLE_HOLD: Duration = Duration::from_secs(30);
/// With more than this left to the kill, the pod is read once more at
/// half of it: a second, shorter delete sends no new SIGTERM.
pub const READ_AGAIN_PAST: Duration = Duration::from_secs(60);
/// Reads of the pod at the stop, at most.
const STOP_READS: u8 = 2;

/// The Kubernetes back-end, when `--k8s-protect` is on.
pub fn from_config(config: &Config) -> Option<Protection> {
    let k8s = config.k8s.as_ref()?;
    let mut protection = Protection::new(k8s, config.timeline.grace, config.grace_max);
    protection.delay = config.timeline.pre_stop_delay;
    protection.idle_safe_to_evict = k8s.idle_safe_to_evict;
    Some(protection)
}

/// A request the back-end sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// The pod's read (at start, and again while no read succeeded).
    Read,
    /// A patch marking the pod busy (true) or idle.
    Patch(bool),
}

/// Where the back-end's one exchange with the API server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The pod's read is out.
    Reading,
    /// Nothing out: the next request goes when one is due.
    Idle,
    /// A patch marking the pod busy (true) or idle is out.
    Patching { busy: bool },
    /// A 401 came back: this request goes again at once (the shell reads
    /// the token again for every request), once per `Streak`.
    Again(Sent),
    /// The last request failed: nothing goes out before `until`.
    Backoff { until: Instant },
}

impl State {
    /// The request out, if any.
    fn out(self) -> Option<Sent> {
        match self {
            State::Reading => Some(Sent::Read),
            State::Patching { busy } => Some(Sent::Patch(busy)),
            State::Idle | State::Again(_) | State::Backoff { .. } => None,
        }
    }
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

/// The managed keys and the record as the pod holds them, or as drainit
/// wants them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    values: Values,
    /// drainit's record of the template's values is on the pod.
    record: bool,
}

/// The pod annotations: set while the app is busy, the template's values
/// back once it is idle.
#[derive(Debug)]
pub struct Protection {
    namespace: String,
    pod: String,
    interval: Duration,
    cost: i32,
    managed: Managed,
    /// `--k8s-idle-safe-to-evict`: idle sets safe-to-evict "true".
    idle_safe_to_evict: bool,
    /// What the pod's template gave the managed keys: found on them at
    /// start with no record, or in the record (`RECORD_KEY`).
    template: Values,
    /// What the pod holds, as the API server last said (None: unknown,
    /// after a patch without a clear answer or before the read): then the
    /// next answer's patch goes out whatever it is.
    held: Option<Held>,
    state: State,
    streak: Streak,
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
            cost: k8s.cost,
            managed: k8s.managed,
            idle_safe_to_evict: false,
            template: Values::default(),
            held: None,
            state: State::Idle,
            streak: Streak::default(),
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
            uid: None,
            stop_sent: None,
            stop_reads: 0,
        }
    }

    fn request_for(&mut self, sent: Sent) -> Request {
        self.state = match sent {
            Sent::Read => State::Reading,
            Sent::Patch(busy) => State::Patching { busy },
        };
        self.build(sent)
    }

    /// The request for `sent`: the read, or the patch that makes the pod
    /// hold what busy (or idle) wants, the record included.
    fn build(&self, sent: Sent) -> Request {
        let (method, body) = match sent {
            Sent::Read => (Method::Get, None),
            Sent::Patch(busy) => {
                let want = self.wanted(busy);
                let record = want
                    .record
                    .then(|| record_text(self.managed, &self.template));
                let body = annotations_patch(self.managed, &want.values, record.as_deref());
                (Method::Patch, Some(body))
            }
        };
        let mut request = Request::new(Endpoint::K8sPod, method)
            .with_auth(Auth::ServiceAccount)
            .with_body(body);
        if request.method == Method::Patch {
            request.headers.push(("Accept", PATCH_ACCEPT.to_string()));
        }
        request
    }

    /// `values` with only the managed keys.
    fn managed_only(&self, values: &Values) -> Values {
        let mut out = Values::default();
        for a in self.managed.iter() {
            out[a as usize] = values[a as usize].clone();
        }
        out
    }

    /// Busy's values of the managed keys.
    fn busy_values(&self) -> Values {
        let mut out = Values::default();
        for a in self.managed.iter() {
            out[a as usize] = Some(match a {
                Annotation::Cost => self.cost.to_string(),
                Annotation::SafeToEvict => "false".to_string(),
                Annotation::DoNotDisrupt => "true".to_string(),
            });
        }
        out
    }

    /// What busy (or idle) wants the pod to hold: busy's values, or the
    /// template's (safe-to-evict "true" with `--k8s-idle-safe-to-evict`);
    /// the record whenever a value is not the template's.
    fn wanted(&self, busy: bool) -> Held {
        let mut values = match busy {
            true => self.busy_values(),
            false => self.template.clone(),
        };
        let evict = Annotation::SafeToEvict;
        if !busy && self.idle_safe_to_evict && self.managed.has(evict) {
            values[evict as usize] = Some("true".to_string());
        }
        let record = values != self.template;
        Held { values, record }
    }

    /// The pod's keys as read: with no record, they are the template's
    /// (whatever their values); with one, they are drainit's from an
    /// earlier run and the record holds the template's.
    fn take_keys(&mut self, pod: &Pod) {
        let found = self.managed_only(&pod.annotations);
        let (template, record) = match pod.record.as_deref() {
            None => (found.clone(), false),
            Some(text) => match read_record(self.managed, text) {
                Ok(template) => {
                    info!(
                        "pod {}/{} holds drainit's annotations from an earlier run: the first idle answer restores the template's values kept in {RECORD_KEY}",
                        self.namespace, self.pod
                    );
                    (template, true)
                }
                Err(e) => {
                    warn!(
                        "Kubernetes pod protection: the pod's {RECORD_KEY} is not drainit's record ({e}): the template's values are not known, so idle removes the keys"
                    );
                    (Values::default(), true)
                }
            },
        };
        // A value drainit could not give back whole is never overwritten:
        // the key is left alone, said once.
        let (mut found, mut template) = (found, template);
        for a in self.managed.iter() {
            let long = |v: &Values| {
                v[a as usize]
                    .as_ref()
                    .is_some_and(|v| v.chars().count() > ANNOTATION_LIMIT)
            };
            if long(&found) {
                warn!(
                    "Kubernetes pod protection: the pod's {} is longer than {ANNOTATION_LIMIT} characters, more than drainit records whole: drainit leaves it alone",
                    a.key()
                );
                self.managed = self.managed.without(a);
                found[a as usize] = None;
                template[a as usize] = None;
            } else if long(&template) {
                // Not drainit's record (it never writes one so long): the
                // key holds drainit's value, and idle removes it.
                warn!(
                    "Kubernetes pod protection: {RECORD_KEY} holds a value of {} longer than {ANNOTATION_LIMIT} characters, which drainit never writes: idle removes the key",
                    a.key()
                );
                template[a as usize] = None;
            }
        }
        self.template = template;
        self.held = Some(Held {
            values: found,
            record,
        });
    }

    /// The pod as read at start: its keys are drainit's earlier state, its
    /// period sets the default grace or checks the one given.
    fn read(&mut self, body: &[u8]) -> Result<(), String> {
        let pod = read_pod(body).map_err(|e| e.to_string())?;
        self.take_keys(&pod);
        self.uid = pod.uid.clone();
        let Some(period) = pod.grace_seconds else {
            if pod.grace_unreadable {
                warn!(
                    "the pod's terminationGracePeriodSeconds is not a whole number of seconds, so the grace stays {}",
                    self.grace_text()
                );
            }
            return Ok(());
        };
        self.period = Some(period);
        let kill = Duration::from_secs(period);
        if let Some(max) = self
            .grace_max
            .filter(|m| self.grace_max_given && *m >= kill)
        {
            warn!(
                "--grace-max {} ms is not below the pod's terminationGracePeriodSeconds ({period} s): an extension past it ends in the kubelet's SIGKILL, and the exit report will be lost",
                millis(max)
            );
        }
        match self.grace_given {
            true if self.grace.map_or(true, |g| g >= kill) => warn!(
                "--grace {} is not below the pod's terminationGracePeriodSeconds ({period} s): the kubelet will kill the container first, and the exit report will be lost",
                self.grace
                    .map_or("none".to_string(), |g| format!("{} ms", millis(g)))
            ),
            true => {}
            false => {
                let grace = self.spec_grace(&pod, period);
                if grace <= self.delay {
                    warn!(
                        "the pod's terminationGracePeriodSeconds ({period} s) less its margin ({} ms) is not longer than --pre-stop-delay ({} ms): a stop cuts the delay so the drain keeps at least half of the grace",
                        millis(grace),
                        millis(self.delay),
                    );
                }
                let grace_max = match self.grace_max_given {
                    true => self.grace_max.map(|m| m.max(grace)),
                    false => Some(grace),
                };
                self.read = Read::Done {
                    grace: Some(Grace { grace, grace_max }),
                };
            }
        }
        Ok(())
    }

    /// The default grace from the pod's spec (`proto::k8s::spec_grace`)
    /// for drainit's own container (`choose`): said when nothing chose
    /// one, and when a preStop hook or a sidecar's wait takes an unknown
    /// share of it.
    fn spec_grace(&mut self, pod: &Pod, period: u64) -> Duration {
        let container = match choose(&pod.containers, self.container.as_deref(), period) {
            Chosen::One(c) => Some(c),
            // No container read (never so in a real pod): the period alone.
            Chosen::Smallest(None) => None,
            Chosen::Smallest(c) => {
                let grace = spec_grace(period, c);
                warn!(
                    "drainit's own container is not known among the pod's {} (set --k8s-container NAME): the grace is the smallest of theirs, {} ms",
                    pod.containers.len(),
                    millis(grace)
                );
                c
            }
        };
        if let Some(c) = container {
            let what = match (c.pre_stop, c.restartable) {
                (PreStop::Other, _) => Some("its exec or httpGet preStop hook's time"),
                (_, true) => Some("the main containers' stop (a restartable init container)"),
                _ => None,
            };
            if let Some(what) = what {
                info!(
                    "container {}: {what} comes out of the grace before drainit's SIGTERM; the read of the pod's deletion at the stop covers it",
                    crate::util::text::escape(&c.name, 64)
                );
            }
        }
        spec_grace(period, container)
    }

    /// The read at the stop answered (`sent`: when it went out): the kill
    /// time, a force delete, or nothing learnt (said in one line).
    fn read_at_stop(&mut self, result: Result<Response, Failure>, sent: Instant) -> Option<Learnt> {
        let response = match result {
            Ok(response) => response,
            Err(failure) => {
                return failed_at_stop(&failure.to_string());
            }
        };
        match response.status {
            200..=299 => {}
            404 if self.uid.is_some() => return Some(Learnt::Gone { at: sent }),
            status => {
                return failed_at_stop(&format!("HTTP {status}"));
            }
        }
        let pod = match read_pod(&response.body) {
            Ok(pod) => pod,
            Err(e) => {
                return failed_at_stop(&e);
            }
        };
        if self.uid.is_some() && pod.uid.is_some() && pod.uid != self.uid {
            return Some(Learnt::Gone { at: sent });
        }
        let Some(deletion) = pod.deletion else {
            match &pod.disruption {
                Some(reason) => info!(
                    "the pod is not being deleted (DisruptionTarget: {}): the deadline stays",
                    crate::util::text::escape(reason, 100)
                ),
                None => info!(
                    "the pod is not being deleted (the kubelet stops the container itself): the deadline stays"
                ),
            }
            return None;
        };
        // Both the API server's clock: the node's skew cancels. The shell
        // gives an answer without a Date the local clock's.
        let Some(date) = response.date else {
            return failed_at_stop("an answer without a date");
        };
        // Never past the deletion's own grace period from now (the kubelet
        // counts it from when it saw the deletion, before this read): a
        // timestamp far off, or a clock far behind, cannot put the
        // deadline after the real kill.
        let most = pod
            .deletion_grace_seconds
            .unwrap_or(PERIOD_LIMIT_SECONDS)
            .min(PERIOD_LIMIT_SECONDS);
        let left = deletion
            .duration_since(date)
            .unwrap_or_default()
            .min(Duration::from_secs(most));
        Some(Learnt::Kill {
            at: sent + left,
            period: pod.deletion_grace_seconds,
        })
    }

    /// The grace that applies, as a log line says it.
    fn grace_text(&self) -> String {
        self.grace
            .map_or("none".to_string(), |g| format!("{} ms", millis(g)))
    }

    /// A failure: said once until a different one comes, then no request
    /// before the backoff (at least `after`).
    fn failed(&mut self, now: Instant, key: Key, message: &str, after: Option<Duration>) {
        self.streak.count = self.streak.count.saturating_add(1);
        let wait = backoff(self.streak.count).max(after.unwrap_or_default());
        self.state = State::Backoff { until: now + wait };
        self.say(key, message);
    }

    /// A patch whose fate is unknown (no answer, a 409, a 5xx, a 429, an
    /// unexpected status): the API server may have applied it, so what the
    /// pod holds is unknown and the next answer, busy or idle, is sent
    /// again (a merge patch is idempotent). A clear refusal (401, 403, 404,
    /// 400, 415, 422) changed nothing and keeps the state.
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
        self.streak = Streak::default();
        if self.said.take().is_some() {
            info!("Kubernetes pod protection: the API server accepts drainit's requests again");
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
            Some(Sent::Patch(busy)) => {
                self.held = Some(self.wanted(busy));
                match busy {
                    true => info!(
                        "pod {}/{} protected: the app is busy",
                        self.namespace, self.pod
                    ),
                    false => info!(
                        "pod {}/{} unprotected: the app is idle",
                        self.namespace, self.pod
                    ),
                }
            }
            None => {}
        }
    }
}

/// The read at the stop told nothing: said in one line, the deadline kept.
fn failed_at_stop(why: &str) -> Option<Learnt> {
    warn!("the pod's read at the stop failed ({why}): the deadline stays");
    None
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
            State::Reading | State::Patching { .. } | State::Again(_) => return None,
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
        if self.held.as_ref() == Some(&self.wanted(busy)) {
            return None; // a patch would change nothing
        }
        Some(self.request_for(Sent::Patch(busy)))
    }

    fn on_answer(&mut self, result: Result<Response, Failure>, now: Instant) {
        let sent = std::mem::replace(&mut self.state, State::Idle).out();
        let response = match result {
            Ok(response) => response,
            Err(failure) => {
                self.unknown_after(sent);
                return self.failed(now, Key::Failed(failure.kind), &failure.to_string(), None);
            }
        };
        let status = response.status;
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
                let key = if status == 429 {
                    Key::TooMany
                } else {
                    Key::Retry
                };
                self.failed(now, key, &format!("HTTP {status}: retrying"), after)
            }
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
            .is_some_and(|h| h.values == self.busy_values())
    }

    fn on_crash(&mut self) -> Option<Request> {
        if self.state == (State::Patching { busy: true }) {
            // Sent beside it, the idle patch could land first and the
            // busy one last: its answer is waited for (`crash_waits`),
            // then this is asked again.
            return None;
        }
        let busy_out = matches!(
            self.state,
            State::Patching { busy: true } | State::Again(Sent::Patch(true))
        );
        let idle = self.wanted(false);
        let may_be_busy = match &self.held {
            None => true,
            Some(held) => *held != idle && self.is_on(),
        };
        let due = self.read != Read::Pending && (busy_out || may_be_busy);
        due.then(|| self.build(Sent::Patch(false)))
    }

    fn crash_waits(&self) -> bool {
        // The read at start: the pod may hold busy's values from an
        // earlier run of the container. A busy patch out: the idle one
        // goes after its answer, never beside it.
        matches!(self.state, State::Reading | State::Patching { busy: true })
    }

    fn crash_answered(&mut self, result: Option<Result<Response, Failure>>) {
        let failure = match &result {
            Some(Ok(answer)) if matches!(verdict(answer), Verdict::Applied) => {
                self.held = Some(self.wanted(false));
                return info!(
                    "pod {}/{} unprotected: the app ended while protected",
                    self.namespace, self.pod
                );
            }
            Some(Ok(answer)) => format!("HTTP {}", answer.status),
            Some(Err(failure)) => failure.to_string(),
            None => format!("no answer within {} ms", millis(super::CRASH_BOUND)),
        };
        warn!(
            "Kubernetes pod protection: the app ended while protected, and the idle patch failed ({failure}): the pod keeps drainit's annotations until it is deleted or drainit runs in it again"
        );
    }

    fn complain(&mut self, key: Key, message: &str) {
        // A source that did not answer protection's poll.
        self.sources.once(key, "pod protection", message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::k8s::{COST_KEY, DO_NOT_DISRUPT_KEY, SAFE_TO_EVICT_KEY};
    use std::time::SystemTime;

    fn config(grace_given: bool) -> K8sConfig {
        K8sConfig {
            host: "10.96.0.1".parse().unwrap(),
            port: 443,
            namespace: "jobs".into(),
            pod: "worker-1".into(),
            container: None,
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

    /// Busy's values of the three keys.
    fn busy_values() -> Values {
        [
            Some("1000".into()),
            Some("false".into()),
            Some("true".into()),
        ]
    }

    /// The patch that marks a pod busy whose template set none of the keys.
    fn busy_patch() -> Vec<u8> {
        annotations_patch(Managed::ALL, &busy_values(), Some("{}"))
    }

    /// The patch that gives such a pod its template's values back.
    fn idle_patch() -> Vec<u8> {
        annotations_patch(Managed::ALL, &Values::default(), None)
    }

    /// The pod holds what idle wants, as far as the back-end knows.
    fn is_idle(p: &Protection) -> bool {
        p.held == Some(p.wanted(false))
    }

    fn body(request: Request) -> serde_json::Value {
        serde_json::from_slice(&request.body.unwrap()).unwrap()
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
        assert_eq!(busy.body.unwrap(), busy_patch());
        assert_eq!(p.request(false, t0), None, "one request out");
        p.on_answer(ok("{}"), t0);
        assert!(p.is_on());
        assert_eq!(p.request(true, t0), None, "busy and on: nothing");
        let idle = p.request(false, t0).unwrap();
        assert_eq!(idle.body.unwrap(), idle_patch());
        p.on_answer(ok("{}"), t0);
        assert!(!p.is_on());
    }

    #[test]
    fn keys_found_with_drainits_record_are_drainits_and_idle_restores_the_template() {
        let t0 = Instant::now();
        let recorded = r#"{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1000","cluster-autoscaler.kubernetes.io/safe-to-evict":"false","karpenter.sh/do-not-disrupt":"true","drainit.dev/template-annotations":"{\"cluster-autoscaler.kubernetes.io/safe-to-evict\":\"true\"}"}}}"#;
        let mut p = Protection::new(&config(false), None, None);
        p.start();
        p.on_answer(ok(recorded), t0);
        assert!(p.is_on());
        assert_eq!(p.request(true, t0), None, "busy already: nothing");
        let restore = p.request(false, t0).expect("idle restores the template");
        assert_eq!(
            body(restore),
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: null, SAFE_TO_EVICT_KEY: "true", DO_NOT_DISRUPT_KEY: null, RECORD_KEY: null}}})
        );
        p.on_answer(ok("{}"), t0);
        assert!(is_idle(&p) && !p.is_on());
        assert_eq!(p.request(false, t0), None);
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
        let record = r#"{"controller.kubernetes.io/pod-deletion-cost":"-100","karpenter.sh/do-not-disrupt":"false"}"#;
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
        assert_eq!(r.request(false, t0).unwrap().body.unwrap(), idle_patch());
    }

    #[test]
    fn idle_safe_to_evict_says_true_when_idle_and_keeps_the_template() {
        let t0 = Instant::now();
        let mut p = Protection::new(&config(false), None, None);
        p.idle_safe_to_evict = true;
        p.start();
        p.on_answer(
            ok(r#"{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/safe-to-evict":"false"}}}"#),
            t0,
        );
        assert!(!is_idle(&p), "the template says false");
        let idle_patch = p.request(false, t0).expect("idle says true");
        let record = r#"{"cluster-autoscaler.kubernetes.io/safe-to-evict":"false"}"#;
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
        q.idle_safe_to_evict = true;
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
        assert_eq!(crash.body.unwrap(), idle_patch());
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

    #[test]
    fn a_patch_without_a_clear_answer_is_sent_again_whatever_comes_next() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(120);
        let timeout = || Err(Failure::new(crate::proto::http::Kind::Timeout, "t"));
        for lost in [
            timeout(),
            status(500),
            status(409),
            status(429),
            status(302),
        ] {
            let mut p = Protection::new(&config(false), None, None);
            p.start();
            p.on_answer(ok("{}"), t0);
            assert!(is_idle(&p));
            p.request(true, t0).unwrap();
            // Perhaps applied: the idle answer must go out, or busy's
            // annotations could stay on an idle pod.
            p.on_answer(lost, t0);
            let idle = p.request(false, later).expect("idle is sent again");
            assert_eq!(idle.body.unwrap(), idle_patch());
            p.on_answer(ok("{}"), later);
            assert!(is_idle(&p));
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
        p.on_answer(ok("{}"), t0);
        assert!(p.is_on());
        assert_eq!((p.streak, p.state), (Streak::default(), State::Idle));
    }
}
