//! Edge cases of the stop timeline and of drainit's own process, each tried
//! as an operator would: a pre-stop delay that reaches the deadline, stop
//! signals repeated before the app got its own, a SIGKILL that fails, a log
//! reader that went away, a panic of the event loop, `--orphan-grace` as
//! PID 1, and help text into a closed pipe.

mod support;

use std::os::fd::FromRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// Records every TERM/INT/PIPE it gets, keeps running, exits 0 on USR1.
const RECORDER: &str = "trap 'echo TERM >> \"$D/term\"' TERM; trap 'echo INT >> \"$D/int\"' INT; \
                        trap 'echo PIPE >> \"$D/pipe\"' PIPE; trap 'exit 0' USR1; \
                        touch \"$D/ready\"; while :; do sleep 0.05; done";

/// Waits until drainit has taken `signo` off its pending set.
fn taken(d: &Drainit, signo: i32) {
    wait_for("drainit to take the signal", PATIENCE, || {
        let pending = status_field(d.pid(), "ShdPnd")?;
        let own = status_field(d.pid(), "SigPnd")?;
        (!sigset_has(&pending, signo) && !sigset_has(&own, signo)).then_some(())
    });
}

#[test]
fn a_pre_stop_delay_that_reaches_the_deadline_is_a_usage_error() {
    assert_usage_error(
        &["--pre-stop-delay", "2s", "--grace", "1s"],
        &[],
        "--pre-stop-delay",
    );
    assert_usage_error(&["--pre-stop-delay", "1s", "--grace", "1s"], &[], "--grace");
    // 30 s against the default 25 s grace a delay switches on.
    assert_usage_error(
        &[],
        &[("DRAINIT_PRE_STOP_DELAY", "30s")],
        "--pre-stop-delay",
    );
    // No deadline, no conflict: the child starts.
    let scratch = Scratch::new("delay-no-grace");
    let (code, stderr) = drainit(["--pre-stop-delay", "30s", "--grace", "none"])
        .with_args(sh(&scratch, "exit 5"))
        .not_pid1()
        .run();
    assert_eq!(code, 5, "{stderr}");
}

#[test]
fn stop_signals_repeated_during_the_delay_reach_the_app_once_after_it() {
    let scratch = Scratch::new("held");
    // A 10 s delay: three signal round trips must fit inside it on a
    // loaded machine.
    let mut d = drainit(["--pre-stop-delay", "10s", "--grace", "40s"])
        .with_args(sh(&scratch, RECORDER))
        .start();
    scratch.wait_file("ready");
    let first = Instant::now();
    d.signal(libc::SIGTERM);
    taken(&d, libc::SIGTERM);
    // A second TERM and an operator's Ctrl-C while the delay runs.
    d.signal(libc::SIGTERM);
    taken(&d, libc::SIGTERM);
    d.signal(libc::SIGINT);
    taken(&d, libc::SIGINT);
    scratch.wait_file("term");
    let after = first.elapsed();
    assert!(
        after >= Duration::from_secs(10),
        "the app got TERM {after:?} after the first, inside the 10 s delay"
    );
    // Once the app has its stop signal, a repeat is forwarded again.
    d.signal(libc::SIGTERM);
    wait_for("the repeated TERM", PATIENCE, || {
        (scratch.read("term").lines().count() >= 2).then_some(())
    });
    d.signal(libc::SIGUSR1);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert_eq!(
        scratch.read("term").lines().count(),
        2,
        "TERM once, then the repeat"
    );
    assert_eq!(
        scratch.read("int"),
        "",
        "the held INT never reached the app"
    );
}

