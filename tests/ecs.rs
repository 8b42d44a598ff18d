//! Amazon ECS against a fake agent: a real HTTP server on 127.0.0.1 that
//! serves the documented metadata bodies under `/v4/<id>`, `/v4/<id>/task`
//! and `/api/<id>/task-protection/v1/state`, can flip DesiredStatus, answer
//! 429/404/500/garbage, and records every request.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::server::{json, Reply, Server};
use support::*;

const TASK: &str = include_str!("fixtures/ecs/task-v4.json");
const CONTAINER: &str = include_str!("fixtures/ecs/container-v4.json");
const PROTECTION_OK: &str = include_str!("fixtures/ecs/task-protection-ok.json");
const PROTECTION_FAILURE: &str = include_str!("fixtures/ecs/task-protection-failure.json");

/// What the fake agent does next.
#[derive(Clone)]
struct Agent {
    desired: &'static str,
    /// Replies for the next /task requests, before the normal body.
    task_faults: Vec<fn() -> Reply>,
    app_busy: bool,
    app_ready: bool,
    protection_fails: bool,
}

impl Default for Agent {
    fn default() -> Agent {
        Agent {
            desired: "RUNNING",
            task_faults: Vec::new(),
            app_busy: true,
            app_ready: false,
            protection_fails: false,
        }
    }
}

fn task_body(desired: &str) -> String {
    TASK.replacen(
        "\"DesiredStatus\": \"RUNNING\"",
        &format!("\"DesiredStatus\": \"{desired}\""),
        1,
    )
}

fn fake_agent(state: Arc<Mutex<Agent>>) -> Server {
    Server::start(move |seen, _| {
        let mut agent = state.lock().unwrap();
        match (seen.method.as_str(), seen.path.as_str()) {
            ("GET", "/v4/abc") => json(200, CONTAINER),
            ("GET", "/v4/abc/task") => {
                if !agent.task_faults.is_empty() {
                    return agent.task_faults.remove(0)();
                }
                json(200, &task_body(agent.desired))
            }
            ("PUT", "/api/abc/task-protection/v1/state") if agent.protection_fails => {
                json(200, PROTECTION_FAILURE)
            }
            ("PUT", "/api/abc/task-protection/v1/state") => json(200, PROTECTION_OK),
            ("GET", "/drain") if agent.app_ready => json(200, "{\"readyForTermination\":true}"),
            ("GET", "/drain") => json(
                503,
                &format!(
                    "{{\"readyForTermination\":false,\"activeExecutions\":{}}}",
                    u8::from(agent.app_busy)
                ),
            ),
            _ => Reply::Send(404, "application/json", "\"Not Found\"".into()),
        }
    })
}

/// A /drain that answers "busy" as not ready and "idle" as ready, as a task
/// with protection sees it while it runs.
fn fake_agent_idle_is_ready(state: Arc<Mutex<Agent>>) -> Server {
    Server::start(move |seen, _| {
        let agent = state.lock().unwrap();
        match (seen.method.as_str(), seen.path.as_str()) {
            ("PUT", "/api/abc/task-protection/v1/state") if agent.protection_fails => {
                json(200, PROTECTION_FAILURE)
            }
            ("PUT", "/api/abc/task-protection/v1/state") => json(200, PROTECTION_OK),
            ("GET", "/drain") => json(
                200,
                &format!("{{\"readyForTermination\":{}}}", !agent.app_busy),
            ),
            _ => Reply::Send(404, "application/json", "\"Not Found\"".into()),
        }
    })
}

const STUBBORN: &str =
    "trap 'echo TERM >> \"$D/term\"' TERM; trap 'echo USR1 >> \"$D/usr1\"' USR1; \
     trap 'echo INT >> \"$D/int\"' INT; \
                        touch \"$D/ready\"; while :; do sleep 0.05; done";

fn task_polls(server: &Server) -> usize {
    server
        .seen()
        .iter()
        .filter(|s| s.path == "/v4/abc/task")
        .count()
}

fn puts(server: &Server) -> Vec<(Instant, Value)> {
    server
        .seen()
        .iter()
        .filter(|s| s.method == "PUT")
        .map(|s| {
            (
                s.at,
                serde_json::from_str(&s.body).expect("PUT body is JSON"),
            )
        })
        .collect()
}

