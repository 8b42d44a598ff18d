//! Drain sources and hooks beyond one URL, with drainit as PID 1: stop hook
//! commands (`--stop-exec`, `--hook-timeout`), readiness by command
//! (`--drain-exec`, `--drain-timeout`) and by file (`--drain-file`),
//! several sources at once, and the usage errors of bad sources. After
//! each, /proc shows no zombie and no command left behind.

mod support;

use std::fs;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::server::{json, Server};
use support::*;

/// A child that records each TERM and keeps running until `$D/quit`
/// exists; then it exits 0.
const STUBBORN: &str = "trap 'echo TERM >> \"$D/term\"' TERM; touch \"$D/ready\"; \
                        while [ ! -e \"$D/quit\" ]; do sleep 0.05; done; exit 0";

fn with_marker(d: &Drainit, marker: &str) -> Vec<(i32, char)> {
    d.processes_with(marker)
}

/// A SIGKILL waits for `pid` (a run being killed): it is on its way out,
/// even if the next run already started.
fn kill_pending(pid: i32) -> bool {
    // Already dying: the kernel sets PF_EXITING (0x4 in stat's flags) as
    // soon as the taken SIGKILL leaves the pending set, and on a loaded
    // machine the exit can take a while after that.
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let flags = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok());
    if flags.is_some_and(|f| f & 0x4 != 0) {
        return true;
    }
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter_map(|l| {
            l.strip_prefix("ShdPnd:")
                .or_else(|| l.strip_prefix("SigPnd:"))
        })
        .filter_map(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .any(|mask| mask & (1 << (libc::SIGKILL - 1)) != 0)
}

/// Nothing of the commands is left and drainit holds no zombie.
fn assert_clean(d: &Drainit, marker: &str) {
    // The kill and the reaping follow an event drainit handles: wait for it.
    wait_for("the commands to be gone", PATIENCE, || {
        with_marker(d, marker).is_empty().then_some(())
    });
    wait_for("no zombie under drainit", PATIENCE, || {
        zombie_children(d.pid()).is_empty().then_some(())
    });
}

/// drainit with `flags`, an exit report in the scratch dir and `child`.
fn start(scratch: &Scratch, flags: &[String], child: &str) -> Drainit {
    let mut args = flags.to_vec();
    args.extend([
        "--exit-report".to_string(),
        path_str(&scratch.file("report.json")).to_string(),
    ]);
    args.extend(sh(scratch, child));
    let d = drainit(args).start();
    scratch.wait_file("ready");
    d
}

fn strings(flags: &[&str]) -> Vec<String> {
    flags.iter().map(|s| s.to_string()).collect()
}

fn in_dir(scratch: &Scratch, script: &str) -> String {
    format!("sh -c 'D={}; {script}'", scratch.path.display())
}

#[test]
fn a_stop_hook_command_runs_before_the_app_gets_its_signal() {
    let scratch = Scratch::new("stop-exec");
    let hook = in_dir(
        &scratch,
        "echo from-hook > \"$D/hook\"; echo hook-output >&2; \
         grep ^SigBlk /proc/self/status > \"$D/mask\"",
    );
    // The app tells whether the hook's file was there when TERM came. It
    // spins (briefly) rather than sleep: no process of its own is left to
    // count as an orphan, so any would be the hook taken for one.
    let child = "trap 'cat \"$D/hook\" > \"$D/seen\"; exit 0' TERM; touch \"$D/ready\"; \
                 while :; do :; done";
    let mut d = start(
        &scratch,
        &strings(&["--stop-exec", &hook, "--grace", "20s"]),
        child,
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert_eq!(scratch.read("seen").trim(), "from-hook");
    assert!(d.stderr().contains("hook-output"), "hook output on stderr");
    // A clean mask, not drainit's (which blocks every signal).
    assert_eq!(
        scratch.read("mask").split_whitespace().nth(1),
        Some("0000000000000000"),
        "the hook's blocked signals"
    );
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "exited");
    assert_eq!(r["orphans_reaped"], 0, "the hook is no orphan: {r}");
}