#[test]
fn stop_signals_repeated_while_the_hook_hangs_are_held() {
    use support::server::{Reply, Server};
    let scratch = Scratch::new("held-hook");
    let server = Server::start(|_, _| Reply::Hang);
    let hook = server.url("/shutdown");
    // The hook gets half of the 20 s left: TERM at about 10 s.
    let mut d = drainit([
        "--stop-url",
        &hook,
        "--drain-interval",
        "30s",
        "--grace",
        "20s",
    ])
    .with_args(sh(&scratch, RECORDER))
    .start();
    scratch.wait_file("ready");
    let first = Instant::now();
    d.signal(libc::SIGTERM);
    wait_for("the hook request", PATIENCE, || {
        (server.count() == 1).then_some(())
    });
    d.signal(libc::SIGTERM);
    taken(&d, libc::SIGTERM);
    scratch.wait_file("term");
    let after = first.elapsed();
    assert!(
        after >= Duration::from_secs(10),
        "TERM {after:?} after the stop, before the hook's time was up"
    );
    d.signal(libc::SIGUSR1);
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert_eq!(scratch.read("term").lines().count(), 1);
}

/// A child that no unprivileged drainit can signal: a setuid-root helper
/// that makes every uid root, notes that it runs, and sleeps.
fn unkillable_helper(scratch: &Scratch) -> String {
    let source = scratch.file("helper.c");
    let binary = scratch.file("helper");
    std::fs::write(
        &source,
        "#define _GNU_SOURCE\n#include <unistd.h>\n#include <fcntl.h>\n#include <signal.h>\n\
         int main(int c, char **v) { setresgid(0,0,0); setresuid(0,0,0);\n\
         signal(SIGTERM, SIG_IGN);\n\
         if (c > 2 && fork() == 0) { setresgid(65534,65534,65534); setresuid(65534,65534,65534);\n\
           for (;;) pause(); }\n\
         close(open(v[1], O_CREAT|O_WRONLY, 0644));\n\
         for (;;) pause(); }\n",
    )
    .unwrap();
    let status = Command::new("cc")
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .status()
        .expect("cc (the Rust toolchain's linker) builds the helper");
    assert!(status.success());
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::set_permissions(&scratch.path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path_str(&binary).to_string()
}

/// drainit as uid 65534 (through setpriv, which execs it in place, so it
/// stays PID 1 of the namespace), with the unkillable helper as its child.
fn unprivileged_drainit(scratch: &Scratch, pid1: bool) -> Drainit {
    unprivileged_drainit_with(scratch, pid1, &[], &[])
}

/// As above; `more` goes to the helper (any word: it also forks a member
/// of its group that drainit can kill).
fn unprivileged_drainit_with(
    scratch: &Scratch,
    pid1: bool,
    more: &[&str],
    env: &[(&str, &str)],
) -> Drainit {
    let helper = unkillable_helper(scratch);
    let ready = scratch.file("ready");
    let mut args = vec![
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        DRAINIT,
        "--grace",
        "1s",
        "--",
        &helper,
        path_str(&ready),
    ];
    args.extend_from_slice(more);
    let mut launch = drainit(args).binary("/usr/bin/setpriv");
    for (key, value) in env {
        launch = launch.env(key, value);
    }
    if !pid1 {
        launch = launch.not_pid1();
    }
    let d = launch.start();
    scratch.wait_file("ready");
    d
}

fn kill_helper(d: &Drainit) {
    for pid in children_of(d.pid()) {
        // SAFETY: test clean-up of the helper, as root.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

#[test]
fn a_failed_escalation_as_pid1_exits_at_once_with_the_deadline_code() {
    let scratch = Scratch::new("eperm-pid1");
    let mut d = unprivileged_drainit(&scratch, true);
    d.signal(libc::SIGTERM);
    // Grace is 1 s: drainit must not hang on a child it cannot kill.
    let status = d.wait_status(PATIENCE);
    let stderr = d.stderr();
    kill_helper(&d);
    assert_eq!(status.code(), Some(124), "{stderr}");
    assert!(stderr.contains("ERROR"), "logged at error level: {stderr}");
}

#[test]
fn a_kill_that_reaches_the_group_but_not_the_child_is_a_failed_escalation() {
    // kill(-pgid) succeeds when any member was signalled: here a member
    // that dropped to drainit's uid. The child itself stays out of reach,
    // and drainit must not wait for it forever.
    let scratch = Scratch::new("eperm-partial");
    let mut d = unprivileged_drainit_with(&scratch, true, &["partial"], &[]);
    let sent = Instant::now();
    d.signal(libc::SIGTERM);
    let status = d.wait_status(PATIENCE);
    let took = sent.elapsed();
    let stderr = d.stderr();
    kill_helper(&d);
    assert_eq!(status.code(), Some(124), "{stderr}");
    // At the 1 s deadline, not by the 5 s kill watchdog (at 6 s).
    assert!(
        took < Duration::from_millis(4_500),
        "exited {took:?} after TERM: {stderr}"
    );
}

#[test]
fn a_failed_escalation_not_as_pid1_waits_for_the_child_then_exits_with_the_deadline_code() {
    let scratch = Scratch::new("eperm");
    // drainit runs as uid 65534: the report file must be writable for it.
    let report = scratch.file("report.json");
    std::fs::write(&report, "").unwrap();
    std::fs::set_permissions(&report, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut d = unprivileged_drainit_with(
        &scratch,
        false,
        &[],
        &[("DRAINIT_EXIT_REPORT", path_str(&report))],
    );
    d.signal(libc::SIGTERM);
    wait_for("the error about the failed kill", PATIENCE, || {
        d.stderr().contains("cannot kill").then_some(())
    });
    kill_helper(&d);
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(124), "{}", d.stderr());
    // Only a drainit that waited saw the child end (after the 1 s deadline).
    let report = exit_report(scratch.file("report.json"));
    let waited = report["stop_to_exit_ms"].as_u64();
    assert!(
        waited.is_some_and(|ms| ms >= 1_000),
        "the child's end was not seen: {report}"
    );
}

#[test]
fn drainits_own_sigpipe_never_reaches_the_app() {
    let scratch = Scratch::new("own-sigpipe");
    // drainit's stderr is a pipe whose reader is gone: every log line
    // raises SIGPIPE in drainit. Debug logging writes a line per signal.
    let port = free_port();
    let serve = format!("127.0.0.1:{port}");
    let mut d = drainit(["-vvv", "--grace", "30s", "--serve", &serve])
        .with_args(sh(&scratch, RECORDER))
        .before_exec(|| {
            let mut fds = [0; 2];
            // SAFETY: test-only libc calls between fork and exec.
            unsafe {
                libc::pipe(fds.as_mut_ptr());
                libc::close(fds[0]);
                libc::dup2(fds[1], 2);
                libc::close(fds[1]);
            }
            Ok(())
        })
        .start();
    scratch.wait_file("ready");
    // drainit's write(2) calls, counted by the kernel (failed ones too):
    // each write to a pipe without a reader raises SIGPIPE in the writer.
    let writes = || write_calls(d.pid());
    let before = writes();
    d.signal(libc::SIGTERM);
    scratch.wait_file("term");
    // Repeated lines are folded to one a second: signal until drainit has
    // written (and raised SIGPIPE) at least five times.
    let mut n = 1;
    while writes() - before < 5 && n < 40 {
        n += 1;
        d.signal(libc::SIGINT);
        wait_for("INT to reach the app", PATIENCE, || {
            (scratch.read("int").lines().count() == n - 1).then_some(())
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let written = writes() - before;
    assert!(
        written >= 5,
        "drainit wrote {written} times to its dead stderr: no SIGPIPE to test"
    );
    // Every SIGPIPE of those writes taken by drainit: any forward of one
    // has been counted by now (the count a loaded machine cannot delay
    // past this point, where the app's own trap may lag behind).
    taken(&d, libc::SIGPIPE);
    let forwarded = |name: &str| -> Option<u64> {
        let (_, body) = http_get(port, "/status")?;
        let status: serde_json::Value = serde_json::from_str(&body).ok()?;
        Some(status["signals_forwarded"][name].as_u64().unwrap_or(0))
    };
    let pipes = wait_for("/status", PATIENCE, || forwarded("SIGPIPE"));
    assert_eq!(pipes, 0, "drainit forwarded its own SIGPIPE");
    // The eyes of this test: a SIGPIPE from outside is forwarded, counted
    // and seen by the app.
    d.signal(libc::SIGPIPE);
    scratch.wait_file("pipe");
    assert_eq!(wait_for("/status", PATIENCE, || forwarded("SIGPIPE")), 1);
    d.signal(libc::SIGUSR1);
    assert_eq!(d.wait_code(), 0);
    assert_eq!(
        scratch.read("pipe"),
        "PIPE\n",
        "the app got drainit's SIGPIPE"
    );
}

/// drainit `--orphan-grace 60s` running `child`, in a fresh PID namespace
/// whose /proc is hidden under an empty tmpfs. `as_pid1`: the mounting
/// shell execs drainit (PID 1) rather than staying PID 1 itself.
fn orphan_grace_without_proc(
    scratch: &Scratch,
    child: &str,
    as_pid1: bool,
) -> (i32, String, Duration) {
    let exec = if as_pid1 { "exec " } else { "" };
    let mut args = vec![
        "-c".to_string(),
        format!("mount -t tmpfs none /proc && {exec}\"$0\" \"$@\""),
        DRAINIT.to_string(),
        "--orphan-grace".to_string(),
        "60s".to_string(),
    ];
    args.extend(sh(scratch, child));
    let start = Instant::now();
    let (code, stderr) = drainit(Vec::<String>::new())
        .binary("/bin/sh")
        .with_args(args)
        .run();
    (code, stderr, start.elapsed())
}

#[test]
fn orphan_grace_as_pid1_needs_no_proc_children_file() {
    // As PID 1, drainit reaches what is left with kill(-1). Here /proc is
    // hidden under an empty tmpfs inside the namespace (as on kernels
    // without CONFIG_PROC_CHILDREN): the orphan must still get its TERM.
    let scratch = Scratch::new("orphans");
    let orphan = "trap 'touch \"$D/orphan-term\"; exit 0' TERM; touch \"$D/orphan-ready\"; \
                  while :; do sleep 0.05; done";
    let child = format!(
        "export D; sh -c '{}' & while [ ! -e \"$D/orphan-ready\" ]; do sleep 0.05; done; exit 3",
        orphan.replace('\'', "'\\''")
    );
    let (code, stderr, took) = orphan_grace_without_proc(&scratch, &child, true);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        scratch.file("orphan-term").exists(),
        "the orphan never got SIGTERM: {stderr}"
    );
    assert!(took < Duration::from_secs(30), "{stderr}");
}

#[test]
fn help_version_and_license_into_a_closed_pipe_exit_quietly() {
    for flag in ["--help", "--version", "--license"] {
        let mut fds = [0; 2];
        // SAFETY: a fresh pipe; its reader is closed at once and the writer
        // is owned by the Stdio below.
        let writer = unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            libc::close(fds[0]);
            std::os::fd::OwnedFd::from_raw_fd(fds[1])
        };
        let mut command = Command::new(DRAINIT);
        command
            .arg(flag)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped());
        // SAFETY: resets SIGPIPE to its default, as a shell's child has it.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                Ok(())
            });
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}: {out:?}");
        assert!(out.stderr.is_empty(), "{flag}: {out:?}");
    }
}

