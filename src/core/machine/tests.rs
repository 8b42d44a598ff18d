//! The machine on a fake clock: what moved out of the event loop (stale
//! answers, the ready word, ECS protection and watch decisions, command
//! runs and their timers) and the fallback that takes a stop over.

use super::*;
use crate::core::event::Note;
use crate::core::outcome::{Ended, Trigger};
use crate::core::protect::ProtectTimer;
use crate::core::settings::Cmd;
use crate::core::settings::{EcsConfig, NotifyConfig, ProtectConfig};
use crate::core::sources as drain;
use crate::core::watch::WatchTimer;
use crate::proto::exchange::{Endpoint, Method};
use crate::proto::http::Target;
use crate::proto::http::{Failure, Response};
use crate::proto::notify_msg::Access;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

const TERM: i32 = libc::SIGTERM;
const CHILD: i32 = 4242;

fn t(ms: u64) -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now) + Duration::from_millis(ms)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// grace 10 s, rounds every 1 s, ready grace 2 s, nothing else.
pub(crate) fn config() -> Config {
    Config {
        program: "app".into(),
        verbosity: 1,
        timeline: Settings {
            stop_signals: vec![TERM, libc::SIGINT],
            grace: Some(ms(10_000)),
            hook_timeout: ms(1_000),
            drain_interval: ms(1_000),
            ready_grace: ms(2_000),
            ..Settings::default()
        },
        drain_field: "/readyForTermination".into(),
        drain_timeout: ms(5_000),
        deadline_exit_code: 124,
        grace_max: Some(ms(10_000)),
        ..Config::default()
    }
}

fn cmd(text: &str) -> Cmd {
    Cmd {
        dir: None,
        text: text.into(),
        argv: vec![text.into()],
        program: PathBuf::from("/bin/true"),
    }
}

fn json(body: &str) -> Result<Response, Failure> {
    Ok(Response {
        status: 200,
        content_type: Some("application/json".into()),
        body: body.as_bytes().to_vec(),
        ..Response::default()
    })
}

const READY: &str = r#"{"readyForTermination":true}"#;
const BUSY: &str = r#"{"readyForTermination":false}"#;

fn actions(m: &mut Machine<'_>) -> Vec<Action> {
    std::iter::from_fn(|| m.poll_action()).collect()
}

/// The tokens of the requests among `actions`, with their URL.
fn sends(actions: &[Action]) -> Vec<(Token, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { token, request, .. } => match &request.endpoint {
                Endpoint::HttpUrl(url) => Some((*token, url.clone())),
                // drainit's own pod (`--k8s-protect`).
                Endpoint::K8sPod => Some((*token, "k8s:pod".into())),
            },
            _ => None,
        })
        .collect()
}

fn forwards(actions: &[Action]) -> Vec<(i32, bool)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Forward { signo, stop, .. } => Some((*signo, *stop)),
            _ => None,
        })
        .collect()
}

fn started(actions: &[Action]) -> Vec<Token> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::StartRun { token, .. } => Some(*token),
            _ => None,
        })
        .collect()
}

