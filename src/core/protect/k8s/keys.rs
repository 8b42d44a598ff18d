//! The exchange's share of drainit's record (`core::protect::record`):
//! what the pod's reads and answers teach `Protection` of the keys and the
//! record, drainit's own name, a 409 read again and a refused restore sent
//! again, and the crash's own exchange.

use log::{info, warn};

use super::{Crash, Protection, Read, Sent, State, CONFLICTS};
use crate::core::protect::record::{self, Held};
use crate::core::protect::Backend;
use crate::proto::exchange::Request;
use crate::proto::http::{Failure, Response};
use crate::proto::k8s::{verdict, Verdict};
use crate::proto::k8s_mounts::own_container;
use crate::proto::k8s_pod::Pod;
use crate::proto::k8s_pod_read::read_pod;
use crate::proto::k8s_record::{Refused, RECORD_KEY, VALUE_LIMIT};
use crate::util::time::millis;

impl Protection {
    /// The pod's keys and record as read or as a patch's answer gives
    /// them (`answer`: with no `resourceVersion` in it, what the patch
    /// wanted).
    pub(super) fn take_keys(&mut self, pod: &Pod, patched: Option<bool>, start: bool) {
        let (held, refused) = Held::from_pod(pod, self.me.managed);
        let held = match (patched, &self.held, pod.resource_version.is_some()) {
            (Some(busy), Some(before), false) => record::applied(&self.want(before, busy)),
            _ => held,
        };
        if start {
            self.say_record(&held, &refused);
        }
        self.held = Some(held);
    }

    /// At start: what the record says of an earlier run, a record value
    /// the API server would refuse, a value too long to keep.
    pub(super) fn say_record(&self, held: &Held, refused: &Refused) {
        let (ns, pod) = (&self.namespace, &self.pod);
        match &held.record {
            record::Found::None => {}
            record::Found::Record(r) => {
                let others: Vec<&str> = r
                    .busy
                    .iter()
                    .filter(|n| **n != self.me.name)
                    .map(String::as_str)
                    .collect();
                match others.as_slice() {
                    [] => info!(
                        "pod {ns}/{pod} holds drainit's annotations from an earlier run: the first idle answer restores the template's values kept in {RECORD_KEY}"
                    ),
                    others => info!(
                        "pod {ns}/{pod} is held busy by drainit in container(s) {}: the template's values come back once none is busy",
                        others.join(", ")
                    ),
                }
            }
            record::Found::Unreadable(e) => warn!(
                "Kubernetes pod protection: the pod's {RECORD_KEY} is not drainit's record ({e}): the template's values are not known, so idle removes the keys"
            ),
        }
        for (a, value) in &refused.values {
            warn!(
                "Kubernetes pod protection: the template's {} recorded in {RECORD_KEY} is {value:?}, which the API server refuses: taken as not set",
                a.key()
            );
        }
        for a in record::too_long(self.me.managed, held) {
            warn!(
                "Kubernetes pod protection: the template's {} is longer than drainit keeps whole ({} bytes): drainit leaves that key alone",
                a.key(),
                VALUE_LIMIT
            );
        }
    }

    /// drainit's name among the pod's containers: protection stays off,
    /// said once, when none is known.
    pub(super) fn name_self(&mut self, pod: &Pod) {
        self.me.containers = pod
            .containers
            .iter()
            .filter(|c| !c.init || c.restartable)
            .map(|c| c.name.clone())
            .collect();
        let mounted = own_container(&self.mounted, pod.uid.as_deref());
        match record::own_name(&pod.containers, self.container.as_deref(), mounted) {
            Ok(name) => self.me.name = name,
            Err(why) => {
                self.off = true;
                warn!(
                    "Kubernetes pod protection stays off: drainit does not know which container it is ({why}); set --k8s-container NAME (DRAINIT_K8S_CONTAINER) in each drainit of the pod"
                );
            }
        }
    }

