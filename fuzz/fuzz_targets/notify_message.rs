//! Fuzz target: one sd_notify datagram (`notify::parse`).
#![no_main]

use drainit::proto::notify_msg::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let m = parse(data);
    let lines = || data.split(|&b| b == b'\n');
    // A word is read only from its exact line.
    assert_eq!(m.ready, lines().any(|l| l == b"READY=1"));
    assert_eq!(
        m.drained,
        lines().any(|l| l == b"X_DRAINIT_READY_FOR_TERMINATION=1")
    );
    if let Some(status) = m.status {
        assert!(status.len() <= data.len() && !status.contains(&b'\n'));
    }
    if m.extend.is_some() {
        assert!(lines().any(|l| l.starts_with(b"EXTEND_TIMEOUT_USEC=")));
    }
});
