//! A helper child for the fault tests and the benchmarks, run under an init:
//!
//! - `stress orphans N`: makes N zombie orphans as fast as it can (fork a
//!   child that forks a grandchild and exits at once; the grandchild exits
//!   too and is re-parented to PID 1 as a zombie), then waits until no
//!   zombie is left in its /proc and prints `burst_ms reap_ms`.
//! - `stress sigrecv`: blocks every catchable signal (the C library's
//!   reserved numbers 32 to SIGRTMIN-1 included), prints `ready`, then
//!   for each signal it takes prints `SIGNO MONOTONIC_NS`; exits 0 on TERM.
//!
//! It needs no other program, so it also runs in a `FROM scratch` image.

#[path = "common/mod.rs"]
mod common;

use common::monotonic_ns;
use std::io::Write;
use std::time::{Duration, Instant};

fn zombies_in_proc() -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
                .unwrap_or(false)
        })
        .count()
}

fn orphans(n: usize) {
    let start = Instant::now();
    for _ in 0..n {
        // SAFETY: single-threaded; the forked processes only call _exit/fork.
        unsafe {
            match libc::fork() {
                0 => {
                    if libc::fork() == 0 {
                        libc::_exit(0);
                    }
                    libc::_exit(0);
                }
                pid if pid > 0 => {
                    let mut status = 0;
                    libc::waitpid(pid, &mut status, 0);
                }
                _ => {
                    // Out of processes for a moment: let the init catch up.
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    let burst = start.elapsed();
    let reap_start = Instant::now();
    while zombies_in_proc() > 0 {
        if reap_start.elapsed() > Duration::from_secs(120) {
            eprintln!("zombies still present after 120 s");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    println!(
        "{:.3} {:.3}",
        burst.as_secs_f64() * 1e3,
        reap_start.elapsed().as_secs_f64() * 1e3
    );
}

fn sigrecv() {
    // SAFETY: signal-mask calls on a local set, before any thread exists.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        // Fault signals too: a real fault here would still be forced through.
        libc::sigfillset(&mut set);
        // And the C library's reserved numbers (32 to SIGRTMIN-1), which
        // sigfillset leaves out: bits 31.. of the kernel's 64-bit set, set
        // directly and blocked with the raw call (glibc's drops them).
        let first = &mut set as *mut libc::sigset_t as *mut u64;
        for signo in 32..libc::SIGRTMIN() {
            *first |= 1u64 << (signo - 1);
        }
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &set as *const libc::sigset_t,
            std::ptr::null_mut::<libc::sigset_t>(),
            8usize,
        );
        set
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    loop {
        // SAFETY: waits for a blocked signal from a valid set.
        let signo = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if signo < 0 {
            continue;
        }
        let _ = writeln!(out, "{signo} {}", monotonic_ns());
        let _ = out.flush();
        if signo == libc::SIGTERM {
            std::process::exit(0);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("orphans") => orphans(args.get(2).and_then(|n| n.parse().ok()).unwrap_or(1000)),
        Some("sigrecv") => sigrecv(),
        _ => {
            eprintln!("usage: stress orphans N | stress sigrecv");
            std::process::exit(2);
        }
    }
}
