//! The fault suite: tries to break drainit and checks nothing is lost.
//! Orphan and signal storms during a drain, the child exiting at every stage
//! of the stop timeline, and endpoint chaos with bounded memory. drainit is
//! PID 1 of its own namespace throughout.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::server::{json, refusing_url, Reply, Server};
use support::*;

fn stress() -> String {
    stress_helper()
}

fn with_report(scratch: &Scratch, flags: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--exit-report".into(),
        path_str(&scratch.file("report.json")).into(),
    ]);
    args
}

#[test]
fn an_orphan_storm_of_10000_during_a_drain_leaves_no_zombie_and_keeps_the_deadline() {
    let scratch = Scratch::new("storm-drain");
    let never = Server::start(|_, _| json(503, "{\"readyForTermination\":false}"));
    let url = never.url("/drain");
    // On TERM the app makes 10,000 zombie orphans; the helper itself waits
    // until its /proc shows no zombie, then writes its timings.
    let child = format!(
        "trap '\"{}\" orphans 10000 > \"$D/storm\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        stress()
    );
    let mut d = drainit(with_report(
        &scratch,
        &[
            "--drain-url",
            &url,
            "--drain-interval",
            "100ms",
            // The storm must be over before the deadline kills its maker:
            // 3.4 s here idle, over 20 s on a 2-core machine under heavy
            // load; 40 s leaves room.
            "--grace",
            "40s",
        ],
    ))
    .with_args(sh(&scratch, &child))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    let storm = wait_for("the storm to be reaped", Duration::from_secs(90), || {
        let text = scratch.read("storm");
        (!text.trim().is_empty()).then_some(text)
    });
    assert!(
        zombie_children(d.pid()).is_empty(),
        "zombies left after the storm"
    );
    // The 40 s deadline is further off than `wait_code`'s patience.
    d.wait_status(Duration::from_secs(60));
    assert_eq!(d.wait_code(), 124);
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "deadline");
    assert!(ms(&r["orphans_reaped"]) >= 10_000, "{r}");
    let to_exit = ms(&r["stop_to_exit_ms"]);
    assert!(
        (40_000..41_000).contains(&to_exit),
        "deadline kept: stop_to_exit_ms {to_exit}"
    );
    eprintln!("orphan storm (burst_ms reap_ms): {}", storm.trim());
}

fn ms(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Sends tens of thousands of mixed signals to drainit, then QUIT, which
/// the child must receive (standard signals coalesce; the last one counts).
fn signal_storm(d: &Drainit, scratch: &Scratch) -> Duration {
    let mixed = [
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGHUP,
        libc::SIGWINCH,
        libc::SIGALRM,
        libc::SIGRTMIN() + 1,
        libc::SIGCONT,
    ];
    let start = Instant::now();
    for i in 0..30_000 {
        // SAFETY: kill has no memory effects.
        let rc = unsafe { libc::kill(d.pid(), mixed[i % mixed.len()]) };
        // EAGAIN: the real-time queue is full for a moment; fine.
        assert!(rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN));
    }
    let sent = start.elapsed();
    d.signal(libc::SIGQUIT);
    let quit = format!("{} ", libc::SIGQUIT);
    wait_for(
        "the child to receive the final QUIT",
        Duration::from_secs(60),
        || {
            scratch
                .read("signals")
                .lines()
                .any(|l| l.starts_with(&quit))
                .then_some(())
        },
    );
    sent
}

#[test]
fn a_signal_storm_while_running_keeps_drainit_responsive() {
    let scratch = Scratch::new("sigstorm-run");
    let child = format!("exec \"{}\" sigrecv > \"$D/signals\"", stress());
    let mut d = drainit(sh(&scratch, &child)).start();
    wait_for("the receiver", PATIENCE, || {
        scratch.read("signals").starts_with("ready").then_some(())
    });
    let sent = signal_storm(&d, &scratch);
    let received = scratch.read("signals").lines().count() - 1;
    assert!(received >= 7, "the child received {received} signals");
    // Still responsive: TERM goes through and the child's status comes back.
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0);
    eprintln!("signal storm: 30000 sent in {sent:?}, {received} received after coalescing");
}

#[test]
fn a_signal_storm_during_a_drain_keeps_the_deadline() {
    let scratch = Scratch::new("sigstorm-drain");
    let child = format!("exec \"{}\" sigrecv > \"$D/signals\"", stress());
    // INT begins the stop; the receiver only exits on TERM, so the deadline ends it.
    let flags = [
        "--stop-signals",
        "INT",
        "--drain-url",
        &refusing_url(),
        "--drain-interval",
        "50ms",
        "--grace",
        "8s",
    ];
    let mut d = drainit(with_report(&scratch, &flags))
        .with_args(sh(&scratch, &child))
        .start();
    wait_for("the receiver", PATIENCE, || {
        scratch.read("signals").starts_with("ready").then_some(())
    });
    d.signal(libc::SIGINT);
    signal_storm(&d, &scratch);
    assert_eq!(d.wait_code(), 124);
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["stop_signal"], "SIGINT");
    let to_exit = ms(&r["stop_to_exit_ms"]);
    assert!(
        (8_000..9_000).contains(&to_exit),
        "stop_to_exit_ms {to_exit}"
    );
}

