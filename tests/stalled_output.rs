//! A stdout or stderr nobody reads never holds PID 1 outside the log:
//! `DRAINIT_CHECK=1` as PID 1 with stdout, stderr or both a full pipe
//! ends within its bound with the check's exit code, and at once on
//! SIGTERM; a 20 KB usage error, and dumb-init's help on stderr, end on a
//! nearly full terminal; the values a usage error echoes are cut to 256
//! characters. On both libc builds.

mod support;

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::server::{Reply, Server};
use support::*;

/// The check's stated bound (`app::check::BOUND`) and one ask's time.
const BOUND: Duration = Duration::from_secs(15);
const ASK: Duration = Duration::from_secs(5);

const BUILDS: [Build; 2] = [Build::Static, Build::Glibc];

/// A pipe whose buffer is full and whose read end nobody reads (kept
/// open, so a write waits rather than failing with EPIPE): (read end,
/// write end), the write end blocking.
fn stalled_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array; fcntl and write on
    // them; both are owned at once.
    unsafe {
        assert_eq!(
            libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK),
            0
        );
        let chunk = [b'x'; 4096];
        while libc::write(fds[1], chunk.as_ptr().cast(), chunk.len()) > 0 {}
        while libc::write(fds[1], chunk.as_ptr().cast(), 1) > 0 {}
        let flags = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, flags & !libc::O_NONBLOCK);
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    }
}

/// A terminal that is nearly full: its slave filled until it would
/// block, then a little read from the master until `poll` says the slave
/// has room again (a pty says so with any room at all, here a few KiB,
/// far less than the lines written to it). Nobody reads it afterwards.
/// (master, slave), the slave blocking.
fn nearly_full_pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two fds we own at once; fcntl, write, read
    // and poll on them with live buffers.
    unsafe {
        let rc = libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        );
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        for fd in [master, slave] {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let flags = libc::fcntl(slave, libc::F_GETFL);
        libc::fcntl(slave, libc::F_SETFL, flags | libc::O_NONBLOCK);
        let chunk = [b'x'; 4096];
        for size in [4096, 1] {
            while libc::write(slave, chunk.as_ptr().cast(), size) > 0 {}
        }
        let mut buf = [0u8; 64];
        let mut read = 0;
        loop {
            let mut fds = libc::pollfd {
                fd: slave,
                events: libc::POLLOUT,
                revents: 0,
            };
            if libc::poll(&mut fds, 1, 50) == 1 && fds.revents & libc::POLLOUT != 0 {
                break;
            }
            let n = libc::read(master, buf.as_mut_ptr().cast(), buf.len());
            assert!(
                n > 0,
                "read the master: {}",
                std::io::Error::last_os_error()
            );
            read += n as usize;
            assert!(read < 16 * 1024, "the pty never said it has room");
        }
        libc::fcntl(slave, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave))
    }
}

/// `binary` as PID 1 of its own namespace with `args`, `vars` and none of
/// the test's own DRAINIT_, ECS_ or KUBERNETES_ variables.
fn as_pid1_with(binary: &str, args: &[&str], vars: &[(&str, &str)]) -> Command {
    let mut command = as_pid1(binary);
    command.args(args).stdin(Stdio::null());
    for (key, _) in std::env::vars() {
        if ["DRAINIT_", "TINI_", "ECS_", "DUMB_INIT_", "KUBERNETES_"]
            .iter()
            .any(|p| key.starts_with(p))
        {
            command.env_remove(key);
        }
    }
    command.envs(vars.iter().copied());
    command
}