/// drainit built with the test hooks (static), the fault points `fault`
/// set, `flags`, and an app that sets `traps`, says it is ready and sleeps;
/// returned once the app is ready.
fn with_fault(scratch: &Scratch, fault: &str, flags: &[&str], traps: &str) -> Drainit {
    let app = format!("{traps} touch \"$D/ready\"; while :; do sleep 0.05; done");
    let d = drainit(flags)
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", fault)
        .with_args(sh(scratch, &app))
        .start();
    scratch.wait_file("ready");
    d
}

#[test]
fn a_panic_of_the_event_loop_falls_back_to_forwarding_and_reaping() {
    let scratch = Scratch::new("loop-panic");
    let traps = "trap 'echo HUP >> \"$D/hup\"' HUP; trap 'exit 7' USR1;";
    let mut d = with_fault(&scratch, "event_loop", &["--grace", "30s"], traps);
    // The first signal the loop handles trips the fault point.
    d.signal(libc::SIGHUP);
    wait_for("the fallback loop", PATIENCE, || {
        d.stderr().contains("event loop failed").then_some(())
    });
    // Signals still reach the app, and drainit outlives the panic.
    d.signal(libc::SIGHUP);
    wait_for("HUP through the fallback", PATIENCE, || {
        (!scratch.read("hup").is_empty()).then_some(())
    });
    assert_eq!(d.try_code(), None);
    d.signal(libc::SIGUSR1);
    // (wait_status: the injected panic is in stderr on purpose.)
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
}

