//! Which signals reach the app and which end drainit: fault and job-control
//! signals sent by another process are forwarded (as PID 1 and as a
//! subreaper, on the glibc and the static musl build), a real fault inside
//! drainit ends it, and a signal drainit raised itself (its own SIGPIPE) is
//! never forwarded. The child is `stress sigrecv`, which blocks every signal
//! and writes one line per signal it takes.

mod support;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use support::*;

/// The builds whose signal handling may differ: the debug glibc binary cargo
/// test built (same code as `cargo install`) and the static musl release.
fn builds() -> Vec<String> {
    vec![DRAINIT.to_string(), built(Build::Static)]
}

/// A drainit running `stress sigrecv`, ready to count signals.
struct Receiver {
    drainit: Drainit,
    scratch: Scratch,
}

impl Receiver {
    fn start(binary: &str, pid1: bool, flags: &[&str]) -> Receiver {
        Receiver::start_with(binary, pid1, flags, false)
    }

    /// `fork_path`: drainit inherits SIGCHLD ignored, which makes it start
    /// the child with fork and exec instead of `posix_spawn`.
    fn start_with(binary: &str, pid1: bool, flags: &[&str], fork_path: bool) -> Receiver {
        let scratch = Scratch::new("sigrecv");
        let child = format!("exec \"{}\" sigrecv > \"$D/signals\"", stress_helper());
        let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        args.extend(sh(&scratch, &child));
        let mut launch = drainit(args).binary(binary);
        if !pid1 {
            launch = launch.not_pid1();
        }
        if fork_path {
            launch = launch.before_exec(|| {
                // SAFETY: between fork and exec; one libc call.
                unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
                Ok(())
            });
        }
        let drainit = launch.start();
        wait_for("the receiver", PATIENCE, || {
            scratch.read("signals").starts_with("ready").then_some(())
        });
        Receiver { drainit, scratch }
    }

    fn count(&self, signo: i32) -> usize {
        let prefix = format!("{signo} ");
        self.scratch
            .read("signals")
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .count()
    }

    /// Sends `signo` to drainit and waits until the child has taken it
    /// `expected` times in all.
    fn send_and_see(&self, signo: i32, expected: usize) {
        self.drainit.signal(signo);
        wait_for(
            &format!("signal {signo} to reach the child {expected} times"),
            PATIENCE,
            || (self.count(signo) >= expected).then_some(()),
        );
    }

    /// TERM ends `stress sigrecv` with 0, which drainit passes on.
    fn finish(mut self) {
        self.drainit.signal(libc::SIGTERM);
        assert_eq!(self.drainit.wait_code(), 0, "{}", self.drainit.stderr());
    }
}

const FAULTS: [i32; 7] = [
    libc::SIGABRT,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
];

fn fault_signals_reach_the_child_twice(pid1: bool) {
    for binary in builds() {
        let r = Receiver::start(&binary, pid1, &[]);
        for signo in FAULTS {
            // The second only after the child took the first: two pending
            // copies of a standard signal would merge into one.
            r.send_and_see(signo, 1);
            r.send_and_see(signo, 2);
        }
        // drainit is still there and still forwarding.
        r.send_and_see(libc::SIGUSR1, 1);
        r.finish();
    }
}

/// 32 to SIGRTMIN-1 for drainit's C library: 32 and 33 with glibc, 32 to
/// 34 with musl. `kill -33` once ended a drainit that was not PID 1.
fn reserved_signals_reach_the_child(pid1: bool) {
    for binary in builds() {
        let mut r = Receiver::start(&binary, pid1, &[]);
        for signo in [32, 33, 34] {
            // Real-time signals queue: each copy arrives.
            r.send_and_see(signo, 1);
            r.send_and_see(signo, 2);
        }
        assert!(r.drainit.try_code().is_none(), "drainit ended");
        r.send_and_see(libc::SIGUSR1, 1);
        r.finish();
    }
}

