//! Name lookups against a hostile resolver and a hostile sender, end to
//! end on both libc builds: drain URLs whose names hang at a resolver that
//! never answers leave the platform's own lookups their slots (the
//! Kubernetes read of the pod at the stop still learns the deletion's
//! kill), and a flood of the C libraries' own signals (32-34) while
//! lookup threads are being born never ends a drainit that is not PID 1
//! (musl unblocks 33, glibc 32, in every new thread for its first
//! instructions).

mod support;

use std::ffi::CString;
use std::path::Path;

use support::server::{json, Server};
use support::*;

/// The builds whose C library differs: the debug glibc binary cargo test
/// built and the static musl release that ships.
fn builds() -> Vec<String> {
    vec![built(Build::Static), DRAINIT.to_string()]
}

/// A directory with `hosts` (`localhost`, then `lines`) and `resolv.conf`
/// naming `resolver` with `options`.
fn names_dir(s: &Scratch, lines: &str, resolver: &str, options: &str) -> std::path::PathBuf {
    let dir = s.file("etc");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hosts"), format!("127.0.0.1 localhost\n{lines}")).unwrap();
    std::fs::write(
        dir.join("resolv.conf"),
        format!("nameserver {resolver}\noptions {options}\n"),
    )
    .unwrap();
    dir
}

/// Code for `Launch::before_exec`: the C libraries' 32 and 33 at their
/// default (the test process may have them ignored, and an ignored one
/// was never in danger), then, with `own_namespace`, a mount namespace
/// of its own (for a drainit that is not PID 1; `service_account_at`
/// makes one otherwise), and `dir`'s `hosts` and `resolv.conf` bound over
/// /etc's.
fn names_at(dir: &Path, own_namespace: bool) -> impl FnMut() -> std::io::Result<()> + Send + Sync {
    let c = |p: &Path| CString::new(path_str(p)).unwrap();
    let binds = [
        (c(&dir.join("hosts")), c("/etc/hosts".as_ref())),
        (c(&dir.join("resolv.conf")), c("/etc/resolv.conf".as_ref())),
    ];
    let (none, root) = (c("none".as_ref()), c("/".as_ref()));
    move || {
        let fail = || Err(std::io::Error::last_os_error());
        let mut action = [0usize; 16];
        action[0] = libc::SIG_DFL;
        // SAFETY: plain syscalls between fork and exec, with values made
        // before the fork; they change only this process's signal state
        // and view of the mounts.
        unsafe {
            for signo in [32, 33] {
                let rc = libc::syscall(
                    libc::SYS_rt_sigaction,
                    signo,
                    action.as_ptr(),
                    std::ptr::null::<usize>(),
                    8usize,
                );
                if rc != 0 {
                    return fail();
                }
            }
            if own_namespace {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return fail();
                }
                let flags = libc::MS_REC | libc::MS_PRIVATE;
                if libc::mount(
                    none.as_ptr(),
                    root.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ) != 0
                {
                    return fail();
                }
            }
            for (source, target) in &binds {
                if libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                {
                    return fail();
                }
            }
        }
        Ok(())
    }
}

#[cfg(feature = "k8s")]
mod platform {
    use super::*;
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use support::k8s_api::{self, FakeApi};

    /// A nameserver that never answers, on a loopback address of its own
    /// (all of 127/8 is loopback) so that runs side by side never share it.
    /// It keeps the names it was asked for.
    struct DeadResolver {
        address: String,
        names: Arc<Mutex<Vec<String>>>,
        stop: Arc<AtomicBool>,
    }

