//! What drainit's pod holds of the three keys and of drainit's record
//! (`proto::k8s_record`), and what one drainit wants it to hold: the pure
//! half of `core::protect::k8s`, with no state of its own.
//!
//! Every drainit of the pod (the app's, a sidecar's) reads and writes the
//! same record: the template's values of the three keys, whatever each
//! one manages, and the names of the containers holding the pod busy
//! (`Me::name`, from `own_name`). A busy drainit adds its name and sets its
//! keys (the cost the highest of its own and the one there while another
//! container is busy); an idle one takes its name out, and only when no
//! name is left do the template's values come back, every recorded key's,
//! with the record removed unless a key keeps a value of drainit's
//! (`--k8s-idle-safe-to-evict`). With no record on the pod, the keys hold
//! the template's values. A key whose value is too long to keep whole is
//! not recorded and never written. Each patch goes under the
//! `resourceVersion` it was computed from, so two drainits never undo
//! each other: the second gets a 409, reads again and computes anew.

use crate::proto::k8s::{is_label, Annotation, Managed, Values};
use crate::proto::k8s_pod::{Container, Pod};
use crate::proto::k8s_record::{
    annotations_patch, read_record, record_text, valid_cost, valid_value, Record, Refused, Template,
};

/// The name of a drainit whose pod read listed no container (never so for
/// a real pod).
pub const UNNAMED: &str = "drainit";

/// The pod's three keys and drainit's record, as the API server last said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub values: Values,
    pub record: Found,
    /// The `resourceVersion` they were read at (None: the server gave
    /// none, and a patch then goes without the precondition).
    pub version: Option<String>,
}

/// drainit's record as found on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    None,
    Record(Record),
    /// Not drainit's record (why): the template's values are not known.
    Unreadable(String),
}

/// One drainit of the pod: its name in the busy list and what it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub name: String,
    pub managed: Managed,
    pub cost: i32,
    /// `--k8s-idle-safe-to-evict`.
    pub idle_safe_to_evict: bool,
    /// The pod's running containers, from the start read: a name in the
    /// busy list that is none of them is dropped (empty: not known).
    pub containers: Vec<String>,
}

/// What a drainit wants the pod to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub values: Values,
    /// None: no record.
    pub record: Option<Record>,
}

impl Held {
    /// What a pod read (or a patch's answer) says, and the record's values
    /// the API server would refuse (taken as not set), if any.
    pub fn from_pod(pod: &Pod, managed: Managed) -> (Held, Refused) {
        let (record, refused) = match pod.record.as_deref() {
            None => (Found::None, Refused::default()),
            Some(text) => match read_record(managed, text) {
                Ok((record, refused)) => (Found::Record(record), refused),
                Err(e) => (Found::Unreadable(e), Refused::default()),
            },
        };
        let held = Held {
            values: pod.annotations.clone(),
            record,
            version: pod.resource_version.clone(),
        };
        (held, refused)
    }

    /// The names in the record's busy list.
    pub fn busy(&self) -> &[String] {
        match &self.record {
            Found::Record(r) => &r.busy,
            Found::None | Found::Unreadable(_) => &[],
        }
    }
}

/// The template's values as `held` tells them: the record's; with no
/// record, the keys' own values (one too long to keep is not recorded);
/// with a record drainit cannot read, not set for the keys of `managed`
/// (idle removes them) and not known for the others.
pub fn template(managed: Managed, held: &Held) -> Template {
    let mut t = Template::default();
    for a in Annotation::ALL {
        let i = a as usize;
        t[i] = match &held.record {
            Found::Record(r) => r.template[i].clone(),
            Found::Unreadable(_) => managed.has(a).then_some(None),
            Found::None => match &held.values[i] {
                Some(v) if !valid_value(a, v) => None,
                value => Some(value.clone()),
            },
        };
    }
    t
}

/// The keys of `managed` whose value is too long to keep whole, as found
/// with no record: drainit leaves them alone.
pub fn too_long(managed: Managed, held: &Held) -> Vec<Annotation> {
    let t = template(managed, held);
    match held.record {
        Found::None => managed
            .iter()
            .filter(|a| t[*a as usize].is_none())
            .collect(),
        _ => Vec::new(),
    }
}

