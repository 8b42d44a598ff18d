//! The static aarch64 (arm64) drainit, run under `qemu-aarch64-static` as
//! PID 1 of a fresh PID namespace: exit codes, signals 1-31, reaping, `-g`,
//! `-p` and a drain against a loopback endpoint. The emulator is called
//! explicitly (no binfmt_misc here); children it execs are host binaries.
//! qemu-user limits what can be tested (README "arm64"): it rejects
//! PR_SET_CHILD_SUBREAPER, so `-s` fails, and it renumbers real-time
//! signals, so only 1-31 are used. Skipped (loudly) without the emulator,
//! the target or the C cross compiler the build needs
//! (`aarch64-linux-gnu-gcc`, for ring), unless `DRAINIT_REQUIRE_ARM64=1`
//! (set by `.ci/run`).

mod support;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use support::server::{json, Server};
use support::*;

const TARGET: &str = "aarch64-unknown-linux-musl";
const QEMU: &str = "qemu-aarch64-static";

/// The arm64 binary, built once per run; None (said loudly) when this
/// machine cannot build or run it.
fn arm64() -> Option<&'static str> {
    static BUILT: OnceLock<Option<String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let required = std::env::var("DRAINIT_REQUIRE_ARM64").as_deref() == Ok("1");
            let qemu = Command::new(QEMU).arg("--version").output();
            let target = Command::new("rustup")
                .args(["target", "list", "--installed"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).contains(TARGET))
                .unwrap_or(false);
            let missing_cc = cross_tools().into_iter().find(|t| !runnable(t));
            if qemu.is_err() || !target || missing_cc.is_some() {
                let why = format!(
                    "needs {QEMU} (Debian's qemu-user-static), `rustup target add {TARGET}` \
                     and the C cross compiler ring's build runs (Debian's gcc-aarch64-linux-gnu){}",
                    missing_cc.map_or(String::new(), |t| format!(": no `{t}` here"))
                );
                assert!(
                    !required,
                    "DRAINIT_REQUIRE_ARM64=1 but the arm64 tests {why}"
                );
                let _ = writeln!(std::io::stderr(), "\n*** arm64 tests SKIPPED: {why} ***\n");
                return None;
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let target_dir = root.join("target").join(format!("release-{TARGET}"));
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            // The linker (rust-lld) comes from .cargo/config.toml.
            let status = Command::new(cargo)
                .current_dir(root)
                .args(["build", "--release", "--bin", "drainit", "--target", TARGET])
                .arg("--target-dir")
                .arg(&target_dir)
                .status()
                .expect("run cargo");
            assert!(status.success(), "the {TARGET} build failed");
            let path = target_dir.join(TARGET).join("release").join("drainit");
            Some(path.to_str().expect("utf-8 path").to_string())
        })
        .as_deref()
}

/// The C compiler and archiver the arm64 build runs for ring (the `k8s`
/// feature's TLS): those `.cargo/config.toml` names, unless the variables
/// of the same name say otherwise (its `[env]` yields to them). The first
/// word of each is the program.
fn cross_tools() -> [String; 2] {
    let tool = |prefix: &str, default: &str| {
        // The cc crate reads `CC_aarch64-unknown-linux-musl` before
        // `CC_aarch64_unknown_linux_musl`.
        let value = std::env::var(format!("{prefix}_{TARGET}"))
            .or_else(|_| std::env::var(format!("{prefix}_{}", TARGET.replace('-', "_"))))
            .unwrap_or_else(|_| default.to_string());
        value
            .split_whitespace()
            .next()
            .unwrap_or(default)
            .to_string()
    };
    [
        tool("CC", "aarch64-linux-gnu-gcc"),
        tool("AR", "aarch64-linux-gnu-ar"),
    ]
}

/// True when `program` is a path to an executable or one on `PATH`.
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return std::fs::metadata(program)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    }
    has_command(program)
}

/// drainit (arm64, under qemu) with `args`, as PID 1 of a new namespace.
fn emulated(binary: &str, args: &[String]) -> Launch {
    let mut all = vec![binary.to_string()];
    all.extend_from_slice(args);
    drainit(all).binary(QEMU)
}

fn sh_exit(binary: &str, script: &str) -> i32 {
    let args: Vec<String> = ["--", "/bin/sh", "-c", script]
        .iter()
        .map(|s| s.to_string())
        .collect();
    emulated(binary, &args).run().0
}

