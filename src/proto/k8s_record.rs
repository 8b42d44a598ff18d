//! drainit's record on its own pod as plain values (`RECORD_KEY`): the
//! template's values of the three keys and the containers holding the pod
//! busy, its text both ways, the checks the API server makes of a value
//! (`valid_value`), and the merge patch that writes the keys and the record
//! under the `resourceVersion` it was computed from. No I/O, no decision:
//! what to write is `core::protect::record`'s.
//!
//! The record is one flat JSON object: each of the three keys to the
//! template's value (`null`: the template did not set it), and `BUSY_KEY`
//! to the list of container names holding the pod busy, so that a release
//! that reads only the keys still finds the template's values. A key left
//! out is not recorded (its template value was too long to keep whole) and
//! is never written. A record without `BUSY_KEY` is an earlier release's:
//! there a managed key left out was not set.

use crate::proto::k8s::{is_label, Annotation, Managed, Values};
pub use crate::proto::k8s::{RECORD_KEY, RECORD_LIMIT, VALUE_LIMIT};

/// The record's list of the containers whose drainit holds the pod busy.
pub const BUSY_KEY: &str = "drainit.dev/busy";
/// The record's list of the keys a drainit of the pod has set to busy's
/// value (by `--k8s-annotations` name): only those, and the keys a
/// drainit manages, ever get the template's value back.
pub const WROTE_KEY: &str = "drainit.dev/wrote";
/// Most names kept in the busy list (a pod has far fewer containers).
pub const BUSY_LIMIT: usize = 64;

/// The template's value of each key, in `Annotation::ALL` order: None, not
/// recorded (leave the key alone); Some(None), not set; Some(Some(v)), `v`.
pub type Template = [Option<Option<String>>; 3];

/// drainit's record, as read or to be written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub template: Template,
    /// The containers whose drainit holds the pod busy, in the order they
    /// came (each a DNS-1123 label, at most `BUSY_LIMIT`).
    pub busy: Vec<String>,
    /// The keys a drainit of the pod has set to busy's value.
    pub wrote: Managed,
}

/// What reading a record found besides the record: the values it refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refused {
    /// Keys whose recorded value the API server would refuse (taken as
    /// not set), and the value, escaped and cut short.
    pub values: Vec<(Annotation, String)>,
}

/// The length of `value` as a JSON string's content (escapes counted).
pub fn escaped_len(value: &str) -> usize {
    serde_json::to_string(value).map_or(usize::MAX, |s| s.len().saturating_sub(2))
}

/// A `pod-deletion-cost` the API server accepts: a decimal int32 with no
/// `+` and no leading zero (a leading `-` passes, as the API server's own
/// `validFirstDigit` and `strconv.ParseInt(v, 10, 32)` let it).
pub fn valid_cost(value: &str) -> bool {
    let b = value.as_bytes();
    let first = match b.first() {
        Some(b'-') => true,
        Some(b'0') => value == "0",
        Some(c) => c.is_ascii_digit(),
        None => false,
    };
    first && value.parse::<i32>().is_ok()
}

/// `value` is one drainit can keep for key `a` and write back: whole
/// within `VALUE_LIMIT`, and, for the cost, one the API server accepts (it
/// checks no other value of the three).
pub fn valid_value(a: Annotation, value: &str) -> bool {
    escaped_len(value) <= VALUE_LIMIT && (a != Annotation::Cost || valid_cost(value))
}

/// The record's text: every recorded key (null for not set) and the busy
/// list, one flat JSON object.
pub fn record_text(record: &Record) -> String {
    let mut map = serde_json::Map::new();
    for a in Annotation::ALL {
        if let Some(value) = &record.template[a as usize] {
            let value = value
                .clone()
                .map_or(serde_json::Value::Null, serde_json::Value::String);
            map.insert(a.key().to_string(), value);
        }
    }
    let busy = record.busy.iter().cloned().map(serde_json::Value::String);
    map.insert(BUSY_KEY.to_string(), busy.collect());
    let wrote = record
        .wrote
        .iter()
        .map(|a| serde_json::Value::from(a.name()));
    map.insert(WROTE_KEY.to_string(), wrote.collect());
    serde_json::Value::Object(map).to_string()
}

