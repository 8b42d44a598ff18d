//! PID 1 never waits on anyone: a stderr pipe nobody reads (or reads
//! slowly) holds neither the stop signal, nor the deadline's SIGKILL, nor
//! the exit; the app's own stderr keeps its blocking flags; a FIFO as the
//! exit report never hangs the exit. Both C libraries' builds, as PID 1.

mod support;

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

const BUILDS: [Build; 2] = [Build::Static, Build::Glibc];

/// A pipe whose write end already holds as much as the kernel takes (64 KiB
/// by default): the next write to it blocks until someone reads. The write
/// end is left blocking, as a container runtime gives it.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds we own at once.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let w = write.as_raw_fd();
    // SAFETY: fcntl on our own fd.
    unsafe {
        let flags = libc::fcntl(w, libc::F_GETFL);
        libc::fcntl(w, libc::F_SETFL, flags | libc::O_NONBLOCK);
        let chunk = [b'x'; 4096];
        while libc::write(w, chunk.as_ptr().cast(), chunk.len()) > 0 {}
        let mut byte = 0u8;
        while libc::write(w, (&mut byte as *mut u8).cast(), 1) > 0 {}
        libc::fcntl(w, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    (read, write)
}

/// drainit as PID 1 of a new namespace with `stderr` as its stderr.
fn launch(build: Build, args: &[&str], stderr: &OwnedFd) -> (Child, i32) {
    let mut command = Command::new("unshare");
    command
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(built(build))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr.try_clone().unwrap()));
    for (key, _) in std::env::vars() {
        if ["DRAINIT_", "TINI_", "ECS_", "DUMB_INIT_", "KUBERNETES_"]
            .iter()
            .any(|p| key.starts_with(p))
        {
            command.env_remove(key);
        }
    }
    let child = command.spawn().expect("unshare");
    let outer = child.id() as i32;
    let pid = wait_for("drainit inside unshare", PATIENCE, || {
        children_of(outer).first().copied()
    });
    (child, pid)
}