    impl DeadResolver {
        fn start() -> DeadResolver {
            let seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
                ^ std::process::id().rotate_left(16);
            for attempt in 0u32..50 {
                let n = seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9));
                let address = format!(
                    "127.{}.{}.{}",
                    1 + n % 250,
                    (n >> 8) % 256,
                    2 + (n >> 16) % 250
                );
                if let Ok(sink) = UdpSocket::bind((address.as_str(), 53)) {
                    return DeadResolver::serve(address, sink);
                }
            }
            panic!("cannot bind a loopback :53 (tests run as root)");
        }

        fn serve(address: String, sink: UdpSocket) -> DeadResolver {
            let names = Arc::new(Mutex::new(Vec::new()));
            let stop = Arc::new(AtomicBool::new(false));
            let (seen, done) = (Arc::clone(&names), Arc::clone(&stop));
            sink.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 1500];
                while !done.load(Ordering::SeqCst) {
                    // Swallowed: no answer, and no ICMP error cuts the wait short.
                    if let Ok((n, _)) = sink.recv_from(&mut buf) {
                        if let Some(name) = query_name(&buf[..n]) {
                            let mut seen = seen.lock().unwrap();
                            if !seen.contains(&name) {
                                seen.push(name);
                            }
                        }
                    }
                }
            });
            DeadResolver {
                address,
                names,
                stop,
            }
        }

        /// The names asked for so far, each once.
        fn names(&self) -> Vec<String> {
            self.names.lock().unwrap().clone()
        }
    }

    impl Drop for DeadResolver {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    /// The name of a DNS query: its labels after the 12-byte header.
    fn query_name(packet: &[u8]) -> Option<String> {
        let mut at = 12;
        let mut labels = Vec::new();
        loop {
            let len = *packet.get(at)? as usize;
            if len == 0 {
                return Some(labels.join("."));
            }
            let label = packet.get(at + 1..at + 1 + len)?;
            labels.push(String::from_utf8_lossy(label).into_owned());
            at += 1 + len;
        }
    }

    const POD: &str = "worker-7d9f-x2";
    const API: &str = "api.lookups.test";

    /// Four drain URLs whose names hang at a resolver that never answers
    /// hold every lookup the drain names may have, at every poll; the API
    /// server, named by a name in /etc/hosts, is still looked up: the read
    /// of the pod at the stop learns the deletion (10 s), so drainit ends
    /// at its deadline before the kubelet's kill, not at the pod's 30 s.
    #[test]
    fn four_hung_drain_lookups_leave_the_stop_read_working() {
        if !k8s_api::available() {
            return;
        }
        for binary in builds() {
            let api = FakeApi::start(&["--pod", POD, "--cert", "dns-san", "--dns-name", API]);
            let s = Scratch::new("lookups-stop-read");
            let sa = s.file("serviceaccount");
            api.fill_service_account(&sa);
            let resolver = DeadResolver::start();
            let etc = names_dir(
                &s,
                &format!("127.0.0.1 {API}\n"),
                &resolver.address,
                "timeout:30 attempts:2",
            );
            let hung: Vec<String> = (1..=4).map(|n| format!("drain-{n}.hung.test")).collect();
            let report = s.file("report.json");
            let mut args = vec![
                "--k8s-protect".to_string(),
                "--protect-interval".into(),
                "1s".into(),
                "--exit-report".into(),
                path_str(&report).into(),
            ];
            for name in &hung {
                args.extend(["--drain-url".into(), format!("http://{name}:8080/drain")]);
            }
            let (mut mount_sa, mut mount_names) = (service_account_at(&sa), names_at(&etc, false));
            let mut d = drainit(args)
                .with_args(sh(
                    &s,
                    "trap '' TERM; touch \"$D/ready\"; while :; do sleep 0.05; done",
                ))
                .binary(&binary)
                .env("KUBERNETES_SERVICE_HOST", API)
                .env("KUBERNETES_SERVICE_PORT", &api.port.to_string())
                .env("POD_NAME", POD)
                .before_exec(move || {
                    mount_sa()?;
                    mount_names()
                })
                .start();
            s.wait_file("ready");
            // The start read answered, by name.
            wait_for("the start read", PATIENCE, || {
                api.requests()
                    .iter()
                    .any(|r| r["method"] == "GET")
                    .then_some(())
            });
            // Every drain name's lookup hangs at the resolver.
            wait_for("four hung drain lookups", PATIENCE, || {
                let asked = resolver.names();
                hung.iter().all(|h| asked.contains(h)).then_some(())
            });
            let gets = || {
                api.requests()
                    .iter()
                    .filter(|r| r["method"] == "GET")
                    .count()
            };
            let before = gets();
            api.delete(10);
            d.signal(libc::SIGTERM);
            let status = d.wait_status(Duration::from_secs(60));
            let stderr = d.stderr();
            assert_eq!(status.code(), Some(124), "{binary}: {stderr}");
            assert!(gets() > before, "{binary}: no read at the stop: {stderr}");
            let r = exit_report(&report);
            assert_eq!(
                r["kubernetes"]["grace_from"], "deletion",
                "{binary}: {r}\n{stderr}"
            );
            assert!(
                !stderr.contains("name lookups are still running"),
                "{binary}: {stderr}"
            );
        }
    }
}