/// The record from its text: an error for anything but a JSON object of at
/// most `RECORD_LIMIT` bytes. A value the API server would refuse, or that
/// is not a string, is taken as not set (and named in `Refused`); names in
/// the busy list that are not container names are dropped. An earlier
/// release's record (no `BUSY_KEY`) lists only the keys its template set:
/// there a key of `managed` left out was not set. A record without
/// `WROTE_KEY` lists no key as written.
pub fn read_record(managed: Managed, text: &str) -> Result<(Record, Refused), String> {
    if text.len() > RECORD_LIMIT {
        return Err(format!("longer than {} KiB", RECORD_LIMIT / 1024));
    }
    let value = crate::proto::json::parse(text.as_bytes())
        .map_err(|e| format!("not a JSON object: {e}"))?;
    let serde_json::Value::Object(map) = value else {
        return Err("not a JSON object".into());
    };
    let current = map.contains_key(BUSY_KEY);
    let mut record = Record::default();
    let mut refused = Refused::default();
    for a in Annotation::ALL {
        record.template[a as usize] = match map.get(a.key()) {
            None if current || !managed.has(a) => None,
            None | Some(serde_json::Value::Null) => Some(None),
            Some(serde_json::Value::String(v)) if valid_value(a, v) => Some(Some(v.clone())),
            Some(other) => {
                let shown = match other {
                    serde_json::Value::String(v) => v.clone(),
                    other => other.to_string(),
                };
                let shown = crate::util::text::escape(&shown, 64);
                refused.values.push((a, shown));
                Some(None)
            }
        };
    }
    if let Some(serde_json::Value::Array(names)) = map.get(WROTE_KEY) {
        for name in names.iter().filter_map(serde_json::Value::as_str) {
            if let Some(a) = Annotation::ALL.into_iter().find(|a| a.name() == name) {
                record.wrote = record.wrote.with(a);
            }
        }
    }
    if let Some(serde_json::Value::Array(names)) = map.get(BUSY_KEY) {
        for name in names.iter().filter_map(serde_json::Value::as_str) {
            if is_label(name) && !record.busy.iter().any(|n| n == name) {
                record.busy.push(name.to_string());
            }
            if record.busy.len() >= BUSY_LIMIT {
                break;
            }
        }
    }
    Ok((record, refused))
}

/// The merge patch that sets each of `keys` (None deletes it), the record
/// to `record` (None deletes it), and, with `version`, makes the API server
/// apply it only to that `resourceVersion` of the pod (409 otherwise).
/// Nothing but `metadata.annotations` is ever written.
pub fn annotations_patch(
    keys: &[(Annotation, Option<&str>)],
    record: Option<&str>,
    version: Option<&str>,
) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    for (a, value) in keys {
        let value = value.map_or(serde_json::Value::Null, |v| v.into());
        map.insert(a.key().to_string(), value);
    }
    let record = record.map_or(serde_json::Value::Null, |r| r.into());
    map.insert(RECORD_KEY.to_string(), record);
    let mut metadata = serde_json::Map::new();
    if let Some(version) = version {
        metadata.insert("resourceVersion".into(), version.into());
    }
    metadata.insert("annotations".into(), map.into());
    serde_json::json!({ "metadata": metadata })
        .to_string()
        .into_bytes()
}

