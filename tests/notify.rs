//! `--notify`: drainit as the receiver of systemd's notify protocol, with
//! real children sending real datagrams (the `notify_send` example, and the
//! real `systemd-notify` where it is installed): each message, the readiness
//! word beside a polled source, extensions up to `--grace-max`, refused
//! senders, the relay to an outer socket, two instances side by side, the
//! bounds under a flood, and the usage errors.

mod support;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::server::{json, Server};
use support::*;

/// `sh -c` with `$D` the scratch dir and `$N` the sender.
fn child(scratch: &Scratch, script: &str) -> Vec<String> {
    sh(scratch, &format!("N='{}'; {script}", notify_sender()))
}

/// A child that ignores TERM and says so in `$D/term`.
const HOLD: &str =
    "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";

fn args(scratch: &Scratch, flags: &[&str], script: &str) -> Vec<String> {
    let mut out: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    out.extend([
        "--exit-report".into(),
        path_str(&scratch.file("report.json")).into(),
    ]);
    out.extend(child(scratch, script));
    out
}

fn ms(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not a number of ms: {v}"))
}

#[test]
fn ready_status_stopping_reach_the_log_and_the_report() {
    let scratch = Scratch::new("notify-words");
    let (code, stderr) = drainit(args(
        &scratch,
        &["--notify"],
        "\"$N\" 'READY=1\\nSTATUS=starting' 'STATUS=serving 3 requests' 'STATUS=serving 3 requests' \
         'STOPPING=1' 'MAINPID=1\\nWATCHDOG=1\\nFOO=1' 'READY' && exit 7",
    ))
    .run();
    assert_eq!(code, 7, "{stderr}");
    let r = exit_report(scratch.file("report.json"));
    let n = &r["notify"];
    assert_eq!(n["status"], "serving 3 requests", "{r}");
    assert_eq!(n["received"], 6, "{r}");
    assert_eq!(n["refused"], 0);
    assert_eq!(n["dropped"], 0);
    assert!(ms(&n["ready_ms"]) < 20_000, "{r}");
    assert_eq!(r["outcome"], "exited");
    assert_eq!(
        stderr.matches("app is ready (READY=1)").count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("app status: serving 3 requests").count(),
        1,
        "only on change: {stderr}"
    );
    assert!(stderr.contains("STOPPING=1"), "{stderr}");
}

#[test]
fn without_notify_the_childs_notify_socket_passes_through() {
    let scratch = Scratch::new("notify-off");
    let (code, stderr) = drainit(args(
        &scratch,
        &[],
        "printf %s \"$NOTIFY_SOCKET\" > \"$D/seen\"",
    ))
    .env("NOTIFY_SOCKET", "/run/outer.sock")
    .run();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(scratch.read("seen"), "/run/outer.sock");
}

#[test]
fn real_systemd_notify_returns_at_once_and_its_status_is_reported() {
    let Some(tool) = ["/usr/bin/systemd-notify", "/bin/systemd-notify"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        if std::env::var_os("DRAINIT_REQUIRE_SYSTEMD_NOTIFY").is_some() {
            panic!("systemd-notify is required here but missing");
        }
        println!("skipped: systemd-notify is not installed (the passed-descriptor case runs with notify_send)");
        return;
    };
    let scratch = Scratch::new("notify-systemd");
    let script = format!(
        "s=$(date +%s%N); {tool} --ready --status='draining queue: 12 left'; rc=$?; e=$(date +%s%N); \
         echo $rc $(( (e - s) / 1000000 )) > \"$D/rc\""
    );
    let (code, stderr) = drainit(args(&scratch, &["--notify"], &script)).run();
    assert_eq!(code, 0, "{stderr}");
    let rc = scratch.read("rc");
    let mut parts = rc.split_whitespace();
    assert_eq!(
        parts.next(),
        Some("0"),
        "systemd-notify failed: {rc} {stderr}"
    );
    let took: u64 = parts.next().unwrap().parse().unwrap();
    // It waits up to 5 s for a receiver that holds its barrier descriptor.
    assert!(took < 4_000, "systemd-notify took {took} ms: {stderr}");
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["notify"]["status"], "draining queue: 12 left", "{r}");
    assert!(r["notify"]["ready_ms"].is_u64(), "{r}");
}