#[test]
fn a_panic_of_the_event_loop_keeps_the_signal_it_was_handling() {
    // TERM trips the fault point before the timeline saw it: the fallback
    // must still deliver it (at once: the 20 s delay died with the loop).
    let scratch = Scratch::new("loop-panic-term");
    let mut d = with_fault(
        &scratch,
        "event_loop",
        &["--pre-stop-delay", "20s", "--grace", "30s"],
        "trap 'exit 9' TERM;",
    );
    let sent = Instant::now();
    d.signal(libc::SIGTERM);
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(9), "{}", d.stderr());
    assert!(
        sent.elapsed() < Duration::from_secs(19),
        "TERM reached the app only after {:?}",
        sent.elapsed()
    );
}

/// TERM trips a fault point, and the app, which ignores it, must still be
/// killed at the 2 s deadline: the operator's promise is an exit before
/// the platform's own SIGKILL. `event_loop`: the loop panics, the fallback
/// forwards TERM. `core`: the core panics on every signal it handles, the
/// fresh core of the fallback fails on the same TERM, so the last resort
/// (no core at all) must deliver it.
#[test]
fn a_panic_of_the_loop_or_of_every_core_keeps_the_deadline() {
    for fault in ["event_loop", "core"] {
        let scratch = Scratch::new(&format!("panic-deadline-{fault}"));
        let report = scratch.file("report.json");
        let mut d = with_fault(
            &scratch,
            fault,
            &["--grace", "2s", "--exit-report", path_str(&report)],
            "trap 'touch \"$D/term\"' TERM;",
        );
        let sent = Instant::now();
        d.signal(libc::SIGTERM);
        scratch.wait_file("term");
        let status = d.wait_status(PATIENCE);
        let took = sent.elapsed();
        assert_eq!(status.code(), Some(124), "{fault}: {}", d.stderr());
        // At the deadline, not before it (the deadline is measured from
        // before TERM); above it, a loaded machine's tolerance.
        let window = Duration::from_millis(1950)..Duration::from_secs(10);
        assert!(window.contains(&took), "{fault}: killed after {took:?}");
        let r = exit_report(&report);
        assert_eq!(r["outcome"], "deadline", "{fault}: {r}");
        assert_eq!(r["stop_signal"], "SIGTERM", "{fault}: {r}");
    }
}

