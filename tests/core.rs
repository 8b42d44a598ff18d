//! tini-compatible behaviour of the real binary: exit codes, signal
//! forwarding, reaping, process groups and the inherited signal state, with
//! drainit as PID 1 of a fresh PID namespace unless a test says otherwise.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

fn sh_exit(script: &str) -> i32 {
    let (code, stderr) = drainit(["--", "/bin/sh", "-c", script]).run();
    assert!(!stderr.contains("panicked"), "{stderr}");
    code
}

#[test]
fn every_exit_code_passes_through() {
    for n in 0..=255 {
        assert_eq!(sh_exit(&format!("exit {n}")), n, "exit {n}");
    }
}

#[test]
fn signalled_child_gives_128_plus_n() {
    for (signo, name) in [
        (libc::SIGHUP, "HUP"),
        (libc::SIGINT, "INT"),
        (libc::SIGQUIT, "QUIT"),
        (libc::SIGKILL, "KILL"),
        (libc::SIGUSR1, "USR1"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGALRM, "ALRM"),
    ] {
        assert_eq!(
            sh_exit(&format!("kill -{name} $$")),
            128 + signo,
            "SIG{name}"
        );
    }
    // A real-time signal: not in nix's `Signal`, the reaper must still count them.
    let rt = libc::SIGRTMIN() + 4;
    assert_eq!(sh_exit(&format!("kill -{rt} $$")), 128 + rt);
}

#[test]
fn remap_with_e_applies_after_128_plus_n() {
    let (code, _) = drainit(["-e", "143", "--", "/bin/sh", "-c", "kill -TERM $$"]).run();
    assert_eq!(code, 0);
    let (code, _) = drainit(["-e", "3", "-e", "4", "/bin/sh", "-c", "exit 4"]).run();
    assert_eq!(code, 0);
    let (code, _) = drainit(["-e", "3", "/bin/sh", "-c", "exit 5"]).run();
    assert_eq!(code, 5);
    let (code, _) = drainit(["/bin/sh", "-c", "exit 3"])
        .env("DRAINIT_REMAP_EXIT", "3")
        .run();
    assert_eq!(code, 0);
}

#[test]
fn not_found_is_127_not_executable_is_126() {
    let scratch = Scratch::new("exec");
    let (code, stderr) = drainit(["/nonexistent/program"]).run();
    assert_eq!(code, 127, "{stderr}");
    assert_eq!(drainit(["no-such-program-on-path-xyz"]).run().0, 127);
    scratch.touch("not-executable");
    assert_eq!(
        drainit([path_str(&scratch.file("not-executable"))]).run().0,
        126
    );
    assert_eq!(
        drainit([path_str(&scratch.path)]).run().0,
        126,
        "a directory"
    );
}

#[test]
fn every_forwarded_signal_reaches_the_child() {
    let scratch = Scratch::new("forward");
    let rt = libc::SIGRTMIN() + 2;
    let mut signals = forwarded();
    signals.push(rt);
    let mut d = drainit(sh(&scratch, &recorder_of(&signals))).start();
    scratch.wait_file("ready");
    each_recorded(&d, &scratch, &signals);
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn a_storm_of_1000_orphans_leaves_no_zombie() {
    let scratch = Scratch::new("storm");
    // Each `( true & )` leaves a process whose parent has gone: the kernel
    // re-parents it to PID 1, and the SIGCHLDs for them coalesce.
    let script = "i=0; while [ $i -lt 1000 ]; do ( true & ); i=$((i+1)); done; \
                  touch \"$D/done\"; while [ ! -e \"$D/stop\" ]; do sleep 0.02; done";
    let mut args = vec!["-w".to_string()];
    args.extend(sh(&scratch, script));
    let mut d = drainit(args).start();
    scratch.wait_file("done");
    wait_for("every orphan to be reaped", PATIENCE, || {
        zombie_children(d.pid()).is_empty().then_some(())
    });
    // Outcome first (no zombies above), then the count from tini's wording.
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0);
    let reaped = d
        .stderr()
        .matches("Reaped zombie process with pid=")
        .count();
    assert_eq!(
        reaped, 1000,
        "every orphan was re-parented to drainit and reaped"
    );
}