/// Busy's value of `a` for `me`: the cost the highest of its own and the
/// one on the pod when another container holds it busy too.
fn busy_value(me: &Me, a: Annotation, held: &Held, shared: bool) -> String {
    match a {
        Annotation::Cost => {
            let there = held.values[a as usize]
                .as_deref()
                .filter(|v| shared && valid_cost(v))
                .and_then(|v| v.parse::<i32>().ok());
            there.map_or(me.cost, |c| c.max(me.cost)).to_string()
        }
        Annotation::SafeToEvict => "false".into(),
        Annotation::DoNotDisrupt => "true".into(),
    }
}

/// What `me` wants the pod to hold when its app is busy (or idle), from
/// what it holds: while any name is in the busy list, the keys stay and
/// the record lists the names; with none, every recorded key gets the
/// template's value back. `refused`: a template whose restore the API
/// server refused, restored instead by removing its keys.
pub fn want(me: &Me, held: &Held, busy: bool, refused: Option<&Template>) -> Want {
    let mut t = template(me.managed, held);
    if refused == Some(&t) {
        for value in t.iter_mut().filter(|v| v.is_some()) {
            *value = Some(None);
        }
    }
    let mut list: Vec<String> = held
        .busy()
        .iter()
        .filter(|n| me.containers.is_empty() || me.containers.contains(n) || **n == me.name)
        .filter(|n| busy || **n != me.name)
        .cloned()
        .collect();
    let shared = list.iter().any(|n| *n != me.name);
    if busy && !list.contains(&me.name) {
        list.push(me.name.clone());
    }
    let mut values = held.values.clone();
    let mut wrote = match &held.record {
        Found::Record(r) => r.wrote,
        Found::None | Found::Unreadable(_) => Managed::NONE,
    };
    if !list.is_empty() {
        for a in me
            .managed
            .iter()
            .filter(|a| busy && t[*a as usize].is_some())
        {
            values[a as usize] = Some(busy_value(me, a, held, shared));
            wrote = wrote.with(a);
        }
        // Busy alone with the template's own values: nothing to record.
        let alone = !shared && !differs(&t, &values) && held.record == Found::None;
        let record = Record {
            template: t,
            busy: list,
            wrote,
        };
        return Want {
            values,
            record: (!alone).then_some(record),
        };
    }
    // A key this drainit manages, or one a drainit of the pod set to
    // busy's value (an earlier run's, under another key set) that still
    // holds it, gets the template's value back; any other key is someone
    // else's.
    let covered = |a: Annotation| me.managed.has(a) || (wrote.has(a) && busy_like(a, held));
    for a in Annotation::ALL.into_iter().filter(|a| covered(*a)) {
        if let Some(value) = &t[a as usize] {
            values[a as usize] = value.clone();
        }
    }
    let evict = Annotation::SafeToEvict as usize;
    if me.idle_safe_to_evict && me.managed.has(Annotation::SafeToEvict) && t[evict].is_some() {
        values[evict] = Some("true".into());
    }
    // What is still drainit's once idle: a covered key that keeps another
    // value than the template's (the idle "true"), and an idle "true" of
    // another drainit's that this one leaves alone. Only those stay in
    // `wrote`, and the record lives while any does.
    let idle_true = |a: Annotation| {
        a == Annotation::SafeToEvict && wrote.has(a) && values[evict].as_deref() == Some("true")
    };
    let mut still = Managed::NONE;
    for a in Annotation::ALL {
        let i = a as usize;
        let differs = t[i].as_ref().is_some_and(|v| *v != values[i]);
        if differs && (covered(a) || idle_true(a)) {
            still = still.with(a);
        }
    }
    let record = (still != Managed::NONE).then(|| Record {
        template: t,
        busy: Vec::new(),
        wrote: still,
    });
    Want { values, record }
}

/// `held`'s value of `a` is one a busy drainit sets (any cost it accepts).
fn busy_like(a: Annotation, held: &Held) -> bool {
    let value = held.values[a as usize].as_deref();
    match a {
        Annotation::Cost => value.is_some_and(valid_cost),
        Annotation::SafeToEvict => value == Some("false"),
        Annotation::DoNotDisrupt => value == Some("true"),
    }
}

