//! What a pod read says, as plain values (`--k8s-protect`): the three
//! keys, drainit's record as text, `resourceVersion`, the deletion, the
//! `DisruptionTarget` reason, the containers and what the grace needs of
//! each, and the grace from the spec for drainit's own container. Reading
//! it from the API server's JSON is `proto::k8s_pod_read`'s.

use std::time::{Duration, SystemTime};

use crate::proto::k8s::{pod_grace, Managed, Values, PERIOD_LIMIT_SECONDS};

/// What a pod read says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    /// The values of the three keys, in `Annotation::ALL` order, when set.
    pub annotations: Values,
    /// drainit's record (`RECORD_KEY`), at most `RECORD_LIMIT` characters.
    pub record: Option<String>,
    pub resource_version: Option<String>,
    /// `spec.terminationGracePeriodSeconds`.
    pub grace_seconds: Option<u64>,
    /// It is there but not a whole number of seconds.
    pub grace_unreadable: bool,
    /// `metadata.uid`: another one is another pod of the same name.
    pub uid: Option<String>,
    /// `metadata.deletionTimestamp` on the API server's clock: the pod is
    /// being deleted, and the kill comes no earlier (None: not being
    /// deleted, or a time that does not read).
    pub deletion: Option<SystemTime>,
    /// `metadata.deletionGracePeriodSeconds`.
    pub deletion_grace_seconds: Option<u64>,
    /// The reason of the pod's `DisruptionTarget` condition (status
    /// `True`): why the kubelet or a controller is stopping it.
    pub disruption: Option<String>,
    /// `spec.containers`, then `spec.initContainers`: what the grace
    /// needs of each (at most `CONTAINER_LIMIT`).
    pub containers: Vec<Container>,
}

/// A container's `lifecycle.preStop` hook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PreStop {
    #[default]
    None,
    /// The native `sleep` action, its seconds.
    Sleep(u64),
    /// An `exec` or `httpGet` hook (or another action): its time is not
    /// known ahead.
    Other,
}

/// What the grace needs of one container of the pod's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Container {
    pub name: String,
    /// From `initContainers` with `restartPolicy: Always` (a sidecar):
    /// it is stopped after the main containers.
    pub restartable: bool,
    /// An init container that runs to completion: never running when the
    /// stop comes.
    pub init: bool,
    /// `livenessProbe.terminationGracePeriodSeconds`,
    /// `startupProbe.terminationGracePeriodSeconds`.
    pub probe_grace: [Option<u64>; 2],
    pub pre_stop: PreStop,
}

impl Pod {
    /// Whether any managed key is on the pod (drainit's earlier state,
    /// kept across a container restart).
    pub fn holds(&self, managed: Managed) -> bool {
        managed
            .iter()
            .any(|a| self.annotations[a as usize].is_some())
    }
}

/// An RFC 3339 time as the API server writes one
/// (`2026-11-28T20:42:34Z`, a fraction and an offset allowed).
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<u64> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(at(4, b'-')
        && at(7, b'-')
        && (at(10, b'T') || at(10, b't'))
        && at(13, b':')
        && at(16, b':'))
    {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (h, m, sec) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = &fraction[n..];
    }
    let time = crate::proto::http::civil_time(year, month, day, h, m, sec)?;
    match rest.as_bytes() {
        b"Z" | b"z" => Some(time),
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let r = rest.as_bytes();
            let hh = u64::from(r[1].wrapping_sub(b'0')) * 10 + u64::from(r[2].wrapping_sub(b'0'));
            let mm = u64::from(r[4].wrapping_sub(b'0')) * 10 + u64::from(r[5].wrapping_sub(b'0'));
            if ![1, 2, 4, 5].iter().all(|i| r[*i].is_ascii_digit()) || hh > 23 || mm > 59 {
                return None;
            }
            let offset = Duration::from_secs(hh * 3_600 + mm * 60);
            // Local time ahead of UTC (+) is later than UTC by the offset.
            match sign {
                b'+' => time.checked_sub(offset),
                _ => time.checked_add(offset),
            }
        }
        _ => None,
    }
}
/// The grace from the spec for `container` (drainit's own): the
/// smallest of the pod's `period` and the container's liveness and
/// startup probes' `terminationGracePeriodSeconds`, less its preStop
/// `sleep`, less max(2 s, 10 % of that smallest period); at least 1 s. No
/// container: the pod's period alone (`pod_grace`).
pub fn spec_grace(period: u64, container: Option<&Container>) -> Duration {
    let Some(c) = container else {
        return pod_grace(period);
    };
    let smallest = c
        .probe_grace
        .iter()
        .flatten()
        .fold(period, |m, p| m.min(*p));
    let sleep = match c.pre_stop {
        PreStop::Sleep(seconds) => Duration::from_secs(seconds.min(PERIOD_LIMIT_SECONDS)),
        PreStop::None | PreStop::Other => Duration::ZERO,
    };
    pod_grace(smallest)
        .saturating_sub(sleep)
        .max(Duration::from_secs(1))
}

/// How drainit's own container was found among the pod's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen<'a> {
    /// Named by `--k8s-container`, the only one running, or the one whose
    /// command runs drainit.
    One(&'a Container),
    /// Nothing chose (no name, or one that is none of them, in a pod of
    /// several): the smallest grace over all of them.
    Smallest(Option<&'a Container>),
}

/// drainit's own container: `name` (`--k8s-container` or the kubelet's
/// mounts), else the only one that runs (init containers that run to
/// completion apart, restartable ones counted); else the one whose grace
/// is smallest. Nothing is guessed from a command: a sidecar's may run
/// drainit whatever it looks like.
pub fn choose<'a>(containers: &'a [Container], name: Option<&str>, period: u64) -> Chosen<'a> {
    let running: Vec<&Container> = containers
        .iter()
        .filter(|c| !c.init || c.restartable)
        .collect();
    if let Some(name) = name {
        if let Some(c) = running.iter().find(|c| c.name == name) {
            return Chosen::One(c);
        }
    } else if let [only] = running.as_slice() {
        return Chosen::One(only);
    }
    Chosen::Smallest(
        running
            .into_iter()
            .min_by_key(|c| spec_grace(period, Some(c))),
    )
}
