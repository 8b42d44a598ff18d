//! Side-by-side benchmarks of drainit against tini, dumb-init and catatonit,
//! in one run on one machine. Run through `bench/run.sh`, which installs the
//! other inits and builds everything static; it prints a Markdown table of
//! medians with the ratio of drainit to tini.
//!
//! Usage: bench DRAINIT STRESS [--quick]
//!
//! Every init runs as PID 1 of a fresh PID namespace (`unshare --pid --fork
//! --mount-proc`) except for the start-up figure, which times `INIT --
//! /bin/true` directly against `/bin/true` alone.

#[path = "common/mod.rs"]
mod common;

use common::monotonic_ns;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Init {
    name: &'static str,
    path: String,
    /// Flags that make it behave like the others (subreaper, quiet).
    flags: Vec<String>,
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    if values.is_empty() {
        return f64::NAN;
    }
    let i = ((values.len() - 1) as f64 * p).round() as usize;
    values[i]
}

fn status_field(pid: u32, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

fn wait_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "benchmark step timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Starts `init -- args` as PID 1; returns unshare's child handle and the
/// init's PID as seen from here.
fn as_pid1(init: &Init, args: &[&str], stdout: Stdio) -> (Child, u32) {
    let child = Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            &init.path,
        ])
        .args(&init.flags)
        .arg("--")
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare");
    let outer = child.id();
    let pid = wait_until(Duration::from_secs(10), || children(outer).first().copied());
    (child, pid)
}

fn stop(mut child: Child, pid: u32) {
    // SAFETY: kills our own benchmark processes.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let _ = child.kill();
    let _ = child.wait();
}