fn wait_exit(child: &mut Child, timeout: Duration) -> Option<i32> {
    let until = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The O_NONBLOCK bit of a process's fd 2, from /proc.
fn stderr_nonblocking(pid: i32) -> bool {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/2")).unwrap();
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .map(|f| i64::from_str_radix(f.trim(), 8).unwrap())
        .unwrap();
    flags & i64::from(libc::O_NONBLOCK) != 0
}

/// When the process `pid` (a child of drainit) was gone (reaped or a
/// zombie), counted from `since`.
fn app_gone(pid: i32, since: Instant) -> Duration {
    wait_for("the app to end", PATIENCE, || {
        matches!(proc_state(pid), None | Some('Z')).then(|| since.elapsed())
    })
}

/// The deadline's SIGKILL at 3 s: not before, and not much after.
fn assert_deadline(build: Build, killed: Duration) {
    assert!(
        killed >= Duration::from_millis(2_950) && killed < Duration::from_millis(3_500),
        "{build:?}: SIGKILL after {killed:?}, the deadline is 3 s"
    );
}

fn app(scratch: &Scratch, script: &str) -> Vec<String> {
    sh(scratch, script)
}

/// SIGTERM reaches the app at once and SIGKILL lands at the 3 s deadline
/// while stderr is full and unread, at the most verbose level.
#[test]
fn a_full_unread_stderr_holds_neither_the_stop_signal_nor_the_deadline() {
    for build in BUILDS {
        let scratch = Scratch::new("stderr-full");
        let (_read, write) = full_pipe();
        let mut args = vec!["-vvvv", "--grace", "3s"];
        let script = app(
            &scratch,
            "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
             while :; do echo app-line >&2 & sleep 0.05; done",
        );
        args.extend(script.iter().map(String::as_str));
        let (mut child, pid) = launch(build, &args, &write);
        scratch.wait_file("ready");
        let app = wait_for("the app", PATIENCE, || children_of(pid).first().copied());
        let sent = Instant::now();
        // SAFETY: kill to the test's own drainit.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        scratch.wait_file("term");
        let reached = sent.elapsed();
        assert!(
            !stderr_nonblocking(pid),
            "{build:?}: drainit's fd 2 flags changed"
        );
        let killed = app_gone(app, sent);
        let code = wait_exit(&mut child, PATIENCE);
        eprintln!("{build:?}: TERM reached the app after {reached:?}, SIGKILL after {killed:?}");
        assert_eq!(code, Some(124), "{build:?}");
        // Blocked, drainit sent nothing for 6-8 s; these margins hold on a
        // loaded machine (bench/never_waits.py measures the figures).
        assert!(
            reached < Duration::from_millis(500),
            "{build:?}: TERM after {reached:?}"
        );
        assert_deadline(build, killed);
    }
}

/// A reader that takes 512 bytes every 100 ms cannot move the deadline.
#[test]
fn a_slow_stderr_reader_does_not_move_the_deadline() {
    for build in BUILDS {
        let scratch = Scratch::new("stderr-slow");
        let (read, write) = full_pipe();
        let _reader = std::thread::spawn(move || {
            let mut file = File::from(read);
            let mut buf = [0u8; 512];
            while file.read(&mut buf).is_ok_and(|n| n > 0) {
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let script = app(
            &scratch,
            "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        );
        let mut args = vec!["-vvvv", "--grace", "3s"];
        args.extend(script.iter().map(String::as_str));
        let (mut child, pid) = launch(build, &args, &write);
        drop(write);
        scratch.wait_file("ready");
        let app = wait_for("the app", PATIENCE, || children_of(pid).first().copied());
        let sent = Instant::now();
        // SAFETY: kill to the test's own drainit.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        scratch.wait_file("term");
        let killed = app_gone(app, sent);
        let code = wait_exit(&mut child, PATIENCE);
        assert_eq!(code, Some(124), "{build:?}");
        assert_deadline(build, killed);
    }
}

/// The app exits while stderr is blocked: drainit exits with its code at
/// once (the writer gets 100 ms), and the app's own stderr stays blocking.
#[test]
fn the_app_exiting_while_stderr_is_blocked_ends_drainit_with_its_code() {
    for build in BUILDS {
        let scratch = Scratch::new("stderr-exit");
        let (_read, write) = full_pipe();
        let script = app(
            &scratch,
            "trap 'exit 7' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        );
        let mut args = vec!["-vvvv", "--grace", "30s"];
        args.extend(script.iter().map(String::as_str));
        let (mut child, pid) = launch(build, &args, &write);
        scratch.wait_file("ready");
        let app = wait_for("the app", PATIENCE, || children_of(pid).first().copied());
        assert!(
            !stderr_nonblocking(app),
            "{build:?}: the app's fd 2 is non-blocking"
        );
        let sent = Instant::now();
        // SAFETY: kill to the test's own drainit.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let gone = app_gone(app, sent);
        let code = wait_exit(&mut child, PATIENCE);
        let took = sent.elapsed().saturating_sub(gone);
        eprintln!("{build:?}: exit {code:?} {took:?} after the app");
        assert_eq!(code, Some(7), "{build:?}");
        // 100 ms for the log writer, then the exit whatever stderr does.
        assert!(
            took < Duration::from_secs(1),
            "{build:?}: exit {took:?} after the app"
        );
    }
}

/// An exit report at a FIFO created after the start: one warning at exit,
/// never a hang in open().
#[test]
fn an_exit_report_fifo_without_a_reader_never_hangs_the_exit() {
    for build in BUILDS {
        let scratch = Scratch::new("report-fifo");
        let report = scratch.file("report.json");
        let script = app(
            &scratch,
            "touch \"$D/ready\"; while [ ! -e \"$D/go\" ]; do sleep 0.05; done; exit 3",
        );
        let mut d = drainit(["--exit-report", path_str(&report)])
            .binary(&built(build))
            .with_args(script)
            .start();
        scratch.wait_file("ready");
        let c = std::ffi::CString::new(path_str(&report)).unwrap();
        // SAFETY: mkfifo with a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        scratch.touch("go");
        let status = d.wait_status(PATIENCE);
        assert_eq!(status.code(), Some(3), "{build:?}: {}", d.stderr());
        assert_eq!(
            d.stderr().matches("cannot write the exit report").count(),
            1,
            "{build:?}: {}",
            d.stderr()
        );
    }
}

/// A report path that can never be written is refused before the child
/// starts; a missing directory is made.
#[test]
fn exit_report_paths_are_checked_before_the_child_starts() {
    let scratch = Scratch::new("report-paths");
    let fifo = scratch.file("fifo");
    let c = std::ffi::CString::new(path_str(&fifo)).unwrap();
    // SAFETY: mkfifo with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    for bad in [
        path_str(&fifo),
        path_str(&scratch.path),
        "/proc/self/status",
    ] {
        let marker = scratch.file("started");
        let (code, stderr) = drainit(["--exit-report", bad])
            .with_args(sh(&scratch, "touch \"$D/started\""))
            .run();
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert!(stderr.contains("--exit-report"), "{bad}: {stderr}");
        assert!(!marker.exists(), "{bad}: the child started");
    }
    let nested = scratch.file("a/b/report.json");
    let (code, stderr) = drainit(["--exit-report", path_str(&nested)])
        .with_args(sh(&scratch, "exit 4"))
        .run();
    assert_eq!(code, 4, "{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&nested).unwrap()).unwrap();
    assert_eq!(r["exit_code"], 4);
}

/// A TCP port that accepts and never answers: every poll runs to its timeout.
fn silent_server() -> (std::net::TcpListener, u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepting = listener.try_clone().unwrap();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in accepting.incoming() {
            match stream {
                Ok(s) => held.push(s),
                Err(_) => return,
            }
            if held.len() > 10_000 {
                return;
            }
        }
    });
    (listener, port, handle)
}

fn status_kib(pid: i32, field: &str) -> u64 {
    status_field(pid, field)
        .and_then(|v| v.split_whitespace().next().map(str::to_string))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// 64 URL sources that never answer: the deadline holds, drainit holds at
/// most 10 tasks (loop, log writer, 8 poll workers) and its peak memory
/// stays within 2 MiB of its idle figure.
#[test]
fn sixty_four_silent_sources_cost_ten_threads_and_keep_the_deadline() {
    for build in BUILDS {
        let scratch = Scratch::new("silent-64");
        let (_listener, port, _accepting) = silent_server();
        let mut args: Vec<String> = vec!["--grace".into(), "3s".into()];
        for i in 0..64 {
            args.push("--drain-url".into());
            args.push(format!("http://127.0.0.1:{port}/drain/{i}"));
        }
        args.extend(sh(
            &scratch,
            "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        ));
        let mut d = drainit(&args).binary(&built(build)).start();
        scratch.wait_file("ready");
        let app = wait_for("the app", PATIENCE, || {
            children_of(d.pid()).first().copied()
        });
        let idle = status_kib(d.pid(), "VmHWM");
        let sent = Instant::now();
        d.signal(libc::SIGTERM);
        // Sampled while the app runs: drainit is still there to be read.
        let (mut most, mut peak) = (0, 0);
        while !matches!(proc_state(app), None | Some('Z')) && sent.elapsed() < PATIENCE {
            most = most.max(status_kib(d.pid(), "Threads"));
            peak = peak.max(status_kib(d.pid(), "VmHWM"));
            std::thread::sleep(Duration::from_millis(2));
        }
        let killed = sent.elapsed();
        let status = d.wait_status(PATIENCE);
        eprintln!(
            "{build:?}: {most} threads at most, VmHWM idle {idle} KiB peak {peak} KiB, SIGKILL after {killed:?}"
        );
        assert_eq!(status.code(), Some(124), "{build:?}: {}", d.stderr());
        assert!((3..=10).contains(&most), "{build:?}: {most} threads");
        assert_deadline(build, killed);
        assert!(
            idle > 0 && peak >= idle,
            "{build:?}: VmHWM not read ({idle}, {peak})"
        );
        assert!(peak <= idle + 2048, "{build:?}: VmHWM {idle} -> {peak} KiB");
    }
}

/// 20,000 stop signals while the pre-stop delay holds the stop: a few
/// lines of "holding", not thousands.
#[test]
fn a_flood_of_stop_signals_during_the_delay_logs_a_few_lines() {
    for build in BUILDS {
        flood_of_stop_signals(build);
    }
}

fn flood_of_stop_signals(build: Build) {
    let scratch = Scratch::new("held-flood");
    let mut d = drainit(["-v", "--pre-stop-delay", "2s", "--grace", "10s"])
        .binary(&built(build))
        .with_args(sh(
            &scratch,
            "trap 'exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        ))
        .start();
    scratch.wait_file("ready");
    for _ in 0..20_000 {
        // SAFETY: kill to the test's own drainit.
        unsafe { libc::kill(d.pid(), libc::SIGTERM) };
    }
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    let stderr = d.stderr();
    let holding = stderr.lines().filter(|l| l.contains("holding")).count();
    let lines = stderr.lines().count();
    eprintln!("{holding} holding lines, {lines} lines in all");
    assert!(
        (1..=5).contains(&holding),
        "{holding} holding lines:\n{stderr}"
    );
    assert!(lines <= 40, "{lines} lines:\n{stderr}");
}
