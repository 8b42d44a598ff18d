//! The listener's rules on a fake clock: admission (who gives way), the
//! head's time, the sync with the loop and the busy answer, the app's
//! readiness URL (shared answers, one ask at a time, its wait), what each
//! path answers, the rendered pages, and the CPU share.

use super::*;
use crate::core::counters::Counters;
use crate::core::outcome::RunSummary;
use crate::core::status::Stage;
use std::net::Ipv4Addr;
use std::sync::OnceLock;

fn t(ms: u64) -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now) + Duration::from_millis(ms)
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn lo() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

fn running() -> Arc<Status> {
    Arc::new(Status {
        stage: Stage::Running,
        program: "app".into(),
        app_ready: None,
        stop_since: None,
        deadline: None,
        sources: Vec::new(),
        summary: RunSummary::default(),
        counters: Counters::default(),
        in_flight: None,
        protection: None,
        notify_kinds: None,
        kill: None,
        outcome: None,
    })
}

fn stopping(at: Instant) -> Arc<Status> {
    let mut s = (*running()).clone();
    s.stop_since = Some(at);
    Arc::new(s)
}

fn get(path: &str) -> Parsed {
    Parsed::Request {
        method: Method::Get,
        path: path.into(),
    }
}

fn listener(ready_url: bool) -> Listener {
    let mut l = Listener::new(ready_url, t(0));
    l.published(Some(running()), 0);
    l
}

fn actions(l: &mut Listener) -> Vec<Action> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

/// The status and first body line of the answer to `id` among `actions`.
fn answer_of(actions: &[Action], id: Id) -> Option<(u16, String)> {
    actions.iter().find_map(|a| match a {
        Action::Answer { id: i, reply, .. } if *i == id => {
            Some((reply.status, reply.body.trim_end().to_string()))
        }
        _ => None,
    })
}

fn closed(actions: &[Action]) -> Vec<Id> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Close(id) => Some(*id),
            _ => None,
        })
        .collect()
}

const OUT: Outside = Outside { unix: 0.0, lost: 0 };

// ---------------------------------------------------------------------------
// Admission.

#[test]
fn loopback_peers_are_one_group_and_mapped_v4_counts_as_loopback() {
    assert_eq!(Peer::of(lo()), Peer::Loopback);
    assert_eq!(Peer::of("127.0.0.6".parse().unwrap()), Peer::Loopback);
    assert_eq!(Peer::of("::1".parse().unwrap()), Peer::Loopback);
    assert_eq!(
        Peer::of("::ffff:127.0.0.1".parse().unwrap()),
        Peer::Loopback
    );
    assert_eq!(Peer::of(ip(2)), Peer::Outside(ip(2)));
}

#[test]
fn below_the_bounds_every_connection_is_let_in() {
    let mut l = listener(false);
    for n in 0..MAX_PER_PEER {
        assert!(l.admit(t(n as u64), ip(1)).is_some());
    }
    assert!(closed(&actions(&mut l)).is_empty());
    assert_eq!(l.open(), MAX_PER_PEER);
}

#[test]
fn an_address_over_its_share_displaces_its_own_oldest_whatever_its_age() {
    let mut l = listener(false);
    let first = l.admit(t(0), ip(1)).unwrap();
    let second = l.admit(t(1), ip(1)).unwrap();
    for n in 2..MAX_PER_PEER {
        l.admit(t(n as u64), ip(1)).unwrap();
    }
    // Another address is untouched; this one's oldest goes, 20 ms old.
    let other = l.admit(t(10), ip(2)).unwrap();
    let _ = actions(&mut l);
    let new = l.admit(t(20), ip(1)).unwrap();
    assert_eq!(closed(&actions(&mut l)), vec![first]);
    assert_eq!(l.open(), MAX_PER_PEER + 1);
    l.admit(t(21), ip(1)).unwrap();
    assert_eq!(closed(&actions(&mut l)), vec![second]);
    assert!(new != other);
}

