//! A pod read (`proto::k8s_pod::Pod`) from the API server's JSON: only
//! the needed values are kept while serde_json walks the body, skipping
//! the rest without building it, so a large or hostile pod costs no more
//! than its bytes; every string kept is bounded (`FIELD_LIMIT`,
//! `RECORD_LIMIT`, `VALUE_LIMIT`), and so is the list of containers
//! (`CONTAINER_LIMIT`).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::proto::k8s::{
    CONTAINER_LIMIT, COST_KEY, DO_NOT_DISRUPT_KEY, FIELD_LIMIT, RECORD_KEY, RECORD_LIMIT,
    SAFE_TO_EVICT_KEY, VALUE_LIMIT,
};
use crate::proto::k8s_pod::{parse_time, Container, Pod, PreStop};

/// Reads a pod from its JSON (a `GET` answer's body). Only the needed
/// values are kept; everything else is skipped without being built.
pub fn read_pod(body: &[u8]) -> Result<Pod, String> {
    let mut pod = Pod::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    Walk {
        pod: &mut pod,
        at: At::Top,
    }
    .deserialize(&mut de)
    .map_err(|e| format!("not a pod: {e}"))?;
    de.end().map_err(|e| format!("not a pod: {e}"))?;
    Ok(pod)
}

/// Where in the pod the walk is.
#[derive(Clone, Copy)]
enum At {
    Top,
    Metadata,
    Spec,
    Annotations,
    Status,
    Container,
    /// A probe: `Container::probe_grace`'s slot.
    Probe(usize),
    Lifecycle,
    Handler,
    Sleep,
}

/// Walks one object at `at`, storing what it needs into `pod`.
struct Walk<'p> {
    pod: &'p mut Pod,
    at: At,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// A key, compared without being kept (escaped keys are decoded into
/// serde_json's scratch buffer, bounded by the body).
struct Key<'a>(&'a [&'static str]);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|k| *k == s))
    }
}

