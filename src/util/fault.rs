//! Fault injection for tests: named points in the code where a test build
//! can make drainit panic, fault or abort on purpose, to prove that PID 1
//! contains or survives it. Compiled in only with the `fault-injection`
//! cargo feature (off by default); the shipped binary has no hook at all,
//! and `.ci/run` checks that its bytes do not name the variable.
//!
//! A test sets `DRAINIT_TEST_FAULT` to a comma-separated list of
//! `point` or `point=action` (action: `panic`, the default; `segv`, a write
//! through a null pointer; `abort`).

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
            _ => panic!("fault injected at {point}"),
        }
    }
}

/// Without the `fault-injection` feature, points compile to nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_point: &str) {}