#[test]
fn idle_there_is_no_timer_and_a_signal_is_forwarded() {
    let config = config();
    let mut m = Machine::new(&config, CHILD, true, t(0));
    assert_eq!(m.poll_timeout(), None, "idle: no wake-ups");
    m.handle(t(5), Input::Signal(libc::SIGHUP));
    assert_eq!(forwards(&actions(&mut m)), [(libc::SIGHUP, false)]);
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn a_stale_drain_answer_counts_for_nothing() {
    let mut config = config();
    config.drain_urls = vec!["http://app/drain".into()];
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    let first = actions(&mut m);
    assert_eq!(forwards(&first), [(TERM, true)]);
    let (token, _) = sends(&first)[0];
    // The deadline passes before the answer: the round is abandoned.
    m.handle(t(10_000), Input::Timeout);
    assert!(actions(&mut m).contains(&Action::KillChild));
    m.handle(
        t(10_001),
        Input::Http {
            token,
            result: json(READY),
        },
    );
    assert!(actions(&mut m).is_empty(), "a late answer does nothing");
    assert_eq!(m.summary().drain_polls, 0, "an abandoned round is no poll");
    assert_eq!(m.summary().stop_to_ready_ms, None);
    // An answer with a token never issued is ignored too.
    m.handle(
        t(10_002),
        Input::Http {
            token: Token(999),
            result: json(READY),
        },
    );
    assert!(actions(&mut m).is_empty());
    m.handle(
        t(10_003),
        Input::ChildExited(Ended::Signaled(libc::SIGKILL)),
    );
    assert_eq!(m.outcome(), Some(Outcome::Deadline));
}

#[test]
fn a_ready_answer_starts_the_ready_grace_and_the_report_counts_the_round() {
    let mut config = config();
    config.drain_urls = vec!["http://app/drain".into()];
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    let (token, url) = sends(&actions(&mut m))[0].clone();
    assert_eq!(url, "http://app/drain");
    m.handle(
        t(300),
        Input::Http {
            token,
            result: json(BUSY),
        },
    );
    assert!(actions(&mut m).is_empty());
    assert_eq!(m.poll_timeout(), Some(t(1_000)), "the next round");
    m.handle(t(1_000), Input::Timeout);
    let (token, _) = sends(&actions(&mut m))[0].clone();
    m.handle(
        t(1_200),
        Input::Http {
            token,
            result: json(READY),
        },
    );
    assert_eq!(m.summary().stop_to_ready_ms, Some(1_200));
    assert_eq!(
        m.poll_timeout(),
        Some(t(3_200)),
        "ready grace, not the deadline"
    );
    m.handle(t(3_200), Input::Timeout);
    assert!(actions(&mut m).contains(&Action::KillChild));
    m.handle(t(3_201), Input::ChildExited(Ended::Signaled(libc::SIGKILL)));
    assert_eq!(m.outcome(), Some(Outcome::Drained));
    assert_eq!(m.summary().drain_polls, 2);
}

#[test]
fn the_ready_word_drains_at_once_drops_the_round_and_kills_drain_commands() {
    let mut config = config();
    config.drain_urls = vec!["http://app/drain".into()];
    config.drain_execs = vec![cmd("check")];
    config.notify = Some(NotifyConfig {
        socket: None,
        access: Access::All,
    });
    let mut m = Machine::new(&config, CHILD, true, t(0));
    let word = |at| {
        Input::Notify(Note {
            at: Some(at),
            received: 1,
            drained: true,
            ..Note::default()
        })
    };
    // Before the stop signal went out, the word is ignored.
    m.handle(t(10), word(t(10)));
    assert!(actions(&mut m).is_empty());
    m.handle(t(100), Input::Signal(TERM));
    let round = actions(&mut m);
    let (http, _) = sends(&round)[0].clone();
    let run = started(&round)[0];
    m.handle(t(400), word(t(400)));
    let after = actions(&mut m);
    assert!(after.contains(&Action::KillRun(run)), "{after:?}");
    let summary = m.summary();
    assert_eq!(summary.stop_to_ready_ms, Some(300));
    assert_eq!(
        summary.notify.as_ref().unwrap().stop_to_ready_word_ms,
        Some(300)
    );
    assert_eq!(summary.notify.unwrap().received, 2);
    // The round's late answers change nothing.
    m.handle(
        t(500),
        Input::Http {
            token: http,
            result: json(BUSY),
        },
    );
    m.handle(
        t(500),
        Input::RunEnded {
            token: run,
            ended: Ended::Signaled(libc::SIGKILL),
        },
    );
    assert!(actions(&mut m).is_empty());
    assert_eq!(
        m.poll_timeout(),
        Some(t(2_400)),
        "ready grace from the word"
    );
}

#[test]
fn a_drain_command_past_its_time_is_killed_and_answers_no_answer_once() {
    let mut config = config();
    config.drain_execs = vec![cmd("slow")];
    config.drain_timeout = ms(500);
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    let run = started(&actions(&mut m))[0];
    assert_eq!(m.poll_timeout(), Some(t(500)), "the run's kill time");
    m.handle(t(700), Input::Timeout);
    assert_eq!(actions(&mut m), [Action::KillRun(run)]);
    m.handle(
        t(710),
        Input::RunEnded {
            token: run,
            ended: Ended::Signaled(libc::SIGKILL),
        },
    );
    let report = m.summary().sources;
    assert_eq!(
        report[0]["last"], "no answer: killed after 500 ms",
        "{report:?}"
    );
    assert_eq!(m.poll_timeout(), Some(t(1_000)), "the next round");
}

fn ecs_config(protect: bool) -> Config {
    let mut config = config();
    config.drain_urls = vec!["http://app/drain".into()];
    config.ecs = Some(EcsConfig {
        metadata_uri: Some("http://agent/v4/abc".into()),
        interval: ms(5_000),
        protect: protect.then(|| ProtectConfig {
            agent_uri: "http://agent/api".into(),
            interval: ms(10_000),
            minutes: 60,
        }),
    });
    config
}

fn put_state(actions: &[Action]) -> Option<(Token, String)> {
    actions.iter().find_map(|a| match a {
        Action::Send { token, request, .. } if request.method == Method::Put => {
            let body = request.body.as_deref().unwrap_or_default();
            Some((*token, String::from_utf8_lossy(body).into()))
        }
        _ => None,
    })
}

#[test]
fn protection_follows_the_app_and_ends_with_the_stop() {
    let config = ecs_config(true);
    let mut m = Machine::new(&config, CHILD, true, t(0));
    let urls: Vec<String> = sends(&actions(&mut m))
        .into_iter()
        .map(|(_, u)| u)
        .collect();
    assert_eq!(urls, ["http://agent/v4/abc", "http://agent/v4/abc/task"]);
    // The protection poll is due at once.
    m.handle(t(0), Input::Timeout);
    let (poll, url) = sends(&actions(&mut m))[0].clone();
    assert_eq!(url, "http://app/drain");
    m.handle(
        t(50),
        Input::Http {
            token: poll,
            result: json(BUSY),
        },
    );
    let (put, body) = put_state(&actions(&mut m)).expect("a PUT");
    assert!(body.contains("\"ProtectionEnabled\":true"), "{body}");
    let applied = Ok(Response {
        status: 200,
        content_type: Some("application/json".into()),
        body: br#"{"protection":{"ProtectionEnabled":true}}"#.to_vec(),
        ..Response::default()
    });
    m.handle(
        t(60),
        Input::Http {
            token: put,
            result: applied,
        },
    );
    // Busy again: nothing to send until renewal.
    m.handle(t(10_000), Input::Timeout);
    let polls = actions(&mut m);
    let poll = sends(&polls)
        .into_iter()
        .find(|(_, u)| u == "http://app/drain")
        .unwrap()
        .0;
    m.handle(
        t(10_050),
        Input::Http {
            token: poll,
            result: json(BUSY),
        },
    );
    assert_eq!(put_state(&actions(&mut m)), None, "already on");
    // Idle: off.
    m.handle(t(20_000), Input::Timeout);
    let polls = actions(&mut m);
    let poll = sends(&polls)
        .into_iter()
        .find(|(_, u)| u == "http://app/drain")
        .unwrap()
        .0;
    m.handle(
        t(20_050),
        Input::Http {
            token: poll,
            result: json(READY),
        },
    );
    let (_, body) = put_state(&actions(&mut m)).expect("a PUT");
    assert!(body.contains("\"ProtectionEnabled\":false"), "{body}");
    // The stop ends the pollers: no ECS or protection timer remains.
    m.handle(t(21_000), Input::Signal(TERM));
    actions(&mut m);
    assert_eq!(
        m.watch.as_ref().and_then(|w| w.timer(WatchTimer::Poll)),
        None
    );
    assert_eq!(
        m.protection
            .as_ref()
            .and_then(|p| p.timer(ProtectTimer::Poll)),
        None
    );
}

#[test]
fn protection_leaves_the_state_alone_when_a_source_gives_no_answer() {
    let config = ecs_config(true);
    let mut m = Machine::new(&config, CHILD, true, t(0));
    actions(&mut m);
    m.handle(t(0), Input::Timeout);
    let (poll, _) = sends(&actions(&mut m))[0].clone();
    let refused = Err(Failure::new(crate::proto::http::Kind::Refused, "refused"));
    m.handle(
        t(50),
        Input::Http {
            token: poll,
            result: refused,
        },
    );
    assert_eq!(put_state(&actions(&mut m)), None);
    assert_eq!(
        m.protection
            .as_ref()
            .and_then(|p| p.timer(ProtectTimer::Poll)),
        Some(t(10_000)),
        "polls go on"
    );
}

#[test]
fn ecs_stopped_begins_the_stop_and_the_platform_signal_is_absorbed_once() {
    let config = ecs_config(false);
    let mut m = Machine::new(&config, CHILD, true, t(0));
    let task = sends(&actions(&mut m))
        .into_iter()
        .find(|(_, u)| u.ends_with("/task"))
        .unwrap()
        .0;
    let body = r#"{"TaskARN":"arn","DesiredStatus":"STOPPED","Containers":[]}"#;
    m.handle(
        t(100),
        Input::Http {
            token: task,
            result: json(body),
        },
    );
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)]);
    assert_eq!(m.summary().stop_trigger, Some(Trigger::Ecs));
    assert_eq!(m.summary().ecs_task_arn.as_deref(), Some("arn"));
    assert_eq!(
        m.watch.as_ref().and_then(|w| w.timer(WatchTimer::Poll)),
        None,
        "no polls during the stop"
    );
    m.handle(t(200), Input::Signal(TERM));
    assert!(forwards(&actions(&mut m)).is_empty(), "absorbed");
    m.handle(t(300), Input::Signal(TERM));
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)], "then forwarded");
}