#[test]
fn full_a_newcomer_displaces_the_oldest_of_the_peer_holding_most() {
    let mut l = listener(false);
    // Outside: 3 addresses with 16, 16 and 8; loopback 24: 64 in all.
    let mut oldest_of_1 = None;
    for n in 0..16u64 {
        let id = l.admit(t(100 + n), ip(1)).unwrap();
        oldest_of_1.get_or_insert(id);
        l.admit(t(n), ip(2)).unwrap();
    }
    for n in 0..8u64 {
        l.admit(t(200 + n), ip(3)).unwrap();
    }
    let mut oldest_loopback = None;
    for n in 0..24u64 {
        let id = l.admit(t(300 + n), lo()).unwrap();
        oldest_loopback.get_or_insert(id);
    }
    assert_eq!(l.open(), MAX_CONNECTIONS);
    assert!(closed(&actions(&mut l)).is_empty());
    // A probe from a new address: loopback holds most (24), its oldest
    // goes, though it is the youngest peer.
    let probe = l.admit(t(400), ip(9)).unwrap();
    assert_eq!(closed(&actions(&mut l)), vec![oldest_loopback.unwrap()]);
    assert_eq!(l.open(), MAX_CONNECTIONS);
    // The probe, holding one place, is never the one to go.
    for n in 0..40u64 {
        l.admit(t(500 + n), ip(10 + (n % 4) as u8)).unwrap();
        assert!(!closed(&actions(&mut l)).contains(&probe));
    }
    let _ = oldest_of_1;
}

#[test]
fn of_two_peers_holding_as_many_the_one_with_the_older_connection_gives_way() {
    let mut l = listener(false);
    let mut first_of_2 = None;
    for n in 0..16u64 {
        let id = l.admit(t(n), ip(2)).unwrap();
        first_of_2.get_or_insert(id);
    }
    for n in 0..16u64 {
        l.admit(t(50 + n), ip(1)).unwrap();
        l.admit(t(50 + n), ip(3)).unwrap();
    }
    for n in 0..16u64 {
        l.admit(t(80 + n), lo()).unwrap();
    }
    let _ = actions(&mut l);
    l.admit(t(100), ip(4)).unwrap();
    assert_eq!(closed(&actions(&mut l)), vec![first_of_2.unwrap()]);
}

#[test]
fn the_loopback_reserve_is_never_taken_from_outside() {
    let mut l = listener(false);
    let mut loopback = Vec::new();
    for n in 0..LOOPBACK_RESERVED as u64 {
        loopback.push(l.admit(t(n), lo()).unwrap());
    }
    // 56 outside places, 14 addresses of 4.
    for n in 0..(MAX_CONNECTIONS - LOOPBACK_RESERVED) as u64 {
        l.admit(t(10 + n), ip(1 + (n % 14) as u8)).unwrap();
    }
    assert_eq!(l.open(), MAX_CONNECTIONS);
    let _ = actions(&mut l);
    // Outside newcomers take outside places only, though the loopback
    // group (8) holds the most.
    for n in 0..100u64 {
        l.admit(t(100 + n), ip(100 + (n % 50) as u8)).unwrap();
        let gone = closed(&actions(&mut l));
        assert_eq!(gone.len(), 1);
        assert!(!loopback.contains(&gone[0]));
    }
    // With the outside places full but a loopback place free, an outside
    // newcomer still takes an outside place.
    l.closed(loopback[0]);
    l.admit(t(300), ip(200)).unwrap();
    assert_eq!(closed(&actions(&mut l)).len(), 1);
    assert_eq!(l.open(), MAX_CONNECTIONS - 1);
    // And a loopback one is let in at once.
    l.admit(t(301), lo()).unwrap();
    assert!(closed(&actions(&mut l)).is_empty());
}