#[test]
fn a_hanging_hook_is_killed_at_the_hook_timeout_and_the_signal_goes_out() {
    let scratch = Scratch::new("hook-hang");
    // The hook leaves a second process in its group: both must go.
    let hook = in_dir(&scratch, "sleep 7301 & echo $! > \"$D/bg\"; sleep 7302");
    let mut d = start(
        &scratch,
        &strings(&[
            "--stop-exec",
            &hook,
            "--hook-timeout",
            "1s",
            "--grace",
            "30s",
        ]),
        STUBBORN,
    );
    let sent = Instant::now();
    d.signal(libc::SIGTERM);
    wait_for("the hook to run", PATIENCE, || {
        (with_marker(&d, "sleep 730").len() >= 2).then_some(())
    });
    scratch.wait_file("term");
    let after = sent.elapsed();
    // Without the hook timeout the hook would get 10 s (the default).
    assert!(after >= Duration::from_secs(1), "TERM after {after:?}");
    assert!(after < Duration::from_secs(4), "TERM after {after:?}");
    assert_clean(&d, "sleep 730");
    assert!(d.try_code().is_none(), "drainit still supervises the app");
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert_eq!(scratch.read("term").lines().count(), 1);
    assert!(d.stderr().contains("did not answer in time"));
}

#[test]
fn a_drain_command_that_turns_ready_after_three_runs_drains() {
    let scratch = Scratch::new("drain-exec");
    let probe = in_dir(
        &scratch,
        "echo run >> \"$D/runs\"; [ $(wc -l < \"$D/runs\") -ge 3 ]",
    );
    // The app never sees TERM and has no process of its own to leave
    // behind: any orphan counted would be a drain run taken for one.
    let mut d = start(
        &scratch,
        &strings(&[
            "--drain-exec",
            &probe,
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "100ms",
            "--grace",
            "30s",
            "--rewrite",
            "TERM:0",
        ]),
        "touch \"$D/ready\"; exec sleep 1000",
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "drained", "{r}");
    // Ready sticks: the command is not run again once it said ready.
    assert_eq!(scratch.read("runs").lines().count(), 3);
    assert_eq!(r["drain_polls"], 3);
    assert_eq!(r["sources"][0]["kind"], "exec");
    assert_eq!(r["sources"][0]["last"], "ready");
    assert_eq!(r["orphans_reaped"], 0, "{r}");
}

#[test]
fn a_hanging_drain_command_is_killed_each_time_never_piles_up_and_the_deadline_holds() {
    let scratch = Scratch::new("drain-hang");
    let probe = in_dir(
        &scratch,
        "echo run >> \"$D/runs\"; sleep 7401 & sleep 7402; wait",
    );
    let mut d = start(
        &scratch,
        &strings(&[
            "--drain-exec",
            &probe,
            "--drain-interval",
            "50ms",
            "--drain-timeout",
            "300ms",
            "--grace",
            "3s",
        ]),
        STUBBORN,
    );
    d.signal(libc::SIGTERM);
    // While it drains, never more than one run at a time.
    let mut most = 0;
    while d.try_code().is_none() {
        // One `sleep 7402` per run (the shell's own command line names it
        // too, hence the comm check).
        let live: Vec<_> = with_marker(&d, "sleep 7402")
            .into_iter()
            .filter(|(pid, state)| {
                *state != 'Z'
                    && !kill_pending(*pid)
                    && fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "sleep")
            })
            .collect();
        most = most.max(live.len());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    assert_eq!(
        most, 1,
        "{most} runs at once: they piled up (or none was seen)"
    );
    let runs = scratch.read("runs").lines().count();
    // 3 s / 300 ms: about 10 runs; on a loaded machine fewer, never 1.
    assert!((3..=11).contains(&runs), "{runs} runs");
    let stuck = d
        .stderr()
        .lines()
        .filter(|l| l.contains("drain source exec") && l.contains("no answer"))
        .count();
    assert_eq!(
        stuck,
        1,
        "a source stuck hanging is logged once: {}",
        d.stderr()
    );
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "deadline");
    assert!(
        r["sources"][0]["last"]
            .as_str()
            .unwrap()
            .starts_with("no answer: killed after"),
        "{r}"
    );
    // The deadline's own precision, on drainit's own figure.
    let exit_ms = r["stop_to_exit_ms"].as_u64().unwrap();
    assert!((3000..3300).contains(&exit_ms), "stop_to_exit {exit_ms} ms");
}