#[test]
fn the_fallback_sends_a_held_stop_signal_and_keeps_the_deadline() {
    let mut config = config();
    config.timeline.pre_stop_delay = ms(5_000);
    config.drain_urls = vec!["http://app/drain".into()];
    let mut old = Machine::new(&config, CHILD, true, t(0));
    old.handle(t(1_000), Input::Signal(TERM));
    assert!(
        forwards(&actions(&mut old)).is_empty(),
        "held for the delay"
    );
    // The loop failed: a fresh core takes over at 2 s.
    let mut m = Machine::fallback(&config, &mut old, false, None, t(2_000));
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)], "at once");
    assert_eq!(m.deadline(), Some(t(11_000)), "the old stop's deadline");
    assert_eq!(m.summary().stop_trigger, Some(Trigger::Signal(TERM)));
    assert_eq!(m.poll_timeout(), Some(t(11_000)), "no rounds: no sources");
    m.handle(t(11_000), Input::Timeout);
    assert_eq!(actions(&mut m), [Action::KillChild]);
    m.handle(
        t(11_001),
        Input::ChildExited(Ended::Signaled(libc::SIGKILL)),
    );
    assert_eq!(m.outcome(), Some(Outcome::Deadline));
}

#[test]
fn the_fallback_does_not_resend_a_stop_signal_and_starts_a_stop_of_its_own() {
    let config = config();
    let mut old = Machine::new(&config, CHILD, true, t(0));
    old.handle(t(1_000), Input::Signal(TERM));
    actions(&mut old);
    let mut m = Machine::fallback(&config, &mut old, true, None, t(1_500));
    assert!(actions(&mut m).is_empty());
    assert_eq!(m.deadline(), Some(t(11_000)));
    m.handle(t(1_600), Input::Signal(TERM));
    assert_eq!(
        forwards(&actions(&mut m)),
        [(TERM, true)],
        "a second TERM goes on"
    );
    // With no stop before the panic, a stop signal begins one (--grace).
    let mut fresh = Machine::new(&config, CHILD, true, t(0));
    let mut m = Machine::fallback(&config, &mut fresh, false, None, t(3_000));
    m.handle(t(3_000), Input::Signal(TERM));
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)]);
    assert_eq!(m.deadline(), Some(t(13_000)));
    m.handle(t(4_000), Input::ChildExited(Ended::Exited(3)));
    assert_eq!(m.outcome(), Some(Outcome::Exited(3)));
}