#[test]
fn a_loopback_flood_displaces_its_own_oldest_and_a_local_probe_survives_a_batch() {
    let mut l = listener(false);
    for n in 0..MAX_CONNECTIONS as u64 {
        l.admit(t(n), lo()).unwrap();
    }
    let probe = l.admit(t(100), lo()).unwrap();
    // One turn's batch of newer loopback connections cannot reach it.
    for n in 0..ACCEPT_BATCH as u64 {
        l.admit(t(101 + n), lo()).unwrap();
    }
    assert!(!closed(&actions(&mut l)).contains(&probe));
    l.head(t(120), probe, get("/healthz"));
    assert_eq!(answer_of(&actions(&mut l), probe).unwrap().0, 200);
}

#[test]
fn a_connection_with_its_request_in_gives_way_after_those_still_sending() {
    let mut l = listener(false);
    let waiting = l.admit(t(0), lo()).unwrap();
    l.head(t(1), waiting, get("/readyz"));
    let mut sending = Vec::new();
    for n in 1..MAX_CONNECTIONS as u64 {
        sending.push(l.admit(t(n), lo()).unwrap());
    }
    let _ = actions(&mut l);
    l.admit(t(100), lo()).unwrap();
    assert_eq!(closed(&actions(&mut l)), vec![sending[0]]);
}

#[test]
fn a_head_not_sent_within_its_time_closes_the_connection() {
    let mut l = listener(false);
    let a = l.admit(t(0), ip(1)).unwrap();
    let b = l.admit(t(3_000), ip(1)).unwrap();
    l.head(t(100), a, Parsed::Partial);
    assert_eq!(l.next_deadline(), Some(t(0) + HEAD_TIMEOUT));
    l.advance(t(4_999), OUT);
    assert!(closed(&actions(&mut l)).is_empty());
    l.advance(t(5_000), OUT);
    assert_eq!(closed(&actions(&mut l)), vec![a]);
    assert_eq!(l.next_deadline(), Some(t(3_000) + HEAD_TIMEOUT));
    l.closed(b);
    assert_eq!(l.next_deadline(), None);
}

// ---------------------------------------------------------------------------
// What each path answers.

#[test]
fn each_path_and_method_gets_its_answer() {
    let mut l = listener(false);
    let cases: [(Parsed, u16, &str); 6] = [
        (get("/healthz"), 200, "alive"),
        (get("/nope"), 404, "not found"),
        (Parsed::Refuse(431), 431, "Request Header Fields Too Large"),
        (Parsed::Refuse(400), 400, "Bad Request"),
        (
            Parsed::Request {
                method: Method::Other,
                path: "/readyz".into(),
            },
            405,
            "only GET and HEAD",
        ),
        (
            Parsed::Request {
                method: Method::Head,
                path: "/healthz".into(),
            },
            200,
            "alive",
        ),
    ];
    for (n, (parsed, code, body)) in cases.into_iter().enumerate() {
        let head = matches!(
            parsed,
            Parsed::Request {
                method: Method::Head,
                ..
            }
        );
        let id = l.admit(t(n as u64), lo()).unwrap();
        l.head(t(n as u64), id, parsed);
        let all = actions(&mut l);
        assert_eq!(answer_of(&all, id), Some((code, body.to_string())));
        assert!(all
            .iter()
            .any(|a| matches!(a, Action::Answer { head: h, .. } if *h == head)));
    }
    // A partial head waits; a second head on an answered one is ignored.
    let id = l.admit(t(10), lo()).unwrap();
    l.head(t(10), id, Parsed::Partial);
    assert!(actions(&mut l).is_empty());
    l.head(t(11), id, get("/healthz"));
    l.head(t(12), id, get("/nope"));
    let all = actions(&mut l);
    assert_eq!(all.len(), 1);
}

