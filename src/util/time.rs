//! Durations as drainit logs, reports and exports them, in integers only:
//! drainit links no float formatting or parsing of its own.

use std::fmt;
use std::time::Duration;

/// Whole milliseconds as u64: every duration drainit logs or reports goes
/// through here, so the binary carries no u128 formatting.
pub fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// A duration as decimal seconds, as a float would print it for any value
/// a float holds exactly: `7`, `0.25`, `1.000000001` (at most nine
/// decimals, no trailing zeros, never an exponent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Secs(pub Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (secs, mut nanos) = (self.0.as_secs(), self.0.subsec_nanos());
        write!(f, "{secs}")?;
        if nanos == 0 {
            return Ok(());
        }
        let mut digits = 9;
        while nanos % 10 == 0 {
            nanos /= 10;
            digits -= 1;
        }
        write!(f, ".{nanos:0digits$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_print_as_a_float_of_the_same_value_would() {
        for (d, text) in [
            (Duration::ZERO, "0"),
            (Duration::from_secs(7), "7"),
            (Duration::from_millis(250), "0.25"),
            (Duration::from_millis(7_500), "7.5"),
            (Duration::new(1, 1), "1.000000001"),
            (Duration::new(0, 1), "0.000000001"),
            (Duration::new(7, 123_456_789), "7.123456789"),
            (
                Duration::new(1_764_116_682, 123_456_000),
                "1764116682.123456",
            ),
            (
                Duration::new(u64::MAX, 999_999_999),
                "18446744073709551615.999999999",
            ),
        ] {
            assert_eq!(Secs(d).to_string(), text);
        }
        // Wherever an f64 holds the value, the same text as its Display.
        for nanos in [
            0u64,
            1,
            10,
            500_000,
            123_456_789,
            999_999_999,
            42_000_000_001,
        ] {
            let d = Duration::from_nanos(nanos);
            assert_eq!(Secs(d).to_string(), d.as_secs_f64().to_string(), "{d:?}");
        }
    }
}