    /// A 409 for a patch: the pod changed since it was read (another
    /// drainit of the pod). Read again at once and the patch computed anew,
    /// `CONFLICTS` times in a row; false past that.
    pub(super) fn conflict(&mut self, sent: Option<Sent>) -> bool {
        let Some(Sent::Patch(busy)) = sent else {
            return false;
        };
        if self.conflicts >= CONFLICTS {
            self.conflicts = 0;
            return false;
        }
        self.conflicts += 1;
        self.pending = Some(busy);
        self.state = State::Again(Sent::Reread);
        true
    }

    /// A 422 for a patch restoring the template: sent once more at once,
    /// removing the keys instead, with one line. False when it was that
    /// one already, or not a restore.
    pub(super) fn fall_back(&mut self, sent: Option<Sent>, message: &str) -> bool {
        let (Some(Sent::Patch(busy)), Some(held)) = (sent, &self.held) else {
            return false;
        };
        let template = record::template(self.me.managed, held);
        let restores = self
            .want(held, busy)
            .record
            .map_or(true, |r| r.busy.is_empty());
        if !restores || self.refused.as_ref() == Some(&template) {
            return false;
        }
        warn!(
            "Kubernetes pod protection: the API server refused the template's values ({message}): removing the keys instead"
        );
        self.refused = Some(template);
        self.state = State::Again(Sent::Patch(busy));
        true
    }

    /// After a crash (`Backend::on_crash`): the idle patch when the pod
    /// may hold busy's values, a read first when what it holds is unknown.
    pub(super) fn crash_request(&mut self) -> Option<Request> {
        // A busy patch waiting on a read (after a 409) is never sent: the
        // app is gone.
        if self.pending == Some(true) {
            self.pending = None;
        }
        if self.state == State::Out(Sent::Patch(true)) || self.off {
            // Sent beside it, the idle patch could land first and the
            // busy one last: its answer is waited for (`crash_waits`),
            // then this is asked again.
            return None;
        }
        let busy_out = matches!(
            self.state,
            State::Out(Sent::Patch(true)) | State::Again(Sent::Patch(true))
        );
        if self.read == Read::Pending {
            return None;
        }
        let sent = match &self.held {
            None => Sent::Reread,
            Some(held) => {
                let listed = held.busy().contains(&self.me.name);
                let may_be_busy = listed || self.is_on();
                if record::holds(held, &self.want(held, false)) || !(busy_out || may_be_busy) {
                    return None;
                }
                Sent::Patch(false)
            }
        };
        self.crash = Crash::Out(sent, 0);
        Some(self.build(sent))
    }

    /// The crash request's answer (`Backend::crash_answered`): after a
    /// read, the patch; after a 409, a read (`CONFLICTS` at most).
    pub(super) fn crash_answer(
        &mut self,
        result: Option<Result<Response, Failure>>,
    ) -> Option<Request> {
        let Crash::Out(sent, reads) = std::mem::replace(&mut self.crash, Crash::None) else {
            return None;
        };
        let failure = match &result {
            Some(Ok(answer)) if matches!(verdict(answer), Verdict::Applied) => {
                let pod = read_pod(&answer.body).unwrap_or_default();
                if sent == Sent::Reread {
                    // Read again after a 409 (or unknown): the patch anew.
                    self.take_keys(&pod, None, false);
                    let next = self.crash_request();
                    if next.is_some() {
                        self.crash = Crash::Out(Sent::Patch(false), reads);
                    }
                    return next;
                }
                self.take_keys(&pod, Some(false), false);
                info!(
                    "pod {}/{} unprotected: the app ended while protected",
                    self.namespace, self.pod
                );
                return None;
            }
            Some(Ok(answer)) if answer.status == 409 && reads < CONFLICTS => {
                // Another drainit of the pod changed it: read, and again.
                self.crash = Crash::Out(Sent::Reread, reads + 1);
                return Some(self.build(Sent::Reread));
            }
            Some(Ok(answer)) => format!("HTTP {}", answer.status),
            Some(Err(failure)) => failure.to_string(),
            None => format!(
                "no answer within {} ms",
                millis(crate::core::protect::CRASH_BOUND)
            ),
        };
        warn!(
            "Kubernetes pod protection: the app ended while protected, and the idle patch failed ({failure}): the pod keeps drainit's annotations until it is deleted or drainit runs in it again"
        );
        None
    }
}