#[test]
fn orphans_are_reparented_to_drainit_when_not_pid1() {
    let scratch = Scratch::new("subreaper");
    let script = "( sleep 600 & echo $! > \"$D/orphan\" ); touch \"$D/ready\"; \
                  while [ ! -e \"$D/stop\" ]; do sleep 0.02; done";
    let mut d = drainit(sh(&scratch, script)).not_pid1().start();
    scratch.wait_file("ready");
    let orphan: i32 = scratch.read("orphan").trim().parse().unwrap();
    wait_for("orphan to be re-parented", PATIENCE, || {
        (parent_of(orphan) == Some(d.pid())).then_some(())
    });
    // SAFETY: signals our own test process tree.
    unsafe { libc::kill(orphan, libc::SIGKILL) };
    wait_for("orphan to be reaped by drainit", PATIENCE, || {
        proc_state(orphan).is_none().then_some(())
    });
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0);
}

/// Child traps USR1 and starts a grandchild `sleep` in its own process group.
fn group_test(flag: Option<&str>) -> (Scratch, Drainit, i32) {
    let scratch = Scratch::new("group");
    let script = "trap 'touch \"$D/child-got\"' USR1; sleep 600 & echo $! > \"$D/grandchild\"; \
                  touch \"$D/ready\"; while [ ! -e \"$D/stop\" ]; do sleep 0.02; done; kill $! 2>/dev/null; exit 0";
    let mut args: Vec<String> = flag.iter().map(|s| s.to_string()).collect();
    args.extend(sh(&scratch, script));
    let d = drainit(args).start();
    scratch.wait_file("ready");
    let grandchild = d.outer_pid(scratch.read("grandchild").trim().parse().unwrap());
    d.signal(libc::SIGUSR1);
    scratch.wait_file("child-got");
    (scratch, d, grandchild)
}

#[test]
fn dash_g_signals_the_whole_process_group() {
    let (scratch, mut d, grandchild) = group_test(Some("-g"));
    // USR1's default action ends the sleeping grandchild.
    wait_for("grandchild to die of USR1", PATIENCE, || {
        matches!(proc_state(grandchild), None | Some('Z')).then_some(())
    });
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn without_g_only_the_child_is_signalled() {
    let (scratch, mut d, grandchild) = group_test(None);
    // The child has handled USR1, so drainit's kill() returned long ago; had
    // it reached the grandchild, USR1 would be pending there or it would be
    // dead. It is asleep with nothing pending.
    assert_eq!(proc_state(grandchild), Some('S'));
    let pending = status_field(grandchild, "ShdPnd").unwrap();
    assert!(!sigset_has(&pending, libc::SIGUSR1), "ShdPnd {pending}");
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn env_kill_process_group_is_like_g() {
    let scratch = Scratch::new("tini-g");
    let script = "sleep 600 & echo $! > \"$D/grandchild\"; trap 'exit 0' USR1; touch \"$D/ready\"; while :; do sleep 0.02; done";
    let mut d = drainit(sh(&scratch, script))
        .env("TINI_KILL_PROCESS_GROUP", "1")
        .start();
    scratch.wait_file("ready");
    let grandchild = d.outer_pid(scratch.read("grandchild").trim().parse().unwrap());
    d.signal(libc::SIGUSR1);
    wait_for("grandchild to die", PATIENCE, || {
        matches!(proc_state(grandchild), None | Some('Z')).then_some(())
    });
    assert_eq!(d.wait_code(), 0);
}

#[test]
fn dash_p_sets_the_parent_death_signal() {
    let scratch = Scratch::new("pdeathsig");
    // An intermediate shell is drainit's parent; killing it must make the
    // kernel send drainit USR1, which drainit forwards to its child.
    let child =
        "trap 'touch \"$D/got\"; exit 0' USR1; touch \"$D/ready\"; while :; do sleep 0.02; done";
    let inner = format!("D='{}'; {child}", scratch.path.display());
    let mut parent = Command::new("/bin/sh")
        .args([
            "-c",
            "\"$0\" -p SIGUSR1 -- /bin/sh -c \"$1\" & wait",
            DRAINIT,
            &inner,
        ])
        .spawn()
        .unwrap();
    scratch.wait_file("ready");
    parent.kill().unwrap();
    parent.wait().unwrap();
    scratch.wait_file("got");
}

#[test]
fn version_and_help() {
    let out = Command::new(DRAINIT).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("drainit "));
    let out = Command::new(DRAINIT).arg("-h").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["-s", "-p", "-v", "-w", "-g", "-e", "-r", "-l", "--version"] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
    let out = Command::new(DRAINIT).arg("-l").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("MIT"));
}

