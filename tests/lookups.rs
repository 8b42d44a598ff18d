//! Name lookups while the app runs: on both libc builds, a drainit that is
//! not PID 1 survives a flood of the C libraries' internal signals (32-34)
//! sent while its drain URLs' names are looked up at every poll, keeps
//! forwarding them, and still supervises the app (no lookup thread is
//! born while the child runs).

mod support;

use std::ffi::CString;
use std::time::{Duration, Instant};

use support::server::{json, Server};
use support::*;

const PATIENCE: Duration = Duration::from_secs(20);

/// Binds a `hosts` with `names` at 127.0.0.1 and a `resolv.conf` whose
/// resolver fails at once over /etc's, in a mount namespace of the
/// process's own: code for `Launch::before_exec`.
fn names_at(s: &Scratch, names: &[&str]) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    let mut hosts = "127.0.0.1 localhost\n".to_string();
    for n in names {
        hosts.push_str(&format!("127.0.0.1 {n}\n"));
    }
    std::fs::write(s.file("hosts"), hosts).unwrap();
    std::fs::write(
        s.file("resolv.conf"),
        "nameserver 127.0.0.1\noptions timeout:0 attempts:1\n",
    )
    .unwrap();
    let c = |p: &str| CString::new(p).unwrap();
    let binds = [
        (c(path_str(&s.file("hosts"))), c("/etc/hosts")),
        (c(path_str(&s.file("resolv.conf"))), c("/etc/resolv.conf")),
    ];
    let (none, root) = (c("none"), c("/"));
    move || {
        // SAFETY: plain syscalls between fork and exec with C strings made
        // before the fork; they change only this process's mounts.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    none.as_ptr(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            for (source, target) in &binds {
                let rc = libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                );
                if rc != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Four drain URLs by name, polled every 100 ms after a SIGTERM whose
/// forward is dropped (`--rewrite 15:0`, so the app keeps running): each
/// poll looks the four names up. Meanwhile 32, 33 and 34 go to drainit by
/// the thousand. Before lookups ran on threads started ahead, each lookup
/// was a new thread born with the C library's cancel signal unblocked (33
/// on musl, 32 on glibc), and the first copy to land there ended drainit.
#[test]
fn a_flood_of_internal_signals_during_lookups_leaves_drainit_running() {
    const NAMES: [&str; 4] = [
        "a.lookups.test",
        "b.lookups.test",
        "c.lookups.test",
        "d.lookups.test",
    ];
    for build in [Build::Static, Build::Glibc] {
        let s = Scratch::new("lookup-flood");
        let drain = Server::start(|_, _| json(200, r#"{"readyForTermination":false}"#));
        let port = drain
            .url("/")
            .split(':')
            .nth(2)
            .unwrap()
            .trim_end_matches('/')
            .to_string();
        let mut args: Vec<String> = vec![
            "--drain-interval".into(),
            "100ms".into(),
            "--grace".into(),
            "60s".into(),
            "--rewrite".into(),
            "15:0".into(),
        ];
        for n in NAMES {
            args.push("--drain-url".into());
            args.push(format!("http://{n}:{port}/drain"));
        }
        let child = format!("exec \"{}\" sigrecv > \"$D/signals\"", stress_helper());
        args.extend(sh(&s, &child));
        let mut d = drainit(args)
            .binary(&built(build))
            .not_pid1()
            .before_exec(names_at(&s, &NAMES))
            .start();
        wait_for("the receiver", PATIENCE, || {
            s.read("signals").starts_with("ready").then_some(())
        });
        d.signal(libc::SIGTERM);
        wait_for("the first polls", PATIENCE, || {
            (drain.count() >= 4).then_some(())
        });
        let polls_before = drain.count();
        let until = Instant::now() + Duration::from_secs(3);
        let mut sent = 0usize;
        while Instant::now() < until && d.try_code().is_none() {
            for signo in [32, 33, 34] {
                // SAFETY: kill to the test's own drainit.
                if unsafe { libc::kill(d.pid(), signo) } == 0 {
                    sent += 1;
                }
            }
        }
        let polls = drain.count() - polls_before;
        eprintln!("{build:?}: {sent} signals sent over {polls} polls");
        assert!(
            polls >= 40,
            "{build:?}: only {polls} polls (lookups) in the flood"
        );
        assert!(
            d.try_code().is_none(),
            "{build:?}: drainit ended: {}",
            d.stderr()
        );
        // Still supervising: the app got forwarded copies.
        wait_for(
            &format!("{build:?}: copies of 33 at the app"),
            PATIENCE,
            || {
                s.read("signals")
                    .lines()
                    .any(|l| l.starts_with("33 "))
                    .then_some(())
            },
        );
        let app = children_of(d.pid());
        d.signal(libc::SIGKILL);
        for pid in app {
            // SAFETY: kill to the test's own app, left behind by drainit.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = d.wait_status(PATIENCE);
    }
}