/// `config()` with `--max-runtime 3s` and a drain URL.
fn max_runtime_config() -> Config {
    let mut config = config();
    config.max_runtime = Some(ms(3_000));
    config.drain_urls = vec!["http://app/drain".into()];
    config
}

#[test]
fn the_max_runtime_begins_a_stop_as_a_signal_would() {
    let config = max_runtime_config();
    let mut m = Machine::new(&config, CHILD, true, t(0));
    assert_eq!(m.poll_timeout(), Some(t(3_000)), "the only timer");
    m.handle(t(2_999), Input::Timeout);
    assert!(actions(&mut m).is_empty(), "not yet");
    m.handle(t(3_000), Input::Timeout);
    let a = actions(&mut m);
    assert_eq!(forwards(&a), [(TERM, true)], "the first stop signal");
    assert_eq!(sends(&a).len(), 1, "the first round, at once");
    assert_eq!(m.summary().stop_trigger, Some(Trigger::MaxRuntime));
    assert_eq!(m.deadline(), Some(t(13_000)), "--grace from the stop");
    // The platform's own SIGTERM is not absorbed: a second stop signal
    // once the app has its first, it goes on, as during any stop.
    m.handle(t(3_500), Input::Signal(TERM));
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)]);
    assert_eq!(m.deadline(), Some(t(13_000)), "the stop is not restarted");
    m.handle(t(13_000), Input::Timeout);
    assert_eq!(actions(&mut m), [Action::KillChild]);
}

#[test]
fn a_stop_begun_by_a_signal_is_not_restarted_by_the_max_runtime() {
    let config = max_runtime_config();
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(1_000), Input::Signal(libc::SIGINT));
    assert_eq!(forwards(&actions(&mut m)), [(libc::SIGINT, true)]);
    assert_eq!(m.max_runtime.and_then(|x| x.next_timer()), None);
    m.handle(t(3_000), Input::Timeout);
    assert!(forwards(&actions(&mut m)).is_empty(), "nothing at 3 s");
    assert_eq!(
        m.summary().stop_trigger,
        Some(Trigger::Signal(libc::SIGINT))
    );
    assert_eq!(m.deadline(), Some(t(11_000)));
    // A child that ends first leaves no timer either.
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(1_000), Input::ChildExited(Ended::Exited(0)));
    assert_eq!(m.poll_timeout(), None);
}

#[test]
fn the_fallback_keeps_the_max_runtime() {
    let config = max_runtime_config();
    let mut old = Machine::new(&config, CHILD, true, t(0));
    let mut m = Machine::fallback(&config, &mut old, false, None, t(1_000));
    assert_eq!(m.poll_timeout(), Some(t(3_000)));
    m.handle(t(3_000), Input::Timeout);
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)]);
    assert_eq!(m.summary().stop_trigger, Some(Trigger::MaxRuntime));
}

#[test]
fn a_lost_child_status_ends_the_run_and_none_left_after_the_child_ends_it() {
    let config = config();
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(1), Input::NoneLeft);
    assert_eq!(m.outcome(), Some(Outcome::Signaled(libc::SIGKILL)));
    let mut config = config.clone();
    config.timeline.orphan_grace = ms(5_000);
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(1), Input::ChildExited(Ended::Exited(0)));
    assert_eq!(actions(&mut m), [Action::TerminateOthers]);
    m.handle(t(2), Input::OrphanReaped { pid: 77 });
    m.handle(t(3), Input::NoneLeft);
    assert_eq!(m.outcome(), Some(Outcome::Exited(0)));
    assert_eq!(m.summary().orphans_reaped, 1);
}