fn inherited_state_test(launch: Launch) -> (String, String) {
    // cp reads its own status: no shell in between (dash clears its mask).
    let scratch = Scratch::new("mask");
    let out = scratch.file("status");
    let (code, stderr) = launch
        .with_args(vec![
            "--".into(),
            "cp".into(),
            "/proc/self/status".into(),
            path_str(&out).into(),
        ])
        .run();
    assert_eq!(code, 0, "{stderr}");
    let field = |name| status_field_of(&scratch.read("status"), name);
    (field("SigBlk"), field("SigIgn"))
}

fn status_field_of(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no {name} in {status:?}"))
}

fn block_and_ignore(
    blocked: &'static [i32],
    ignored: &'static [i32],
    raise: Option<i32>,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    move || {
        set_32_and_33(libc::SIG_DFL)?;
        // SAFETY: test-only libc calls between fork and exec.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &signo in blocked {
                libc::sigaddset(&mut set, signo);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            for &signo in ignored {
                libc::signal(signo, libc::SIG_IGN);
            }
            if let Some(signo) = raise {
                // Sent by another process, as a platform would: drainit
                // never forwards a signal it raised itself (same pid).
                let me = libc::getpid();
                match libc::fork() {
                    0 => {
                        libc::kill(me, signo);
                        libc::_exit(0);
                    }
                    pid if pid > 0 => {
                        libc::waitpid(pid, std::ptr::null_mut(), 0);
                    }
                    _ => return Err(std::io::Error::last_os_error()),
                }
            }
        }
        Ok(())
    }
}

#[test]
fn child_inherits_the_mask_and_ignored_signals_drainit_inherited() {
    let bits = |signals: &[i32]| signals.iter().fold(0u64, |acc, s| acc | 1 << (s - 1));
    // The debug binary is a glibc build (whose posix_spawn would leave its
    // internal signals 32 and 33 ignored in the child); the static build
    // is what ships. Both must hand over exactly what they inherited.
    for binary in [DRAINIT.to_string(), built(Build::Static)] {
        let (blocked, ignored) = inherited_state_test(
            drainit(Vec::<String>::new())
                .binary(&binary)
                .before_exec(block_and_ignore(&[], &[], None)),
        );
        assert_eq!(
            u64::from_str_radix(&blocked, 16).unwrap(),
            0,
            "{binary}: drainit's own mask must not leak"
        );
        assert_eq!(
            u64::from_str_radix(&ignored, 16).unwrap(),
            0,
            "{binary}: nothing was ignored, nothing may be: SigIgn {ignored}"
        );

        // Both as PID 1 and not: blocked USR2/WINCH and ignored HUP/PIPE/TTOU
        // must reach the child exactly as drainit inherited them.
        for launch in [
            drainit(Vec::<String>::new()),
            drainit(Vec::<String>::new()).not_pid1(),
        ] {
            let launch = launch.binary(&binary).before_exec(block_and_ignore(
                &[libc::SIGUSR2, libc::SIGWINCH],
                &[libc::SIGHUP, libc::SIGPIPE, libc::SIGTTOU],
                None,
            ));
            let (blocked, ignored) = inherited_state_test(launch);
            assert_eq!(
                u64::from_str_radix(&blocked, 16).unwrap(),
                bits(&[libc::SIGUSR2, libc::SIGWINCH]),
                "{binary}: SigBlk {blocked}"
            );
            assert_eq!(
                u64::from_str_radix(&ignored, 16).unwrap(),
                bits(&[libc::SIGHUP, libc::SIGPIPE, libc::SIGTTOU]),
                "{binary}: SigIgn {ignored}"
            );
        }
    }
}

