//! Called `dumb-init`, drainit does what dumb-init's own suite checks, on the
//! real binary, as PID 1 of a PID namespace and (as that suite runs it) not
//! PID 1: SIGTERM to what the child left in its process group when it ends
//! in session mode, `/` as its own working directory once the child started
//! (relative paths made absolute at start), and for SIGTSTP, SIGTTIN and
//! SIGTTOU the child stopped and then drainit itself, until a SIGCONT
//! resumes both. Under its own name none of this changes.

mod support;

use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};

use support::*;

/// `binary` installed under the name `dumb-init` (a link in `dir`).
fn as_dumb_init(binary: &str, dir: &Scratch) -> String {
    let link = dir.file("dumb-init");
    if !link.exists() {
        std::os::unix::fs::symlink(binary, &link).expect("link as dumb-init");
    }
    path_str(&link).to_string()
}

/// The child's leftover: a shell in the child's process group that traps
/// TERM (file `term`) and WINCH (file `probe`) and wrote its pid to
/// `leftover`; the child exits 0 once it is there.
const LEAVES_ONE_BEHIND: &str = "sh -c \"trap 'touch $D/term' TERM; trap 'touch $D/probe' WINCH; \
     echo \\$\\$ > $D/leftover; while :; do sleep 0.02; done\" & \
     while [ ! -s \"$D/leftover\" ]; do sleep 0.01; done; exit 0";

/// Runs a child that leaves a process behind, not as PID 1 (the leftover
/// outlives drainit, as in dumb-init's suite), and says whether the
/// leftover got SIGTERM when the child ended.
fn leftover_got_term(binary: &str, flags: &[&str], vars: &[(&str, &str)]) -> bool {
    let scratch = Scratch::new("dumb-init-leftover");
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(sh(&scratch, LEAVES_ONE_BEHIND));
    let mut launch = drainit(args).binary(binary).not_pid1();
    for (k, v) in vars {
        launch = launch.env(k, v);
    }
    let mut d = launch.start();
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    let leftover: i32 = scratch.read("leftover").trim().parse().unwrap();
    // Anything drainit sent was sent before it exited. WINCH (28) is
    // trapped after TERM (15) when both are pending, so once `probe` is
    // there, a SIGTERM from drainit would have left `term` already.
    // SAFETY: kill has no memory effects; the leftover is ours.
    unsafe { libc::kill(leftover, libc::SIGWINCH) };
    scratch.wait_file("probe");
    let got = scratch.file("term").exists();
    // SAFETY: as above.
    unsafe { libc::kill(leftover, libc::SIGKILL) };
    got
}

#[test]
fn leftovers_in_the_childs_group_get_sigterm_when_it_ends_in_session_mode() {
    let links = Scratch::new("dumb-init-bin");
    let dumb = as_dumb_init(DRAINIT, &links);
    assert!(leftover_got_term(&dumb, &[], &[]));
    assert!(leftover_got_term(&dumb, &[], &[("DUMB_INIT_SETSID", "1")]));
    // No session mode, no SIGTERM (as dumb-init).
    assert!(!leftover_got_term(&dumb, &[], &[("DUMB_INIT_SETSID", "0")]));
    assert!(!leftover_got_term(&dumb, &["-c"], &[]));
    // Under its own name drainit exits at once, the group or not.
    assert!(!leftover_got_term(DRAINIT, &["-g"], &[]));
}

#[test]
fn as_pid1_the_group_signal_comes_before_the_orphan_grace() {
    // As PID 1 the kernel ends what is left when drainit exits, so the
    // signal is seen through --orphan-grace: the leftover ignores the
    // grace's SIGTERM and ends on the group's signal, rewritten to USR1.
    let links = Scratch::new("dumb-init-bin");
    let dumb = as_dumb_init(DRAINIT, &links);
    let scratch = Scratch::new("dumb-init-pid1-leftover");
    let script = "sh -c \"trap '' TERM; trap 'touch $D/usr1; exit 0' USR1; \
         echo \\$\\$ > $D/leftover; while :; do sleep 0.02; done\" & \
         while [ ! -s \"$D/leftover\" ]; do sleep 0.01; done; exit 0";
    let mut args = vec![
        "--orphan-grace".to_string(),
        "20s".into(),
        "-r".into(),
        "TERM:USR1".into(),
    ];
    args.extend(sh(&scratch, script));
    let started = std::time::Instant::now();
    let (code, stderr) = drainit(args).binary(&dumb).run();
    assert_eq!(code, 0, "{stderr}");
    assert!(scratch.file("usr1").exists(), "{stderr}");
    // It ended because none was left, not at the grace's end.
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}