/// Waits at most `timeout` for `child` to end: its exit code, None when
/// it is still running then (it is killed).
fn ended_within(child: &mut Child, timeout: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Which of stdout and stderr are stalled.
#[derive(Debug, Clone, Copy)]
enum Stalled {
    Stdout,
    Stderr,
    Both,
}

/// `DRAINIT_CHECK=1` as PID 1 of `build`, asking a drain URL that never
/// answers, with `stalled` a full pipe nobody reads (the other stream a
/// file): the running check, the inner pipes' read ends, and the file.
fn stalled_check(build: Build, stalled: Stalled, app: &Server) -> (Child, Vec<OwnedFd>, Scratch) {
    let scratch = Scratch::new("stalled-check");
    let url = app.url("/drain");
    let mut command = as_pid1_with(
        &built(build),
        &["--drain-url", &url, "--", "true"],
        &[("DRAINIT_CHECK", "1")],
    );
    let mut keep = Vec::new();
    let mut pipe = || {
        let (read, write) = stalled_pipe();
        keep.push(read);
        Stdio::from(write)
    };
    let file = || Stdio::from(std::fs::File::create(scratch.file("out")).unwrap());
    let (out, err) = match stalled {
        Stalled::Stdout => (pipe(), file()),
        Stalled::Stderr => (file(), pipe()),
        Stalled::Both => (pipe(), pipe()),
    };
    let child = command.stdout(out).stderr(err).spawn().expect("unshare");
    (child, keep, scratch)
}

/// With stdout, stderr or both stalled, the check still ends at its own
/// end (the silent URL's ask time), well within its bound, with its own
/// exit code (0: no answer is a warning); and, where stdout is a file,
/// its findings are all there.
#[test]
fn drainit_check_as_pid1_ends_within_its_bound_on_a_stalled_stdout_or_stderr() {
    for build in BUILDS {
        for stalled in [Stalled::Stdout, Stalled::Both, Stalled::Stderr] {
            let app = Server::start(|_, _| Reply::Hang);
            let started = Instant::now();
            let (mut child, _keep, scratch) = stalled_check(build, stalled, &app);
            let code = ended_within(&mut child, BOUND + PATIENCE);
            let took = started.elapsed();
            assert_eq!(code, Some(0), "{build:?} {stalled:?}: {took:?}");
            assert!(
                took < BOUND + Duration::from_secs(5),
                "{build:?} {stalled:?}: {took:?}"
            );
            if let Stalled::Stderr = stalled {
                let out = scratch.read("out");
                assert!(out.contains("warn: drain source"), "{out}");
                assert!(
                    out.lines()
                        .last()
                        .unwrap_or("")
                        .starts_with("ok: 0 errors, 1 warning"),
                    "{out}"
                );
            }
        }
    }
}

/// With stdout, stderr or both stalled, SIGTERM once the check's ask is
/// out ends it at once, exit 1, as it does with streams that take it.
#[test]
fn drainit_check_as_pid1_ends_at_once_on_sigterm_on_a_stalled_stdout_or_stderr() {
    for build in BUILDS {
        for stalled in [Stalled::Stdout, Stalled::Both, Stalled::Stderr] {
            let app = Server::start(|_, _| Reply::Hang);
            let (mut child, _keep, _scratch) = stalled_check(build, stalled, &app);
            wait_for("the drain URL asked", PATIENCE, || {
                (app.count() == 1).then_some(())
            });
            let drainit = wait_for("drainit", PATIENCE, || {
                children_of(child.id() as i32).first().copied()
            });
            let sent = Instant::now();
            // SAFETY: SIGTERM to the drainit this test started.
            unsafe { libc::kill(drainit, libc::SIGTERM) };
            let code = ended_within(&mut child, PATIENCE);
            assert_eq!(code, Some(1), "{build:?} {stalled:?}");
            // At once: well before the ask's own time would end it.
            assert!(
                sent.elapsed() < ASK / 2,
                "{build:?} {stalled:?}: {:?}",
                sent.elapsed()
            );
        }
    }
}

/// `binary` as PID 1 with `args` and `vars`, stderr a nearly full pty
/// nobody reads (stdout too): its exit code, within a few seconds.
fn on_a_stalled_terminal(binary: &str, args: &[&str], vars: &[(&str, &str)]) -> Option<i32> {
    let (_master, slave) = nearly_full_pty();
    let out = slave.try_clone().unwrap();
    let mut child = as_pid1_with(binary, args, vars)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("unshare");
    ended_within(&mut child, Duration::from_secs(10))
}

/// A usage error of 20 KB (a `--stop-exec` and a variable of 20,000
/// characters) on a nearly full terminal: exit 2 at once, the child never
/// started.
#[test]
fn a_20kb_usage_error_on_a_nearly_full_terminal_exits_2() {
    let long = "x".repeat(20_000);
    for build in BUILDS {
        let binary = built(build);
        let scratch = Scratch::new("pty-usage");
        let marker = scratch.file("started");
        let touch = ["--", "/bin/touch", path_str(&marker)];
        let flag = [&["--stop-exec", long.as_str()][..], &touch].concat();
        let code = on_a_stalled_terminal(&binary, &flag, &[]);
        assert_eq!(code, Some(2), "{build:?} --stop-exec");
        let code = on_a_stalled_terminal(&binary, &touch, &[("DRAINIT_GRACE", &long)]);
        assert_eq!(code, Some(2), "{build:?} DRAINIT_GRACE");
        assert!(!marker.exists(), "{build:?}: the child started");
    }
}

/// Text far longer than the terminal's room, with nothing cut: dumb-init's
/// help (10 KB on stderr) on a nearly full terminal ends at once, exit 0.
#[test]
fn dumb_inits_help_on_a_nearly_full_terminal_ends() {
    for build in BUILDS {
        let scratch = Scratch::new("pty-help");
        let link = scratch.file("dumb-init");
        std::os::unix::fs::symlink(built(build), &link).unwrap();
        let code = on_a_stalled_terminal(path_str(&link), &["--help"], &[]);
        assert_eq!(code, Some(0), "{build:?}");
    }
}

/// The longest run of `c` in `text`.
fn longest_run(text: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in text.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// A command line's arguments and variables.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);

/// Each way a usage error echoes a value of 20,000 characters shows at
/// most 256 of them, marked as cut: clap's echo and the parser's (a
/// command's program), a variable's, a signal name, a container name, a
/// pod name. The line stays one short line.
#[test]
fn usage_errors_echo_at_most_256_characters_of_a_value() {
    let long = "q".repeat(20_000);
    let flag = format!("--{long}");
    let path = format!("/{long}/{long}");
    #[allow(unused_mut)]
    let mut cases: Vec<Case> = vec![
        (vec!["--stop-exec", &long], vec![]),
        (vec!["--stop-exec", &path], vec![]),
        (vec![&flag], vec![]),
        (vec![], vec![("DRAINIT_GRACE", &long)]),
        (vec!["--stop-signals", &long], vec![]),
        (vec![], vec![("DRAINIT_STOP_SIGNALS", &long)]),
        (vec!["--exit-report", &path], vec![]),
        (vec!["--k8s-container", &long], vec![]),
    ];
    #[cfg(feature = "k8s")]
    cases.extend([
        (vec!["--k8s-protect", "--k8s-annotations", &long], vec![]),
        (
            vec!["--k8s-protect", "--drain-exec", "true"],
            vec![
                ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("POD_NAME", &long),
            ],
        ),
        (
            vec!["--k8s-protect", "--drain-exec", "true"],
            vec![
                ("KUBERNETES_SERVICE_HOST", &long),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("POD_NAME", "web-1"),
            ],
        ),
    ]);
    for (args, vars) in cases {
        let mut command = as_pid1_with(DRAINIT, &[&args[..], &["--", "true"]].concat(), &vars);
        let out = command.stdout(Stdio::null()).output().expect("unshare");
        let said = String::from_utf8_lossy(&out.stderr);
        let what = format!("{:.20} {:?}", args.concat(), vars.last().map(|v| v.0));
        // The line as the assertions show it, in case it is not cut.
        let shown: String = said.chars().take(600).collect();
        assert_eq!(out.status.code(), Some(2), "{what}: {shown}");
        assert_eq!(said.lines().count(), 1, "{what}: {shown}");
        let run = longest_run(&said, 'q');
        assert!((1..=256).contains(&run), "{what}: a run of {run}: {shown}");
        assert!(said.contains("q…"), "{what}: {shown}");
        assert!(said.len() < 1200, "{what}: {} bytes", said.len());
    }
}