#[test]
fn it_is_a_static_arm64_executable_within_budget() {
    let Some(bin) = arm64() else { return };
    let bytes = std::fs::read(bin).unwrap();
    assert!(
        bytes.len() <= 2_097_152,
        "{} bytes, over 2 MiB",
        bytes.len()
    );
    // ELF header: e_machine 183 is EM_AARCH64; no PT_INTERP (static).
    assert_eq!(&bytes[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 183);
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let phentsize = u16::from_le_bytes([bytes[54], bytes[55]]) as usize;
    let phnum = u16::from_le_bytes([bytes[56], bytes[57]]) as usize;
    for i in 0..phnum {
        let p_type = u32::from_le_bytes(
            bytes[phoff + i * phentsize..phoff + i * phentsize + 4]
                .try_into()
                .unwrap(),
        );
        assert_ne!(p_type, 3, "PT_INTERP: the binary is not static");
    }
    let _ = writeln!(std::io::stderr(), "arm64 drainit: {} bytes", bytes.len());
}

#[test]
fn version_matches_the_host_build() {
    let Some(bin) = arm64() else { return };
    let arm = Command::new(QEMU)
        .args([bin, "--version"])
        .output()
        .unwrap();
    let host = Command::new(DRAINIT).arg("--version").output().unwrap();
    assert!(arm.status.success());
    assert_eq!(arm.stdout, host.stdout, "same version line, same commit");
}

#[test]
fn exit_codes_pass_through_and_signals_give_128_plus_n() {
    let Some(bin) = arm64() else { return };
    for n in 0..=255 {
        assert_eq!(sh_exit(bin, &format!("exit {n}")), n, "exit {n}");
    }
    for signo in [1, 2, 3, 6, 9, 10, 12, 13, 14, 15] {
        assert_eq!(sh_exit(bin, &format!("kill -{signo} $$")), 128 + signo);
    }
    let missing = ["/nonexistent/program".to_string()];
    assert_eq!(emulated(bin, &missing).run().0, 127);
}

#[test]
fn every_forwarded_signal_1_to_31_reaches_the_child() {
    let Some(bin) = arm64() else { return };
    let scratch = Scratch::new("arm64-forward");
    let signals = forwarded();
    let mut d = emulated(bin, &sh(&scratch, &recorder_of(&signals))).start();
    scratch.wait_file("ready");
    each_recorded(&d, &scratch, &signals);
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
}

#[test]
fn orphans_are_reaped() {
    let Some(bin) = arm64() else { return };
    let scratch = Scratch::new("arm64-storm");
    let script = "i=0; while [ $i -lt 300 ]; do ( true & ); i=$((i+1)); done; \
                  touch \"$D/done\"; while [ ! -e \"$D/stop\" ]; do sleep 0.02; done";
    let mut d = emulated(bin, &sh(&scratch, script)).start();
    scratch.wait_file("done");
    wait_for("every orphan to be reaped", PATIENCE, || {
        zombie_children(d.pid()).is_empty().then_some(())
    });
    scratch.touch("stop");
    assert_eq!(d.wait_code(), 0, "{}", d.stderr());
}

/// Whether USR1 sent to drainit reaches a grandchild in the child's group.
fn group_reached(bin: &str, flags: &[&str]) -> bool {
    let scratch = Scratch::new("arm64-group");
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(sh(&scratch, GROUP_CHILD));
    usr1_reached_the_grandchild(emulated(bin, &args).start(), &scratch)
}

#[test]
fn dash_g_signals_the_group_and_without_it_only_the_child() {
    let Some(bin) = arm64() else { return };
    assert!(group_reached(bin, &["-g"]));
    assert!(!group_reached(bin, &[]));
}

#[test]
fn dash_p_sets_the_parent_death_signal() {
    let Some(bin) = arm64() else { return };
    let scratch = Scratch::new("arm64-pdeathsig");
    let child =
        "trap 'touch \"$D/got\"; exit 0' USR1; touch \"$D/ready\"; while :; do sleep 0.02; done";
    let inner = format!("D='{}'; {child}", scratch.path.display());
    // An intermediate shell is drainit's parent; when it dies the kernel
    // sends drainit USR1, which drainit forwards to its child.
    let mut parent = Command::new("/bin/sh")
        .args([
            "-c",
            "\"$0\" \"$1\" -p SIGUSR1 -- /bin/sh -c \"$2\" & wait",
            QEMU,
            bin,
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
fn a_stuck_app_is_killed_at_the_deadline_and_a_ready_one_drains() {
    let Some(bin) = arm64() else { return };
    let stubborn =
        "trap 'touch \"$D/term\"' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done";
    for (ready, code, outcome) in [(false, 124, "deadline"), (true, 0, "drained")] {
        let server =
            Server::start(move |_, _| json(503, &format!("{{\"readyForTermination\":{ready}}}")));
        let scratch = Scratch::new("arm64-drain");
        let report = scratch.file("report.json");
        let mut args: Vec<String> = [
            "--drain-url",
            &server.url("/drain"),
            "--drain-interval",
            "100ms",
            "--ready-grace",
            "0",
            "--grace",
            "2s",
            "--exit-report",
            path_str(&report),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(sh(&scratch, stubborn));
        let mut d = emulated(bin, &args).start();
        scratch.wait_file("ready");
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), code, "{}", d.stderr());
        let report: serde_json::Value = exit_report(&report);
        assert_eq!(report["outcome"], outcome);
        let to_exit = report["stop_to_exit_ms"].as_u64().unwrap();
        if ready {
            assert!(to_exit < 2000, "drained before the deadline: {to_exit} ms");
            assert!(server.count() >= 1);
        } else {
            assert!(scratch.file("term").exists(), "the app got SIGTERM first");
            // The 50 ms precision, on drainit's own figure, even emulated.
            assert!((2000..2050).contains(&to_exit), "stop_to_exit_ms {to_exit}");
        }
    }
}