/// While drainit is busy forwarding a flood of WINCH, every copy of 32-34
/// still reaches the child and none ends drainit: the C library unblocks
/// these in new threads (`--notify` starts one) and in the main thread
/// (musl's first `sigaction`), and a copy that arrives outside the wait
/// would then take its default action.
fn reserved_signals_survive_a_flood(flags: &[&str], fork_path: bool) {
    const ROUNDS: usize = 500;
    for binary in builds() {
        let mut r = Receiver::start_with(&binary, false, flags, fork_path);
        for _ in 0..ROUNDS {
            for signo in [libc::SIGWINCH, 32, 33, 34] {
                r.drainit.signal(signo);
            }
        }
        for signo in [32, 33, 34] {
            // Real-time signals queue: every copy, none lost.
            wait_for(
                &format!("{ROUNDS} copies of {signo} at the child ({binary})"),
                PATIENCE,
                || (r.count(signo) >= ROUNDS).then_some(()),
            );
            assert_eq!(r.count(signo), ROUNDS, "{binary}: copies of {signo}");
        }
        assert!(r.drainit.try_code().is_none(), "{binary} ended");
        r.finish();
    }
}

/// The moment the child runs, drainit's threads must already have blocked
/// the C library's signals (a new thread is born with 33 unblocked): a
/// flood of 32-34 sent as soon as the child is up never ends drainit.
#[test]
fn reserved_signals_at_the_first_moment_never_end_drainit() {
    const ROUNDS: usize = 100;
    for binary in builds() {
        for flags in [&[][..], &["--notify"][..]] {
            for _ in 0..6 {
                let mut r = Receiver::start_with(&binary, false, flags, false);
                for _ in 0..ROUNDS {
                    for signo in [32, 33, 34] {
                        r.drainit.signal(signo);
                    }
                }
                for signo in [32, 33, 34] {
                    wait_for(
                        &format!("{ROUNDS} copies of {signo} ({binary} {flags:?})"),
                        PATIENCE,
                        || {
                            (r.count(signo) >= ROUNDS || r.drainit.try_code().is_some())
                                .then_some(())
                        },
                    );
                }
                assert!(r.drainit.try_code().is_none(), "{binary} {flags:?} ended");
                r.finish();
            }
        }
    }
}

#[test]
fn reserved_signals_survive_a_flood_with_worker_threads() {
    reserved_signals_survive_a_flood(&["--notify"], false);
}

#[test]
fn reserved_signals_survive_a_flood_on_the_fork_path() {
    // No thread: only the main thread's own mask protects drainit here.
    reserved_signals_survive_a_flood(&[], true);
}

#[test]
fn the_c_librarys_reserved_signals_are_forwarded_as_subreaper() {
    reserved_signals_reach_the_child(false);
}

#[test]
fn the_c_librarys_reserved_signals_are_forwarded_as_pid1() {
    reserved_signals_reach_the_child(true);
}

#[test]
fn fault_signals_sent_by_another_process_are_forwarded_as_pid1() {
    fault_signals_reach_the_child_twice(true);
}

#[test]
fn fault_signals_sent_by_another_process_are_forwarded_as_subreaper() {
    fault_signals_reach_the_child_twice(false);
}

fn job_control_reaches_the_child(pid1: bool) {
    for binary in builds() {
        let r = Receiver::start(&binary, pid1, &[]);
        for signo in [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
            r.send_and_see(signo, 1);
            // Had drainit stopped, it would be in state T now (the signal
            // is taken before the child can see it).
            assert_ne!(
                proc_state(r.drainit.pid()),
                Some('T'),
                "drainit stopped on signal {signo}"
            );
        }
        r.send_and_see(libc::SIGUSR1, 1);
        assert_ne!(proc_state(r.drainit.pid()), Some('T'));
        r.finish();
    }
}

#[test]
fn job_control_signals_are_forwarded_and_never_stop_drainit_as_pid1() {
    job_control_reaches_the_child(true);
}

#[test]
fn job_control_signals_are_forwarded_and_never_stop_drainit_as_subreaper() {
    job_control_reaches_the_child(false);
}

#[test]
fn rewrite_takes_any_forwarded_signal_as_its_source() {
    for binary in builds() {
        let r = Receiver::start(&binary, true, &["-r", "SYS:USR1", "-r", "TTIN:HUP"]);
        r.drainit.signal(libc::SIGSYS);
        r.drainit.signal(libc::SIGTTIN);
        wait_for("the rewritten signals", PATIENCE, || {
            (r.count(libc::SIGUSR1) == 1 && r.count(libc::SIGHUP) == 1).then_some(())
        });
        assert_eq!(r.count(libc::SIGSYS), 0, "SYS must arrive as USR1");
        assert_eq!(r.count(libc::SIGTTIN), 0, "TTIN must arrive as HUP");
        r.finish();
    }
}

