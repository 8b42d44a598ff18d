//! Nothing in the container can fool PID 1: a SIGCHLD forged by a process
//! inside drainit's namespace, a report file swapped for a symlink by an
//! app running as `nobody`, a usage error with a stderr nobody reads, a
//! long report line ahead of the EMF line on a slow reader, and commands
//! that must run where the child was started. Each on both libc builds
//! where libc matters.

mod support;

use std::os::unix::fs::PermissionsExt;

use support::*;

/// Queues SIGCHLD to PID 1 with `rt_sigqueueinfo`, SI_QUEUE, PID 1 as the
/// sender and the value drainit's own wake-ups once carried: a perfect
/// copy of a wake-up, from a process inside the namespace. `python3 -c
/// FORGE n` queues `n` of them (`0`: until killed) and touches `$D/sent`
/// after the first.
const FORGE: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
info = (ctypes.c_int * 32)()
info[0] = 17          # SIGCHLD
info[2] = -1          # SI_QUEUE
info[4] = 1           # si_pid: PID 1 itself
info[5] = os.getuid() # si_uid
info[6] = 0x64726169  # si_value: the old wake-up tag
n = int(sys.argv[1])
i = 0
while n == 0 or i < n:
    if libc.syscall(129, 1, 17, info) != 0:  # rt_sigqueueinfo
        sys.exit("rt_sigqueueinfo: errno %d" % ctypes.get_errno())
    i += 1
    if i == 1:
        open(os.environ["D"] + "/sent", "w").close()
"#;

/// The builds whose libc matters here: the static musl one that ships in
/// images and the glibc one `cargo install` gives.
const BUILDS: [Build; 2] = [Build::Static, Build::Glibc];

/// A forged SIGCHLD pending in drainit when the app exits swallows the
/// kernel's (SIGCHLD does not queue). drainit is stopped from outside so
/// that both are surely pending together; once it runs again it must still
/// see the exit and leave with the app's status.
#[test]
fn a_forged_wake_up_pending_as_the_app_exits_does_not_hide_the_exit() {
    for build in BUILDS {
        let scratch = Scratch::new("forged-pending");
        let d_dir = path_str(&scratch.path).to_string();
        let script = format!(
            "touch \"$D/ready\"; while [ ! -e \"$D/go\" ]; do sleep 0.01; done; \
             python3 -c '{FORGE}' 1 && exit 7; exit 9"
        );
        let mut d = drainit(["--", "/bin/sh", "-c", &script])
            .binary(&built(build))
            .env("D", &d_dir)
            .start();
        scratch.wait_file("ready");
        let child = wait_for("the app", PATIENCE, || {
            children_of(d.pid()).first().copied()
        });
        d.signal(libc::SIGSTOP);
        wait_for("drainit to stop", PATIENCE, || {
            (proc_state(d.pid()) == Some('T')).then_some(())
        });
        scratch.touch("go");
        wait_for("the app to exit", PATIENCE, || {
            (proc_state(child) == Some('Z')).then_some(())
        });
        // Proof that the attack was set up: the forged SIGCHLD was queued
        // and is pending in drainit with the app's exit behind it.
        assert!(
            scratch.file("sent").exists(),
            "{build:?}: nothing was forged"
        );
        let pending = status_field(d.pid(), "ShdPnd").expect("ShdPnd");
        assert!(
            sigset_has(&pending, libc::SIGCHLD),
            "{build:?}: no SIGCHLD pending ({pending})"
        );
        d.signal(libc::SIGCONT);
        let status = d.wait_status(PATIENCE);
        assert_eq!(status.code(), Some(7), "{build:?}: {}", d.stderr());
    }
}

/// A flood of forged wake-ups from a process the app started, while the
/// app exits: drainit leaves with the app's status every time.
#[test]
fn a_flood_of_forged_wake_ups_does_not_hide_the_exit() {
    for build in BUILDS {
        for round in 0..5 {
            let scratch = Scratch::new("forged-flood");
            let d_dir = path_str(&scratch.path).to_string();
            let script = format!(
                "python3 -c '{FORGE}' 0 & \
                 while [ ! -e \"$D/sent\" ]; do sleep 0.01; done; exit 7"
            );
            let mut d = drainit(["--", "/bin/sh", "-c", &script])
                .binary(&built(build))
                .env("D", &d_dir)
                .start();
            let status = d.wait_status(PATIENCE);
            assert!(
                scratch.file("sent").exists(),
                "{build:?}: nothing was forged"
            );
            assert_eq!(
                status.code(),
                Some(7),
                "{build:?} round {round}: {}",
                d.stderr()
            );
        }
    }
}