#[test]
fn a_round_polls_eight_sources_at_once_and_the_rest_in_turn() {
    let mut config = config();
    config.drain_urls = (0..20).map(|i| format!("http://app/{i}")).collect();
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    let first = sends(&actions(&mut m));
    assert_eq!(first.len(), drain::MAX_POLLS, "{first:?}");
    // Each answer frees a slot for the next source of the same round.
    m.handle(
        t(10),
        Input::Http {
            token: first[0].0,
            result: json(BUSY),
        },
    );
    let next = sends(&actions(&mut m));
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].1, "http://app/8");
    // The deadline drops the round and what still waits in it.
    m.handle(t(10_000), Input::Timeout);
    assert!(sends(&actions(&mut m)).is_empty());
    for (token, _) in first.iter().skip(1) {
        m.handle(
            t(10_001),
            Input::Http {
                token: *token,
                result: json(READY),
            },
        );
    }
    assert!(
        sends(&actions(&mut m)).is_empty(),
        "nothing queued is started late"
    );
}

#[test]
fn protection_polls_have_their_own_slots() {
    let mut config = ecs_config(true);
    config.drain_urls = (0..12).map(|i| format!("http://app/{i}")).collect();
    let mut m = Machine::new(&config, CHILD, true, t(0));
    actions(&mut m);
    m.handle(t(0), Input::Timeout);
    let polls = sends(&actions(&mut m));
    assert_eq!(polls.len(), drain::MAX_POLLS, "{polls:?}");
    // A stop now: the round gets its own eight while protection's are out.
    m.handle(t(100), Input::Signal(TERM));
    let round = sends(&actions(&mut m));
    assert_eq!(round.len(), drain::MAX_POLLS, "{round:?}");
}

#[test]
fn once_the_child_is_gone_no_ecs_poll_keeps_the_loop_awake() {
    let mut config = ecs_config(true);
    config.timeline.orphan_grace = ms(15_000);
    let mut m = Machine::new(&config, CHILD, true, t(0));
    actions(&mut m);
    m.handle(t(2_500), Input::ChildExited(Ended::Exited(0)));
    actions(&mut m);
    // Only the orphan grace remains: no poll is due in the past.
    assert_eq!(m.poll_timeout(), Some(t(17_500)));
    m.handle(t(6_000), Input::Timeout);
    assert!(
        sends(&actions(&mut m)).is_empty(),
        "no ECS poll after the child"
    );
    assert_eq!(m.poll_timeout(), Some(t(17_500)));
}

#[test]
fn the_fallback_sends_nothing_to_a_child_already_reaped() {
    let mut config = config();
    config.timeline.pre_stop_delay = ms(5_000);
    let mut old = Machine::new(&config, CHILD, true, t(0));
    old.handle(t(1_000), Input::Signal(TERM));
    actions(&mut old);
    let ended = Some(Ended::Exited(4));
    let mut m = Machine::fallback(&config, &mut old, false, ended, t(20_000));
    let after = actions(&mut m);
    assert!(forwards(&after).is_empty(), "{after:?}");
    assert!(!after.contains(&Action::KillChild), "{after:?}");
    assert_eq!(m.outcome(), Some(Outcome::Exited(4)));
}

/// Whether the stop waits for hooks comes from the hooks configured, not
/// from a stored flag: with the flag set and no hook, the stop signal goes
/// out at once; with a hook command and the flag clear, it waits for it.
#[test]
fn the_stop_waits_for_hooks_only_when_there_are_hooks() {
    let mut config = config();
    config.timeline.hook = true;
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)]);

    let mut config = self::config();
    config.stop_execs = vec![cmd("hook")];
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    let first = actions(&mut m);
    assert!(forwards(&first).is_empty(), "{first:?}");
    assert!(
        first.iter().any(|a| matches!(a, Action::StartRun { .. })),
        "{first:?}"
    );
    // The hook's time (1 s) runs out: the stop signal goes out without it.
    m.handle(t(1_000), Input::Timeout);
    assert!(forwards(&actions(&mut m)).contains(&(TERM, true)));
}

#[test]
fn a_hook_answer_after_its_time_is_stale() {
    let mut config = config();
    config.stop_hooks = vec![Target {
        method: "POST".into(),
        url: "http://app/stop".into(),
    }];
    let mut m = Machine::new(&config, CHILD, true, t(0));
    m.handle(t(0), Input::Signal(TERM));
    let (hook, _) = sends(&actions(&mut m))[0].clone();
    // The hook's time (1 s) runs out: the stop signal goes out without it.
    m.handle(t(1_000), Input::Timeout);
    assert_eq!(forwards(&actions(&mut m)), [(TERM, true)]);
    let late = Err(Failure::new(crate::proto::http::Kind::Timeout, "timed out"));
    m.handle(
        t(1_100),
        Input::Http {
            token: hook,
            result: late,
        },
    );
    assert!(actions(&mut m).is_empty());
}