#[test]
fn child_exits_before_drainit_looks_with_a_stop_signal_pending() {
    // TERM is pending from before exec and the child exits at once: the
    // stop and the exit race inside drainit's first loop turns.
    let scratch = Scratch::new("pending-stop");
    let flags = ["--drain-url", &refusing_url(), "--", "/bin/true"];
    let launch = drainit(with_report(&scratch, &flags[..2]))
        .with_args(flags[2..].iter().map(|s| s.to_string()).collect())
        .not_pid1()
        .before_exec(|| {
            // SAFETY: test-only libc calls between fork and exec.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                // Sent by another process, as a platform would: drainit
                // never forwards what it raised itself. It stays pending
                // across exec; the child inherits the block and exits 0.
                let me = libc::getpid();
                let helper = libc::fork();
                if helper == 0 {
                    libc::kill(me, libc::SIGTERM);
                    libc::_exit(0);
                }
                libc::waitpid(helper, std::ptr::null_mut(), 0);
            }
            Ok(())
        });
    let start = Instant::now();
    let (code, stderr) = launch.run();
    assert_eq!(code, 0, "the child's own code: {stderr}");
    assert!(start.elapsed() < Duration::from_secs(10), "no hang");
    // The pending TERM was seen as a stop, not lost in the race.
    assert_eq!(
        exit_report(scratch.file("report.json"))["stop_trigger"],
        "signal",
        "{stderr}"
    );
}

/// A child that exits with `code` once the test creates `$D/quit`.
fn quits_on_file(code: i32) -> String {
    format!("trap 'echo TERM >> \"$D/term\"' TERM; touch \"$D/ready\"; while [ ! -e \"$D/quit\" ]; do sleep 0.02; done; exit {code}")
}

fn exit_during(
    scratch: &Scratch,
    flags: &[&str],
    code: i32,
    before_quit: impl Fn(&Drainit),
) -> Value {
    let mut d = drainit(with_report(scratch, flags))
        .with_args(sh(scratch, &quits_on_file(code)))
        .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    before_quit(&d);
    scratch.touch("quit");
    // No clock window: every timer in these runs (delay, interval, grace)
    // is longer than PATIENCE, so exiting at all within it, with the
    // child's own code rather than 124, proves drainit followed the exit.
    assert_eq!(d.wait_code(), code, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["child_status"]["exited"], code, "{r}");
    r
}

#[test]
fn child_exits_during_the_pre_stop_delay() {
    let scratch = Scratch::new("exit-prestop");
    let r = exit_during(
        &scratch,
        &["--pre-stop-delay", "30s", "--grace", "60s"],
        3,
        |_| {},
    );
    assert_eq!(r["outcome"], "exited");
    assert!(
        scratch.read("term").is_empty(),
        "the delay had not passed: no TERM yet"
    );
}

/// The child exits (with `code`) while a request to a hanging endpoint is
/// in flight: `flag` is `--drain-url` or `--stop-url`.
fn exit_while_hanging(name: &str, flag: &str, code: i32) {
    let scratch = Scratch::new(name);
    let hang = Server::start(|_, _| Reply::Hang);
    let url = hang.url("/endpoint");
    let flags = [flag, &url, "--drain-interval", "30s", "--grace", "60s"];
    let r = exit_during(&scratch, &flags, code, |_| {
        wait_for("the hanging request", PATIENCE, || {
            (hang.count() == 1).then_some(())
        });
    });
    assert_eq!(r["outcome"], "exited");
    assert_eq!(r["child_status"]["exited"], code);
}

#[test]
fn child_exits_while_a_drain_request_is_in_flight() {
    exit_while_hanging("exit-inflight", "--drain-url", 4);
}

#[test]
fn child_exits_while_the_stop_hook_is_in_flight() {
    exit_while_hanging("exit-hook", "--stop-url", 6);
}

#[test]
fn child_exiting_exactly_at_the_deadline_is_one_outcome_or_the_other() {
    for round in 0..3 {
        let scratch = Scratch::new("exit-deadline");
        // The child exits 5 about when the 1 s deadline fires.
        let child = "trap 'sleep 1; exit 5' TERM; touch \"$D/ready\"; while :; do sleep 0.02; done";
        let mut d = drainit(with_report(
            &scratch,
            &["--drain-url", &refusing_url(), "--grace", "1s"],
        ))
        .with_args(sh(&scratch, child))
        .start();
        scratch.wait_file("ready");
        d.signal(libc::SIGTERM);
        let code = d.wait_code();
        let r = exit_report(scratch.file("report.json"));
        match code {
            5 => assert_eq!(r["outcome"], "exited", "round {round}"),
            124 => assert_eq!(r["outcome"], "deadline", "round {round}"),
            other => panic!("round {round}: exit {other}, report {r}"),
        }
        assert!(ms(&r["stop_to_exit_ms"]) < 2_000, "round {round}: {r}");
    }
}

