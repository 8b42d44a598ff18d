//! drainit's own spawner on both C libraries' builds, as PID 1: a stop
//! hook command starts in its own process group with stdin from
//! /dev/null, stdout on drainit's stderr, no signal blocked and none
//! caught (32-34 included), and a command whose program vanished
//! after the start is a warning, not a hang or a crash; what drainit
//! inherited ignored stays ignored (SIGPIPE excepted); the main child
//! gets its own group and the exec errors map to 126/127.

mod support;

use support::*;

fn builds() -> Vec<String> {
    vec![DRAINIT.to_string(), built(Build::Static)]
}

/// A field of /proc/self/status as the hook recorded it.
fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("{name} missing in {status}"))
}

/// Sets the C libraries' 32 and 33 to `handler` with the raw call (libc's
/// `signal` refuses them): code for `Launch::before_exec`.
fn set_32_and_33(handler: usize) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    move || {
        let mut action = [0usize; 16];
        action[0] = handler;
        for signo in [32, 33] {
            // SAFETY: rt_sigaction reads the action (handler first, the
            // rest zero), which outlives the call.
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
}

#[test]
fn a_command_starts_with_a_clean_signal_state_and_quiet_stdio() {
    let reserved: u64 = (1 << 31) | (1 << 32);
    for (binary, handler) in builds()
        .into_iter()
        .flat_map(|b| [(b.clone(), libc::SIG_DFL), (b, libc::SIG_IGN)])
    {
        let scratch = Scratch::new("spawn-clean");
        let hook = format!(
            "sh -c 'D={}; cat /proc/self/status > \"$D/status\"; \
             if [ /proc/self/fd/0 -ef /dev/null ]; then touch \"$D/stdin-null\"; fi; \
             if [ /proc/self/fd/1 -ef /proc/self/fd/2 ]; then touch \"$D/stdout-stderr\"; fi; \
             set -- $(cat /proc/$$/stat); echo $1 $5 > \"$D/group\"'",
            scratch.path.display()
        );
        let mut d = drainit(["--stop-exec", &hook, "--grace", "20s"])
            .binary(&binary)
            .before_exec(set_32_and_33(handler))
            .with_args(sh(
                &scratch,
                "trap 'exit 0' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
            ))
            .start();
        scratch.wait_file("ready");
        // What drainit ignores because it inherited so passes on; SIGPIPE
        // is reset, and 32 and 33, which drainit ignores whatever it
        // inherited (glibc then puts its handler on 33), are what drainit
        // inherited.
        let own = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
        let own = u64::from_str_radix(field(&own, "SigIgn:"), 16).unwrap();
        assert_ne!(own & 1 << 31, 0, "{binary}: drainit's own SigIgn {own:x}");
        let inherited = if handler == libc::SIG_IGN {
            own | reserved
        } else {
            own & !reserved
        };
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), 0, "{binary}: {}", d.stderr());
        let status = scratch.read("status");
        let ignored = u64::from_str_radix(field(&status, "SigIgn:"), 16).unwrap();
        assert_eq!(
            ignored,
            inherited & !(1 << (libc::SIGPIPE - 1)),
            "{binary} (32 and 33 inherited at {handler}): the command's SigIgn"
        );
        for name in ["SigBlk:", "SigCgt:"] {
            assert_eq!(
                field(&status, name),
                "0000000000000000",
                "{binary}: the command's {name}"
            );
        }
        // Tested by the hook with its shell's own `[ -ef ]` (no redirect
        // of its own in the way).
        assert!(scratch.file("stdin-null").exists(), "{binary}: stdin");
        assert!(
            scratch.file("stdout-stderr").exists(),
            "{binary}: stdout goes where stderr goes"
        );
        let group: Vec<String> = scratch
            .read("group")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(group.len(), 2, "{binary}: {group:?}");
        // The hook's shell is the process drainit started: the leader of
        // its own group (pid = pgid).
        assert_eq!(group[0], group[1], "{binary}: the command's group");
    }
}

#[test]
fn a_command_whose_program_vanished_is_a_warning_and_the_stop_goes_on() {
    for binary in builds() {
        let scratch = Scratch::new("spawn-vanished");
        let program = scratch.file("hook");
        std::fs::write(&program, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let report = scratch.file("report.json");
        let mut d = drainit([
            "--stop-exec",
            path_str(&program),
            "--grace",
            "20s",
            "--exit-report",
            path_str(&report),
        ])
        .binary(&binary)
        .with_args(sh(
            &scratch,
            "trap 'exit 5' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
        ))
        .start();
        scratch.wait_file("ready");
        std::fs::remove_file(&program).unwrap();
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), 5, "{binary}: {}", d.stderr());
        assert!(
            d.stderr().contains("cannot run"),
            "{binary}: {}",
            d.stderr()
        );
        // The child that could not exec was collected by the spawner: the
        // reaper never met it as an orphan.
        let r: serde_json::Value = exit_report(&report);
        assert_eq!(r["orphans_reaped"], 0, "{binary}: {r}");
    }
}

#[test]
fn the_main_child_has_its_own_group_and_exec_errors_map_like_a_shell() {
    for binary in builds() {
        let scratch = Scratch::new("spawn-main");
        let (code, stderr) = drainit(Vec::<String>::new())
            .binary(&binary)
            .with_args(sh(
                &scratch,
                "set -- $(cat /proc/$$/stat); echo $5 > \"$D/pgid\"; echo $$ > \"$D/pid\"",
            ))
            .run();
        assert_eq!(code, 0, "{binary}: {stderr}");
        assert_eq!(
            scratch.read("pgid").trim(),
            scratch.read("pid").trim(),
            "{binary}"
        );
        assert_eq!(drainit(["/nonexistent/x"]).binary(&binary).run().0, 127);
        assert_eq!(
            drainit(["no-such-program-xyz"]).binary(&binary).run().0,
            127
        );
        assert_eq!(
            drainit([path_str(&scratch.path)]).binary(&binary).run().0,
            126
        );
        scratch.touch("plain");
        assert_eq!(
            drainit([path_str(&scratch.file("plain"))])
                .binary(&binary)
                .run()
                .0,
            126
        );
        // Found on PATH, argv[0] as typed.
        let (code, _) = drainit(["sh", "-c", "[ \"$0\" = sh ]"])
            .binary(&binary)
            .run();
        assert_eq!(code, 0, "{binary}: argv[0]");
    }
}
