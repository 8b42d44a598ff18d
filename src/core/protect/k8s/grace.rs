//! What the pod's reads teach the Kubernetes back-end of the grace and
//! the kill: the read at start (drainit's name, the template's values, the
//! period and drainit's container's probes and preStop sleep, which set
//! the default grace or check the one given) and the read at the stop (the
//! deletion's kill on the API server's clock, a force delete).

use std::time::{Duration, Instant};

use log::{info, warn};

use super::{Protection, Read};
use crate::core::deadline::{Grace, Learnt};
use crate::proto::http::{Failure, Response};
use crate::proto::k8s::PERIOD_LIMIT_SECONDS;
use crate::proto::k8s_mounts::own_container;
use crate::proto::k8s_pod::{choose, spec_grace, Chosen, Pod, PreStop};
use crate::proto::k8s_pod_read::read_pod;
use crate::util::time::millis;

impl Protection {
    /// The pod as read at start: its keys are drainit's earlier state, its
    /// period sets the default grace or checks the one given.
    pub(super) fn read(&mut self, body: &[u8]) -> Result<(), String> {
        let pod = read_pod(body).map_err(|e| e.to_string())?;
        self.name_self(&pod);
        self.take_keys(&pod, None, true);
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

    /// The default grace from the pod's spec (`proto::k8s_pod::spec_grace`)
    /// for drainit's own container (`choose`): said when nothing chose
    /// one, and when a preStop hook or a sidecar's wait takes an unknown
    /// share of it.
    pub(super) fn spec_grace(&mut self, pod: &Pod, period: u64) -> Duration {
        // The name protection goes by (`name_self`, read first), else the
        // option's or the mounts' (none when they disagree).
        let name = match self.off {
            false => Some(self.me.name.clone()),
            true => match (
                self.container.as_deref(),
                own_container(&self.mounted, pod.uid.as_deref()),
            ) {
                (Some(option), Some(mounted)) if option != mounted => None,
                (option, mounted) => option.or(mounted).map(str::to_string),
            },
        };
        let container = match choose(&pod.containers, name.as_deref(), period) {
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
    pub(super) fn read_at_stop(
        &mut self,
        result: Result<Response, Failure>,
        sent: Instant,
    ) -> Option<Learnt> {
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
    pub(super) fn grace_text(&self) -> String {
        self.grace
            .map_or("none".to_string(), |g| format!("{} ms", millis(g)))
    }
}

/// The read at the stop told nothing: said in one line, the deadline kept.
fn failed_at_stop(why: &str) -> Option<Learnt> {
    warn!("the pod's read at the stop failed ({why}): the deadline stays");
    None
}