#[test]
fn healthz_before_any_status_is_503_starting() {
    let mut l = Listener::new(false, t(0));
    let id = l.admit(t(0), lo()).unwrap();
    l.head(t(0), id, get("/healthz"));
    assert_eq!(
        answer_of(&actions(&mut l), id),
        Some((503, "starting".into()))
    );
}

// ---------------------------------------------------------------------------
// The sync with the loop.

#[test]
fn readyz_waits_for_a_turn_asked_after_it_came_and_sees_the_stop() {
    let mut l = listener(false);
    let id = l.admit(t(0), lo()).unwrap();
    l.head(t(1), id, get("/readyz"));
    assert!(actions(&mut l).is_empty(), "nothing before advance");
    l.advance(t(1), OUT);
    assert_eq!(actions(&mut l), vec![Action::AskLoop(1)]);
    assert_eq!(l.next_deadline(), Some(t(1) + SYNC_WAIT));
    // The loop handled a stop signal, then caught up.
    l.published(Some(stopping(t(2))), 1);
    l.advance(t(3), OUT);
    assert_eq!(
        answer_of(&actions(&mut l), id),
        Some((503, "stopping".into()))
    );
}

#[test]
fn a_turn_served_before_the_request_came_does_not_answer_it() {
    let mut l = listener(false);
    let a = l.admit(t(0), lo()).unwrap();
    l.head(t(0), a, get("/readyz"));
    l.advance(t(0), OUT);
    assert_eq!(actions(&mut l), vec![Action::AskLoop(1)]);
    // b comes while turn 1 is outstanding: it needs turn 2.
    let b = l.admit(t(5), lo()).unwrap();
    l.head(t(5), b, get("/readyz"));
    l.published(None, 1);
    l.advance(t(6), OUT);
    let all = actions(&mut l);
    assert_eq!(answer_of(&all, a), Some((200, "ready".into())));
    assert!(answer_of(&all, b).is_none());
    assert!(all.contains(&Action::AskLoop(2)));
    l.published(None, 2);
    l.advance(t(7), OUT);
    assert_eq!(answer_of(&actions(&mut l), b), Some((200, "ready".into())));
}

#[test]
fn at_most_one_ask_is_outstanding_whatever_the_flood() {
    let mut l = listener(false);
    let mut asks = 0;
    for n in 0..50u64 {
        let id = l.admit(t(n), lo()).unwrap();
        l.head(t(n), id, get("/readyz"));
        l.advance(t(n), OUT);
        asks += actions(&mut l)
            .iter()
            .filter(|a| matches!(a, Action::AskLoop(_)))
            .count();
        let _ = id;
        if n % 25 == 24 {
            l.published(None, l.issued);
        }
    }
    // One ask, then one after each turn served.
    assert!(asks <= 3, "{asks} asks");
}

#[test]
fn a_loop_that_does_not_catch_up_in_100_ms_makes_readyz_busy() {
    let mut l = listener(false);
    let id = l.admit(t(0), lo()).unwrap();
    l.head(t(0), id, get("/readyz"));
    l.advance(t(0), OUT);
    let _ = actions(&mut l);
    l.advance(t(99), OUT);
    assert!(answer_of(&actions(&mut l), id).is_none());
    l.advance(t(100), OUT);
    assert_eq!(
        answer_of(&actions(&mut l), id),
        Some((503, "not ready: drainit is busy".into()))
    );
    // Not ready anyway: the reason, not "busy".
    let id = l.admit(t(200), lo()).unwrap();
    l.published(Some(stopping(t(150))), 0);
    l.head(t(200), id, get("/readyz"));
    l.advance(t(300), OUT);
    assert_eq!(
        answer_of(&actions(&mut l), id),
        Some((503, "stopping".into()))
    );
}

