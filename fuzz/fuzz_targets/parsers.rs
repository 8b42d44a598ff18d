//! Fuzz target: the command-line value parsers (durations, signals, URLs).
#![no_main]

use drainit::app::values::parse_duration;
use drainit::proto::http::parse_url;
use drainit::util::signame::{parse_signal, signal_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = parse_duration(text) {
        assert!(d.as_secs() <= 365 * 24 * 3600);
    }
    if let Ok(n) = parse_signal(text) {
        assert_eq!(parse_signal(&signal_name(n)), Ok(n));
    }
    if let Ok(url) = parse_url(text) {
        assert!(!url.host.is_empty() && url.port > 0 && url.path.starts_with('/'));
    }
});