#[test]
fn a_drain_file_the_app_creates_drains_with_0() {
    let scratch = Scratch::new("drain-file");
    let child =
        "trap 'touch \"$D/drained\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
    let file = scratch.file("drained");
    let mut d = start(
        &scratch,
        &strings(&[
            "--drain-file",
            path_str(&file),
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "100ms",
            "--grace",
            "30s",
        ]),
        child,
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "drained", "{r}");
    assert_eq!(r["sources"][0]["kind"], "file");
    assert_eq!(r["sources"][0]["target"], path_str(&file));
}

#[test]
fn a_drain_file_left_from_before_the_stop_does_not_drain() {
    let scratch = Scratch::new("stale-file");
    scratch.touch("drained");
    let file = scratch.file("drained");
    // An mtime clearly before the stop (the filesystem clock is coarse).
    let old = libc::timespec {
        tv_sec: 1_000_000_000,
        tv_nsec: 0,
    };
    let c = std::ffi::CString::new(path_str(&file)).unwrap();
    // SAFETY: a valid path and two valid timespecs.
    unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [old, old].as_ptr(), 0) };
    let mut d = start(
        &scratch,
        &strings(&[
            "--drain-file",
            path_str(&file),
            "--drain-interval",
            "100ms",
            "--grace",
            "1500ms",
        ]),
        STUBBORN,
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 124, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["sources"][0]["last"], "not ready: older than the stop");
}

