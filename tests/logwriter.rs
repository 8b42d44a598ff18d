//! The log writer on a stderr the app made non-blocking: every line that
//! arrives is whole (each parses as JSON with `--log-format json`), every
//! line that does not is counted in the exit report's `log_lines_dropped`,
//! and the exit report's own line (longer than a pipe writes at once) is
//! either whole or counted. Both C libraries' builds, as PID 1, with a
//! real pipe, a slow reader and an app that sets O_NONBLOCK on the stderr
//! it shares with drainit; each written both ways: through drainit's own
//! non-blocking description of the pipe (no thread), and by the writer
//! thread (which a regular file or a socket gets; the fault-injection
//! build's `log_writer_thread` switch gives it the pipe).

mod support;

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::*;

/// Orphans the app leaves: each reaped one is a warning line (`-w`), more
/// than the writer's queue holds (1,024 lines) while nobody reads.
const ORPHANS: usize = 1_500;

/// A pipe whose write end already holds as many whole `fill` lines as the
/// kernel takes; both ends blocking.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds we own at once.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let w = write.as_raw_fd();
    // SAFETY: fcntl and write on our own fd.
    unsafe {
        let flags = libc::fcntl(w, libc::F_GETFL);
        libc::fcntl(w, libc::F_SETFL, flags | libc::O_NONBLOCK);
        let line = b"fill\n";
        while libc::write(w, line.as_ptr().cast(), line.len()) > 0 {}
        libc::fcntl(w, libc::F_SETFL, flags);
    }
    (read, write)
}

/// The app: makes the stderr it shares with drainit non-blocking, leaves
/// ORPHANS orphans to drainit, says so, and exits 0 on SIGTERM.
const APP: &str = r#"
import fcntl, os, signal, sys, time
fcntl.fcntl(2, fcntl.F_SETFL, fcntl.fcntl(2, fcntl.F_GETFL) | os.O_NONBLOCK)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
d = sys.argv[1]
for _ in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
open(os.path.join(d, "spawned"), "w").close()
while True:
    time.sleep(1)
"#;

/// The builds and how each writes: without a thread, and with the writer
/// thread.
const SINKS: [(Build, Option<&str>); 4] = [
    (Build::Static, None),
    (Build::Glibc, None),
    (Build::StaticFaults, Some("log_writer_thread=on")),
    (Build::GlibcFaults, Some("log_writer_thread=on")),
];

/// drainit (`build`, `args`) as PID 1 of a new PID namespace, `stderr` its
/// stderr, with `vars` and none of this process's drainit, tini,
/// dumb-init, ECS, Kubernetes or notify variables: the `unshare` process,
/// and drainit's pid from here. No write end of `stderr` stays here.
fn pid1(build: Build, args: Vec<OsString>, stderr: OwnedFd, vars: &[(&str, &str)]) -> (Child, i32) {
    let mut command = Command::new("unshare");
    command
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(built(build))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr));
    for (key, _) in std::env::vars() {
        let theirs = [
            "DRAINIT_",
            "TINI_",
            "ECS_",
            "DUMB_INIT_",
            "KUBERNETES_",
            "NOTIFY_SOCKET",
        ];
        if theirs.iter().any(|p| key.starts_with(p)) {
            command.env_remove(key);
        }
    }
    command.envs(vars.iter().copied());
    let child = command.spawn().expect("unshare");
    let outer = child.id() as i32;
    let pid = wait_for("drainit inside unshare", PATIENCE, || {
        children_of(outer).first().copied()
    });
    (child, pid)
}

/// Appends what the non-blocking `file` holds now to `all`; true when
/// `all` then contains `text`.
fn read_for(file: &mut File, all: &mut Vec<u8>, text: &str) -> bool {
    let mut buf = [0u8; 65536];
    while let Ok(n) = file.read(&mut buf) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(all).contains(text)
}