#[test]
fn an_inherited_block_of_signals_32_and_33_reaches_the_child() {
    // glibc's posix_spawn cannot hand these over (it sets the child's mask
    // through a wrapper that drops them): drainit then starts the child by
    // fork and exec. The static build's posix_spawn can.
    let reserved = (1u64 << 31) | (1u64 << 32);
    for binary in [DRAINIT.to_string(), built(Build::Static)] {
        // Not under `unshare`: its own fork clears these (glibc again).
        let launch = drainit(Vec::<String>::new())
            .binary(&binary)
            .not_pid1()
            .before_exec(move || {
                set_32_and_33(libc::SIG_DFL)?;
                // SAFETY: the raw call (glibc's drops these numbers); the
                // kernel reads 8 bytes of the value.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_rt_sigprocmask,
                        libc::SIG_BLOCK,
                        &reserved as *const u64,
                        std::ptr::null_mut::<u64>(),
                        8usize,
                    )
                };
                if rc != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        let (blocked, _) = inherited_state_test(launch);
        assert_eq!(
            u64::from_str_radix(&blocked, 16).unwrap(),
            reserved,
            "{binary}: SigBlk {blocked}"
        );
    }
}

/// Sets the C libraries' internal signals 32 and 33 to `handler` (SIG_DFL
/// or SIG_IGN), which libc's `signal` refuses: the raw system call, between
/// fork and exec. The test process itself may have them ignored (a glibc
/// `posix_spawn` started it), so every launch here sets them.
fn set_32_and_33(handler: usize) -> std::io::Result<()> {
    let mut action = [0usize; 16];
    action[0] = handler;
    for signo in [32, 33] {
        // SAFETY: rt_sigaction reads the action (handler first, the rest
        // zero), which outlives the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signo,
                action.as_ptr(),
                std::ptr::null::<usize>(),
                8usize,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[test]
fn signals_32_and_33_inherited_ignored_stay_ignored() {
    let both = (1u64 << 31) | (1 << 32);
    for binary in [DRAINIT.to_string(), built(Build::Static)] {
        for launch in [
            drainit(Vec::<String>::new()),
            drainit(Vec::<String>::new()).not_pid1(),
        ] {
            let launch = launch
                .binary(&binary)
                .before_exec(|| set_32_and_33(libc::SIG_IGN));
            let (_, got) = inherited_state_test(launch);
            assert_eq!(
                u64::from_str_radix(&got, 16).unwrap(),
                both,
                "{binary}: SigIgn {got}"
            );
        }
    }
}

#[test]
fn a_signal_sent_before_the_child_exists_is_delivered_to_it() {
    // USR1 is made pending (and blocked) before drainit is even exec'd;
    // pending signals survive exec, so drainit holds it from its first
    // instruction. The child (sleep) inherits the block, so the forwarded
    // USR1 waits in its pending set, where the test can see it.
    let mut d = drainit(["--", "sleep", "600"])
        .not_pid1()
        .before_exec(block_and_ignore(&[libc::SIGUSR1], &[], Some(libc::SIGUSR1)))
        .start();
    let child = d.wait_child();
    wait_for("USR1 pending in the child", PATIENCE, || {
        sigset_has(&status_field(child, "ShdPnd")?, libc::SIGUSR1).then_some(())
    });
    assert_eq!(d.try_code(), None, "drainit keeps running");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 128 + libc::SIGTERM);
}

#[test]
fn child_exit_ends_drainit_at_once_even_with_a_grandchild_alive() {
    let start = Instant::now();
    let (code, _) = drainit(["/bin/sh", "-c", "sleep 600 & exit 3"]).run();
    assert_eq!(code, 3);
    assert!(start.elapsed() < Duration::from_secs(60));
    // Also as a subreaper, where the grandchild outlives drainit.
    let scratch = Scratch::new("gc-outlives");
    let (code, _) = drainit(sh(&scratch, "sleep 600 & echo $! > \"$D/gc\"; exit 4"))
        .not_pid1()
        .run();
    assert_eq!(code, 4);
    let gc: i32 = scratch.read("gc").trim().parse().unwrap();
    assert!(proc_state(gc).is_some(), "grandchild should still run");
    // SAFETY: clean up our own process.
    unsafe { libc::kill(gc, libc::SIGKILL) };
}

#[test]
fn idle_drainit_makes_no_wakeups() {
    let scratch = Scratch::new("idle");
    let mut d = drainit(sh(&scratch, "touch \"$D/ready\"; exec sleep 600")).start();
    scratch.wait_file("ready");
    let child = d.wait_child();
    wait_for("child to exec sleep", PATIENCE, || {
        std::fs::read_to_string(format!("/proc/{child}/comm"))
            .ok()
            .filter(|c| c.trim() == "sleep")
    });
    let switches = |pid| {
        let v: u64 = status_field(pid, "voluntary_ctxt_switches")
            .unwrap()
            .parse()
            .unwrap();
        let n: u64 = status_field(pid, "nonvoluntary_ctxt_switches")
            .unwrap()
            .parse()
            .unwrap();
        (v, n)
    };
    // Settled by state, not by a quiet spell a loaded machine can fake: the
    // loop blocked in rt_sigtimedwait with no timeout (sigwaitinfo), which
    // nothing but a signal ends. /proc/PID/syscall: number, then arguments;
    // the fourth field is the timeout pointer.
    let blocked = || {
        let text = std::fs::read_to_string(format!("/proc/{0}/task/{0}/syscall", d.pid())).ok()?;
        let fields: Vec<&str> = text.split_whitespace().collect();
        (fields.first() == Some(&"128") && fields.get(3) == Some(&"0x0")).then_some(())
    };
    wait_for("the loop to wait without a timeout", PATIENCE, blocked);
    let before = switches(d.pid());
    // A count, not a verdict by the clock: a blocked thread switches only
    // when woken, however loaded the machine. tini would wake 3 times here.
    std::thread::sleep(Duration::from_secs(3));
    let after = switches(d.pid());
    assert!(
        blocked().is_some(),
        "the loop is no longer in its untimed wait"
    );
    assert_eq!(before.0, after.0, "voluntary context switches while idle");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_code(), 128 + libc::SIGTERM);
}