#[test]
fn every_source_must_be_ready_and_each_stays_ready() {
    let scratch = Scratch::new("several");
    // The URL answers ready once, then refuses to say so: it stays ready.
    let server = Server::start(|_, n| {
        if n == 0 {
            json(200, "{\"readyForTermination\":true}")
        } else {
            json(503, "{\"readyForTermination\":false}")
        }
    });
    let url = server.url("/drain");
    let file = scratch.file("drained");
    let port = free_port();
    let mut d = start(
        &scratch,
        &strings(&[
            "--drain-url",
            &url,
            "--drain-file",
            path_str(&file),
            "--drain-exec",
            "true",
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "100ms",
            "--grace",
            "30s",
            "--serve",
            &format!("127.0.0.1:{port}"),
        ]),
        STUBBORN,
    );
    d.signal(libc::SIGTERM);
    // Rounds completed (the listener's count, not a time that a loaded
    // machine may not fill) in which the URL and the command had said
    // ready and only the file was missing: each could have drained.
    wait_for("three rounds with the file alone missing", PATIENCE, || {
        let (_, body) = http_get(port, "/status")?;
        let status: Value = serde_json::from_str(&body).ok()?;
        let ready: Vec<bool> = status["sources"]
            .as_array()?
            .iter()
            .map(|s| s["ready"] == true)
            .collect();
        (ready == [true, true, false] && status["drain_polls"].as_u64()? >= 3).then_some(())
    });
    assert!(
        d.try_code().is_none(),
        "drained before the file: {}",
        d.stderr()
    );
    scratch.touch("drained");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "drained", "{r}");
    assert_eq!(server.count(), 1, "a ready source is not asked again");
    let kinds: Vec<_> = r["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["url", "exec", "file"]);
    assert!(r["sources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["ready"] == true));
}

#[test]
fn hook_and_drain_commands_are_gone_when_the_child_exits() {
    let scratch = Scratch::new("exit-during");
    let hook = "sleep 7501";
    let probe = "sleep 7502";
    // The hook hangs and is killed at the hook timeout; TERM is ignored, so
    // the drain command runs (and hangs) until the app exits by itself.
    let child = "trap '' TERM; touch \"$D/ready\"; \
                 while [ ! -e \"$D/quit\" ]; do sleep 0.05; done; exit 3";
    let mut d = start(
        &scratch,
        &strings(&[
            "--stop-exec",
            hook,
            "--hook-timeout",
            "1s",
            "--drain-exec",
            probe,
            "--drain-timeout",
            "60s",
            "--drain-interval",
            "60s",
            "--grace",
            "120s",
        ]),
        child,
    );
    d.signal(libc::SIGTERM);
    wait_for("the hook to run", PATIENCE, || {
        (!with_marker(&d, hook).is_empty()).then_some(())
    });
    wait_for("the drain command to run", PATIENCE, || {
        (!with_marker(&d, probe).is_empty()).then_some(())
    });
    // The hook was killed at its timeout, reaped, and left no zombie.
    assert_clean(&d, hook);
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 3, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["orphans_reaped"], 0, "commands are not orphans: {r}");
    assert_eq!(r["outcome"], "exited", "{r}");
}

#[test]
fn bad_sources_are_usage_errors_before_the_child_starts() {
    assert_usage_error(&["--stop-exec", ""], &[], "--stop-exec");
    assert_usage_error(&["--drain-exec", "sh -c 'exit 0"], &[], "unclosed quote");
    assert_usage_error(
        &["--drain-exec", "no-such-program-drainit -x"],
        &[],
        "not found",
    );
    assert_usage_error(&["--stop-exec", "/etc/passwd"], &[], "not an executable");
    assert_usage_error(
        &[],
        &[("DRAINIT_DRAIN_EXEC", "true\n'")],
        "DRAINIT_DRAIN_EXEC",
    );
    assert_usage_error(
        &["--drain-file", "/tmp/x", "--drain-file", "/tmp/x"],
        &[],
        "twice",
    );
    assert_usage_error(
        &[
            "--stop-exec",
            "true",
            "--grace",
            "5s",
            "--hook-timeout",
            "5s",
        ],
        &[],
        "--hook-timeout",
    );
}

/// drainit draining two workers (`--drain-url` each), polled every 100 ms,
/// the app `STUBBORN`.
fn two_workers(scratch: &Scratch, a: &Server, b: &Server) -> Drainit {
    start(
        scratch,
        &strings(&[
            "--drain-url",
            &a.url("/drain"),
            "--drain-url",
            &b.url("/drain"),
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "100ms",
            "--grace",
            "30s",
        ]),
        STUBBORN,
    )
}

#[test]
fn two_drain_urls_drain_only_when_both_have_been_ready() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let scratch = Scratch::new("two-urls");
    let early = Server::start(|_, _| json(200, "{\"readyForTermination\":true}"));
    let late_ready = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&late_ready);
    let late = Server::start(move |_, _| {
        json(
            200,
            &format!(
                "{{\"readyForTermination\":{}}}",
                flag.load(Ordering::SeqCst)
            ),
        )
    });
    let mut d = two_workers(&scratch, &early, &late);
    d.signal(libc::SIGTERM);
    wait_for("three rounds on the late worker", PATIENCE, || {
        (late.count() >= 3).then_some(())
    });
    assert!(d.try_code().is_none(), "drained with one worker busy");
    late_ready.store(true, Ordering::SeqCst);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let r = exit_report(scratch.file("report.json"));
    assert_eq!(r["outcome"], "drained", "{r}");
    assert_eq!(early.count(), 1, "the ready worker is not asked again");
    assert!(r["drain_polls"].as_u64().unwrap() >= 4, "{r}");
    assert!(r["sources"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["ready"] == true));
}

/// Live runs of a command: not a zombie, no SIGKILL on its way.
fn live_runs(d: &Drainit, marker: &str) -> Vec<i32> {
    with_marker(d, marker)
        .into_iter()
        .filter(|(pid, state)| *state != 'Z' && !kill_pending(*pid))
        .map(|(pid, _)| pid)
        .collect()
}