/// Root drainit, the app dropped to `nobody` with a report directory it
/// may write: the app swaps the report for a symlink to a root-only file
/// (or a FIFO). drainit refuses to write through it: the file keeps its
/// bytes, the run keeps the app's exit code.
#[test]
fn a_report_swapped_for_a_symlink_by_the_app_is_not_followed() {
    for build in BUILDS {
        for planted in ["ln -s \"$D/secret\"", "mkfifo"] {
            let scratch = Scratch::new("report-link");
            let dir = scratch.file("reports");
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
            let secret = scratch.file("secret");
            std::fs::write(&secret, "root only").unwrap();
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
            let report = dir.join("report.json");
            let script = format!(
                "rm -f \"$D/reports/report.json\" && {planted} \"$D/reports/report.json\" && exit 3"
            );
            let mut d = drainit([
                "--exit-report",
                path_str(&report),
                "--",
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/bin/sh",
                "-c",
                &script,
            ])
            .binary(&built(build))
            .env("D", path_str(&scratch.path))
            .start();
            let code = d.wait_code();
            assert_eq!(code, 3, "{build:?} {planted}: {}", d.stderr());
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "root only",
                "{build:?}: written through the link"
            );
            let kind = std::fs::symlink_metadata(&report).unwrap().file_type();
            assert!(
                !kind.is_file(),
                "{build:?} {planted}: the plant is still there"
            );
            assert!(
                d.stderr().contains("not a regular file"),
                "{build:?} {planted}: {}",
                d.stderr()
            );
        }
    }
}

/// A pipe whose buffer is full and whose read end nobody reads (kept
/// open, so a write waits rather than failing with EPIPE): the write end,
/// blocking, to give drainit as its stderr.
fn stalled_pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
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
        let mut one = [b'x'; 1];
        while libc::write(fds[1], one.as_mut_ptr().cast(), 1) > 0 {}
        let flags = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, flags & !libc::O_NONBLOCK);
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

/// A usage error (a flag or its variable) with fd 2 a full pipe nobody
/// reads: drainit as PID 1 still leaves with exit 2, the child never
/// started, as it does with a stderr that takes the line.
#[test]
fn a_usage_error_never_waits_for_a_stalled_stderr() {
    use std::process::Stdio;
    for build in BUILDS {
        for (flags, vars) in [
            (&["--grace", "bogus"][..], &[][..]),
            (&[][..], &[("DRAINIT_GRACE", "bogus")][..]),
        ] {
            let scratch = Scratch::new("stalled-usage");
            let marker = scratch.file("started");
            let (_read, write) = stalled_pipe();
            let mut command = as_pid1(built(build));
            command
                .args(flags)
                .args(["--", "/bin/touch", path_str(&marker)])
                .env_remove("DRAINIT_GRACE")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(write));
            for (k, v) in vars {
                command.env(k, v);
            }
            let mut child = command.spawn().expect("unshare");
            let status = wait_for("drainit to exit", PATIENCE, || {
                child.try_wait().ok().flatten()
            });
            assert_eq!(status.code(), Some(2), "{build:?} {flags:?} {vars:?}");
            assert!(!marker.exists(), "{build:?}: the child started");
        }
    }
}

/// Called `dumb-init` (which leaves its start directory for `/`), a drain
/// command with a relative path runs where the child was started: the app
/// makes `state/ready` there on SIGTERM, and the stop ends drained (0),
/// not at the deadline (124). The same under drainit's own name.
#[test]
fn drain_commands_run_in_the_childs_start_directory_under_every_name() {
    use std::process::Stdio;
    for build in BUILDS {
        for name in ["dumb-init", "drainit"] {
            let scratch = Scratch::new("start-dir");
            let work = scratch.file("work");
            std::fs::create_dir_all(work.join("state")).unwrap();
            let link = scratch.file(name);
            std::os::unix::fs::symlink(built(build), &link).unwrap();
            let stderr = scratch.file("stderr");
            let mut child = as_pid1(&link)
                .args([
                    "--drain-exec",
                    "test -f state/ready",
                    "--grace",
                    "30s",
                    "--",
                ])
                .args(["/bin/sh", "-c"])
                .arg(
                    "trap 'touch state/ready' TERM; touch started; \
                     while :; do sleep 0.1; done",
                )
                .current_dir(&work)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&stderr).unwrap())
                .spawn()
                .expect("unshare");
            wait_for("the app", PATIENCE, || {
                work.join("started").exists().then_some(())
            });
            let drainit = wait_for("drainit", PATIENCE, || {
                children_of(child.id() as i32).first().copied()
            });
            // SAFETY: SIGTERM to the drainit this test started.
            unsafe { libc::kill(drainit, libc::SIGTERM) };
            let status = wait_for("drainit to exit", PATIENCE, || {
                child.try_wait().ok().flatten()
            });
            let log = std::fs::read_to_string(&stderr).unwrap_or_default();
            assert!(work.join("state/ready").exists(), "{build:?} {name}: {log}");
            assert_eq!(status.code(), Some(0), "{build:?} {name}: {log}");
        }
    }
}