#[test]
fn status_waits_for_the_loop_too_and_healthz_does_not() {
    let mut l = listener(false);
    let s = l.admit(t(0), lo()).unwrap();
    let h = l.admit(t(0), lo()).unwrap();
    l.head(t(0), s, get("/status"));
    l.head(t(0), h, get("/healthz"));
    let all = actions(&mut l);
    assert!(answer_of(&all, h).is_some() && answer_of(&all, s).is_none());
    l.advance(t(0), OUT);
    let _ = actions(&mut l);
    l.published(None, 1);
    l.advance(t(1), OUT);
    let (code, body) = answer_of(&actions(&mut l), s).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("\"phase\":\"running\""), "{body}");
}

// ---------------------------------------------------------------------------
// The app's readiness URL.

/// A /readyz that the loop caught up with at once.
fn readyz(l: &mut Listener, at: u64) -> Id {
    let id = l.admit(t(at), lo()).unwrap();
    l.head(t(at), id, get("/readyz"));
    l.advance(t(at), OUT);
    l.published(None, l.issued);
    l.advance(t(at), OUT);
    id
}

#[test]
fn the_app_is_asked_once_for_concurrent_requests_and_2xx_means_ready() {
    let mut l = listener(true);
    let a = readyz(&mut l, 0);
    let b = readyz(&mut l, 10);
    let all = actions(&mut l);
    assert_eq!(all.iter().filter(|x| **x == Action::AskApp).count(), 1);
    assert!(answer_of(&all, a).is_none() && answer_of(&all, b).is_none());
    l.app_answered(t(20), app_ready(Ok(204)));
    l.advance(t(20), OUT);
    let all = actions(&mut l);
    assert_eq!(answer_of(&all, a), Some((200, "ready".into())));
    assert_eq!(answer_of(&all, b), Some((200, "ready".into())));
}

#[test]
fn an_answer_is_shared_for_100_ms_then_asked_again() {
    let mut l = listener(true);
    let _ = readyz(&mut l, 0);
    let _ = actions(&mut l);
    l.app_answered(t(10), app_ready(Ok(503)));
    l.advance(t(10), OUT);
    let _ = actions(&mut l);
    let b = readyz(&mut l, 109);
    let all = actions(&mut l);
    assert_eq!(
        answer_of(&all, b),
        Some((503, "app not ready: HTTP 503".into()))
    );
    assert!(!all.contains(&Action::AskApp));
    let c = readyz(&mut l, 110);
    let all = actions(&mut l);
    assert!(answer_of(&all, c).is_none());
    assert!(all.contains(&Action::AskApp));
}

#[test]
fn no_answer_within_1_s_is_503_and_a_late_one_is_still_used() {
    let mut l = listener(true);
    let a = readyz(&mut l, 0);
    let _ = actions(&mut l);
    assert_eq!(l.next_deadline(), Some(t(0) + APP_WAIT));
    l.advance(t(999), OUT);
    assert!(answer_of(&actions(&mut l), a).is_none());
    l.advance(t(1_000), OUT);
    assert_eq!(
        answer_of(&actions(&mut l), a),
        Some((503, "app not ready: no answer in time".into()))
    );
    // Still one ask in flight: a new request does not ask again.
    let b = readyz(&mut l, 1_100);
    assert!(!actions(&mut l).contains(&Action::AskApp));
    l.app_answered(t(1_200), app_ready(Err("refused".into())));
    l.advance(t(1_200), OUT);
    assert_eq!(
        answer_of(&actions(&mut l), b),
        Some((503, "app not ready: refused".into()))
    );
}

#[test]
fn the_app_is_not_asked_when_drainit_already_says_not_ready() {
    let mut l = listener(true);
    l.published(Some(stopping(t(0))), 0);
    let a = readyz(&mut l, 1);
    let all = actions(&mut l);
    assert_eq!(answer_of(&all, a), Some((503, "stopping".into())));
    assert!(!all.contains(&Action::AskApp));
}