#[test]
fn a_protection_run_ends_when_the_stop_begins() {
    let scratch = Scratch::new("protect-stop");
    let agent = Server::start(|_, _| json(200, "{\"protection\":{\"ProtectionEnabled\":true}}"));
    // The protection poll runs it at once and would let it run 60 s; the
    // stop's drain rounds run the same command.
    let probe = "sleep 7601";
    let mut d = drainit(strings(&[
        "--ecs-protect",
        "--drain-exec",
        probe,
        "--drain-timeout",
        "60s",
        "--protect-interval",
        "60s",
        "--drain-interval",
        "60s",
        "--grace",
        "90s",
    ]))
    .with_args(sh(&scratch, STUBBORN))
    .env("ECS_AGENT_URI", &agent.url("/api/abc"))
    .start();
    scratch.wait_file("ready");
    let first = wait_for("the protection run", PATIENCE, || {
        live_runs(&d, probe).first().copied()
    });
    d.signal(libc::SIGTERM);
    scratch.wait_file("term");
    wait_for("the protection run to end with the stop", PATIENCE, || {
        (!live_runs(&d, probe).contains(&first)).then_some(())
    });
    // The drain round's run, alone: the two never overlap.
    wait_for("the drain round's own run", PATIENCE, || {
        (live_runs(&d, probe).len() == 1).then_some(())
    });
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
}

#[test]
fn task_protection_follows_a_drain_command() {
    let scratch = Scratch::new("protect-exec");
    let agent = Server::start(|_, _| json(200, "{\"protection\":{\"ProtectionEnabled\":true}}"));
    let probe = in_dir(&scratch, "test -e \"$D/idle\"");
    let mut d = drainit(strings(&[
        "--ecs-protect",
        "--drain-exec",
        &probe,
        "--protect-interval",
        "1s",
        "--grace",
        "5s",
    ]))
    .with_args(sh(&scratch, STUBBORN))
    .env("ECS_AGENT_URI", &agent.url("/api/abc"))
    .start();
    scratch.wait_file("ready");
    let puts = || -> Vec<Value> {
        agent
            .seen()
            .iter()
            .filter(|s| s.method == "PUT")
            .map(|s| serde_json::from_str(&s.body).unwrap())
            .collect()
    };
    wait_for("protection on", PATIENCE, || {
        (!puts().is_empty()).then_some(())
    });
    assert_eq!(puts()[0]["ProtectionEnabled"], true);
    scratch.touch("idle");
    wait_for("protection off", PATIENCE, || {
        (puts().len() >= 2).then_some(())
    });
    assert_eq!(puts()[1]["ProtectionEnabled"], false);
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
}

/// Live processes anywhere on the machine whose command line contains
/// `marker` (zombies count: someone still has to reap them).
fn host_processes_with(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let text: String = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(marker) || (proc_state(pid) == Some('Z') && parent_of(pid) == Some(me))
        })
        .collect()
}

#[test]
fn no_command_outlives_drainit_when_it_is_not_pid1() {
    let scratch = Scratch::new("outlive");
    // Not PID 1: nothing ends the commands for drainit when it exits. The
    // marker names this test run, so another run cannot disturb the check.
    let marker = format!("sleep 1{}.", std::process::id());
    let probe = format!("sh -c '{marker}1 & {marker}2'");
    let child = "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
                 while [ ! -e \"$D/quit\" ]; do sleep 0.05; done; exit 0";
    let mut args = strings(&[
        "--drain-exec",
        &probe,
        "--drain-timeout",
        "60s",
        "--grace",
        "120s",
    ]);
    args.extend(sh(&scratch, child));
    let mut d = drainit(args).not_pid1().start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    scratch.wait_file("term");
    wait_for("the drain command to run", PATIENCE, || {
        (host_processes_with(&marker).len() >= 2).then_some(())
    });
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    wait_for("no command left anywhere", PATIENCE, || {
        host_processes_with(&marker).is_empty().then_some(())
    });
}

#[test]
fn each_worker_has_its_own_progress_in_the_log() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let scratch = Scratch::new("progress");
    let done = Arc::new(AtomicBool::new(false));
    let worker = |active: u32| {
        let done = Arc::clone(&done);
        Server::start(move |_, _| {
            let ready = done.load(Ordering::SeqCst);
            json(
                200,
                &format!("{{\"readyForTermination\":{ready},\"activeExecutions\":{active}}}"),
            )
        })
    };
    let (a, b) = (worker(3), worker(5));
    let mut d = two_workers(&scratch, &a, &b);
    d.signal(libc::SIGTERM);
    wait_for("five rounds", PATIENCE, || (b.count() >= 5).then_some(()));
    done.store(true, Ordering::SeqCst);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    // Each worker's count is logged when it first appears, not each round:
    // one line per change of a source, its numbers in it.
    let lines = d
        .stderr()
        .lines()
        .filter(|l| l.contains("drain source url") && l.contains("activeExecutions="))
        .count();
    assert_eq!(lines, 2, "{}", d.stderr());
}