#[test]
fn stopped_begins_the_drain_and_the_platform_sigterm_is_absorbed() {
    let scratch = Scratch::new("ecs-stop");
    let state = Arc::new(Mutex::new(Agent::default()));
    let server = fake_agent(Arc::clone(&state));
    let report = scratch.file("report.json");
    let args = [
        "--ecs-interval",
        "1s",
        "--drain-url",
        &server.url("/drain"),
        "--drain-interval",
        "100ms",
        "--ready-grace",
        "200ms",
        "--exit-report",
        path_str(&report),
    ];
    let mut d = drainit(args)
        .with_args(sh(&scratch, STUBBORN))
        .env("ECS_CONTAINER_METADATA_URI_V4", &server.url("/v4/abc"))
        .start();
    scratch.wait_file("ready");
    wait_for("the first task poll", PATIENCE, || {
        (task_polls(&server) >= 1).then_some(())
    });
    let flipped = Instant::now();
    state.lock().unwrap().desired = "STOPPED";
    scratch.wait_file("term");
    let latency = flipped.elapsed();
    eprintln!(
        "ecs: TERM reached the app {latency:?} after DesiredStatus became STOPPED (interval 1 s)"
    );
    assert!(
        latency < Duration::from_millis(1000 + 2000),
        "TERM {latency:?} after STOPPED (interval 1s)"
    );

    // An operator's Ctrl-C is not the platform's signal: forwarded.
    d.signal(libc::SIGINT);
    wait_for("INT to reach the app", PATIENCE, || {
        (scratch.read("int").lines().count() == 1).then_some(())
    });

    // The platform's SIGTERM now arrives: absorbed, not forwarded again.
    d.signal(libc::SIGTERM);
    wait_for("drainit to consume the SIGTERM", PATIENCE, || {
        let pending = status_field(d.pid(), "ShdPnd")?;
        (!sigset_has(&pending, libc::SIGTERM)).then_some(())
    });
    d.signal(libc::SIGUSR1);
    wait_for("USR1", PATIENCE, || {
        (scratch.read("usr1").lines().count() == 1).then_some(())
    });
    d.signal(libc::SIGUSR1);
    wait_for("second USR1", PATIENCE, || {
        (scratch.read("usr1").lines().count() == 2).then_some(())
    });
    assert_eq!(
        scratch.read("term").lines().count(),
        1,
        "the app saw the stop once"
    );

    state.lock().unwrap().app_ready = true;
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let report: Value = exit_report(&report);
    assert_eq!(report["outcome"], "drained");
    assert_eq!(report["stop_trigger"], "ecs");
    assert_eq!(
        report["ecs_task_arn"],
        "arn:aws:ecs:us-west-2:111122223333:task/default/158d1c8083dd49d6b527399fd6414f5c"
    );
    assert!(
        server.seen().iter().any(|s| s.path == "/v4/abc"),
        "container metadata was read"
    );
}

#[test]
fn every_kind_of_metadata_error_is_survived_and_polling_goes_on() {
    let scratch = Scratch::new("ecs-errors");
    let faults: Vec<fn() -> Reply> = vec![
        || Reply::Send(429, "text/plain", "Too Many Requests".into()),
        || Reply::Send(404, "application/json", "\"Not Found\"".into()),
        || Reply::Send(500, "application/json", "\"internal error\"".into()),
        || json(200, "{\"DesiredStatus\": "),
        || Reply::Garbage,
        || Reply::Hang,
        || json(200, &task_body("STOPPED")),
    ];
    let count = faults.len();
    let state = Arc::new(Mutex::new(Agent {
        task_faults: faults,
        ..Agent::default()
    }));
    let server = fake_agent(Arc::clone(&state));
    let mut d = drainit(["--ecs-interval", "1s", "--grace", "1s"])
        .with_args(sh(&scratch, STUBBORN))
        .env("ECS_CONTAINER_METADATA_URI_V4", &server.url("/v4/abc"))
        .start();
    scratch.wait_file("ready");
    // SIGUSR1 is still forwarded while the agent misbehaves.
    d.signal(libc::SIGUSR1);
    scratch.wait_file("usr1");
    // The seventh answer says STOPPED: the stop begins, and with no drain
    // URL and an app that ignores TERM, the 1 s deadline ends it.
    wait_for("the ECS-triggered stop", Duration::from_secs(60), || {
        (!scratch.read("term").is_empty()).then_some(())
    });
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    assert_eq!(
        task_polls(&server),
        count,
        "one poll per interval, none lost"
    );
}

