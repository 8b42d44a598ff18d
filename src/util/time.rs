//! Durations as drainit logs and reports them.

use std::time::Duration;

/// Whole milliseconds as u64: every duration drainit logs or reports goes
/// through here, so the binary carries no u128 formatting.
pub fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}