#[test]
fn a_panic_of_the_core_once_leaves_the_stop_to_the_fallback_core() {
    // The core fails only on HUP's handling in the first core (the fault
    // point is the loop's, before the core): the fallback's core then runs
    // the whole stop, the exit report included.
    let scratch = Scratch::new("core-panic-once");
    let report = scratch.file("report.json");
    let mut d = with_fault(
        &scratch,
        "event_loop",
        &["--grace", "30s", "--exit-report", path_str(&report)],
        "trap 'touch \"$D/hup\"' HUP; trap 'exit 5' TERM;",
    );
    d.signal(libc::SIGHUP);
    scratch.wait_file("hup");
    d.signal(libc::SIGTERM);
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(5), "{}", d.stderr());
    let r: serde_json::Value = exit_report(&report);
    assert_eq!(r["stop_trigger"], "signal", "{r}");
    assert_eq!(r["stop_signal"], "SIGTERM", "{r}");
    assert_eq!(r["child_status"]["exited"], 5, "{r}");
    assert!(
        r["stop_to_exit_ms"].is_u64(),
        "the fallback's core timed the stop: {r}"
    );
}

#[test]
fn the_last_resort_keeps_the_code_of_a_child_that_exits_by_itself_as_the_kill_goes_out() {
    // The core fails on TERM twice, so the last resort keeps the 1 s
    // deadline. At the deadline it stands at a gate just before its
    // SIGKILL; the child exits by itself (code 7) meanwhile and is still
    // unreaped when the kill goes out. The timeline keeps the child's own
    // code in that case (`core::rules::child_outcome`); so must the last
    // resort: 7, not the deadline's 124.
    let scratch = Scratch::new("last-resort-own-code");
    let report = scratch.file("report.json");
    let gate = scratch.file("gate");
    let mut d = drainit(["--grace", "1s", "--exit-report", path_str(&report)])
        .binary(&built(Build::GlibcFaults))
        .env("DRAINIT_TEST_FAULT", "core,last_resort_kill=gate")
        .env("DRAINIT_TEST_GATE", path_str(&gate))
        .with_args(sh(
            &scratch,
            "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
             while [ ! -e \"$D/go\" ]; do sleep 0.05; done; exit 7",
        ))
        .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    scratch.wait_file("term");
    // The deadline passed: the last resort is about to kill.
    scratch.wait_file("gate.reached");
    let child = d.wait_child();
    scratch.touch("go");
    wait_for("the child to exit by itself", PATIENCE, || {
        zombie_children(d.pid()).contains(&child).then_some(())
    });
    scratch.touch("gate");
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
    assert!(
        d.stderr()
            .contains("deadline reached after the event loop failed"),
        "the kill went out: {}",
        d.stderr()
    );
}

#[test]
fn a_panic_in_the_last_resort_restarts_it() {
    // The core fails on HUP twice (the first core and the fallback's): the
    // last resort delivers HUP; its own panic on USR1 restarts it, and it
    // still reaps and ends with the child's status.
    let scratch = Scratch::new("last-resort-panic");
    let mut d = drainit(["--grace", "30s"])
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "core,last_resort")
        .with_args(sh(
            &scratch,
            "trap 'touch \"$D/hup\"' HUP; touch \"$D/ready\"; \
             while [ ! -e \"$D/go\" ]; do sleep 0.05; done; exit 7",
        ))
        .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGHUP);
    scratch.wait_file("hup");
    d.signal(libc::SIGUSR1);
    wait_for("the last resort's panic", PATIENCE, || {
        d.stderr()
            .contains("fault injected at last_resort")
            .then_some(())
    });
    std::fs::write(scratch.file("go"), "").unwrap();
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
}