/// A URL given to a switch (`--notify=URL`) is echoed redacted in the
/// usage error, and redaction changes the values, never drainit's words.
#[test]
fn usage_errors_redact_values_and_keep_drainits_words() {
    let switches = ["--notify", "--emf", "--k8s-protect", "--subreaper"];
    // A value read from a secret often ends in a newline.
    for (flag, end) in switches.iter().flat_map(|f| [(*f, ""), (*f, "\n")]) {
        let typed = format!("{flag}=http://user:pw1@app/x?token=sec2{end}");
        let scratch = Scratch::new("redact-switch");
        let marker = scratch.file("started");
        let (code, stderr) = drainit([typed.as_str(), "/bin/touch", path_str(&marker)])
            .not_pid1()
            .run();
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{flag}: {stderr}");
        assert!(stderr.contains(flag), "{flag}: {stderr}");
        for secret in ["user", "pw1", "sec2"] {
            assert!(!stderr.contains(secret), "{flag} shows {secret}: {stderr}");
        }
        assert!(!marker.exists(), "{flag}: the child started");
    }
    assert_usage_error(
        &["--stop-url", "https://user:pw1@app/x?token=sec2"],
        &[],
        "only http:// URLs are accepted, not https://",
    );
    let probe = std::process::Command::new(DRAINIT)
        .args(["--probe", "https://app/x?token=sec2"])
        .output()
        .expect("drainit --probe");
    let said = String::from_utf8_lossy(&probe.stdout);
    assert!(said.contains("(or tcp://HOST:PORT)"), "{said}");
    assert!(said.contains("not https://"), "{said}");
    assert!(!said.contains("sec2"), "{said}");
}

/// Fills fd 2's pipe from the app, through a non-blocking description of
/// its own, until it takes no more byte.
const FILL: &str = r#"
import os
fd = os.open("/proc/self/fd/2", os.O_WRONLY | os.O_NONBLOCK)
for size in (4096, 1):
    try:
        while True:
            os.write(fd, b"x" * (size - 1) + b"\n" if size > 1 else b"\n")
    except BlockingIOError:
        pass
"#;

/// Everything the non-blocking read end holds now, appended to `all`.
fn drain_pipe(read: &mut std::fs::File, all: &mut Vec<u8>, at_most: usize) {
    use std::io::Read;
    let mut buf = vec![0u8; at_most.min(65536)];
    let mut taken = 0;
    while taken < at_most {
        let want = (at_most - taken).min(buf.len());
        match read.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                all.extend_from_slice(&buf[..n]);
                taken += n;
            }
        }
    }
}