/// A flood of 32, 33 and 34 sent to a drainit that is not PID 1 while it
/// starts a lookup thread for every poll (four drain URLs by name, every
/// 5 ms): none ends drainit, which still forwards and supervises its
/// child. 34 is blocked in every thread at every moment, so each copy
/// reaches the child; the count paces the flood (a signal queue is
/// bounded), which goes on until 200 polls have gone out during it.
#[test]
fn a_flood_of_the_c_librarys_signals_during_lookups_never_ends_drainit() {
    for binary in builds() {
        let s = Scratch::new("lookups-flood");
        let etc = names_dir(
            &s,
            &(1..=4)
                .map(|n| format!("127.0.0.1 drain-{n}.flood.test\n"))
                .collect::<String>(),
            "127.0.0.1",
            "timeout:0 attempts:1",
        );
        let drain = Server::start(|_, _| json(200, r#"{"readyForTermination":false}"#));
        let port = drain.addr.port();
        let mut args = vec![
            "--stop-signals".to_string(),
            "INT".into(),
            "--drain-interval".into(),
            "5ms".into(),
            "--grace".into(),
            "0".into(),
        ];
        for n in 1..=4 {
            args.extend([
                "--drain-url".into(),
                format!("http://drain-{n}.flood.test:{port}/drain"),
            ]);
        }
        let child = format!("exec \"{}\" sigrecv > \"$D/signals\"", stress_helper());
        let mut d = drainit(args)
            .with_args(sh(&s, &child))
            .binary(&binary)
            .not_pid1()
            .before_exec(names_at(&etc, true))
            .start();
        let count = |signo: i32| {
            let prefix = format!("{signo} ");
            s.read("signals")
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .count()
        };
        wait_for("the child", PATIENCE, || {
            s.read("signals").starts_with("ready").then_some(())
        });
        // The stop: polls by name from now on.
        d.signal(libc::SIGINT);
        wait_for("polls by name", PATIENCE, || {
            (drain.count() >= 8).then_some(())
        });
        let polls = drain.count();
        let mut sent = 0;
        while drain.count() < polls + 200 && sent < 20_000 {
            for _ in 0..50 {
                for signo in [32, 33, 34] {
                    if d.try_code().is_some() {
                        break;
                    }
                    d.signal(signo);
                }
            }
            sent += 50;
            wait_for(&format!("{sent} copies of 34 ({binary})"), PATIENCE, || {
                (count(34) >= sent || d.try_code().is_some()).then_some(())
            });
            if d.try_code().is_some() {
                let status = d.wait_status(PATIENCE);
                panic!(
                    "{binary} ended during the flood ({status:?}): {}",
                    d.stderr()
                );
            }
        }
        assert!(drain.count() >= polls + 200, "{binary}: too few polls");
        eprintln!(
            "{binary}: {sent} rounds of 32-34 during {} polls; the child took {} of 32, {} of 33",
            drain.count() - polls,
            count(32),
            count(33)
        );
        // Still forwarding, still the child's parent.
        d.signal(libc::SIGUSR1);
        wait_for("USR1 at the child", PATIENCE, || {
            (count(libc::SIGUSR1) >= 1).then_some(())
        });
        assert_eq!(count(34), sent, "{binary}: copies of 34");
        // TERM is no stop signal here: forwarded, it ends the child with
        // 0, and drainit with it.
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait_code(), 0, "{binary}: {}", d.stderr());
    }
}