#[test]
fn app_ready_is_2xx_only() {
    assert_eq!(app_ready(Ok(200)), Ok(()));
    assert_eq!(app_ready(Ok(299)), Ok(()));
    assert_eq!(app_ready(Ok(300)), Err("HTTP 300".into()));
    assert_eq!(app_ready(Ok(199)), Err("HTTP 199".into()));
    assert_eq!(app_ready(Err("timed out".into())), Err("timed out".into()));
}

// ---------------------------------------------------------------------------
// Rendered pages.

fn status_page(l: &mut Listener, at: u64, lost: u64) -> Arc<Reply> {
    let id = l.admit(t(at), lo()).unwrap();
    l.head(t(at), id, get("/status"));
    let out = Outside { unix: 0.0, lost };
    l.advance(t(at), out);
    l.published(None, l.issued);
    l.advance(t(at), out);
    actions(l)
        .into_iter()
        .find_map(|a| match a {
            Action::Answer { id: i, reply, .. } if i == id => Some(reply),
            _ => None,
        })
        .unwrap()
}

#[test]
fn status_is_rendered_once_per_change_and_served_from_the_copy() {
    let mut l = listener(false);
    let first = status_page(&mut l, 0, 0);
    let again = status_page(&mut l, 50, 0);
    assert!(Arc::ptr_eq(&first, &again), "rendered twice within 100 ms");
    // A new status, a new count of lost lines, or age: a new page.
    l.published(Some(stopping(t(60))), 0);
    let changed = status_page(&mut l, 60, 0);
    assert!(!Arc::ptr_eq(&first, &changed));
    assert!(changed.body.contains("\"stopping\":true"));
    let lost = status_page(&mut l, 61, 3);
    assert!(lost.body.contains("\"log_lines_dropped\":3"));
    let same = status_page(&mut l, 62, 3);
    assert!(Arc::ptr_eq(&lost, &same));
    let old = status_page(&mut l, 161, 3);
    assert!(!Arc::ptr_eq(&lost, &old));
}

#[test]
fn metrics_is_answered_without_waiting_for_the_loop() {
    let mut l = listener(false);
    let id = l.admit(t(0), lo()).unwrap();
    l.head(t(0), id, get("/metrics"));
    l.advance(t(0), OUT);
    let all = actions(&mut l);
    assert!(!all.iter().any(|a| matches!(a, Action::AskLoop(_))));
    let (code, body) = answer_of(&all, id).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("drainit_"), "{body}");
}

// ---------------------------------------------------------------------------
// The CPU share.

#[test]
fn within_its_share_the_listener_never_rests() {
    let mut l = listener(false);
    let mut cpu = Duration::ZERO;
    for ms in 0..1_000u64 {
        // 5 % of each millisecond.
        cpu += Duration::from_micros(50);
        assert_eq!(l.spent(t(ms), cpu), None, "at {ms} ms");
    }
}

#[test]
fn over_its_share_it_rests_until_its_average_is_back() {
    let mut l = listener(false);
    assert_eq!(l.spent(t(0), Duration::from_millis(500)), None);
    // 20 ms of CPU in the first 20 ms: rest until 200 ms (10 %).
    let rest = l.spent(t(20), Duration::from_millis(520));
    assert_eq!(rest, Some(t(200)));
    assert_eq!(l.spent(t(199), Duration::from_millis(520)), Some(t(200)));
    assert_eq!(l.spent(t(200), Duration::from_millis(520)), None);
    // A flood that always works when allowed: over any second, at most
    // the share plus one turn.
    let mut cpu = Duration::from_millis(520);
    let mut now = 200u64;
    let start = cpu;
    while now < 1_200 {
        match l.spent(t(now), cpu) {
            None => {
                cpu += Duration::from_millis(1);
                now += 1;
            }
            Some(until) => now = (until - t(0)).as_millis() as u64,
        }
    }
    let used = cpu - start;
    assert!(
        used <= Duration::from_millis(100 + 2),
        "{used:?} of CPU in 1 s"
    );
    assert!(used >= Duration::from_millis(90), "{used:?} of CPU in 1 s");
}