/// A string value, cut to its limit in characters; anything else is
/// `None`.
struct Text(usize);

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Option<String>, E> {
        Ok(Some(s.chars().take(self.0).collect()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> Result<Option<String>, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Option<String>, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        match self.at {
            At::Top => Err(E::custom("null")),
            _ => Ok(()), // `"annotations": null`
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let keys: &[&'static str] = match self.at {
            At::Top => &["metadata", "spec", "status"],
            At::Metadata => &[
                "annotations",
                "resourceVersion",
                "uid",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ],
            At::Spec => &[
                "terminationGracePeriodSeconds",
                "containers",
                "initContainers",
            ],
            At::Container => &[
                "name",
                "restartPolicy",
                "livenessProbe",
                "startupProbe",
                "lifecycle",
            ],
            At::Probe(_) => &["terminationGracePeriodSeconds"],
            At::Lifecycle => &["preStop"],
            At::Handler => &["sleep", "exec", "httpGet", "tcpSocket"],
            At::Sleep => &["seconds"],
            At::Annotations => &[COST_KEY, SAFE_TO_EVICT_KEY, DO_NOT_DISRUPT_KEY, RECORD_KEY],
            At::Status => &["conditions"],
        };
        while let Some(found) = m.next_key_seed(Key(keys))? {
            let pod = &mut *self.pod;
            match (self.at, found) {
                (At::Top, Some(0)) => m.next_value_seed(Walk {
                    pod,
                    at: At::Metadata,
                })?,
                (At::Top, Some(1)) => m.next_value_seed(Walk { pod, at: At::Spec })?,
                (At::Top, Some(_)) => m.next_value_seed(Walk {
                    pod,
                    at: At::Status,
                })?,
                (At::Metadata, Some(0)) => m.next_value_seed(Walk {
                    pod,
                    at: At::Annotations,
                })?,
                (At::Metadata, Some(1)) => {
                    pod.resource_version = m.next_value_seed(Text(FIELD_LIMIT))?
                }
                (At::Metadata, Some(2)) => pod.uid = m.next_value_seed(Text(FIELD_LIMIT))?,
                (At::Metadata, Some(3)) => {
                    pod.deletion = m
                        .next_value_seed(Text(FIELD_LIMIT))?
                        .as_deref()
                        .and_then(parse_time)
                }
                (At::Metadata, Some(_)) => {
                    if let Some(Ok(seconds)) = m.next_value_seed(Period)? {
                        pod.deletion_grace_seconds = Some(seconds);
                    }
                }
                (At::Status, Some(_)) => pod.disruption = m.next_value_seed(Conditions)?,
                (At::Spec, Some(0)) => match m.next_value_seed(Period)? {
                    Some(Ok(seconds)) => pod.grace_seconds = Some(seconds),
                    Some(Err(())) => pod.grace_unreadable = true,
                    None => {}
                },
                (At::Spec, Some(i)) => m.next_value_seed(Containers { pod, init: i == 2 })?,
                (At::Container, Some(0)) => {
                    if let (Some(c), Some(name)) = (
                        pod.containers.last_mut(),
                        m.next_value_seed(Text(FIELD_LIMIT))?,
                    ) {
                        c.name = name;
                    }
                }
                (At::Container, Some(1)) => {
                    let always = m.next_value_seed(Text(FIELD_LIMIT))?.as_deref() == Some("Always");
                    if let Some(c) = pod.containers.last_mut().filter(|c| c.init) {
                        c.restartable = always;
                    }
                }
                (At::Container, Some(i @ (2 | 3))) => m.next_value_seed(Walk {
                    pod,
                    at: At::Probe(i - 2),
                })?,
                (At::Container, Some(_)) => m.next_value_seed(Walk {
                    pod,
                    at: At::Lifecycle,
                })?,
                (At::Probe(i), Some(_)) => {
                    if let (Some(c), Some(Ok(seconds))) =
                        (pod.containers.last_mut(), m.next_value_seed(Period)?)
                    {
                        c.probe_grace[i.min(1)] = Some(seconds);
                    }
                }
                (At::Lifecycle, Some(_)) => {
                    if let Some(c) = pod.containers.last_mut() {
                        c.pre_stop = PreStop::Other;
                    }
                    m.next_value_seed(Walk {
                        pod,
                        at: At::Handler,
                    })?
                }
                (At::Handler, Some(0)) => m.next_value_seed(Walk { pod, at: At::Sleep })?,
                (At::Handler, Some(_)) => {
                    m.next_value::<IgnoredAny>()?;
                }
                (At::Sleep, Some(_)) => {
                    if let (Some(c), Some(Ok(seconds))) =
                        (pod.containers.last_mut(), m.next_value_seed(Period)?)
                    {
                        c.pre_stop = PreStop::Sleep(seconds);
                    }
                }
                (At::Annotations, Some(3)) => {
                    pod.record = m.next_value_seed(Text(RECORD_LIMIT + 1))?
                }
                (At::Annotations, Some(i)) => {
                    // One more than is kept: a longer value is known as such.
                    pod.annotations[i] = m.next_value_seed(Text(VALUE_LIMIT + 1))?
                }
                (_, None) => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// `terminationGracePeriodSeconds` as found: a whole number of seconds,
/// something else (skipped whole: a string, a negative or fractional
/// number, an object), or null (as if absent).
struct Period;

impl<'de> DeserializeSeed<'de> for Period {
    type Value = Option<Result<u64, ()>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Period {
    type Value = Option<Result<u64, ()>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number of seconds")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(Ok(v)))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Some(Err(())))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Some(Err(())))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Some(Err(())))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Some(Err(())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Some(Err(())))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Some(Err(())))
    }
}

/// `spec.containers` or `spec.initContainers`: each object walked as a
/// container (pushed first, so the walk fills the last one), at most
/// `CONTAINER_LIMIT` in all; anything else skipped.
struct Containers<'p> {
    pod: &'p mut Pod,
    init: bool,
}

impl<'de> DeserializeSeed<'de> for Containers<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Containers<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("containers")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        loop {
            if self.pod.containers.len() >= CONTAINER_LIMIT {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                return Ok(());
            }
            self.pod.containers.push(Container {
                init: self.init,
                ..Container::default()
            });
            let walk = Walk {
                pod: &mut *self.pod,
                at: At::Container,
            };
            if a.next_element_seed(walk)?.is_none() {
                self.pod.containers.pop();
                return Ok(());
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
        Text(FIELD_LIMIT).visit_map(m).map(|_| ())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
}

/// `status.conditions`: the reason of a `DisruptionTarget` condition whose
/// status is `True`, if any (every other value skipped).
struct Conditions;

impl<'de> DeserializeSeed<'de> for Conditions {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Conditions {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("conditions")
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(reason) = a.next_element_seed(Condition)? {
            found = found.or(reason);
        }
        Ok(found)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
        Text(FIELD_LIMIT).visit_map(m)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// One condition: its reason when it is a `DisruptionTarget` that holds.
struct Condition;

impl<'de> DeserializeSeed<'de> for Condition {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Condition {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a condition")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let (mut kind, mut status, mut reason) = (None, None, None);
        while let Some(found) = m.next_key_seed(Key(&["type", "status", "reason"]))? {
            match found {
                Some(0) => kind = m.next_value_seed(Text(FIELD_LIMIT))?,
                Some(1) => status = m.next_value_seed(Text(FIELD_LIMIT))?,
                Some(_) => reason = m.next_value_seed(Text(FIELD_LIMIT))?,
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        let holds =
            kind.as_deref() == Some("DisruptionTarget") && status.as_deref() == Some("True");
        Ok(reason.filter(|_| holds))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
        Text(FIELD_LIMIT).visit_seq(s)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
}