#[test]
fn sigchld_cannot_be_rewritten() {
    assert_usage_error(&["-r", "CHLD:USR1"], &[], "SIGCHLD");
    assert_usage_error(&[], &[("DRAINIT_REWRITE", "CLD:0")], "SIGCHLD");
}

/// Runs a fault-injection build whose loop faults with `action` at the
/// first signal it takes (the supervisor's `event_loop` point, inside its
/// catch_unwind: a fault or abort is no panic and must still end drainit); returns how drainit (or unshare, which re-raises
/// its child's death signal) ended.
fn injected(build: Build, pid1: bool, action: &str) -> std::process::ExitStatus {
    let scratch = Scratch::new("fault");
    let mut launch = drainit(sh(&scratch, "touch \"$D/up\"; exec sleep 30"))
        .binary(&built(build))
        .env("DRAINIT_TEST_FAULT", &format!("event_loop={action}"));
    if !pid1 {
        launch = launch.not_pid1();
    }
    let mut d = launch.start();
    scratch.wait_file("up");
    d.signal(libc::SIGUSR1);
    d.wait_status(PATIENCE)
}

#[test]
fn a_real_fault_inside_drainit_ends_it_by_sigsegv() {
    for build in [Build::StaticFaults, Build::GlibcFaults] {
        for pid1 in [true, false] {
            let status = injected(build, pid1, "segv");
            assert_eq!(
                status.signal(),
                Some(libc::SIGSEGV),
                "{build:?} pid1={pid1}: {status:?}"
            );
        }
    }
}

#[test]
fn abort_inside_drainit_ends_it_by_a_signal_never_a_hang() {
    for build in [Build::StaticFaults, Build::GlibcFaults] {
        for pid1 in [true, false] {
            // wait_status panics if drainit is still there after PATIENCE.
            let status = injected(build, pid1, "abort");
            assert!(
                status.signal().is_some(),
                "{build:?} pid1={pid1}: {status:?}"
            );
        }
    }
}

#[test]
fn drainits_own_sigpipe_is_never_forwarded() {
    for binary in builds() {
        let scratch = Scratch::new("own-sigpipe");
        // drainit's stderr is a pipe whose reader is gone: every log line
        // raises SIGPIPE in drainit itself (-vvv logs each signal).
        let mut fds = [0; 2];
        // Close-on-exec, so no process another test starts meanwhile keeps
        // the read end open (the writes would then simply succeed).
        // SAFETY: pipe2() fills the array.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: the read end is ours and closed once.
        unsafe { libc::close(fds[0]) };
        // SAFETY: the write end is ours; Stdio takes it over.
        let stderr = unsafe { <Stdio as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
        let child = format!(
            "exec \"{}\" sigrecv > \"{}\"",
            stress_helper(),
            path_str(&scratch.file("signals"))
        );
        let mut unshare = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(&binary)
            .args(["-vvv", "--", "/bin/sh", "-c", &child])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start unshare");
        let outer = unshare.id() as i32;
        let pid = wait_for("drainit inside unshare", PATIENCE, || {
            children_of(outer).first().copied()
        });
        // A failed assertion must not leave this namespace running.
        let mut guard = KillOnDrop(vec![pid, outer]);
        wait_for("the receiver", PATIENCE, || {
            fs::read_to_string(scratch.file("signals"))
                .ok()?
                .starts_with("ready")
                .then_some(())
        });
        let count = |signo: i32| {
            let prefix = format!("{signo} ");
            fs::read_to_string(scratch.file("signals"))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .count()
        };
        for n in 1..=20 {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(pid, libc::SIGUSR1) };
            wait_for("USR1 to reach the child", PATIENCE, || {
                (count(libc::SIGUSR1) >= n).then_some(())
            });
        }
        assert_eq!(
            count(libc::SIGPIPE),
            0,
            "drainit forwarded its own SIGPIPE ({binary})"
        );
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = wait_for("drainit to exit", PATIENCE, || {
            unshare.try_wait().ok().flatten()
        });
        guard.0.clear(); // reaped: never signal those pids again
        assert_eq!(status.code(), Some(0), "{status:?}");
    }
}