/// A recorded key of `t` whose value in `values` is not the template's.
fn differs(t: &Template, values: &Values) -> bool {
    Annotation::ALL.into_iter().any(|a| {
        let i = a as usize;
        t[i].as_ref().is_some_and(|v| *v != values[i])
    })
}

/// The pod holds what `want` says: nothing to send.
pub fn holds(held: &Held, want: &Want) -> bool {
    let record = match &held.record {
        Found::None => want.record.is_none(),
        Found::Record(r) => want.record.as_ref() == Some(r),
        Found::Unreadable(_) => false,
    };
    record && held.values == want.values
}

/// The merge patch from `held` to `want`, under `held`'s version: the
/// keys `me` manages and knows the template of, any other key that
/// changes (a template's value restored), and the record.
pub fn patch(me: &Me, held: &Held, want: &Want) -> Vec<u8> {
    let t = template(me.managed, held);
    let keys: Vec<(Annotation, Option<&str>)> = Annotation::ALL
        .into_iter()
        .filter(|a| {
            let i = *a as usize;
            (me.managed.has(*a) && t[i].is_some()) || want.values[i] != held.values[i]
        })
        .map(|a| (a, want.values[a as usize].as_deref()))
        .collect();
    let record = want.record.as_ref().map(record_text);
    annotations_patch(&keys, record.as_deref(), held.version.as_deref())
}

/// What `held` becomes once `want`'s patch is applied (the answer said
/// no more: a server that gives no `resourceVersion`).
pub fn applied(want: &Want) -> Held {
    Held {
        values: want.values.clone(),
        record: want.record.clone().map_or(Found::None, Found::Record),
        version: None,
    }
}

/// The pod is protected as `me` sets it: each key it writes holds busy's
/// value (a cost at least its own).
pub fn is_on(me: &Me, held: &Held) -> bool {
    let t = template(me.managed, held);
    let mut written = me.managed.iter().filter(|a| t[*a as usize].is_some());
    let protective = |a: Annotation| {
        let value = held.values[a as usize].as_deref();
        match a {
            Annotation::Cost => value
                .filter(|v| valid_cost(v))
                .and_then(|v| v.parse::<i32>().ok())
                .is_some_and(|c| c >= me.cost),
            Annotation::SafeToEvict => value == Some("false"),
            Annotation::DoNotDisrupt => value == Some("true"),
        }
    };
    let mut any = false;
    let all = written.all(|a| {
        any = true;
        protective(a)
    });
    any && all
}

