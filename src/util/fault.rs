//! Fault injection for tests: named points in the code where a test build
//! can make drainit panic, fault or abort on purpose, to prove that PID 1
//! contains or survives it. Compiled in only with the `fault-injection`
//! cargo feature (off by default); the shipped binary has no hook at all,
//! and `.ci/run` checks that its bytes do not name the variable.
//!
//! A test sets `DRAINIT_TEST_FAULT` to a comma-separated list of
//! `point` or `point=action` (action: `panic`, the default; `segv`, a write
//! through a null pointer; `abort`; `gate`, which creates the file named by
//! `DRAINIT_TEST_GATE` with `.reached` appended, then waits, at most 60 s,
//! until the test creates the file itself: the test decides what happens
//! while drainit stands at the point; `on`, for a point that is a switch
//! ([`switched`]): it does nothing where [`point`] is called).

/// Triggers the fault named for `point`, if the test asked for one.
#[cfg(feature = "fault-injection")]
pub fn point(point: &str) {
    let Some(wanted) = std::env::var_os("DRAINIT_TEST_FAULT") else {
        return;
    };
    let wanted = wanted.to_string_lossy();
    for entry in wanted.split(',') {
        let (name, action) = entry.split_once('=').unwrap_or((entry, "panic"));
        if name != point {
            continue;
        }
        match action {
            "segv" => {
                // SAFETY: not safe at all, on purpose: a real fault.
                unsafe {
                    std::ptr::write_volatile(std::ptr::null_mut::<u8>(), 1);
                }
            }
            "abort" => std::process::abort(),
            "gate" => gate(),
            "on" => {}
            _ => panic!("fault injected at {point}"),
        }
    }
}

#[cfg(feature = "fault-injection")]
fn gate() {
    let Some(gate) = std::env::var_os("DRAINIT_TEST_GATE") else {
        return;
    };
    let gate = std::path::PathBuf::from(gate);
    let mut reached = gate.clone().into_os_string();
    reached.push(".reached");
    let _ = std::fs::write(reached, b"");
    for _ in 0..6_000 {
        if gate.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// True when the test turned the switch `name` on (`name=on`): a test
/// build takes a path it would not take on this machine.
#[cfg(feature = "fault-injection")]
pub fn switched(name: &str) -> bool {
    std::env::var_os("DRAINIT_TEST_FAULT").is_some_and(|wanted| {
        let wanted = wanted.to_string_lossy();
        wanted.split(',').any(|entry| entry == format!("{name}=on"))
    })
}

/// Without the `fault-injection` feature, switches are off.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn switched(_name: &str) -> bool {
    false
}

/// Without the `fault-injection` feature, points compile to nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_point: &str) {}