/// At exit a report line over 4 KiB (40 drain URLs) waits for room for
/// all of it in a pipe a slow reader keeps nearly full; the EMF line
/// behind it must not wait with it. The app fills the pipe, the reader
/// takes 16 KiB (room for the EMF line, not for the report line by the
/// whole-line rule), and the app exits: the EMF line is out.
#[test]
fn a_long_report_line_does_not_cost_the_emf_line_behind_it() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::process::Stdio;
    use support::server::{json, Server};
    let busy = Server::start(|_, _| json(200, r#"{"readyForTermination":false}"#));
    // Without a writer thread (the pipe opened again), and with one.
    let sinks = [
        (Build::Static, ""),
        (Build::Glibc, ""),
        (Build::StaticFaults, "log_writer_thread=on"),
    ];
    for (build, fault) in sinks {
        let scratch = Scratch::new("emf-behind");
        let report = scratch.file("report.json");
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the array; the read end alone is made
        // non-blocking (its own description); both are owned at once.
        let (mut read, write) = unsafe {
            assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
            let flags = libc::fcntl(fds[0], libc::F_GETFL);
            libc::fcntl(fds[0], libc::F_SETFL, flags | libc::O_NONBLOCK);
            (
                std::fs::File::from_raw_fd(fds[0]),
                OwnedFd::from_raw_fd(fds[1]),
            )
        };
        let app = format!(
            "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; \
             while [ ! -e \"$D/fill\" ]; do sleep 0.01; done; \
             python3 -c '{FILL}'; touch \"$D/filled\"; \
             while [ ! -e \"$D/go\" ]; do sleep 0.01; done; exit 0"
        );
        let mut command = as_pid1(built(build));
        command
            .args(["--emf", "--grace", "60s", "--exit-report"])
            .arg(&report);
        for i in 0..40 {
            command.arg("--drain-url").arg(busy.url(&format!(
                "/drain/a-rather-long-path-for-source-number-{i:02}/of-the-app"
            )));
        }
        command
            .args(["--", "/bin/sh", "-c", &app])
            .env("D", &scratch.path)
            .env("DRAINIT_TEST_FAULT", fault)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(write));
        let mut child = command.spawn().expect("unshare");
        let mut all = Vec::new();
        wait_for("the app", PATIENCE, || {
            drain_pipe(&mut read, &mut all, usize::MAX);
            scratch.file("ready").exists().then_some(())
        });
        let drainit = wait_for("drainit", PATIENCE, || {
            children_of(child.id() as i32).first().copied()
        });
        // SAFETY: SIGTERM to the drainit this test started.
        unsafe { libc::kill(drainit, libc::SIGTERM) };
        wait_for("the app's SIGTERM", PATIENCE, || {
            drain_pipe(&mut read, &mut all, usize::MAX);
            scratch.file("term").exists().then_some(())
        });
        // From here the reader is slow: the app fills the pipe.
        scratch.touch("fill");
        scratch.wait_file("filled");
        drain_pipe(&mut read, &mut all, 16 * 1024);
        scratch.touch("go");
        let status = wait_for("drainit to exit", PATIENCE, || {
            child.try_wait().ok().flatten()
        });
        drain_pipe(&mut read, &mut all, usize::MAX);
        assert_eq!(status.code(), Some(0), "{build:?}");
        let written = std::fs::read_to_string(&report).unwrap_or_default();
        assert!(
            written.len() > 4096,
            "{build:?}: a report of {} bytes",
            written.len()
        );
        let text = String::from_utf8_lossy(&all);
        let emf = text
            .lines()
            .filter(|l| l.starts_with('{') && l.contains("\"_aws\""))
            .count();
        assert_eq!(
            emf,
            1,
            "{build:?} {fault}: the EMF line is lost (report {} bytes)",
            written.len()
        );
        // The report line, which could not go whole, is counted.
        let report: serde_json::Value = serde_json::from_str(&written).unwrap();
        assert!(
            report["log_lines_dropped"].as_u64() >= Some(1),
            "{build:?} {fault}: {report}"
        );
    }
}

/// A tmpfs mounted for one test, unmounted when it goes (also when the
/// test fails), before its scratch directory is removed.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &std::path::Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .expect("mount");
        assert!(status.success(), "mount -t tmpfs at {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Fills the file system of `dir` to its last byte: writes until ENOSPC.
fn fill(dir: &std::path::Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = [b'f'; 4096];
    while file.write_all(&chunk).is_ok() {}
    let byte = [b'f'; 1];
    while file.write(&byte).is_ok_and(|n| n == 1) {}
    // SAFETY: statvfs writes only into `st`; the path is a C string.
    let free = unsafe {
        let c = std::ffi::CString::new(path_str(dir)).unwrap();
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
        st.f_bavail
    };
    assert_eq!(free, 0, "{} is not full", dir.display());
}

/// The report's file system is full when drainit exits: the earlier run's
/// report (16 KiB, larger than this run's) is there, and not one block is
/// free for a new copy of the report. This run's report is written in
/// place, in the earlier one's blocks: the file is this run's, never the
/// earlier run's, and no temporary file is left.
#[test]
fn a_report_on_a_full_file_system_is_this_runs() {
    for build in BUILDS {
        let scratch = Scratch::new("report-full");
        let dir = scratch.file("fs");
        let _fs = Tmpfs::mount(&dir, "256k");
        let report = dir.join("report.json");
        let earlier = format!(
            "{{\"exit_code\":99,\"pad\":\"{}\"}}\n",
            "e".repeat(16 * 1024)
        );
        std::fs::write(&report, &earlier).unwrap();
        fill(&dir);
        let (code, stderr) = drainit(["--exit-report", path_str(&report)])
            .binary(&built(build))
            .with_args(sh(&scratch, "exit 3"))
            .run();
        assert_eq!(code, 3, "{build:?}: {stderr}");
        let written = std::fs::read_to_string(&report).unwrap();
        assert!(
            written != earlier,
            "{build:?}: the earlier run's report is left: {stderr}"
        );
        let r: serde_json::Value = serde_json::from_str(&written)
            .unwrap_or_else(|e| panic!("{build:?}: {e}: {written:?} {stderr}"));
        assert_eq!(r["exit_code"], 3, "{build:?}: {r}");
        assert!(
            !stderr.contains("cannot write the exit report"),
            "{build:?}: {stderr}"
        );
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".drainit-"))
            .collect();
        assert!(left.is_empty(), "{build:?}: {left:?}");
    }
}