/// drainit's working directory, from /proc.
fn cwd_of(pid: i32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// Starts `binary` as PID 1 in `start` (its working directory), with a
/// child that writes its own directory to `child-cwd` and drainit's to
/// `parent-cwd`, then waits for `stop`, and a relative `--exit-report`.
fn started_in(binary: &str, start: &Path, scratch: &Scratch) -> Drainit {
    let dir = CString::new(path_str(start)).unwrap();
    let mut args = vec!["--exit-report".to_string(), "report.json".into()];
    args.extend(sh(
        scratch,
        "pwd > \"$D/child-cwd\"; readlink /proc/$PPID/cwd > \"$D/parent-cwd\"; \
         touch \"$D/ready\"; \
         while [ ! -e \"$D/stop\" ]; do sleep 0.02; done",
    ));
    drainit(args)
        .binary(binary)
        .before_exec(move || {
            // SAFETY: chdir to a path we own, between fork and exec.
            if unsafe { libc::chdir(dir.as_ptr()) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
        .start()
}

#[test]
fn called_dumb_init_its_working_directory_is_root_once_the_child_started() {
    let links = Scratch::new("dumb-init-bin");
    let dumb = as_dumb_init(DRAINIT, &links);
    let start = Scratch::new("dumb-init-start");
    let scratch = Scratch::new("dumb-init-cwd");
    let mut d = started_in(&dumb, &start.file(""), &scratch);
    scratch.wait_file("ready");
    // Already at the child's first moment (as dumb-init's suite reads it).
    assert_eq!(scratch.read("parent-cwd").trim(), "/");
    assert_eq!(cwd_of(d.pid()).as_deref(), Some(Path::new("/")));
    // The child started where drainit was started.
    assert_eq!(
        Path::new(scratch.read("child-cwd").trim()),
        start.file("").canonicalize().unwrap()
    );
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    // The relative report path was made absolute at start.
    assert!(
        start.file("report.json").exists(),
        "no report in the start directory: {}",
        d.stderr()
    );
}

#[test]
fn under_its_own_name_drainit_keeps_its_start_directory() {
    let start = Scratch::new("drainit-start");
    let scratch = Scratch::new("drainit-cwd");
    let mut d = started_in(DRAINIT, &start.file(""), &scratch);
    scratch.wait_file("ready");
    let start_dir = start.file("").canonicalize().unwrap();
    assert_eq!(cwd_of(d.pid()), Some(start_dir.clone()));
    assert_eq!(Path::new(scratch.read("parent-cwd").trim()), start_dir);
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
    assert!(start.file("report.json").exists(), "{}", d.stderr());
}

/// A child that wrote its pid to `child` and traps `traps` (each by
/// touching a file of the signal's name), and runs until killed.
fn job_child(scratch: &Scratch, traps: &[&str]) -> Vec<String> {
    let mut script = String::new();
    for sig in traps {
        script.push_str(&format!("trap 'touch \"$D/{sig}\"' {sig}; "));
    }
    // Written whole, then named: the test reads the pid as soon as the
    // name exists. Its `sleep` runs in the background and the shell waits
    // in `wait`: a shell running `sleep` in the foreground may be in
    // dash's vfork, which waits uninterruptibly (`D`) for a child that the
    // group's SIGSTOP stopped, so the shell itself would never show `T`.
    script.push_str(
        "echo $$ > \"$D/child.tmp\"; mv \"$D/child.tmp\" \"$D/child\"; \
         while :; do sleep 0.02 & wait $!; done",
    );
    sh(scratch, &script)
}

/// Kills the child's process group when the test ends, however it ends:
/// not PID 1, drainit's death leaves a child in its own group running.
struct KillGroup(i32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        // SAFETY: kill has no memory effects; the group is the test's child's.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
            libc::kill(self.0, libc::SIGKILL);
        }
    }
}

fn is_stopped(pid: i32) -> bool {
    proc_state(pid) == Some('T')
}

const JOB_SIGNALS: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// The release build as well: stopping itself is signal handling, which
/// differs by C library.
fn builds() -> [String; 2] {
    [DRAINIT.to_string(), built(Build::Static)]
}

#[test]
fn job_control_stops_the_childs_group_and_then_drainit_until_sigcont() {
    for binary in builds() {
        let links = Scratch::new("dumb-init-bin");
        let dumb = as_dumb_init(&binary, &links);
        let scratch = Scratch::new("dumb-init-tstp");
        let d = drainit(job_child(&scratch, &[]))
            .binary(&dumb)
            .not_pid1()
            .start();
        let child: i32 = scratch.wait_number("child");
        let _group = KillGroup(child);
        for signo in JOB_SIGNALS {
            d.signal(signo);
            wait_for("the child and drainit stopped", PATIENCE, || {
                (is_stopped(child) && is_stopped(d.pid())).then_some(())
            });
            d.signal(libc::SIGCONT);
            wait_for("the child and drainit resumed", PATIENCE, || {
                (!is_stopped(child) && !is_stopped(d.pid())).then_some(())
            });
        }
    }
}

#[test]
fn job_control_signals_go_as_rewritten_or_unchanged_and_drainit_still_stops() {
    // (flags, what the child gets for each of TSTP, TTIN, TTOU)
    let cases: [(&[&str], [&str; 3]); 2] = [
        (&["-c"], ["TSTP", "TTIN", "TTOU"]),
        (
            &["-r", "TSTP:HUP", "-r", "TTIN:USR1", "-r", "TTOU:USR2"],
            ["HUP", "USR1", "USR2"],
        ),
    ];
    let links = Scratch::new("dumb-init-bin");
    let dumb = as_dumb_init(DRAINIT, &links);
    for (flags, got) in cases {
        let scratch = Scratch::new("dumb-init-rewritten");
        let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        args.extend(job_child(&scratch, &[got[0], got[1], got[2], "CONT"]));
        let d = drainit(args).binary(&dumb).not_pid1().start();
        let child: i32 = scratch.wait_number("child");
        let _group = KillGroup(child);
        for (signo, name) in JOB_SIGNALS.into_iter().zip(got) {
            d.signal(signo);
            scratch.wait_file(name);
            wait_for("drainit stopped", PATIENCE, || {
                is_stopped(d.pid()).then_some(())
            });
            assert!(!is_stopped(child), "{flags:?}: the child caught {name}");
            d.signal(libc::SIGCONT);
            // SIGCONT reaches the child once drainit runs again.
            scratch.wait_file("CONT");
            fs::remove_file(scratch.file("CONT")).unwrap();
            assert!(!is_stopped(d.pid()));
        }
    }
}

#[test]
fn under_its_own_name_drainit_forwards_job_control_and_never_stops() {
    let scratch = Scratch::new("drainit-tstp");
    // The child only: with -g its `sleep` would stop at SIGTSTP, and the
    // shell waiting for it would never run its trap.
    let d = drainit(job_child(&scratch, &["TSTP"])).not_pid1().start();
    let child: i32 = scratch.wait_number("child");
    let _group = KillGroup(child);
    d.signal(libc::SIGTSTP);
    // Unchanged to the child; drainit, which would have stopped itself
    // right after the forward, runs.
    scratch.wait_file("TSTP");
    // A drainit that stopped itself just after the forward would show `T`
    // within moments: watch it for a while, not once.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while std::time::Instant::now() < until {
        assert!(!is_stopped(d.pid()), "drainit stopped itself");
        assert!(!is_stopped(child), "the child stopped");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn as_pid1_only_the_child_stops_the_kernel_keeps_init_running() {
    // The kernel drops a SIGSTOP that PID 1 of a namespace sends itself
    // (it is unkillable from inside): dumb-init as a container's PID 1
    // behaves the same. The child's group stops and SIGCONT resumes it.
    for binary in builds() {
        let links = Scratch::new("dumb-init-bin");
        let dumb = as_dumb_init(&binary, &links);
        let scratch = Scratch::new("dumb-init-pid1-tstp");
        let d = drainit(job_child(&scratch, &["USR1"]))
            .binary(&dumb)
            .start();
        let inner: i32 = scratch.wait_number("child");
        let child = d.outer_pid(inner);
        d.signal(libc::SIGTSTP);
        wait_for("the child stopped", PATIENCE, || {
            is_stopped(child).then_some(())
        });
        // drainit asked for its own stop right after the forward, yet it
        // still forwards: USR1 reaches the stopped child's group.
        d.signal(libc::SIGUSR1);
        wait_for("USR1 pending at the stopped child", PATIENCE, || {
            sigset_has(&status_field(child, "ShdPnd")?, libc::SIGUSR1).then_some(())
        });
        assert!(!is_stopped(d.pid()), "PID 1 stopped");
        assert!(is_stopped(child));
        d.signal(libc::SIGCONT);
        wait_for("the child resumed", PATIENCE, || {
            (!is_stopped(child)).then_some(())
        });
    }
}

#[test]
fn the_last_resort_stops_itself_after_a_job_control_signal() {
    // The core fails on every signal (the fallback's too), so the last
    // resort handles them; called `dumb-init`, it still stops itself after
    // a job-control signal, as the core would.
    let links = Scratch::new("dumb-init-bin");
    let dumb = as_dumb_init(&built(Build::StaticFaults), &links);
    let scratch = Scratch::new("dumb-init-last-resort-tstp");
    let d = drainit(job_child(&scratch, &[]))
        .binary(&dumb)
        .not_pid1()
        .env("DRAINIT_TEST_FAULT", "core")
        .start();
    let child: i32 = scratch.wait_number("child");
    let group = KillGroup(child);
    d.signal(libc::SIGTSTP);
    wait_for("the child and drainit stopped", PATIENCE, || {
        (is_stopped(child) && is_stopped(d.pid())).then_some(())
    });
    d.signal(libc::SIGCONT);
    wait_for("the child and drainit resumed", PATIENCE, || {
        (!is_stopped(child) && !is_stopped(d.pid())).then_some(())
    });
    assert!(
        d.stderr().contains("the fallback failed too"),
        "{}",
        d.stderr()
    );
    drop(group);
}

#[test]
fn the_last_resort_sends_sigterm_to_what_the_child_left_in_its_group() {
    // The core fails on every signal (the fallback's too), so the last
    // resort sees the child end; called `dumb-init` (session mode), it
    // still sends SIGTERM to what the child left in its group, as the core
    // would. The leftover ignores USR2, the signal that sends drainit to
    // its last resort; the child ends once `go` is there.
    let links = Scratch::new("dumb-init-bin");
    let dumb = as_dumb_init(&built(Build::StaticFaults), &links);
    let scratch = Scratch::new("dumb-init-last-resort-leftover");
    let script = "sh -c \"trap 'touch $D/term' TERM; trap 'touch $D/probe' WINCH; trap '' USR2; \
         echo \\$\\$ > $D/leftover; while :; do sleep 0.02; done\" & \
         trap 'touch \"$D/usr2\"' USR2; \
         while [ ! -s \"$D/leftover\" ]; do sleep 0.01; done; \
         while [ ! -e \"$D/go\" ]; do sleep 0.02; done; exit 0";
    let mut d = drainit(sh(&scratch, script))
        .binary(&dumb)
        .not_pid1()
        .env("DRAINIT_TEST_FAULT", "core")
        .start();
    let leftover: i32 = scratch.wait_number("leftover");
    d.signal(libc::SIGUSR2);
    scratch.wait_file("usr2");
    scratch.touch("go");
    let status = d.wait_status(PATIENCE);
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    assert!(
        d.stderr().contains("the fallback failed too"),
        "{}",
        d.stderr()
    );
    // As in `leftover_got_term`: WINCH is trapped after a pending TERM.
    // SAFETY: kill has no memory effects; the leftover is ours.
    unsafe { libc::kill(leftover, libc::SIGWINCH) };
    scratch.wait_file("probe");
    let got = scratch.file("term").exists();
    // SAFETY: as above.
    unsafe { libc::kill(leftover, libc::SIGKILL) };
    assert!(got, "the leftover got no SIGTERM: {}", d.stderr());
}