#[test]
fn url_and_command_hooks_fire_together_and_the_signal_waits_for_both() {
    use support::server::Reply;
    let scratch = Scratch::new("both-hooks");
    // The URL hook answers only after the command hook has written its file:
    // the two run at the same time, and TERM waits for the slower one.
    let marker = scratch.file("cmd-hook");
    let url_done = scratch.file("url-hook");
    let server = Server::start(move |_, _| {
        wait_for("the command hook", PATIENCE, || {
            marker.exists().then_some(())
        });
        fs::write(&url_done, b"answered").unwrap();
        Reply::Send(200, "text/plain", String::new())
    });
    let hook = in_dir(&scratch, "touch \"$D/cmd-hook\"");
    let child = "trap 'cat \"$D/url-hook\" > \"$D/seen\"; exit 0' TERM; touch \"$D/ready\"; \
                 while :; do sleep 0.05; done";
    let mut d = start(
        &scratch,
        &strings(&[
            "--stop-url",
            &server.url("/shutdown"),
            "--stop-exec",
            &hook,
            "--grace",
            "30s",
        ]),
        child,
    );
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert_eq!(
        scratch.read("seen"),
        "answered",
        "TERM came after both hooks"
    );
    assert_eq!(server.count(), 1);
}

/// drainit's threads (their ids), from /proc.
fn thread_ids(pid: i32) -> Vec<i32> {
    let mut ids: Vec<i32> = fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    ids.sort();
    ids
}

/// With protection and no URL source, the thread that sends protection's
/// request to the agent is started before the child too: no thread is
/// born while the child runs (one would open the C library's reserved
/// signals for a moment).
#[test]
fn protection_with_only_a_drain_command_starts_no_thread_while_the_child_runs() {
    let scratch = Scratch::new("protect-threads");
    let agent = Server::start(|_, _| json(200, "{\"protection\":{\"ProtectionEnabled\":true}}"));
    // The first poll's run waits for the test to have counted the threads.
    let probe = in_dir(
        &scratch,
        "while [ ! -e \"$D/go\" ]; do sleep 0.05; done; test -e \"$D/idle\"",
    );
    let mut d = drainit(strings(&[
        "--ecs-protect",
        "--drain-exec",
        &probe,
        "--protect-interval",
        "5s",
        "--grace",
        "5s",
    ]))
    .with_args(sh(&scratch, STUBBORN))
    .env("ECS_AGENT_URI", &agent.url("/api/abc"))
    .start();
    scratch.wait_file("ready");
    let at_start = thread_ids(d.pid());
    scratch.touch("go");
    let puts = || agent.seen().iter().filter(|s| s.method == "PUT").count();
    wait_for("protection on", PATIENCE, || (puts() >= 1).then_some(()));
    let later = thread_ids(d.pid());
    let born: Vec<_> = later.iter().filter(|t| !at_start.contains(t)).collect();
    assert!(
        born.is_empty(),
        "threads born while the child ran: {born:?} (at start {at_start:?})"
    );
    scratch.touch("quit");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
}