#[test]
fn notes_count_what_the_reader_folded_and_the_fallback_only_counts() {
    let mut config = config();
    config.drain_urls = vec!["http://app/drain".into()];
    config.notify = Some(NotifyConfig {
        socket: None,
        access: Access::All,
    });
    let mut old = Machine::new(&config, CHILD, true, t(0));
    let note = Note {
        at: Some(t(50)),
        received: 500,
        refused: 3,
        dropped: 2,
        ready_at: Some(t(40)),
        status: Some(b"busy".to_vec()),
        ..Note::default()
    };
    old.handle(t(50), Input::Notify(note));
    old.handle(t(100), Input::Signal(TERM));
    actions(&mut old);
    let mut m = Machine::fallback(&config, &mut old, true, None, t(200));
    let word = Note {
        at: Some(t(300)),
        received: 1,
        drained: true,
        ..Note::default()
    };
    m.handle(t(300), Input::Notify(word));
    assert!(
        actions(&mut m).is_empty(),
        "the fallback's core only counts"
    );
    let n = m.summary().notify.unwrap();
    assert_eq!((n.received, n.refused, n.dropped), (501, 3, 2));
    assert_eq!(n.ready_ms, Some(40));
    assert_eq!(n.status.as_deref(), Some("busy"));
}

/// The Kubernetes back-end's part in the run: only with the `k8s`
/// feature, which builds it.
#[cfg(feature = "k8s")]
mod k8s {
    use super::*;

    /// `--k8s-protect` with a drain URL, the default grace of 25 s.
    fn k8s_config() -> Config {
        let mut config = config();
        config.drain_urls = vec!["http://app/drain".into()];
        config.timeline.grace = Some(ms(25_000));
        config.grace_max = Some(ms(25_000));
        config.k8s = Some(crate::core::settings::K8sConfig {
            host: "10.96.0.1".parse().unwrap(),
            port: 443,
            namespace: "jobs".into(),
            pod: "worker-1".into(),
            container: None,
            mounted: Vec::new(),
            interval: ms(1_000),
            cost: 1000,
            managed: crate::proto::k8s::Managed::ALL,
            idle_safe_to_evict: false,
            grace_given: false,
            grace_max_given: false,
        });
        config
    }

    /// The pod's read at start, answered at `at` with a grace period of 60 s.
    fn pod_read(m: &mut Machine<'_>, at: Instant) {
        let read = sends(&actions(m));
        let (token, _) = read
            .iter()
            .find(|(_, url)| url == "k8s:pod")
            .cloned()
            .expect("the pod's read at start");
        let pod = r#"{"metadata":{},"spec":{"terminationGracePeriodSeconds":60}}"#;
        m.handle(
            at,
            Input::Http {
                token,
                result: json(pod),
            },
        );
    }

    #[test]
    fn the_pods_grace_sets_the_deadline() {
        let config = k8s_config();
        let mut m = Machine::new(&config, CHILD, true, t(0));
        pod_read(&mut m, t(100));
        assert_eq!(m.summary().platform_words.unwrap().1["grace_from"], "pod");
        m.handle(t(1_000), Input::Signal(TERM));
        assert_eq!(m.deadline(), Some(t(1_000) + ms(54_000)), "60 s less 6 s");
    }

    #[test]
    fn a_stop_under_way_keeps_its_deadline_when_the_pod_answers_late() {
        let config = k8s_config();
        let mut m = Machine::new(&config, CHILD, true, t(0));
        m.handle(t(50), Input::Signal(TERM));
        pod_read(&mut m, t(100));
        assert_eq!(m.deadline(), Some(t(50) + ms(25_000)));
        assert_eq!(
            m.summary().platform_words.unwrap().1["grace_from"],
            "default"
        );
        // Nothing is written during the stop, whatever the app says.
        m.handle(t(2_000), Input::Timeout);
        let sent = sends(&actions(&mut m));
        assert!(sent.iter().all(|(_, url)| url != "k8s:pod"), "{sent:?}");
    }

    /// A k8s-protected run whose app said busy and whose pod took busy's
    /// annotations, by `t(300)`.
    fn protected(m: &mut Machine<'_>) {
        pod_read(m, t(100));
        let poll = sends(&actions(m));
        let (token, _) = poll
            .iter()
            .find(|(_, url)| url == "http://app/drain")
            .cloned()
            .expect("protection's poll");
        m.handle(
            t(200),
            Input::Http {
                token,
                result: json(BUSY),
            },
        );
        let patch = sends(&actions(m));
        let (token, _) = patch
            .iter()
            .find(|(_, url)| url == "k8s:pod")
            .cloned()
            .expect("busy's patch");
        m.handle(
            t(300),
            Input::Http {
                token,
                result: json("{}"),
            },
        );
        assert!(m.status().protection.unwrap().protected);
    }