/// The debug build and both shipped libc builds.
fn binaries() -> Vec<String> {
    vec![
        DRAINIT.to_string(),
        built(Build::Static),
        built(Build::Glibc),
    ]
}

#[test]
fn a_passed_descriptor_is_never_kept() {
    for binary in binaries() {
        let scratch = Scratch::new("notify-fd");
        let (code, stderr) = drainit(args(
            &scratch,
            &["--notify"],
            "\"$N\" --fd 'READY=1\\nBARRIER=1'; echo $? > \"$D/rc\"; \
             for i in 1 2 3 4 5 6 7 8; do \"$N\" --fd 'BARRIER=1' || echo held >> \"$D/rc\"; done",
        ))
        .binary(&binary)
        .run();
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(
            scratch.read("rc"),
            "0\n",
            "drainit held a passed descriptor: {stderr}"
        );
        let r = exit_report(scratch.file("report.json"));
        assert_eq!(r["notify"]["received"], 9, "{r}");
    }
}

/// Starts a drainit whose child ignores TERM, stops it, returns the report.
fn stop(scratch: &Scratch, flags: &[&str], script: &str) -> (i32, Value, String) {
    let mut d = drainit(args(scratch, flags, script)).start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    let code = d.wait_code();
    let stderr = d.stderr();
    (code, exit_report(scratch.file("report.json")), stderr)
}