/// The values of `template` as the keys would hold them (an unrecorded
/// key as None).
pub fn values_of(template: &Template) -> Values {
    template.clone().map(Option::flatten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::k8s::{
        COST_KEY, DO_NOT_DISRUPT_KEY, REQUEST_LIMIT, SAFE_TO_EVICT_KEY, TOKEN_LIMIT,
    };
    use crate::proto::k8s_pod_read::read_pod;

    fn json(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn the_record_is_flat_with_every_key_and_the_busy_list() {
        let record = Record {
            template: [
                Some(Some("-100".into())),
                Some(Some("a \"b\"\n".into())),
                Some(None),
            ],
            busy: vec!["app".into(), "side".into()],
            wrote: Managed::parse("cost,do-not-disrupt").unwrap(),
        };
        let text = record_text(&record);
        assert_eq!(
            json(text.as_bytes()),
            serde_json::json!({COST_KEY: "-100", SAFE_TO_EVICT_KEY: "a \"b\"\n",
                DO_NOT_DISRUPT_KEY: null, BUSY_KEY: ["app", "side"],
                WROTE_KEY: ["cost", "do-not-disrupt"]})
        );
        let cost = Managed::parse("cost").unwrap();
        assert_eq!(read_record(cost, &text).unwrap().0, record, "every key");
        // An unrecorded key is left out, and read back as unrecorded.
        let partial = Record {
            template: [Some(None), None, Some(Some("true".into()))],
            busy: vec![],
            wrote: Managed::NONE,
        };
        let text = record_text(&partial);
        assert!(!text.contains(SAFE_TO_EVICT_KEY), "{text}");
        assert_eq!(read_record(Managed::ALL, &text).unwrap().0, partial);
        for bad in ["", "[]", "\"x\"", "{", "null"] {
            assert!(read_record(Managed::ALL, bad).is_err(), "{bad}");
        }
        let long = format!(r#"{{"x":"{}"}}"#, "a".repeat(RECORD_LIMIT));
        assert!(read_record(Managed::ALL, &long).is_err());
    }

    #[test]
    fn an_earlier_releases_record_lists_only_the_keys_its_template_set() {
        let text = format!(r#"{{"{SAFE_TO_EVICT_KEY}":"true"}}"#);
        let (record, refused) = read_record(Managed::ALL, &text).unwrap();
        assert_eq!(
            record.template,
            [Some(None), Some(Some("true".into())), Some(None)]
        );
        assert!(record.busy.is_empty() && refused.values.is_empty());
        // A key the run does not manage, left out: not known.
        let cost = Managed::parse("cost").unwrap();
        assert_eq!(
            read_record(cost, "{}").unwrap().0.template,
            [Some(None), None, None]
        );
    }

    #[test]
    fn values_the_api_server_refuses_are_taken_as_not_set() {
        for good in ["0", "-0", "5", "-2147483648", "2147483647", "-007"] {
            assert!(valid_cost(good), "{good}");
        }
        for bad in [
            "",
            "abc",
            "+5",
            "007",
            "00",
            "2147483648",
            "-2147483649",
            " 5",
            "5 ",
            "1e3",
            "-",
        ] {
            assert!(!valid_cost(bad), "{bad:?}");
        }
        let text = format!(
            r#"{{"{COST_KEY}":"abc","{SAFE_TO_EVICT_KEY}":5,"{DO_NOT_DISRUPT_KEY}":"anything","{BUSY_KEY}":["app","Not A Name",7,"app","side"]}}"#
        );
        let (record, refused) = read_record(Managed::ALL, &text).unwrap();
        assert_eq!(
            record.template,
            [Some(None), Some(None), Some(Some("anything".into()))]
        );
        assert_eq!(
            refused.values,
            [
                (Annotation::Cost, "abc".to_string()),
                (Annotation::SafeToEvict, "5".to_string())
            ]
        );
        assert_eq!(record.busy, ["app", "side"], "names only, once each");
        // A value kept whole up to its bound, escapes counted.
        assert!(valid_value(
            Annotation::DoNotDisrupt,
            &"x".repeat(VALUE_LIMIT)
        ));
        assert!(!valid_value(
            Annotation::DoNotDisrupt,
            &"x".repeat(VALUE_LIMIT + 1)
        ));
        assert!(!valid_value(
            Annotation::DoNotDisrupt,
            &"\"".repeat(VALUE_LIMIT / 2 + 1)
        ));
    }

    #[test]
    fn the_patch_carries_the_resource_version_and_fits_the_request_bound() {
        let patch = annotations_patch(
            &[
                (Annotation::Cost, Some("1000")),
                (Annotation::SafeToEvict, None),
            ],
            Some("{}"),
            Some("42"),
        );
        assert_eq!(
            json(&patch),
            serde_json::json!({"metadata": {"resourceVersion": "42", "annotations": {
                COST_KEY: "1000", SAFE_TO_EVICT_KEY: null, RECORD_KEY: "{}"}}})
        );
        let plain = annotations_patch(&[], None, None);
        assert_eq!(
            json(&plain),
            serde_json::json!({"metadata": {"annotations": {RECORD_KEY: null}}})
        );
        // The largest patch: three values at the bound, each of them also
        // in a record with a full busy list, all of it escaped twice.
        let worst = "\\".repeat(VALUE_LIMIT / 2);
        assert!(valid_value(Annotation::SafeToEvict, &worst));
        let record = Record {
            template: [
                Some(Some("-2147483648".into())),
                Some(Some(worst.clone())),
                Some(Some(worst.clone())),
            ],
            busy: (0..BUSY_LIMIT).map(|i| format!("{i:0>63}")).collect(),
            wrote: Managed::ALL,
        };
        let text = record_text(&record);
        assert!(text.len() <= RECORD_LIMIT, "{}", text.len());
        let keys: Vec<(Annotation, Option<&str>)> = Annotation::ALL
            .into_iter()
            .map(|a| (a, Some(worst.as_str())))
            .collect();
        let patch = annotations_patch(&keys, Some(&text), Some(&"9".repeat(64)));
        assert!(
            patch.len() + 2048 <= REQUEST_LIMIT - TOKEN_LIMIT,
            "{}",
            patch.len()
        );
        // A pod read keeps the record whole.
        let body = serde_json::json!({"metadata": {"annotations": {RECORD_KEY: text}}});
        let pod = read_pod(body.to_string().as_bytes()).unwrap();
        assert_eq!(pod.record.as_deref(), Some(text.as_str()));
        assert_eq!(read_record(Managed::ALL, &text).unwrap().0, record);
    }
}