#[test]
fn bad_options_exit_2_with_one_line_before_starting_the_child() {
    assert_usage_error(&["--bogus"], &[], "--bogus");
    assert_usage_error(&["-e", "300"], &[], "--remap-exit");
    assert_usage_error(&["-p", "SIGNOPE"], &[], "--pdeathsig");
    assert_usage_error(&["-r", "TERM"], &[], "--rewrite");
    assert_usage_error(&[], &[("DRAINIT_REMAP_EXIT", "x")], "DRAINIT_REMAP_EXIT");
    assert_usage_error(&[], &[("TINI_VERBOSITY", "loud")], "TINI_VERBOSITY");
    assert_usage_error(
        &[],
        &[("DRAINIT_SUBREAPER", "perhaps")],
        "DRAINIT_SUBREAPER",
    );
    let (code, stderr) = drainit(Vec::<String>::new()).not_pid1().run();
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("PROGRAM"), "{stderr:?}");
}

#[test]
fn the_child_gets_the_terminal_foreground() {
    // script(1) gives drainit a pseudo-terminal as stdin; the child must be
    // its own group and that group the terminal's foreground (tpgid).
    let out = Command::new("script")
        .args([
            "-qec",
            &format!("{DRAINIT} -- cat /proc/self/stat"),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script(1) from util-linux");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("(cat)"))
        .unwrap_or_else(|| panic!("no stat line in {text:?}"));
    let fields: Vec<&str> = line[line.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let pid: i32 = line.split_whitespace().next().unwrap().parse().unwrap();
    let (pgrp, tpgid): (i32, i32) = (fields[2].parse().unwrap(), fields[5].parse().unwrap());
    assert_eq!(pgrp, pid, "child leads its own process group");
    assert_eq!(
        tpgid, pgrp,
        "child's group is the terminal's foreground group"
    );
}