/// The name a drainit goes by in the busy list: `--k8s-container` (one of
/// the pod's running containers), else the one the kubelet's mounts name
/// (`mounted`), else the pod's only running container; Err says why none
/// is (protection then stays off). Two drainits never take one name (the
/// busy list would then hold one for both), so nothing is guessed from
/// the spec: a sidecar's command, or its image's entrypoint, may run
/// drainit whatever it looks like. An option the mounts contradict (one
/// variable shared by two containers) is refused too.
pub fn own_name(
    containers: &[Container],
    option: Option<&str>,
    mounted: Option<&str>,
) -> Result<String, String> {
    let running: Vec<&Container> = containers
        .iter()
        .filter(|c| (!c.init || c.restartable) && is_label(&c.name))
        .collect();
    if containers.is_empty() {
        return Ok(option.or(mounted).unwrap_or(UNNAMED).to_string());
    }
    let mounted = mounted.filter(|n| running.iter().any(|c| c.name == *n));
    match (option, mounted) {
        (Some(name), Some(m)) if name != m => Err(format!(
            "--k8s-container {name}, but the kubelet's mounts say this is container {m}"
        )),
        (Some(name), _) if running.iter().any(|c| c.name == name) => Ok(name.to_string()),
        (Some(name), _) => Err(format!(
            "--k8s-container {name} is none of the pod's running containers"
        )),
        (None, Some(m)) => Ok(m.to_string()),
        (None, None) => match running.as_slice() {
            [one] => Ok(one.name.clone()),
            several => Err(format!(
                "the pod runs {} containers and the kubelet's mounts name none of them",
                several.len()
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::k8s::{COST_KEY, DO_NOT_DISRUPT_KEY, SAFE_TO_EVICT_KEY};
    use crate::proto::k8s_pod_read::read_pod;
    use crate::proto::k8s_record::{BUSY_KEY, RECORD_KEY, WROTE_KEY};

    fn me(name: &str, cost: i32) -> Me {
        Me {
            name: name.into(),
            managed: Managed::ALL,
            cost,
            idle_safe_to_evict: false,
            containers: vec!["app".into(), "side".into()],
        }
    }

    /// A pod holding `annotations` (a JSON object) at version `rv`.
    fn held(annotations: serde_json::Value, rv: &str) -> Held {
        let body =
            serde_json::json!({"metadata": {"resourceVersion": rv, "annotations": annotations}});
        Held::from_pod(
            &read_pod(body.to_string().as_bytes()).unwrap(),
            Managed::ALL,
        )
        .0
    }

    /// `held` once `want` is applied at version `rv`.
    fn after(want: &Want, rv: &str) -> Held {
        let mut h = applied(want);
        h.version = Some(rv.into());
        h
    }

    fn patch_json(me: &Me, held: &Held, want: &Want) -> serde_json::Value {
        serde_json::from_slice(&patch(me, held, want)).unwrap()
    }

    #[test]
    fn two_drainits_hold_the_pod_busy_until_both_are_idle() {
        let (app, side) = (me("app", 1000), me("side", 5000));
        let template = held(serde_json::json!({COST: "-100"}), "1");
        // The app turns busy: its keys, and the record naming it.
        let w = want(&app, &template, true, None);
        let body = patch_json(&app, &template, &w);
        let record = body["metadata"]["annotations"][RECORD_KEY]
            .as_str()
            .unwrap();
        assert_eq!(body["metadata"]["resourceVersion"], "1");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(record).unwrap(),
            serde_json::json!({COST_KEY: "-100", SAFE_TO_EVICT_KEY: null, DO_NOT_DISRUPT_KEY: null, BUSY_KEY: ["app"], WROTE_KEY: ["cost", "safe-to-evict", "do-not-disrupt"]})
        );
        let one = after(&w, "2");
        // The sidecar, idle, reads it: busy's values stay, nothing to send.
        assert!(holds(&one, &want(&side, &one, false, None)));
        // The sidecar turns busy too: both listed, its higher cost.
        let w = want(&side, &one, true, None);
        assert_eq!(w.values[0].as_deref(), Some("5000"));
        assert_eq!(w.record.as_ref().unwrap().busy, ["app", "side"]);
        let both = after(&w, "3");
        assert!(is_on(&app, &both) && is_on(&side, &both));
        // The app, with a lower cost and busy, changes nothing.
        assert!(holds(&both, &want(&app, &both, true, None)));
        // The app idle: only its name goes; the keys stay.
        let w = want(&app, &both, false, None);
        assert_eq!(w.values, both.values);
        assert_eq!(w.record.as_ref().unwrap().busy, ["side"]);
        let last = after(&w, "4");
        // The sidecar idle: the template comes back, the record goes.
        let w = want(&side, &last, false, None);
        assert_eq!(
            w,
            Want {
                values: [Some("-100".into()), None, None],
                record: None
            }
        );
        let body = patch_json(&side, &last, &w);
        assert_eq!(
            body,
            serde_json::json!({"metadata": {"resourceVersion": "4", "annotations": {
                COST_KEY: "-100", SAFE_TO_EVICT_KEY: null, DO_NOT_DISRUPT_KEY: null, RECORD_KEY: null}}})
        );
        // A lower cost busy alone keeps its own.
        let w = want(&app, &last, true, None);
        assert_eq!(
            w.values[0].as_deref(),
            Some("5000"),
            "shared with the sidecar"
        );
        let alone = after(&want(&side, &last, false, None), "5");
        assert_eq!(
            want(&app, &alone, true, None).values[0].as_deref(),
            Some("1000")
        );
    }

    #[test]
    fn a_changed_key_set_restores_every_template_value() {
        // An earlier run managed the three keys and was busy; this one
        // manages the cost only.
        let earlier = me("app", 1000);
        let template = held(serde_json::json!({EVICT: "true", DISRUPT: "false"}), "1");
        let busy = after(&want(&earlier, &template, true, None), "2");
        let mut now = me("app", 1000);
        now.managed = Managed::parse("cost").unwrap();
        let w = want(&now, &busy, false, None);
        assert_eq!(
            w,
            Want {
                values: [None, Some("true".into()), Some("false".into())],
                record: None
            }
        );
        assert_eq!(
            patch_json(&now, &busy, &w)["metadata"]["annotations"],
            serde_json::json!({COST_KEY: null, SAFE_TO_EVICT_KEY: "true", DO_NOT_DISRUPT_KEY: "false", RECORD_KEY: null})
        );
        // Busy again with the smaller set: the other keys are left as
        // they are, and the record keeps their template's values.
        let w = want(&now, &busy, true, None);
        assert_eq!(w.values, busy.values);
        assert_eq!(w.record.unwrap().template, template_of(&template));
        // A key newly managed keeps the template's value from the record.
        let mut cost_only = me("app", 1000);
        cost_only.managed = Managed::parse("cost").unwrap();
        let first = after(&want(&cost_only, &template, true, None), "2");
        assert_eq!(
            first.values[1].as_deref(),
            Some("true"),
            "not managed: untouched"
        );
        let w = want(&earlier, &first, false, None);
        assert_eq!(w.values, [None, Some("true".into()), Some("false".into())]);
        assert_eq!(w.record, None);
    }

    #[test]
    fn a_planted_record_never_writes_a_key_that_is_someone_elses() {
        // A record on the pod says the template had safe-to-evict "true";
        // the key now holds another value of someone else's, and this
        // drainit manages the cost only: idle leaves the key as it is.
        let record = serde_json::json!({COST_KEY: null, SAFE_TO_EVICT_KEY: "true",
            DO_NOT_DISRUPT_KEY: null, BUSY_KEY: []});
        let pod = held(
            serde_json::json!({COST_KEY: "1000", SAFE_TO_EVICT_KEY: "maybe",
                RECORD_KEY: record.to_string()}),
            "3",
        );
        let mut cost_only = me("app", 1000);
        cost_only.managed = Managed::parse("cost").unwrap();
        let w = want(&cost_only, &pod, false, None);
        assert_eq!(w.values, [None, Some("maybe".into()), None]);
        assert_eq!(w.record, None, "nothing of drainit's is left to restore");
        let body = patch_json(&cost_only, &pod, &w);
        assert_eq!(
            body["metadata"]["annotations"],
            serde_json::json!({COST_KEY: null, RECORD_KEY: null})
        );
        // Values a busy drainit would set, but set by someone else: a
        // cost-only drainit turned busy, then another party set
        // do-not-disrupt "true" and safe-to-evict "false". Idle leaves
        // them, and the record (which lists only the cost) goes.
        let template = held(serde_json::json!({}), "1");
        let busy = after(&want(&cost_only, &template, true, None), "2");
        let mut theirs = busy.clone();
        theirs.values[1] = Some("false".into());
        theirs.values[2] = Some("true".into());
        let w = want(&cost_only, &theirs, false, None);
        assert_eq!(
            w.values,
            [None, Some("false".into()), Some("true".into())],
            "{w:?}"
        );
        let body = patch_json(&cost_only, &theirs, &w);
        assert_eq!(
            body["metadata"]["annotations"],
            serde_json::json!({COST_KEY: null, RECORD_KEY: null})
        );
    }

    #[test]
    fn an_idle_true_is_kept_by_its_drainit_and_left_by_the_others() {
        // The app's drainit manages all keys with --k8s-idle-safe-to-evict;
        // the sidecar's only the cost.
        let mut app = me("app", 1000);
        app.idle_safe_to_evict = true;
        let mut side = me("side", 1000);
        side.managed = Managed::parse("cost").unwrap();
        let template = held(serde_json::json!({}), "1");
        let idle = after(&want(&app, &template, false, None), "2");
        assert_eq!(idle.values[1].as_deref(), Some("true"));
        let record = |h: &Held| match &h.record {
            Found::Record(r) => r.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            record(&idle).wrote,
            Managed::parse("safe-to-evict").unwrap()
        );
        // The sidecar busy, then idle: the "true" and the record stay.
        let busy = after(&want(&side, &idle, true, None), "3");
        let again = after(&want(&side, &busy, false, None), "4");
        assert_eq!(again.values, [None, Some("true".into()), None]);
        assert_eq!(record(&again).template[1], Some(None), "the template kept");
        // The app's drainit then finds what it wants: nothing to send.
        assert!(holds(&again, &want(&app, &again, false, None)));
    }

    #[test]
    fn what_is_written_shrinks_to_what_still_is_drainits() {
        // Busy, then idle with the flag: only safe-to-evict is still
        // drainit's. Restarted with the cost only, a do-not-disrupt "true"
        // someone set since is theirs, and stays.
        let mut app = me("app", 1000);
        app.idle_safe_to_evict = true;
        let template = held(serde_json::json!({}), "1");
        let busy = after(&want(&app, &template, true, None), "2");
        let idle = after(&want(&app, &busy, false, None), "3");
        let mut theirs = idle.clone();
        theirs.values[2] = Some("true".into());
        let mut cost_only = me("app", 1000);
        cost_only.managed = Managed::parse("cost").unwrap();
        let w = want(&cost_only, &theirs, false, None);
        assert_eq!(w.values[2].as_deref(), Some("true"), "{w:?}");
        assert_eq!(
            w.values[1].as_deref(),
            Some("true"),
            "the idle true stays: {w:?}"
        );
    }

    fn template_of(held: &Held) -> Template {
        template(Managed::ALL, held)
    }

    const COST: &str = COST_KEY;
    const EVICT: &str = SAFE_TO_EVICT_KEY;
    const DISRUPT: &str = DO_NOT_DISRUPT_KEY;

    #[test]
    fn a_refused_value_is_not_set_and_a_refused_restore_removes_the_keys() {
        let app = me("app", 1000);
        let record =
            serde_json::json!({COST: "abc", EVICT: "true", DISRUPT: null, BUSY_KEY: ["app"]});
        let planted = held(
            serde_json::json!({COST: "1000", EVICT: "false", DISRUPT: "true", RECORD_KEY: record.to_string()}),
            "7",
        );
        let w = want(&app, &planted, false, None);
        assert_eq!(w.values, [None, Some("true".into()), None]);
        assert_eq!(w.record, None);
        // The API server refused that restore all the same: the keys go.
        let t = template(app.managed, &planted);
        let w = want(&app, &planted, false, Some(&t));
        assert_eq!(
            w,
            Want {
                values: [None, None, None],
                record: None
            }
        );
        // A refusal of another template changes nothing.
        let other: Template = [Some(None), Some(None), Some(None)];
        assert_eq!(
            want(&app, &planted, false, Some(&other)).values[1].as_deref(),
            Some("true")
        );
    }

    #[test]
    fn a_value_too_long_to_keep_whole_is_left_alone() {
        let app = me("app", 1000);
        let long = "x".repeat(crate::proto::k8s_record::VALUE_LIMIT + 1);
        let kept = "y".repeat(300);
        let pod = held(serde_json::json!({EVICT: long, DISRUPT: kept}), "1");
        assert_eq!(too_long(app.managed, &pod), [Annotation::SafeToEvict]);
        let w = want(&app, &pod, true, None);
        assert_eq!(
            w.values[1].as_deref().map(str::len),
            Some(long.len()),
            "untouched"
        );
        let body = patch_json(&app, &pod, &w);
        let annotations = &body["metadata"]["annotations"];
        assert!(annotations.get(EVICT).is_none(), "{annotations}");
        let record: serde_json::Value =
            serde_json::from_str(annotations[RECORD_KEY].as_str().unwrap()).unwrap();
        assert!(record.get(EVICT).is_none(), "not recorded: {record}");
        assert_eq!(record[DISRUPT], kept.as_str(), "300 characters, whole");
        // Back whole once idle.
        let w = want(&app, &after(&w, "2"), false, None);
        assert_eq!(w.values[2].as_deref(), Some(kept.as_str()));
        assert_eq!(w.record, None);
    }

    #[test]
    fn idle_safe_to_evict_keeps_the_record_with_no_one_busy() {
        let mut app = me("app", 1000);
        app.idle_safe_to_evict = true;
        let bare = held(serde_json::json!({}), "1");
        let w = want(&app, &bare, false, None);
        assert_eq!(w.values, [None, Some("true".into()), None]);
        assert_eq!(w.record.as_ref().unwrap().busy, Vec::<String>::new());
        let idle = after(&w, "2");
        assert!(holds(&idle, &want(&app, &idle, false, None)));
        assert!(!is_on(&app, &idle));
        // A template that says "true" already: nothing.
        let evictable = held(serde_json::json!({EVICT: "true"}), "1");
        assert!(holds(&evictable, &want(&app, &evictable, false, None)));
    }

    #[test]
    fn names_not_of_the_pod_are_dropped_and_an_unreadable_record_removes_the_keys() {
        let app = me("app", 1000);
        let record =
            serde_json::json!({COST: null, EVICT: null, DISRUPT: null, BUSY_KEY: ["gone"]});
        let stale = held(
            serde_json::json!({COST: "1000", EVICT: "false", DISRUPT: "true", RECORD_KEY: record.to_string()}),
            "3",
        );
        assert_eq!(
            want(&app, &stale, false, None).record,
            None,
            "gone is no container"
        );
        let bad = held(serde_json::json!({DISRUPT: "true", RECORD_KEY: "[1]"}), "3");
        assert!(matches!(bad.record, Found::Unreadable(_)));
        let w = want(&app, &bad, false, None);
        assert_eq!(
            w,
            Want {
                values: [None, None, None],
                record: None
            }
        );
    }

    #[test]
    fn a_drainit_names_itself() {
        // (Whether its command names drainit: it tells nothing.)
        let c = |name: &str, _runs: bool| Container {
            name: name.into(),
            ..Container::default()
        };
        let init = Container {
            init: true,
            ..c("setup", true)
        };
        assert_eq!(own_name(&[c("app", false)], None, None).unwrap(), "app");
        assert_eq!(
            own_name(&[c("app", true), init.clone()], None, None).unwrap(),
            "app",
            "an init container that runs to completion does not count"
        );
        assert_eq!(
            own_name(&[c("app", true), c("side", true)], Some("side"), None).unwrap(),
            "side"
        );
        // Nothing is guessed from the spec: the sidecar's command may run
        // drainit whatever it looks like (`sh -c "exec drainit …"`).
        for pod in [
            [c("app", true), c("proxy", false)],
            [c("app", true), c("side", true)],
            [c("app", false), c("proxy", false)],
        ] {
            let why = own_name(&pod, None, None).unwrap_err();
            assert!(why.contains("runs 2 containers"), "{why}");
        }
        assert!(own_name(&[c("app", false)], Some("setup"), None).is_err());
        assert!(own_name(&[c("app", false), init], Some("setup"), None).is_err());
        assert_eq!(own_name(&[], None, None).unwrap(), UNNAMED);
        // The kubelet's mounts name each one for what it is.
        let pod = [c("app", true), c("proxy", false)];
        assert_eq!(own_name(&pod, None, Some("proxy")).unwrap(), "proxy");
        assert_eq!(own_name(&pod, None, Some("app")).unwrap(), "app");
        assert_eq!(own_name(&pod, Some("app"), Some("app")).unwrap(), "app");
        // One variable shared by both containers: the mounts say otherwise.
        let why = own_name(&pod, Some("app"), Some("proxy")).unwrap_err();
        assert!(why.contains("mounts say this is container proxy"), "{why}");
        // A mount naming none of the running containers is not taken.
        assert!(own_name(&pod, None, Some("gone")).is_err());
        assert_eq!(own_name(&pod, Some("app"), Some("gone")).unwrap(), "app");
        assert_eq!(own_name(&[], None, Some("proxy")).unwrap(), "proxy");
    }
}