#[test]
fn default_poll_rate_is_one_every_five_seconds() {
    let scratch = Scratch::new("ecs-rate");
    let state = Arc::new(Mutex::new(Agent::default()));
    let server = fake_agent(state);
    let d = drainit(sh(&scratch, STUBBORN))
        .env("ECS_CONTAINER_METADATA_URI", &server.url("/v4/abc"))
        .start();
    scratch.wait_file("ready");
    wait_for("the first task poll", PATIENCE, || {
        (task_polls(&server) >= 1).then_some(())
    });
    let first = server
        .seen()
        .iter()
        .find(|s| s.path == "/v4/abc/task")
        .unwrap()
        .at;
    wait_for("the second task poll", PATIENCE, || {
        (task_polls(&server) >= 2).then_some(())
    });
    let polls: Vec<Instant> = server
        .seen()
        .iter()
        .filter(|s| s.path == "/v4/abc/task")
        .map(|s| s.at)
        .collect();
    let gap = polls[1].duration_since(first);
    assert!(
        gap >= Duration::from_millis(4900),
        "second poll after {gap:?}"
    );
    assert!(gap < Duration::from_secs(8), "second poll after {gap:?}");
    d.signal(libc::SIGKILL);
}

#[test]
fn ecs_off_makes_no_request() {
    let scratch = Scratch::new("ecs-off");
    let state = Arc::new(Mutex::new(Agent::default()));
    let server = fake_agent(state);
    // Two runs side by side, both children waiting for the same file. The
    // ECS-on run starts only once the --ecs off run's child is up, and the
    // children go only once the on run has read the metadata: the off run
    // lived, after its child started, at least as long as that took.
    let on_server = fake_agent(Arc::new(Mutex::new(Agent::default())));
    let child = |name: &str| {
        format!("touch \"$D/up-{name}\"; while [ ! -e \"$D/quit\" ]; do sleep 0.02; done")
    };
    let mut off = drainit(["--ecs", "off"])
        .with_args(sh(&scratch, &child("off")))
        .env("ECS_CONTAINER_METADATA_URI_V4", &server.url("/v4/abc"))
        .start();
    scratch.wait_file("up-off");
    let mut on = drainit(sh(&scratch, &child("on")))
        .env("ECS_CONTAINER_METADATA_URI_V4", &on_server.url("/v4/abc"))
        .start();
    wait_for(
        "container and task metadata reads with ECS on",
        PATIENCE,
        || (on_server.count() >= 2).then_some(()),
    );
    scratch.touch("quit");
    assert_eq!(off.wait_code(), 0, "{}", off.stderr());
    assert_eq!(on.wait_code(), 0, "{}", on.stderr());
    assert_eq!(server.count(), 0, "--ecs off made a request");
}

/// drainit with `--ecs-protect` (polled every second) against a fake agent
/// whose app is busy until told otherwise; returns once the app runs.
fn protected(name: &str, state: &Arc<Mutex<Agent>>, flags: &[&str]) -> (Scratch, Server, Drainit) {
    let scratch = Scratch::new(name);
    let server = fake_agent_idle_is_ready(Arc::clone(state));
    let url = server.url("/drain");
    let mut args = vec![
        "--ecs-protect",
        "--drain-url",
        &url,
        "--protect-interval",
        "1s",
    ];
    args.extend_from_slice(flags);
    let d = drainit(args)
        .with_args(sh(&scratch, STUBBORN))
        .env("ECS_AGENT_URI", &server.url("/api/abc"))
        .start();
    scratch.wait_file("ready");
    (scratch, server, d)
}

#[test]
fn protection_follows_busy_and_idle_and_is_renewed() {
    let state = Arc::new(Mutex::new(Agent::default()));
    let (_scratch, server, mut d) = protected("protect", &state, &["--protect-minutes", "1"]);
    wait_for("protection on", PATIENCE, || {
        (!puts(&server).is_empty()).then_some(())
    });
    let (first_at, first) = puts(&server)[0].clone();
    assert_eq!(
        first,
        serde_json::json!({"ProtectionEnabled": true, "ExpiresInMinutes": 1})
    );

    // Busy and protected: not re-sent on every poll, but renewed at half
    // its one-minute life.
    wait_for("the renewal", Duration::from_secs(60), || {
        (puts(&server).len() >= 2).then_some(())
    });
    let all = puts(&server);
    assert_eq!(all.len(), 2, "only the renewal was re-sent");
    assert_eq!(all[1].1, first);
    let renewed_after = all[1].0.duration_since(first_at);
    assert!(
        renewed_after >= Duration::from_secs(29),
        "renewed after {renewed_after:?}"
    );
    assert!(
        renewed_after < Duration::from_secs(40),
        "renewed after {renewed_after:?}"
    );

    state.lock().unwrap().app_busy = false;
    wait_for("protection off", PATIENCE, || {
        (puts(&server).len() >= 3).then_some(())
    });
    assert_eq!(
        puts(&server)[2].1,
        serde_json::json!({"ProtectionEnabled": false})
    );
    // Idle and unprotected: nothing more is sent over several polls.
    let polls = server.seen().iter().filter(|s| s.path == "/drain").count();
    wait_for("three more polls", PATIENCE, || {
        (server.seen().iter().filter(|s| s.path == "/drain").count() >= polls + 3).then_some(())
    });
    assert_eq!(puts(&server).len(), 3);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "idle app: drained");
}