#[test]
fn endless_bodies_keep_memory_bounded_and_the_deadline() {
    let scratch = Scratch::new("chaos-memory");
    let endless = Server::start(|_, i| {
        if i % 2 == 0 {
            Reply::Endless
        } else {
            Reply::Dribble(Duration::from_millis(10))
        }
    });
    let url = endless.url("/drain");
    let child = "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
    let mut d = drainit(with_report(
        &scratch,
        &[
            "--drain-url",
            &url,
            "--drain-interval",
            "50ms",
            "--grace",
            "4s",
        ],
    ))
    .with_args(sh(&scratch, child))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    let pid = d.pid();
    let mut peak_kib = 0u64;
    while d.try_code().is_none() {
        if let Some(hwm) = status_field(pid, "VmHWM") {
            peak_kib = peak_kib.max(hwm.trim_end_matches(" kB").trim().parse().unwrap_or(0));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(d.wait_code(), 124);
    assert!(endless.count() >= 10, "polled {} times", endless.count());
    // A debug build's worker threads plus 64 KiB bodies: a few MiB at most.
    assert!(
        peak_kib > 0 && peak_kib < 16 * 1024,
        "peak RSS {peak_kib} KiB"
    );
    let to_exit = ms(&exit_report(scratch.file("report.json"))["stop_to_exit_ms"]);
    assert!(
        (4_000..5_000).contains(&to_exit),
        "stop_to_exit_ms {to_exit}"
    );
    eprintln!(
        "endless bodies: peak RSS {peak_kib} KiB over {} polls",
        endless.count()
    );
}

/// A drain command that forks a storm of children each run: every run is
/// killed with its whole group at `--drain-timeout`, the children that
/// outlive their shell are reaped (none is left, as process or zombie,
/// once the next run is under way), and the deadline holds.
#[test]
fn a_drain_command_forking_a_storm_is_killed_with_its_group_each_run() {
    let scratch = Scratch::new("exec-storm");
    // Run N forks 300 `sleep 30N` and waits; the marker names its run.
    let probe = format!(
        "sh -c 'D={}; echo run >> \"$D/runs\"; n=$(wc -l < \"$D/runs\"); i=0; \
         while [ $i -lt 300 ]; do sleep 30$n & i=$((i+1)); done; wait'",
        scratch.path.display()
    );
    let child = "touch \"$D/ready\"; while :; do sleep 0.05; done";
    let mut d = drainit(with_report(
        &scratch,
        &[
            "--drain-exec",
            &probe,
            "--drain-interval",
            "100ms",
            "--drain-timeout",
            "1s",
            "--grace",
            "5s",
            "--rewrite",
            "TERM:0",
        ],
    ))
    .with_args(sh(&scratch, child))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    wait_for("the second run", PATIENCE, || {
        (scratch.read("runs").lines().count() >= 2).then_some(())
    });
    // The first run's storm is gone entirely: killed and reaped.
    wait_for("the first run's children to be gone", PATIENCE, || {
        d.processes_with("sleep 301").is_empty().then_some(())
    });
    assert!(zombie_children(d.pid()).len() < 300, "zombies pile up");
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "deadline");
    // The storm's children were drainit's to reap once their shell died.
    assert!(ms(&r["orphans_reaped"]) >= 100, "{r}");
    let to_exit = ms(&r["stop_to_exit_ms"]);
    assert!(
        (5_000..5_300).contains(&to_exit),
        "deadline kept: stop_to_exit_ms {to_exit}"
    );
    assert!(
        r["sources"][0]["last"]
            .as_str()
            .unwrap()
            .starts_with("no answer: killed after"),
        "{r}"
    );
}

/// A panic while starting a drain command (injected) is the event loop's
/// panic: drainit falls back to forwarding and reaping, the app keeps its
/// supervisor, and its own exit code comes through.
#[test]
fn a_panic_starting_a_drain_command_falls_back_and_keeps_the_app() {
    let scratch = Scratch::new("start-run-panic");
    let probe = format!("sh -c 'touch {}/ran'", scratch.path.display());
    let mut d = drainit(["--drain-exec", &probe, "--grace", "30s"])
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "start_run")
        .with_args(sh(
            &scratch,
            "trap 'touch \"$D/term\"' TERM; trap 'exit 7' USR1; \
             touch \"$D/ready\"; while :; do sleep 0.05; done",
        ))
        .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    wait_for("the fallback loop", PATIENCE, || {
        d.stderr().contains("event loop failed").then_some(())
    });
    scratch.wait_file("term");
    assert!(!scratch.file("ran").exists(), "the command never started");
    assert_eq!(d.try_code(), None, "drainit outlives the panic");
    d.signal(libc::SIGUSR1);
    // (wait_status: the injected panic is in stderr on purpose.)
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
}