/// Idle RSS (KiB) and wake-ups per second with a sleeping child.
fn idle(init: &Init, window: Duration) -> (f64, f64) {
    let (child, pid) = as_pid1(init, &["sleep", "600"], Stdio::null());
    wait_until(Duration::from_secs(10), || {
        let kid = *children(pid).first()?;
        (std::fs::read_to_string(format!("/proc/{kid}/comm"))
            .ok()?
            .trim()
            == "sleep")
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(200));
    let switches = || {
        status_field(pid, "voluntary_ctxt_switches").unwrap_or(0)
            + status_field(pid, "nonvoluntary_ctxt_switches").unwrap_or(0)
    };
    let before = switches();
    std::thread::sleep(window);
    let after = switches();
    let rss = status_field(pid, "VmRSS").unwrap_or(0) as f64;
    stop(child, pid);
    (rss, (after - before) as f64 / window.as_secs_f64())
}

/// Median wall time (µs) of each command over `runs` rounds. The commands
/// take turns within each round, so a noisy neighbour slows them all alike.
fn run_times(cmds: &[Vec<String>], runs: usize) -> Vec<f64> {
    let mut times = vec![Vec::with_capacity(runs); cmds.len()];
    for _ in 0..runs {
        for (cmd, times) in cmds.iter().zip(times.iter_mut()) {
            let start = Instant::now();
            let status = Command::new(&cmd[0])
                .args(&cmd[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run");
            assert!(status.success(), "{cmd:?} failed");
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.iter_mut().map(|t| percentile(t, 0.5)).collect()
}

/// Median ms for PID 1 to reap a burst of `n` orphans (burst + drain).
fn reaping(init: &Init, stress: &str, n: usize, rounds: usize) -> f64 {
    let mut totals: Vec<f64> = (0..rounds)
        .map(|_| {
            let (mut child, _pid) =
                as_pid1(init, &[stress, "orphans", &n.to_string()], Stdio::piped());
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            let _ = child.wait();
            let parts: Vec<f64> = out
                .split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect();
            assert_eq!(parts.len(), 2, "stress output {out:?}");
            parts[0] + parts[1]
        })
        .collect();
    percentile(&mut totals, 0.5)
}

/// Signal forwarding latency (µs, p50 and p99): kill(init) to the child's
/// sigwaitinfo, on the shared monotonic clock.
/// All inits run side by side and take turns in blocks of 50 signals.
fn forwarding(inits: &[Init], stress: &str, samples: usize) -> Vec<(f64, f64)> {
    let mut running: Vec<_> = inits
        .iter()
        .map(|init| {
            let (mut child, pid) = as_pid1(init, &[stress, "sigrecv"], Stdio::piped());
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            assert_eq!(lines.next().unwrap().unwrap(), "ready");
            (child, pid, lines, Vec::with_capacity(samples))
        })
        .collect();
    for block in 0..samples.div_ceil(50) {
        for (_, pid, lines, latencies) in running.iter_mut() {
            for i in 0..50 {
                let signo = if (block + i) % 2 == 0 {
                    libc::SIGUSR1
                } else {
                    libc::SIGUSR2
                };
                let sent = monotonic_ns();
                // SAFETY: signals our own benchmark process.
                unsafe { libc::kill(*pid as i32, signo) };
                let line = lines.next().unwrap().unwrap();
                let got: u128 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
                latencies.push((got.saturating_sub(sent)) as f64 / 1e3);
            }
        }
    }
    running
        .into_iter()
        .map(|(child, pid, _, mut latencies)| {
            stop(child, pid);
            let p50 = percentile(&mut latencies, 0.5);
            (p50, percentile(&mut latencies, 0.99))
        })
        .collect()
}

/// A drain endpoint that is busy until `ready_after`, then ready; returns
/// its URL and the moment it first answered "ready".
fn drain_server(ready_after: Duration) -> (String, Arc<Mutex<Option<Instant>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/drain", listener.local_addr().unwrap());
    let first_ready = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&first_ready);
    let start = Instant::now();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 2048];
            let _ = stream.read(&mut buf);
            let ready = start.elapsed() >= ready_after;
            if ready {
                seen.lock().unwrap().get_or_insert_with(Instant::now);
            }
            let body = format!("{{\"readyForTermination\":{ready}}}");
            let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    (url, first_ready)
}

fn drainit_with(path: &str, flags: &[&str]) -> Init {
    Init {
        name: "drainit",
        path: path.into(),
        flags: flags.iter().map(|f| f.to_string()).collect(),
    }
}

/// Drain precision (ms): ready-to-exit latency with --ready-grace 0, and
/// how far past a 1 s --grace drainit exits, median and worst.
fn drain_precision(drainit: &str, rounds: usize) -> ((f64, f64), (f64, f64)) {
    let ignore_term = ["/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"];
    let mut ready_to_exit = Vec::new();
    let mut overshoot = Vec::new();
    for _ in 0..rounds {
        let (url, first_ready) = drain_server(Duration::from_millis(300));
        let init = drainit_with(
            drainit,
            &[
                "--drain-url",
                &url,
                "--drain-interval",
                "50ms",
                "--ready-grace",
                "0",
                "--grace",
                "30s",
            ],
        );
        let (mut child, pid) = as_pid1(&init, &ignore_term, Stdio::null());
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signals our own benchmark process.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let _ = child.wait();
        let exited = Instant::now();
        let ready = first_ready
            .lock()
            .unwrap()
            .expect("drain server answered ready");
        ready_to_exit.push(exited.duration_since(ready).as_secs_f64() * 1e3);

        let refused = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let url = format!("http://{refused}/drain");
        let init = drainit_with(drainit, &["--drain-url", &url, "--grace", "1s"]);
        let (mut child, pid) = as_pid1(&init, &ignore_term, Stdio::null());
        std::thread::sleep(Duration::from_millis(100));
        let sent = Instant::now();
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let _ = child.wait();
        overshoot.push((sent.elapsed().as_secs_f64() - 1.0) * 1e3);
    }
    let worst = |v: &mut Vec<f64>| percentile(v, 1.0);
    (
        (
            percentile(&mut ready_to_exit, 0.5),
            worst(&mut ready_to_exit),
        ),
        (percentile(&mut overshoot, 0.5), worst(&mut overshoot)),
    )
}

fn fmt(v: f64, unit: &str) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (drainit, stress) = (
        args.get(1).expect("DRAINIT path").clone(),
        args.get(2).expect("STRESS path").clone(),
    );
    let quick = args.iter().any(|a| a == "--quick");
    let (starts, rounds, samples, window) = if quick {
        (50, 2, 300, Duration::from_secs(2))
    } else {
        (300, 5, 2000, Duration::from_secs(5))
    };
    let inits = [
        Init {
            name: "drainit",
            path: drainit.clone(),
            flags: vec![],
        },
        Init {
            name: "tini",
            path: "/usr/bin/tini-static".into(),
            flags: vec!["-s".into()],
        },
        Init {
            name: "dumb-init",
            path: "/usr/bin/dumb-init".into(),
            flags: vec![],
        },
        Init {
            name: "catatonit",
            path: "/usr/bin/catatonit".into(),
            flags: vec![],
        },
    ];
    let mut rows: Vec<(String, Vec<f64>, &str)> = Vec::new();
    let sizes = inits
        .iter()
        .map(|i| {
            std::fs::metadata(&i.path)
                .map(|m| m.len() as f64 / 1024.0)
                .unwrap_or(f64::NAN)
        })
        .collect();
    rows.push((
        "binary size (static; dumb-init: Debian's is dynamic)".into(),
        sizes,
        "KiB",
    ));
    eprintln!("idle RSS and wake-ups...");
    let idles: Vec<(f64, f64)> = inits.iter().map(|i| idle(i, window)).collect();
    rows.push((
        "idle RSS, sleeping child".into(),
        idles.iter().map(|x| x.0).collect(),
        "KiB",
    ));
    rows.push((
        "idle wake-ups per second".into(),
        idles.iter().map(|x| x.1).collect(),
        "/s",
    ));
    eprintln!("start-up overhead...");
    let mut cmds: Vec<Vec<String>> = inits
        .iter()
        .map(|i| {
            let mut cmd = vec![i.path.clone()];
            cmd.extend(i.flags.iter().cloned());
            cmd.extend(["--".to_string(), "/bin/true".to_string()]);
            cmd
        })
        .collect();
    cmds.push(vec!["/bin/true".to_string()]);
    let times = run_times(&cmds, starts);
    let bare = times[inits.len()];
    let startup: Vec<f64> = times[..inits.len()].iter().map(|t| t - bare).collect();
    rows.push((
        format!("start-up overhead over /bin/true ({bare:.0} µs)"),
        startup,
        "µs",
    ));
    eprintln!("reaping...");
    rows.push((
        "reap a burst of 5000 orphans (burst + drain)".into(),
        inits
            .iter()
            .map(|i| reaping(i, &stress, 5000, rounds))
            .collect(),
        "ms",
    ));
    eprintln!("signal forwarding...");
    let fwd = forwarding(&inits, &stress, samples);
    rows.push((
        "signal forwarding latency p50".into(),
        fwd.iter().map(|x| x.0).collect(),
        "µs",
    ));
    rows.push((
        "signal forwarding latency p99".into(),
        fwd.iter().map(|x| x.1).collect(),
        "µs",
    ));
    eprintln!("drain precision...");
    let ((r50, rmax), (o50, omax)) = drain_precision(&drainit, rounds.max(3));
    let na = f64::NAN;
    rows.push((
        "ready-to-exit latency, median".into(),
        vec![r50, na, na, na],
        "ms",
    ));
    rows.push((
        "ready-to-exit latency, worst".into(),
        vec![rmax, na, na, na],
        "ms",
    ));
    rows.push((
        "deadline overshoot, median".into(),
        vec![o50, na, na, na],
        "ms",
    ));
    rows.push((
        "deadline overshoot, worst".into(),
        vec![omax, na, na, na],
        "ms",
    ));

    println!(
        "| figure | {} | drainit / tini |",
        inits.iter().map(|i| i.name).collect::<Vec<_>>().join(" | ")
    );
    println!("|---|{}---|", "---|".repeat(inits.len()));
    for (label, values, unit) in rows {
        let ratio = if values[1].is_nan() || values[1] == 0.0 {
            if values[0] == 0.0 && values[1] == 0.0 {
                "1.00 (both 0)".into()
            } else {
                "n/a".to_string()
            }
        } else {
            format!("{:.2}", values[0] / values[1])
        };
        let cells: Vec<String> = values.iter().map(|v| fmt(*v, unit)).collect();
        println!("| {label} | {} | {ratio} |", cells.join(" | "));
    }
}