#[test]
fn a_panic_inside_the_fallback_restarts_it() {
    let scratch = Scratch::new("fallback-panic");
    let mut d = drainit(["--grace", "30s"])
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "event_loop,fallback")
        .with_args(sh(
            &scratch,
            "trap 'touch \"$D/hup\"' HUP; touch \"$D/ready\"; \
             while [ ! -e \"$D/go\" ]; do sleep 0.05; done; exit 7",
        ))
        .start();
    scratch.wait_file("ready");
    // HUP kills the loop; the fallback still hands it to the app.
    d.signal(libc::SIGHUP);
    scratch.wait_file("hup");
    // USR1 trips the fallback's own fault point.
    d.signal(libc::SIGUSR1);
    wait_for("the fallback's panic", PATIENCE, || {
        d.stderr()
            .contains("fault injected at fallback")
            .then_some(())
    });
    // drainit outlived it, still reaps, and ends with the child's status.
    std::fs::write(scratch.file("go"), "").unwrap();
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
}

#[test]
fn orphan_grace_not_as_pid1_without_proc_says_so() {
    // Not PID 1 (a shell is), /proc hidden: drainit cannot find what is
    // left. It must say so once, and still end with the child's code.
    let scratch = Scratch::new("orphans-no-proc");
    let (code, stderr, took) = orphan_grace_without_proc(&scratch, "exit 3", false);
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(
        stderr.matches("no /proc here").count(),
        1,
        "one warning: {stderr}"
    );
    assert!(took < Duration::from_secs(30), "{stderr}");
}