#[test]
fn a_job_control_signal_sent_before_the_loop_runs_is_not_lost() {
    // TTIN made pending (and blocked) before drainit is exec'd: drainit must
    // keep it for the child rather than discard it by ignoring it. The child
    // (sleep) inherits the block, so the forwarded TTIN waits in its pending
    // set, where the test can see it.
    let mut d = drainit(["--", "sleep", "600"])
        .not_pid1()
        .before_exec(|| {
            // SAFETY: test-only libc calls between fork and exec.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGTTIN);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                // From another process: drainit never forwards its own.
                let me = libc::getpid();
                match libc::fork() {
                    0 => {
                        libc::kill(me, libc::SIGTTIN);
                        libc::_exit(0);
                    }
                    pid if pid > 0 => {
                        libc::waitpid(pid, std::ptr::null_mut(), 0);
                    }
                    _ => return Err(std::io::Error::last_os_error()),
                }
            }
            Ok(())
        })
        .start();
    let child = d.wait_child();
    wait_for("TTIN pending in the child", PATIENCE, || {
        sigset_has(&status_field(child, "ShdPnd")?, libc::SIGTTIN).then_some(())
    });
    assert_ne!(proc_state(d.pid()), Some('T'));
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 128 + libc::SIGTERM);
}

/// Kills the listed pids (drainit first, then unshare) unless cleared.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: test clean-up of our own, not yet reaped processes.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// One name per signal number on both builds, Docker's, systemd's and
/// glibc's: a child killed by signal 34 is `SIGRTMIN` in the exit report
/// and the log, by 37 `SIGRTMIN+3`, where musl's build once said `34` and
/// a later one counted from 32.
#[test]
fn real_time_signals_have_one_name_on_both_builds() {
    for binary in builds() {
        for (signo, name) in [(34, "SIGRTMIN"), (37, "SIGRTMIN+3"), (64, "SIGRTMIN+30")] {
            let scratch = Scratch::new("rt-name");
            let report = scratch.file("report.json");
            let (code, stderr) = drainit(["-v", "--exit-report", path_str(&report)])
                .binary(&binary)
                .with_args(sh(&scratch, &format!("kill -{signo} $$")))
                .run();
            assert_eq!(code, 128 + signo, "{binary}: {stderr}");
            let r: serde_json::Value = exit_report(&report);
            assert_eq!(r["child_status"]["signaled"], name, "{binary}: {r}");
            assert!(
                stderr.contains(&format!("main child was killed by {name}\n")),
                "{binary}: {stderr}"
            );
        }
    }
}

/// Real-time names in options mean the same numbers on both builds, 34 for
/// `RTMIN` included although musl keeps 34 for itself: `STOPSIGNAL
/// SIGRTMIN+3` (37) begins a stop, `-r USR2:RTMIN+3` sends 37, `-r
/// RTMIN:USR1` takes 34 as a source; 32 and 33 are refused.
#[test]
fn real_time_names_in_options_follow_docker_on_both_builds() {
    for binary in builds() {
        for (stop, signo, name) in [("SIGRTMIN+3", 37, "SIGRTMIN+3"), ("RTMIN", 34, "SIGRTMIN")] {
            let scratch = Scratch::new("rt-stop");
            let report = scratch.file("report.json");
            let mut d = drainit(["--stop-signals", stop, "--exit-report", path_str(&report)])
                .binary(&binary)
                .with_args(sh(&scratch, "touch \"$D/up\"; exec sleep 1000"))
                .start();
            wait_for("the child", PATIENCE, || {
                scratch.file("up").exists().then_some(())
            });
            d.signal(signo);
            assert_eq!(d.wait_code(), 128 + signo, "{binary}: {}", d.stderr());
            let r: serde_json::Value = exit_report(&report);
            assert_eq!(r["stop_trigger"], "signal", "{binary}: {r}");
            assert_eq!(r["stop_signal"], name, "{binary}: {r}");
            assert_eq!(r["child_status"]["signaled"], name, "{binary}: {r}");
        }

        let r = Receiver::start(&binary, true, &["-r", "USR2:RTMIN+3", "-r", "RTMIN:USR1"]);
        r.drainit.signal(libc::SIGUSR2);
        r.drainit.signal(34);
        wait_for("the rewritten signals", PATIENCE, || {
            (r.count(37) == 1 && r.count(libc::SIGUSR1) == 1).then_some(())
        });
        assert_eq!(r.count(libc::SIGUSR2), 0, "USR2 must arrive as 37");
        assert_eq!(r.count(34), 0, "34 must arrive as USR1");
        r.finish();

        for text in ["32", "33", "RTMIN-1", "RTMAX-31", "RTMIN+31"] {
            let (code, stderr) = drainit(["--stop-signals", text, "--", "true"])
                .binary(&binary)
                .run();
            assert_eq!(code, 2, "{binary} {text}: {stderr}");
        }
    }
}