#[test]
fn the_readiness_word_drains_between_polls() {
    let scratch = Scratch::new("notify-word");
    // The endpoint never turns ready and is polled every 30 s: only the
    // word can end this stop early.
    let server = Server::start(|_, _| json(503, "{\"readyForTermination\":false}"));
    let url = server.url("/drain");
    let script = "trap '\"$N\" X_DRAINIT_READY_FOR_TERMINATION=1' TERM; touch \"$D/ready\"; \
         while :; do sleep 0.05; done";
    let (code, r, stderr) = stop(
        &scratch,
        &[
            "--notify",
            "--drain-url",
            &url,
            "--drain-interval",
            "30s",
            "--ready-grace",
            "0",
            "--grace",
            "60s",
        ],
        script,
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(r["outcome"], "drained", "{r}");
    // The first poll (not ready) and the word race; either way no second
    // poll was waited for.
    assert!(
        r["drain_polls"].as_u64().is_some_and(|n| n <= 1),
        "the word came before a second poll: {r}"
    );
    assert!(ms(&r["stop_to_exit_ms"]) < 10_000, "{r}");
    assert!(r["notify"]["stop_to_ready_word_ms"].is_u64(), "{r}");
    assert!(
        stderr.contains("X_DRAINIT_READY_FOR_TERMINATION"),
        "{stderr}"
    );
}

#[test]
fn the_readiness_word_ends_a_running_drain_command() {
    // A drain command that hangs (60 s allowed) is running when the app's
    // word drains the stop: nothing waits for its answer any more, so it is
    // killed with its group at once. The app waits to see it gone before it
    // exits by itself; were the command left to its timeout, the 30 s ready
    // grace would kill the app first and the marker would never appear.
    let scratch = Scratch::new("notify-word-exec");
    let probe = format!(
        "sh -c 'echo $$ > {}; exec sleep 100'",
        path_str(&scratch.file("probe.pid"))
    );
    let script = "trap 'while [ ! -s \"$D/probe.pid\" ]; do sleep 0.05; done; \
         \"$N\" X_DRAINIT_READY_FOR_TERMINATION=1; p=$(cat \"$D/probe.pid\"); \
         while kill -0 \"$p\" 2>/dev/null; do sleep 0.05; done; \
         touch \"$D/probe-gone\"; exit 0' TERM; \
         touch \"$D/ready\"; while :; do sleep 0.05; done";
    let (code, r, stderr) = stop(
        &scratch,
        &[
            "--notify",
            "--drain-exec",
            &probe,
            "--drain-timeout",
            "60s",
            "--ready-grace",
            "30s",
            "--grace",
            "90s",
        ],
        script,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(scratch.file("probe-gone").exists(), "{r}\n{stderr}");
    assert!(r["notify"]["stop_to_ready_word_ms"].is_u64(), "{r}");
    assert!(ms(&r["stop_to_exit_ms"]) < 20_000, "{r}");
    assert_eq!(r["drain_polls"], 0, "the round was dropped: {r}");
}

#[test]
fn the_readiness_word_before_the_stop_signal_is_ignored() {
    let scratch = Scratch::new("notify-early");
    // Sent before the stop and during the pre-stop delay, never after.
    let script = "\"$N\" X_DRAINIT_READY_FOR_TERMINATION=1; touch \"$D/ready\"; \
                  trap 'touch \"$D/term\"' TERM; \
                  while [ ! -e \"$D/stopping\" ]; do sleep 0.05; done; \
                  \"$N\" X_DRAINIT_READY_FOR_TERMINATION=1; touch \"$D/sent\"; \
                  while :; do sleep 0.05; done";
    let mut d = drainit(args(
        &scratch,
        &[
            "--notify",
            "--pre-stop-delay",
            "4s",
            "--grace",
            "5s",
            "-vvv",
        ],
        script,
    ))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    scratch.touch("stopping");
    scratch.wait_file("sent");
    assert!(
        !scratch.file("term").exists(),
        "the second word must go out during the pre-stop delay"
    );
    let code = d.wait_code();
    let stderr = d.stderr();
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(code, 124, "{stderr}");
    assert_eq!(r["outcome"], "deadline", "{r}");
    assert!(
        scratch.file("term").exists(),
        "the app got its signal: {stderr}"
    );
    assert_eq!(r["notify"]["received"], 2, "{r}");
    assert!(
        stderr.contains("X_DRAINIT_READY_FOR_TERMINATION ignored"),
        "{stderr}"
    );
}

#[test]
fn notify_beside_a_polled_source_that_turns_ready_never_delays_the_stop() {
    let scratch = Scratch::new("notify-beside");
    let server = Server::start(|_, _| json(200, "{\"readyForTermination\":true}"));
    let url = server.url("/drain");
    let (code, r, stderr) = stop(
        &scratch,
        &[
            "--notify",
            "--drain-url",
            &url,
            "--ready-grace",
            "0",
            "--grace",
            "20s",
        ],
        &format!("\"$N\" 'READY=1\\nSTATUS=up'; {HOLD}"),
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(r["outcome"], "drained", "{r}");
    assert!(ms(&r["stop_to_ready_ms"]) < 5_000, "{r}");
    assert!(r["notify"]["stop_to_ready_word_ms"].is_null(), "{r}");
    assert_eq!(r["notify"]["status"], "up");
}

/// A child that, on TERM, asks for 2.5 s more every 300 ms, forever.
const EXTENDER: &str = "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
    while [ ! -e \"$D/term\" ]; do sleep 0.05; done; \
    while :; do \"$N\" EXTEND_TIMEOUT_USEC=2500000; sleep 0.3; done";

#[test]
fn extensions_move_the_deadline_up_to_grace_max() {
    let scratch = Scratch::new("notify-extend");
    let (code, r, stderr) = stop(
        &scratch,
        &["--notify", "--grace", "2s", "--grace-max", "5s"],
        EXTENDER,
    );
    assert_eq!(code, 124, "{stderr}");
    assert_eq!(r["notify"]["deadline_ms"], 5_000, "{r}");
    let took = ms(&r["stop_to_exit_ms"]);
    assert!(
        (5_000..=5_050).contains(&took),
        "capped at --grace-max: {r}"
    );
    assert_eq!(
        stderr.matches("app extends the deadline").count(),
        1,
        "first at info only: {stderr}"
    );
}

#[test]
fn extensions_move_nothing_without_grace_max() {
    let scratch = Scratch::new("notify-no-max");
    let (code, r, stderr) = stop(&scratch, &["--notify", "--grace", "2s"], EXTENDER);
    assert_eq!(code, 124, "{stderr}");
    assert_eq!(r["notify"]["deadline_ms"], 2_000, "{r}");
    assert!((2_000..=2_500).contains(&ms(&r["stop_to_exit_ms"])), "{r}");
}

#[test]
fn an_app_that_stops_extending_is_killed_at_its_last_deadline() {
    let scratch = Scratch::new("notify-hung");
    // One extension to about 4 s after the stop, then silence.
    let script = "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
                  while [ ! -e \"$D/term\" ]; do sleep 0.05; done; \
                  \"$N\" EXTEND_TIMEOUT_USEC=4000000; while :; do sleep 0.05; done";
    let (code, r, stderr) = stop(
        &scratch,
        &["--notify", "--grace", "2s", "--grace-max", "30s"],
        script,
    );
    assert_eq!(code, 124, "{stderr}");
    let deadline = ms(&r["notify"]["deadline_ms"]);
    assert!((4_000..12_000).contains(&deadline), "{r}");
    let took = ms(&r["stop_to_exit_ms"]);
    // An honest margin for a loaded machine: the tight figure is the
    // bench's (bench/run.sh, deadline overshoot).
    assert!(took >= deadline && took <= deadline + 500, "{r}");
}

#[test]
fn a_sender_outside_the_pid_namespace_is_refused() {
    let scratch = Scratch::new("notify-outside");
    let mut d = drainit(args(
        &scratch,
        &["--notify"],
        "printf %s \"$NOTIFY_SOCKET\" > \"$D/addr.tmp\"; mv \"$D/addr.tmp\" \"$D/addr\"; \
         while [ ! -e \"$D/sent\" ]; do sleep 0.05; done; exit 3",
    ))
    .start();
    let addr = scratch.wait_file("addr");
    let name = addr
        .strip_prefix('@')
        .expect("an abstract address by default");
    // The test process is not in drainit's PID namespace: pid 0 there.
    use std::os::linux::net::SocketAddrExt;
    let to = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let sock = UnixDatagram::unbound().unwrap();
    sock.send_to_addr(b"READY=1\nSTATUS=from outside", &to)
        .unwrap();
    sock.send_to_addr(b"X_DRAINIT_READY_FOR_TERMINATION=1", &to)
        .unwrap();
    // The refusal is counted before the child ends: wait for its warning.
    wait_for("the refusal", PATIENCE, || {
        (d.stderr().matches("refused a notify message").count() == 2).then_some(())
    });
    scratch.touch("sent");
    assert_eq!(d.wait_code(), 3);
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["notify"]["refused"], 2, "{r}");
    assert_eq!(r["notify"]["received"], 0, "{r}");
    assert!(
        r["notify"]["status"].is_null() && r["notify"]["ready_ms"].is_null(),
        "{r}"
    );
}

#[test]
fn notify_access_main_refuses_a_grandchild_and_takes_the_child() {
    let scratch = Scratch::new("notify-main");
    // sh runs the sender as its own child first (a grandchild of drainit),
    // then execs it: then the sender is the main child itself.
    let (code, stderr) = drainit(args(
        &scratch,
        &["--notify", "--notify-access", "main"],
        "\"$N\" 'STATUS=grandchild'; exec \"$N\" 'STATUS=main child'",
    ))
    .run();
    assert_eq!(code, 0, "{stderr}");
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["notify"]["refused"], 1, "{r}");
    assert_eq!(r["notify"]["received"], 1, "{r}");
    assert_eq!(r["notify"]["status"], "main child", "{r}");
    // The default, all, takes both.
    let scratch = Scratch::new("notify-all");
    let (code, stderr) = drainit(args(
        &scratch,
        &["--notify"],
        "\"$N\" 'STATUS=grandchild'; exec \"$N\" 'STATUS=main child'",
    ))
    .run();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        exit_report(scratch.file("report.json"))["notify"]["received"],
        2
    );
}

#[test]
fn two_instances_in_one_network_namespace_do_not_collide() {
    let a = Scratch::new("notify-two-a");
    let b = Scratch::new("notify-two-b");
    // Written whole, then renamed: wait_file must never see it half done.
    let script = "printf %s \"$NOTIFY_SOCKET\" > \"$D/addr.tmp\"; mv \"$D/addr.tmp\" \"$D/addr\"; \
                  while [ ! -e \"$D/go\" ]; do sleep 0.05; done; \"$N\" \"STATUS=$D\"";
    let mut da = drainit(args(&a, &["--notify"], script)).start();
    let mut db = drainit(args(&b, &["--notify"], script)).start();
    let (addr_a, addr_b) = (a.wait_file("addr"), b.wait_file("addr"));
    assert_ne!(addr_a, addr_b);
    a.touch("go");
    b.touch("go");
    assert_eq!(da.wait_code(), 0);
    assert_eq!(db.wait_code(), 0);
    for s in [&a, &b] {
        let r = exit_report(s.file("report.json"));
        assert_eq!(r["notify"]["status"], path_str(&s.path), "{r}");
        assert_eq!(r["notify"]["received"], 1, "{r}");
    }
}

#[test]
fn notify_socket_path_is_bound_replaced_and_removed() {
    let scratch = Scratch::new("notify-path");
    let path = scratch.file("notify.sock");
    // A stale socket file from an earlier run.
    drop(UnixDatagram::bind(&path).unwrap());
    let (code, stderr) = drainit(args(
        &scratch,
        &["--notify-socket", path_str(&path)],
        "printf %s \"$NOTIFY_SOCKET\" > \"$D/addr\"; [ -S \"$NOTIFY_SOCKET\" ] && \"$N\" STATUS=on-path",
    ))
    .run();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(scratch.read("addr"), path_str(&path));
    assert_eq!(
        exit_report(scratch.file("report.json"))["notify"]["status"],
        "on-path"
    );
    assert!(!path.exists(), "the socket file is removed at exit");
}

#[test]
fn a_socket_that_cannot_be_bound_is_exit_125_before_the_child() {
    let scratch = Scratch::new("notify-unbindable");
    let marker = scratch.file("started");
    let (code, stderr) = drainit([
        "--notify-socket",
        "/nonexistent-dir/notify.sock",
        "/bin/touch",
        path_str(&marker),
    ])
    .not_pid1()
    .run();
    assert_eq!(code, 125, "{stderr}");
    // One error (besides the start's note on the default grace).
    let errors: Vec<_> = stderr
        .lines()
        .filter(|l| !l.contains("by default"))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("notify socket"), "{stderr}");
    assert!(!marker.exists());
}

#[test]
fn the_relay_passes_ready_status_stopping_to_the_outer_socket() {
    let scratch = Scratch::new("notify-relay");
    let outer_path = scratch.file("outer.sock");
    let outer = UnixDatagram::bind(&outer_path).unwrap();
    outer.set_read_timeout(Some(PATIENCE)).unwrap();
    let (code, stderr) = drainit(args(
        &scratch,
        &["--notify"],
        "\"$N\" 'READY=1\\nSTATUS=relayed\\nMAINPID=1' 'WATCHDOG=1' 'STOPPING=1'",
    ))
    .env("NOTIFY_SOCKET", path_str(&outer_path))
    .run();
    assert_eq!(code, 0, "{stderr}");
    let mut buf = [0u8; 256];
    let n = outer.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1\nSTATUS=relayed\n");
    let n = outer.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1\n", "WATCHDOG is not relayed");
    // A dead outer socket: said once, nothing blocks.
    drop(outer);
    let scratch = Scratch::new("notify-relay-dead");
    let (code, stderr) = drainit(args(
        &scratch,
        &["--notify"],
        "\"$N\" READY=1 STATUS=a STATUS=b",
    ))
    .env("NOTIFY_SOCKET", path_str(&outer_path))
    .run();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr.matches("cannot relay").count(), 1, "{stderr}");
    assert_eq!(
        exit_report(scratch.file("report.json"))["notify"]["status"],
        "b"
    );
}