#[test]
fn a_poll_answered_after_the_child_ended_does_not_count() {
    use support::server::{Reply, Server};
    // The first poll hangs; the child ends at its TERM while the poll is in
    // flight, and an orphan that ignores TERM keeps the run going (orphan
    // grace) until the poll's failure has come back. That late answer is
    // not a poll of this drain: drain_polls stays 0.
    let scratch = Scratch::new("late-poll");
    let server = Server::start(|_, _| Reply::Hang);
    let url = server.url("/drain");
    let report = scratch.file("report.json");
    let orphan = "trap '' TERM; while [ ! -e \"$D/go\" ]; do sleep 0.05; done";
    let child = format!(
        "export D; sh -c '{}' & trap 'exit 3' TERM; touch \"$D/ready\"; \
         while :; do sleep 0.05; done",
        orphan.replace('\'', "'\\''")
    );
    let mut d = drainit([
        "-vvv",
        "--drain-url",
        &url,
        "--drain-interval",
        "1s",
        "--grace",
        "30s",
        "--orphan-grace",
        "30s",
        "--exit-report",
        path_str(&report),
    ])
    .with_args(sh(&scratch, &child))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    wait_for("the poll's late answer", PATIENCE, || {
        let stderr = d.stderr();
        (stderr.contains("main child exited")
            && (stderr.contains("late answer") || stderr.contains("drain endpoint")))
        .then_some(())
    });
    scratch.touch("go");
    assert_eq!(d.wait_code(), 3, "{}", d.stderr());
    let report = exit_report(scratch.file("report.json"));
    assert_eq!(report["drain_polls"], 0, "{report}");
}

/// Silent (verbosity 0), a panic of the loop says nothing on stderr: the
/// log lets no line through, and std's hook, which would write from the
/// loop's thread on a stderr that may be full, is not called. The child
/// still goes on under the fallback, which forwards its stop signal.
#[test]
fn a_panic_of_the_event_loop_is_silent_when_the_log_is() {
    for build in [Build::StaticFaults, Build::GlibcFaults] {
        let scratch = Scratch::new("loop-panic-silent");
        let mut d = drainit(Vec::<String>::new())
            .binary(&built(build))
            .env("DRAINIT_VERBOSE", "0")
            .env("DRAINIT_TEST_FAULT", "event_loop")
            .with_args(sh(
                &scratch,
                "trap 'echo HUP >> \"$D/hup\"' HUP; trap 'exit 7' USR1; \
                 touch \"$D/ready\"; while :; do sleep 0.05; done",
            ))
            .start();
        scratch.wait_file("ready");
        // The first signal the loop handles trips the fault point; the
        // fallback delivers it.
        d.signal(libc::SIGHUP);
        wait_for("HUP through the fallback", PATIENCE, || {
            (!scratch.read("hup").is_empty()).then_some(())
        });
        d.signal(libc::SIGUSR1);
        let status = d.wait_status(PATIENCE);
        assert_eq!(status.code(), Some(7), "{build:?}");
        assert_eq!(d.stderr(), "", "{build:?}: silent, yet stderr has lines");
    }
}

/// `path` of drainit's health listener at `addr`, whole.
fn get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

#[test]
fn the_last_resort_counts_the_signals_it_forwards() {
    // The core fails on every signal (the fallback's too): the last
    // resort forwards HUP, and counts it where the core would, so
    // /metrics says so as it would have.
    let scratch = Scratch::new("last-resort-counts");
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let mut d = drainit(["--grace", "30s", "--serve", &addr])
        .binary(&built(Build::StaticFaults))
        .env("DRAINIT_TEST_FAULT", "core")
        .with_args(sh(
            &scratch,
            "trap 'touch \"$D/hup\"' HUP; trap 'exit 7' USR1; touch \"$D/ready\"; \
             while :; do sleep 0.05; done",
        ))
        .start();
    scratch.wait_file("ready");
    wait_for("the listener", PATIENCE, || get(&addr, "/healthz"));
    d.signal(libc::SIGHUP);
    scratch.wait_file("hup");
    wait_for("HUP counted in /metrics", PATIENCE, || {
        let metrics = get(&addr, "/metrics")?;
        metrics
            .contains("\ndrainit_signals_forwarded_total{signal=\"SIGHUP\"} 1\n")
            .then_some(())
    });
    d.signal(libc::SIGUSR1);
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(7), "{}", d.stderr());
    assert!(
        d.stderr().contains("the fallback failed too"),
        "{}",
        d.stderr()
    );
}