/// `read_before_exit`: a slow reader from the moment every orphan is made
/// (else nobody reads until drainit has exited: the exit's lines cannot go).
/// `fault`: the fault-injection build's `DRAINIT_TEST_FAULT`.
fn run(build: Build, fault: Option<&str>, read_before_exit: bool) {
    let scratch = Scratch::new("nonblocking-stderr");
    let report = scratch.file("report.json");
    let (read, write) = full_pipe();
    let mut args: Vec<OsString> = [
        "--log-format",
        "json",
        "-v",
        "-w",
        "--emf",
        "--grace",
        "20s",
        "--exit-report",
    ]
    .map(OsString::from)
    .to_vec();
    args.push(report.clone().into());
    // Drain files with long names: the exit report's line outgrows what a
    // pipe takes at once (PIPE_BUF, 4 KiB).
    for i in 0..40 {
        args.push("--drain-file".into());
        args.push(
            scratch
                .file(&format!(
                    "a-drain-file-with-a-name-long-enough-to-make-the-report-line-long-{i:02}"
                ))
                .into(),
        );
    }
    for arg in ["--", "python3", "-c", APP, path_str(&scratch.path)] {
        args.push(arg.into());
    }
    args.push(ORPHANS.to_string().into());
    // Only lines the test can count: a reap line per orphan reaped (the
    // report says how many), the exit report's, and the EMF line.
    let mut vars = vec![("DRAINIT_LOG", "warn,drainit::report=info")];
    if let Some(fault) = fault {
        vars.push(("DRAINIT_TEST_FAULT", fault));
    }
    // The reader sees the end once drainit (and everything it started) is
    // gone: no other write end may stay open here.
    let (mut child, pid) = pid1(build, args, write, &vars);
    // The way it writes is the one asked for: the writer thread or none
    // (it starts before the child does).
    scratch.wait_file("spawned");
    let thread = thread_names(pid).iter().any(|n| n == "drainit-log");
    assert_eq!(thread, fault.is_some(), "{build:?}: the writer thread");
    // Nobody reads until every orphan is made: the queue overflows.
    let gate = Arc::new(AtomicBool::new(read_before_exit));
    // Then a slow reader (512 bytes every 5 ms) until the stop, and a fast
    // one after it.
    let stopping = Arc::new(AtomicBool::new(false));
    let reader = {
        let stopping = Arc::clone(&stopping);
        let gate = Arc::clone(&gate);
        std::thread::spawn(move || {
            while !gate.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut file = File::from(read);
            let mut all = Vec::new();
            let mut buf = [0u8; 512];
            loop {
                match file.read(&mut buf) {
                    Ok(0) | Err(_) => return all,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                }
                if !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    // Half a second (of slow reading): the writer meets EAGAIN many times.
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill to the test's own drainit.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    stopping.store(true, Ordering::Relaxed);
    let until = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "{build:?}: drainit did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    gate.store(true, Ordering::Relaxed);
    let bytes = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{build:?}");

    let file: Value = exit_report(&report);
    let reaped = file["orphans_reaped"].as_u64().unwrap();
    let dropped = file["log_lines_dropped"].as_u64().unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let (mut seen_reaped, mut noted, mut report_line, mut emf_line, mut lines) =
        (0u64, 0u64, false, false, 0);
    for line in text.lines().filter(|l| *l != "fill") {
        lines += 1;
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{build:?}: a line cut or mangled ({e}): {line:?}"));
        if value.get("_aws").is_some() {
            emf_line = true;
            continue;
        }
        let msg = value["msg"].as_str().unwrap_or_default();
        if msg.starts_with("Reaped zombie") {
            seen_reaped += 1;
        } else if msg == "exit report" {
            report_line = true;
            assert_eq!(value["report"]["orphans_reaped"], reaped, "{build:?}");
        } else if let Some(n) = msg.strip_suffix(
            " log lines were dropped before this one: stderr is not being read fast enough",
        ) {
            noted += n.parse::<u64>().unwrap();
        }
    }
    eprintln!(
        "{build:?} {fault:?} (read before the exit: {read_before_exit}): {lines} lines, {seen_reaped} of \
         {reaped} reap lines, {dropped} dropped ({noted} noted), report line {report_line}, \
         EMF line {emf_line}"
    );
    assert!(
        reaped >= ORPHANS as u64 / 2,
        "{build:?}: {reaped} orphans reaped"
    );
    // Every line lost is counted: the reap lines missing, the report's
    // line and the EMF line if missing, and what the notes said.
    let missing = (reaped - seen_reaped) + u64::from(!report_line) + u64::from(!emf_line);
    assert!(
        dropped >= missing,
        "{build:?}: {missing} lines missing, {dropped} counted"
    );
    // And nothing else: the reader read to the end after drainit exited, so
    // every line that went out whole was read, and a line is counted only
    // when it did not.
    assert_eq!(
        dropped, missing,
        "{build:?}: {missing} lines missing, {dropped} counted"
    );
    assert!(
        dropped >= noted,
        "{build:?}: notes said {noted}, {dropped} counted"
    );
    assert!(
        dropped > 0,
        "{build:?}: the queue never overflowed: the test pushed nothing"
    );
}

#[test]
fn a_non_blocking_stderr_with_a_slow_reader_loses_no_line_uncounted_and_cuts_none() {
    for (build, fault) in SINKS {
        run(build, fault, true);
    }
}

/// Nobody reads until drainit has gone: the exit report's line (longer
/// than a pipe takes at once) and the EMF line cannot be written whole in
/// the 100 ms at exit, so they are counted in the report file, and what
/// did get into the pipe is whole.
#[test]
fn the_exits_lines_on_a_full_non_blocking_stderr_are_counted_never_cut() {
    for (build, fault) in SINKS {
        run(build, fault, false);
    }
}

/// The exit's flush gives up while the writer holds a line it has written
/// whole but not yet said so (held there by the fault-injection build's
/// `log_line_written` gate, never opened): that line, the exit report's,
/// is in the log and not counted; the EMF line queued behind it is.
#[test]
fn a_line_written_whole_as_the_exit_gives_up_is_not_counted() {
    let scratch = Scratch::new("held-line");
    let report = scratch.file("report.json");
    let gate = scratch.file("gate");
    let mut d = drainit([
        "--log-format",
        "json",
        "--emf",
        "--exit-report",
        path_str(&report),
    ])
    .binary(&built(Build::GlibcFaults))
    .env("DRAINIT_TEST_FAULT", "log_line_written=gate")
    .env("DRAINIT_TEST_GATE", path_str(&gate))
    // The exit report's line only (not the warning that the gate's
    // variable is not drainit's).
    .env("DRAINIT_LOG", "error,drainit::report=info")
    .with_args(sh(&scratch, "touch \"$D/ready\"; exec sleep 1000"))
    .start();
    scratch.wait_file("ready");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 128 + libc::SIGTERM, "{}", d.stderr());
    assert!(
        scratch.file("gate.reached").exists(),
        "the writer never stood at the gate"
    );
    let stderr = d.stderr();
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["msg"], "exit report", "{stderr}");
    let file: Value = exit_report(&report);
    assert_eq!(file["log_lines_dropped"], 1, "only the EMF line: {file}");
}

/// Without a writer thread, a line another thread logs while stderr is
/// full (the notify reader's warning about a refused message) still goes
/// out once the reader reads again, while drainit runs: that thread wakes
/// the event loop, which then retries, even with no timer of its own.
#[test]
fn a_line_from_another_thread_on_a_full_pipe_goes_out_when_read_again() {
    for build in [Build::Static, Build::Glibc] {
        let scratch = Scratch::new("other-thread-line");
        let (read, write) = full_pipe();
        // The grandchild's message is refused (`--notify-access main`).
        let script = format!(
            "while [ ! -e \"$D/go\" ]; do sleep 0.01; done; '{}' STATUS=refused; \
             touch \"$D/sent\"; exec sleep 1000",
            notify_sender()
        );
        let mut args: Vec<OsString> =
            vec!["--notify".into(), "--notify-access".into(), "main".into()];
        args.extend(sh(&scratch, &script).into_iter().map(OsString::from));
        let (mut child, pid) = pid1(build, args, write, &[]);
        assert!(
            !thread_names(pid).iter().any(|n| n == "drainit-log"),
            "{build:?}: a writer thread on a pipe"
        );
        let before = write_calls(pid);
        scratch.touch("go");
        scratch.wait_file("sent");
        // The warning is logged: drainit has written since the refusal (the
        // reader thread waking the loop for its line, the loop's try at the
        // full pipe). Waited for, not slept on, so the read below comes
        // after the line was queued on a loaded machine too.
        let tried = wait_for("a write into the full pipe", PATIENCE, || {
            Some(write_calls(pid)).filter(|n| *n > before)
        });
        eprintln!("{build:?}: write calls {before} before the refusal, {tried} after");
        let mut file = File::from(read);
        // SAFETY: fcntl on the test's own fd.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut all = Vec::new();
        let refused = "refused a notify message";
        let seen = wait_for("the refused line", PATIENCE, || {
            let seen = read_for(&mut file, &mut all, refused);
            (seen || child.try_wait().unwrap().is_some()).then_some(seen)
        });
        assert!(seen, "{build:?}: drainit ended before the line came");
        assert!(
            child.try_wait().unwrap().is_none(),
            "{build:?}: drainit ended"
        );
        // SAFETY: kill to the test's own unshare, which takes drainit.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    }
}

/// The loop's voluntary context switches so far (each wait that ended).
fn loop_wakeups(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Without a writer thread, a stderr nobody reads costs the loop about a
/// wake-up a second: its tries come 2 ms apart at first and twice as far
/// apart after each that wrote nothing, up to 1 s (a fixed 2 ms would be
/// 2,000 wake-ups in the 4 s measured).
#[test]
fn a_stderr_nobody_reads_costs_about_a_wake_up_a_second() {
    for build in [Build::Static, Build::Glibc] {
        let scratch = Scratch::new("stalled-stderr");
        let (read, write) = full_pipe();
        // An orphan, whose reap line finds the pipe full.
        let script = "(sleep 0.1 &); touch \"$D/spawned\"; exec sleep 1000";
        let mut args: Vec<OsString> = vec!["-w".into()];
        args.extend(sh(&scratch, script).into_iter().map(OsString::from));
        let (mut child, pid) = pid1(build, args, write, &[]);
        scratch.wait_file("spawned");
        // The orphan is reaped: its line waits in the queue.
        wait_for("the orphan reaped", PATIENCE, || {
            (children_of(pid).len() == 1).then_some(())
        });
        // The tries have spread out to a second by now (2 + 4 + ... ms); a
        // loaded machine only makes each later, and so the spread wider.
        std::thread::sleep(Duration::from_millis(2_500));
        let before = loop_wakeups(pid);
        let measured = Instant::now();
        std::thread::sleep(Duration::from_secs(4));
        let woke = loop_wakeups(pid) - before;
        // At most 10 in 4 s, counted against the time that really passed
        // (a loaded machine may let this thread oversleep, never drainit
        // wake more often).
        let secs = measured.elapsed().as_secs_f64();
        assert!(
            woke as f64 <= 2.5 * secs,
            "{build:?}: {woke} wake-ups in {secs:.1} s"
        );
        // The line is still there to be read: the tries go on.
        let mut file = File::from(read);
        // SAFETY: fcntl on the test's own fd.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let mut all = Vec::new();
        wait_for("the reap line", PATIENCE, || {
            read_for(&mut file, &mut all, "Reaped zombie").then_some(())
        });
        // SAFETY: kill to the test's own unshare, which takes drainit.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    }
}
