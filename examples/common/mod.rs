//! Shared by the benchmark driver and its helper child: the one clock both
//! sides of a latency measurement read (CLOCK_MONOTONIC is system-wide, so a
//! child in another PID namespace reads the same clock).

pub fn monotonic_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}
