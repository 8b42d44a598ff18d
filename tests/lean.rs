//! drainit's idle cost as PID 1: the private memory it keeps while the app
//! runs (the start-up arena given back, an inbox that holds no room for
//! inputs that never came, small stack frames), on both builds.
//!
//! The goal is 128 kB of `Private_Dirty` for the static build, with and
//! without `--serve` (`bench/lean.py` measures it beside tini). These tests
//! hold the bound on drainit's own anonymous memory, which is where each
//! of those would show: the heap, `.bss` and the thread stacks, with the
//! main stack.

mod support;

use std::os::fd::AsRawFd;

use support::*;

/// Private dirty kB of `pid`'s anonymous mappings (heap, `.bss`, stacks),
/// and of all its mappings.
fn private_dirty(pid: i32) -> (u64, u64) {
    // A binary cargo has just written is dirty in the page cache, and its
    // mapped pages would count as private dirty until written back.
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
    let (mut anonymous, mut all) = (0, 0);
    let mut file_backed = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's head: range, perms, offset, dev, inode, path.
            let inode = line.split_whitespace().nth(4).unwrap_or("0");
            file_backed = inode != "0";
        } else if let Some(kb) = line.strip_prefix("Private_Dirty:") {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap();
            all += kb;
            if !file_backed {
                anonymous += kb;
            }
        }
    }
    (anonymous, all)
}

fn idle(build: Build, extra: &[&str]) -> (u64, u64) {
    let scratch = Scratch::new("lean-idle");
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(sh(&scratch, "touch \"$D/ready\"; exec sleep 60"));
    let d = drainit(Vec::<String>::new())
        .with_args(args)
        .binary(&built(build))
        .start();
    scratch.wait_file("ready");
    d.wait_child();
    let pid = d.pid();
    // Settled: the child runs and the loop waits for an event.
    wait_for("drainit asleep", PATIENCE, || {
        (proc_state(pid) == Some('S')).then_some(())
    });
    let figures = private_dirty(pid);
    eprintln!(
        "{build:?} {extra:?}: Private_Dirty anonymous {} kB, all {} kB",
        figures.0, figures.1
    );
    d.signal(libc::SIGKILL);
    figures
}

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// Without the arena's release the anonymous figure is about 60 kB more;
/// with std's inbox, 44 kB more; with the supervisor's frames together, 20
/// kB more. The bounds leave room for a page or two of difference between
/// kernels; glibc's allocator keeps about 28 kB more than musl's.
#[test]
fn idle_private_memory_stays_small() {
    for build in [Build::Static, Build::Glibc] {
        for extra in [&[][..], &["--serve", "127.0.0.1:0"][..]] {
            let (anonymous, all) = idle(build, extra);
            let bound = if build == Build::Static { 88 } else { 128 };
            assert!(
                anonymous <= bound,
                "{build:?} {extra:?}: {anonymous} kB of anonymous private memory"
            );
            if build == Build::Static {
                assert!(all <= 128, "{build:?} {extra:?}: Private_Dirty {all} kB");
            }
        }
    }
}

/// Only the threads a configuration needs run beside the app: the loop and
/// the log writer (none when no line can come; the harness's stderr is a
/// regular file, which needs the thread), plus one poll thread for one
/// drain URL (its host name check at start runs on that thread, not on a
/// second one).
#[test]
fn threads_beside_the_app_are_those_the_configuration_needs() {
    let cases: [(&[&str], &[&str]); 5] = [
        (&[], &["drainit", "drainit-log"]),
        // Silent: no line can come, no writer.
        (&["DRAINIT_VERBOSE=0"], &["drainit"]),
        (&["DRAINIT_VERBOSE=0", "--emf"], &["drainit", "drainit-log"]),
        (
            &["--drain-url", "http://127.0.0.1:9/drain"],
            &["drainit", "drainit-log", "drainit-poll"],
        ),
        (
            &["--drain-url", "http://localhost:9/drain"],
            &["drainit", "drainit-log", "drainit-poll"],
        ),
    ];
    for build in [Build::Static, Build::Glibc] {
        for (extra, expected) in cases {
            let scratch = Scratch::new("lean-threads");
            let (vars, flags): (Vec<&str>, Vec<&str>) = extra.iter().partition(|a| a.contains('='));
            let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
            args.extend(sh(&scratch, "touch \"$D/ready\"; exec sleep 60"));
            let mut launch = drainit(Vec::<String>::new())
                .with_args(args)
                .binary(&built(build));
            for var in vars {
                let (key, value) = var.split_once('=').unwrap();
                launch = launch.env(key, value);
            }
            let d = launch.start();
            scratch.wait_file("ready");
            let pid = d.pid();
            // Every thread drainit starts is started before the child (the
            // host check at start is handed to a pool then too), so all of
            // them are there once the child runs.
            assert_eq!(thread_names(pid), expected, "{build:?} {extra:?}");
            d.signal(libc::SIGKILL);
        }
    }
}

/// With stderr a pipe (a container's), or `/dev/null`, the log needs no
/// thread: drainit writes through a non-blocking description of its own,
/// and the loop is the only thread beside the app, on both builds.
#[test]
fn a_pipe_or_dev_null_for_stderr_needs_no_writer_thread() {
    for build in [Build::Static, Build::Glibc] {
        for (extra, pipe) in [
            (&[][..], true),
            (&["--emf", "-vvv"][..], true),
            (&[][..], false),
        ] {
            let scratch = Scratch::new("lean-pipe");
            let mut fds = [0; 2];
            // SAFETY: pipe2 writes two fds we own at once.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            // SAFETY: both fds are ours alone from here on.
            let (read, write) = unsafe {
                use std::os::fd::FromRawFd;
                (
                    std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                    std::os::fd::OwnedFd::from_raw_fd(fds[1]),
                )
            };
            let stderr = if pipe {
                std::process::Stdio::from(write)
            } else {
                drop(write);
                std::process::Stdio::null()
            };
            let mut command = std::process::Command::new("unshare");
            command
                .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
                .arg(built(build))
                .args(extra)
                .args(sh(&scratch, "touch \"$D/ready\"; exec sleep 60"))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(stderr);
            for (key, _) in std::env::vars() {
                if key.starts_with("DRAINIT_") || key.starts_with("TINI_") {
                    command.env_remove(key);
                }
            }
            let mut child = command.spawn().expect("unshare");
            drop(command);
            scratch.wait_file("ready");
            let outer = child.id() as i32;
            let pid = wait_for("drainit inside unshare", PATIENCE, || {
                children_of(outer).first().copied()
            });
            assert_eq!(
                thread_names(pid),
                ["drainit"],
                "{build:?} {extra:?} pipe {pipe}"
            );
            // SAFETY: kill to the test's own unshare, which takes drainit.
            unsafe { libc::kill(outer, libc::SIGKILL) };
            child.wait().expect("unshare");
            if pipe && !extra.is_empty() {
                // The debug lines of the start went out through the pipe.
                // Read without waiting: what drainit wrote is there.
                let mut file = std::fs::File::from(read);
                // SAFETY: fcntl on the test's own fd.
                unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
                let mut all = Vec::new();
                let mut buf = [0u8; 65536];
                while let Ok(n) = std::io::Read::read(&mut file, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    all.extend_from_slice(&buf[..n]);
                }
                let text = String::from_utf8_lossy(&all);
                assert!(
                    text.contains("[drainit]"),
                    "{build:?}: no line came: {text:?}"
                );
            }
        }
    }
}