    /// The crash's idle patch among `actions`: its token and timeout.
    fn crash_patch(actions: &[Action]) -> (Token, Duration) {
        actions
            .iter()
            .find_map(|a| match a {
                Action::Send {
                    token,
                    request,
                    timeout,
                    ..
                } if request.method == Method::Patch => Some((*token, *timeout)),
                _ => None,
            })
            .expect("the crash's idle patch")
    }

    #[test]
    fn a_crash_while_protected_takes_protection_off_before_the_exit() {
        let config = k8s_config();
        let mut m = Machine::new(&config, CHILD, true, t(0));
        protected(&mut m);
        m.handle(t(1_000), Input::ChildExited(Ended::Exited(3)));
        let out = actions(&mut m);
        let (token, timeout) = crash_patch(&out);
        assert_eq!(timeout, crate::core::protect::CRASH_BOUND);
        assert!(!out.contains(&Action::Exit), "the exit waits for it");
        assert_eq!(m.outcome(), None);
        assert_eq!(m.poll_timeout(), Some(t(2_500)));
        m.handle(
            t(1_200),
            Input::Http {
                token,
                result: json("{}"),
            },
        );
        assert!(actions(&mut m).contains(&Action::Exit));
        assert_eq!(m.outcome(), Some(Outcome::Exited(3)), "the child's code");
        assert!(!m.status().protection.unwrap().protected);
    }

    #[test]
    fn a_crash_patch_without_an_answer_holds_the_exit_at_most_its_bound() {
        let config = k8s_config();
        let mut m = Machine::new(&config, CHILD, true, t(0));
        protected(&mut m);
        m.handle(t(1_000), Input::ChildExited(Ended::Signaled(libc::SIGSEGV)));
        let (token, _) = crash_patch(&actions(&mut m));
        m.handle(t(2_499), Input::Timeout);
        assert_eq!(m.outcome(), None);
        m.handle(t(2_500), Input::Timeout);
        assert!(actions(&mut m).contains(&Action::Exit));
        assert_eq!(m.outcome(), Some(Outcome::Signaled(libc::SIGSEGV)));
        // Its answer after the bound changes nothing.
        m.handle(
            t(3_000),
            Input::Http {
                token,
                result: json("{}"),
            },
        );
        assert_eq!(m.outcome(), Some(Outcome::Signaled(libc::SIGSEGV)));
    }

    #[test]
    fn no_crash_patch_after_a_stop_or_when_idle() {
        let config = k8s_config();
        // A stop under way: protection ended with it, the exit is at once.
        let mut m = Machine::new(&config, CHILD, true, t(0));
        protected(&mut m);
        m.handle(t(1_000), Input::Signal(TERM));
        actions(&mut m);
        m.handle(t(1_500), Input::ChildExited(Ended::Exited(0)));
        let out = actions(&mut m);
        assert!(sends(&out).is_empty(), "{out:?}");
        assert!(out.contains(&Action::Exit));
        // Never protected: nothing to take off.
        let mut m = Machine::new(&config, CHILD, true, t(0));
        pod_read(&mut m, t(100));
        actions(&mut m);
        m.handle(t(1_000), Input::ChildExited(Ended::Exited(1)));
        let out = actions(&mut m);
        assert!(sends(&out).is_empty(), "{out:?}");
        assert_eq!(m.outcome(), Some(Outcome::Exited(1)));
    }

    #[test]
    fn a_crash_before_the_pods_read_answers_waits_for_it() {
        // A restart while busy: the pod holds busy's values and drainit's
        // record from the earlier run, and the app crashes again at once.
        let config = k8s_config();
        let mut m = Machine::new(&config, CHILD, true, t(0));
        let (read, _) = sends(&actions(&mut m))
            .into_iter()
            .find(|(_, url)| url == "k8s:pod")
            .unwrap();
        m.handle(t(10), Input::ChildExited(Ended::Exited(1)));
        assert!(
            !actions(&mut m).contains(&Action::Exit),
            "waits for the read"
        );
        let pod = r#"{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1000","cluster-autoscaler.kubernetes.io/safe-to-evict":"false","karpenter.sh/do-not-disrupt":"true","drainit.dev/template-annotations":"{}"}}}"#;
        m.handle(
            t(300),
            Input::Http {
                token: read,
                result: json(pod),
            },
        );
        let out = actions(&mut m);
        let (token, timeout) = crash_patch(&out);
        assert_eq!(timeout, ms(1_210), "what is left of the bound");
        assert!(!out.contains(&Action::Exit));
        m.handle(
            t(400),
            Input::Http {
                token,
                result: json("{}"),
            },
        );
        assert!(actions(&mut m).contains(&Action::Exit));
        assert_eq!(m.outcome(), Some(Outcome::Exited(1)));
        // A read that never answers holds the exit no longer than the bound.
        let mut m = Machine::new(&config, CHILD, true, t(0));
        actions(&mut m);
        m.handle(t(10), Input::ChildExited(Ended::Exited(1)));
        m.handle(t(1_509), Input::Timeout);
        assert_eq!(m.outcome(), None);
        m.handle(t(1_510), Input::Timeout);
        assert_eq!(m.outcome(), Some(Outcome::Exited(1)));
    }