#[test]
fn bad_notify_values_are_usage_errors() {
    assert_usage_error(&["--notify-access", "exec"], &[], "--notify-access");
    assert_usage_error(
        &["--notify"],
        &[("DRAINIT_NOTIFY_ACCESS", "x")],
        "DRAINIT_NOTIFY_ACCESS",
    );
    assert_usage_error(
        &["--notify", "--grace", "30s", "--grace-max", "10s"],
        &[],
        "--grace-max",
    );
    assert_usage_error(
        &["--notify", "--grace", "none", "--grace-max", "60s"],
        &[],
        "--grace-max",
    );
    assert_usage_error(&["--notify", "--grace-max", "soon"], &[], "--grace-max");
    assert_usage_error(&["--notify", "--grace-max=-5s"], &[], "--grace-max");
    assert_usage_error(
        &["--notify-socket", "relative.sock"],
        &[],
        "--notify-socket",
    );
    assert_usage_error(&[], &[("DRAINIT_NOTIFY", "maybe")], "DRAINIT_NOTIFY");
}

/// Peak RSS (VmHWM, KiB) of `pid`, followed until it exits.
fn follow_hwm(pid: i32, d: &mut support::Drainit) -> u64 {
    let mut peak = 0;
    while d.try_code().is_none() {
        if let Some(kib) = status_field(pid, "VmHWM")
            .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    peak
}

/// A flood of garbage, oversized and do-nothing messages from two senders
/// through a whole stop: memory stays flat, nothing moves the deadline, and
/// the deadline holds to 50 ms. Both libc builds.
#[test]
fn a_flood_neither_grows_memory_nor_moves_the_deadline() {
    for build in [Build::Static, Build::Glibc] {
        let scratch = Scratch::new("notify-flood");
        let script = "trap 'touch \"$D/term\"' TERM; \
                      ( while :; do \"$N\" --flood 20000 > /dev/null; done ) & \
                      ( while :; do \"$N\" --flood 20000 > /dev/null; done ) & \
                      \"$N\" --flood 2000 > \"$D/ready\"; while :; do sleep 0.05; done";
        let mut d = drainit(args(&scratch, &["--notify", "--grace", "3s"], script))
            .binary(&built(build))
            .start();
        scratch.wait_file("ready");
        let pid = d.pid();
        d.signal(libc::SIGTERM);
        let peak_kib = follow_hwm(pid, &mut d);
        let code = d.wait_code();
        let stderr = d.stderr();
        let r = exit_report(scratch.file("report.json"));
        println!("{build:?}: peak RSS {peak_kib} KiB; {}", r["notify"]);
        assert_eq!(code, 124, "{stderr}");
        let took = ms(&r["stop_to_exit_ms"]);
        assert!((3_000..=3_050).contains(&took), "{build:?}: {r}");
        assert_eq!(r["notify"]["deadline_ms"], 3_000);
        assert!(ms(&r["notify"]["received"]) >= 2_000, "{r}");
        assert!(
            ms(&r["notify"]["dropped"]) >= 200,
            "oversized ones dropped: {r}"
        );
        if build == Build::Static {
            assert!(peak_kib <= 2_048, "static build peak RSS {peak_kib} KiB");
        }
        // Rate-limited: a few lines, not one per message.
        assert!(
            stderr.lines().count() < 60,
            "{} lines",
            stderr.lines().count()
        );
    }
}

/// The closing note's figure: from the readiness datagram leaving the app
/// to the app's death by drainit's SIGKILL (seen through a pidfd, which
/// turns readable when the process dies), median of several stops.
#[test]
fn readiness_word_to_sigkill_latency() {
    let mut samples = Vec::new();
    for _ in 0..9 {
        let scratch = Scratch::new("notify-latency");
        let script = "trap '\"$N\" --stamp \"$D/sent\" X_DRAINIT_READY_FOR_TERMINATION=1' TERM; \
                      touch \"$D/ready\"; while :; do sleep 0.05; done";
        let mut d = drainit(args(
            &scratch,
            &["--notify", "--ready-grace", "0", "--grace", "20s"],
            script,
        ))
        .binary(&built(Build::Static))
        .start();
        scratch.wait_file("ready");
        let child = d.wait_child();
        // SAFETY: pidfd_open and poll on a descriptor we own.
        let died_ns = unsafe {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, child, 0) as i32;
            assert!(
                pidfd >= 0,
                "pidfd_open: {}",
                std::io::Error::last_os_error()
            );
            d.signal(libc::SIGTERM);
            let mut pfd = libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            assert_eq!(libc::poll(&mut pfd, 1, PATIENCE.as_millis() as i32), 1);
            let now = monotonic_ns();
            libc::close(pidfd);
            now
        };
        assert_eq!(d.wait_code(), 0, "{}", d.stderr());
        let sent: u128 = scratch.wait_number("sent");
        samples.push(((died_ns - sent) / 1_000) as u64);
    }
    samples.sort_unstable();
    let median = samples[samples.len() / 2];
    println!("readiness word to the app's death by SIGKILL: median {median} us, all {samples:?}");
    assert!(median < 1_000_000, "{samples:?}");
}

fn monotonic_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}