#[test]
fn a_refused_protection_request_is_retried_and_survived() {
    let state = Arc::new(Mutex::new(Agent {
        protection_fails: true,
        ..Agent::default()
    }));
    let (_scratch, server, mut d) = protected("protect-fail", &state, &["--grace", "1s"]);
    wait_for("a retry after TASK_NOT_VALID", PATIENCE, || {
        (puts(&server).len() >= 2).then_some(())
    });
    state.lock().unwrap().protection_fails = false;
    let n = puts(&server).len();
    wait_for("the accepted request", PATIENCE, || {
        (puts(&server).len() > n).then_some(())
    });
    let n = puts(&server).len();
    let polls = server.seen().iter().filter(|s| s.path == "/drain").count();
    wait_for("two more polls", PATIENCE, || {
        (server.seen().iter().filter(|s| s.path == "/drain").count() >= polls + 2).then_some(())
    });
    assert_eq!(puts(&server).len(), n, "accepted once, then not re-sent");
    assert_eq!(d.try_code(), None);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124, "busy app ignoring TERM: deadline");
}

#[test]
fn bad_ecs_settings_exit_2() {
    let agent = [("ECS_AGENT_URI", "http://127.0.0.1:1/api")];
    let drain = ["--drain-url", "http://127.0.0.1:1/d"];
    assert_usage_error(&["--ecs", "on"], &[], "ECS_CONTAINER_METADATA_URI_V4");
    assert_usage_error(&["--ecs", "maybe"], &[], "--ecs");
    assert_usage_error(&["--ecs-interval", "500ms"], &[], "--ecs-interval");
    assert_usage_error(&["--ecs-protect", drain[0], drain[1]], &[], "ECS_AGENT_URI");
    assert_usage_error(&["--ecs-protect"], &agent, "--drain-url");
    assert_usage_error(
        &[
            "--ecs-protect",
            "--protect-minutes",
            "2881",
            drain[0],
            drain[1],
        ],
        &agent,
        "--protect-minutes",
    );
    // A platform variable that is not a usable http:// URL stops drainit
    // only with --ecs on (under auto it is a warning: tests/defaults.rs).
    assert_usage_error(
        &["--ecs", "on"],
        &[("ECS_CONTAINER_METADATA_URI_V4", "https://x/v4")],
        "ECS_CONTAINER_METADATA_URI_V4",
    );
}

#[test]
fn a_loop_panic_during_the_pre_stop_delay_still_signals_the_app() {
    // ECS began the stop; the app waits for its TERM behind a 20 s delay
    // when the loop dies (HUP trips the fault point). The fallback has no
    // timers: it must send the stop signal at once instead of never.
    let scratch = Scratch::new("ecs-loop-panic");
    let state = Arc::new(Mutex::new(Agent {
        desired: "STOPPED",
        ..Agent::default()
    }));
    let server = fake_agent(state);
    let mut d = drainit(["--pre-stop-delay", "20s", "--grace", "40s"])
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "event_loop")
        .env("ECS_CONTAINER_METADATA_URI_V4", &server.url("/v4/abc"))
        .with_args(sh(
            &scratch,
            "trap 'exit 9' TERM; trap 'touch \"$D/hup\"' HUP; touch \"$D/ready\"; \
             while :; do sleep 0.05; done",
        ))
        .start();
    scratch.wait_file("ready");
    wait_for("the ECS-triggered stop", PATIENCE, || {
        d.stderr().contains("stop begins (ECS)").then_some(())
    });
    let sent = Instant::now();
    d.signal(libc::SIGHUP);
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(9), "{}", d.stderr());
    assert!(
        sent.elapsed() < Duration::from_secs(15),
        "TERM reached the app {:?} after the panic",
        sent.elapsed()
    );
}