    /// The read at the stop among `actions`: its token, after the stop
    /// signal's forward.
    fn stop_read(actions: &[Action]) -> Token {
        let forward = actions
            .iter()
            .position(|a| matches!(a, Action::Forward { .. }));
        let (at, token) = actions
            .iter()
            .enumerate()
            .find_map(|(i, a)| match a {
                Action::Send { token, request, .. }
                    if request.endpoint == Endpoint::K8sPod
                        && request.query == [("resourceVersion", "0".to_string())] =>
                {
                    Some((i, *token))
                }
                _ => None,
            })
            .expect("the read at the stop");
        assert!(forward.is_some_and(|f| f < at), "the stop signal first");
        token
    }

    /// A pod answer dated `date` (the API server's clock), being deleted at
    /// `stamp` with a grace period of `period`.
    fn deleted(
        uid: &str,
        date: (u64, u64, u64),
        stamp: &str,
        period: u64,
    ) -> Result<Response, Failure> {
        let mut answer = json(&format!(
        r#"{{"metadata":{{"uid":"{uid}","deletionTimestamp":"{stamp}","deletionGracePeriodSeconds":{period}}}}}"#
    ))
    .unwrap();
        answer.date = crate::proto::http::civil_time(2027, 1, 15, date.0, date.1, date.2);
        Ok(answer)
    }

    /// `k8s_config`, the pod read at start at 100 ms (period 30 s, uid u-1).
    fn k8s_pod_read(config: &Config) -> Machine<'_> {
        let mut m = Machine::new(config, CHILD, true, t(0));
        let (token, _) = sends(&actions(&mut m))[0].clone();
        let pod = r#"{"metadata":{"uid":"u-1"},"spec":{"terminationGracePeriodSeconds":30}}"#;
        m.handle(
            t(100),
            Input::Http {
                token,
                result: json(pod),
            },
        );
        m
    }

    #[test]
    fn the_deletion_read_at_the_stop_sets_the_deadline_and_the_fallback_keeps_it() {
        let config = k8s_config();
        let mut m = k8s_pod_read(&config);
        m.handle(t(1_000), Input::Signal(TERM));
        assert_eq!(m.deadline(), Some(t(1_000) + ms(27_000)), "the pod's grace");
        let token = stop_read(&actions(&mut m));
        // Deleted with 10 s: the kill 10 s after the read was sent, the
        // deadline 2 s before it.
        let answer = deleted("u-1", (8, 0, 0), "2027-01-15T08:00:10Z", 10);
        m.handle(
            t(1_300),
            Input::Http {
                token,
                result: answer,
            },
        );
        assert_eq!(m.deadline(), Some(t(9_000)));
        let words = m.summary().platform_words.unwrap().1;
        assert_eq!(words["grace_from"], "deletion");
        assert_eq!(words["deletion_grace_period_seconds"], 10);
        assert_eq!(words["kill_ms"], 10_000);
        assert_eq!(m.status().kill, Some(t(11_000)));
        // After a panic of the loop, the fresh core keeps it.
        let mut fresh = Machine::fallback(&config, &mut m, true, None, t(3_000));
        assert_eq!(fresh.deadline(), Some(t(9_000)));
        let owner = fresh.deadline_owner();
        assert_eq!(owner.from().name(), "deletion");
        assert_eq!(owner.cap(), Some(t(9_000)));
        fresh.handle(t(9_000), Input::Timeout);
        assert!(actions(&mut fresh).contains(&Action::KillChild));
    }

    #[test]
    fn a_force_delete_or_a_failed_read_at_the_stop() {
        let config = k8s_config();
        // 404 for the pod found at start: 1 s after the stop began.
        let mut m = k8s_pod_read(&config);
        m.handle(t(1_000), Input::Signal(TERM));
        let token = stop_read(&actions(&mut m));
        let gone = Ok(Response {
            status: 404,
            ..Response::default()
        });
        m.handle(
            t(1_200),
            Input::Http {
                token,
                result: gone,
            },
        );
        assert_eq!(m.deadline(), Some(t(2_000)));
        // A 500: the deadline stays, and nothing more is sent.
        let mut m = k8s_pod_read(&config);
        m.handle(t(1_000), Input::Signal(TERM));
        let token = stop_read(&actions(&mut m));
        let failed = Ok(Response {
            status: 500,
            ..Response::default()
        });
        m.handle(
            t(1_200),
            Input::Http {
                token,
                result: failed,
            },
        );
        assert_eq!(m.deadline(), Some(t(28_000)));
        m.handle(t(20_000), Input::Timeout);
        assert!(sends(&actions(&mut m)).is_empty());
        assert_eq!(m.summary().platform_words.unwrap().1["grace_from"], "pod");
    }
}