/// A drain endpoint on `port` that says busy, until `stop` is set: then
/// its socket is closed and connections are refused.
fn busy_endpoint(port: u16, stop: Arc<std::sync::atomic::AtomicBool>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind the drain port");
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok((mut stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let body = "{\"readyForTermination\":false}";
            let _ = write!(
                stream,
                "HTTP/1.1 503 Busy\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

/// drainit with `--ecs-protect` (polled every second, debug logs) whose
/// drain URL is on `port`, on which nothing listens yet.
fn protected_late(name: &str, port: u16) -> (Scratch, Server, Drainit) {
    let scratch = Scratch::new(name);
    let agent = fake_agent_idle_is_ready(Arc::new(Mutex::new(Agent::default())));
    let url = format!("http://127.0.0.1:{port}/drain");
    let d = drainit([
        "-vv",
        "--ecs-protect",
        "--drain-url",
        &url,
        "--protect-interval",
        "1s",
    ])
    .with_args(sh(&scratch, STUBBORN))
    .env("ECS_AGENT_URI", &agent.url("/api/abc"))
    .start();
    scratch.wait_file("ready");
    (scratch, agent, d)
}

const WINDOW_LINE: &str = "the app may not listen yet: start-up window";
const REFUSED_WARN: &str = "connection refused (logged once per kind";

/// An app that opens its port a few seconds after the start: its refusals
/// are no warning (debug only) and protection follows it once it answers;
/// after that first answer, a refusal is a warning at once.
#[test]
fn protection_refusals_before_the_app_listens_are_no_warning() {
    let port = free_port();
    let (_scratch, agent, mut d) = protected_late("protect-late", port);
    wait_for("two refusals in the start-up window", PATIENCE, || {
        (d.stderr().matches(WINDOW_LINE).count() >= 2).then_some(())
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    busy_endpoint(port, Arc::clone(&stop));
    wait_for("protection on once the app answers", PATIENCE, || {
        (!puts(&agent).is_empty()).then_some(())
    });
    assert!(!d.stderr().contains(REFUSED_WARN), "{}", d.stderr());
    // Answered once: a refusal now is the warning, within the window's time.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let closed = Instant::now();
    wait_for("the refusal warning", PATIENCE, || {
        d.stderr().contains(REFUSED_WARN).then_some(())
    });
    assert!(
        closed.elapsed() < Duration::from_secs(15),
        "{:?}",
        closed.elapsed()
    );
    d.signal(libc::SIGKILL);
    let _ = d.wait_code();
}

/// Nothing ever listens: the warning comes when the 30 s window ends, not
/// before.
#[test]
fn protection_refusals_are_a_warning_once_the_start_up_window_ends() {
    let started = Instant::now();
    let (_scratch, _agent, mut d) = protected_late("protect-never", free_port());
    let seen = wait_for("the refusal warning", Duration::from_secs(60), || {
        d.stderr().contains(REFUSED_WARN).then(|| started.elapsed())
    });
    assert!(
        seen >= Duration::from_secs(30) && seen < Duration::from_secs(40),
        "warned after {seen:?}"
    );
    let stderr = d.stderr();
    assert!(stderr.matches(WINDOW_LINE).count() >= 20, "{stderr}");
    d.signal(libc::SIGKILL);
    let _ = d.wait_code();
}

#[test]
fn the_platforms_sigterm_after_an_ecs_stop_and_a_loop_panic_reaches_the_app_once() {
    // ECS began the stop and the app had its TERM; the loop dies (HUP
    // trips the fault point) and the fallback's core takes over. The
    // platform's own SIGTERM, which follows ECS's stop, is still absorbed:
    // the app counts the TERMs it gets, and WINCH (forwarded, and
    // delivered after a TERM sent before it) makes it say the count.
    let scratch = Scratch::new("ecs-loop-panic-absorb");
    let state = Arc::new(Mutex::new(Agent::default()));
    let server = fake_agent(state.clone());
    let mut d = drainit(["--grace", "40s"])
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "event_loop")
        .env("ECS_CONTAINER_METADATA_URI_V4", &server.url("/v4/abc"))
        .with_args(sh(
            &scratch,
            "trap 'echo term >> \"$D/terms\"' TERM; trap 'touch \"$D/hup\"' HUP; \
             trap 'wc -l < \"$D/terms\" > \"$D/count.tmp\"; mv \"$D/count.tmp\" \"$D/count\"; exit 7' WINCH; \
             touch \"$D/ready\"; while :; do sleep 0.05; done",
        ))
        .start();
    scratch.wait_file("ready");
    // ECS's stop, once the app's traps are set, signals the app.
    state.lock().unwrap().desired = "STOPPED";
    scratch.wait_file("terms");
    d.signal(libc::SIGHUP);
    // The fallback's core forwards the HUP the first one failed on.
    scratch.wait_file("hup");
    d.signal(libc::SIGTERM);
    d.signal(libc::SIGWINCH);
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
    let count = std::fs::read_to_string(scratch.file("count")).expect("the app's count");
    assert_eq!(
        count.trim(),
        "1",
        "the app got the stop signal more than once: {}",
        d.stderr()
    );
}
