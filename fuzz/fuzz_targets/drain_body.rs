//! Fuzz target: the readiness rules over any drain response (status,
//! content type and body from the input). Must never panic, and "ready"
//! must have a reason.
#![no_main]

use drainit::proto::drain_body::{evaluate, is_json};
use drainit::proto::http::Response;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let status = 100 + u16::from(data[0]) * 2;
    let content_type = match data[1] % 4 {
        0 => None,
        1 => Some("application/json".to_string()),
        2 => Some("application/vnd.x+json; charset=utf-8".to_string()),
        _ => Some("text/plain".to_string()),
    };
    let pointer = ["/readyForTermination", "/a/0/b", "/", "/~0~1"][usize::from(data[2] % 4)];
    let body = data[3..].to_vec();
    let response = Response {
        status,
        content_type: content_type.clone(),
        body: body.clone(),
        ..Default::default()
    };
    let reading = evaluate(&Ok(response), pointer);
    if reading.ready && is_json(content_type.as_deref()) {
        let value: serde_json::Value = serde_json::from_slice(&body).expect("ready JSON parses");
        assert_eq!(value.pointer(pointer), Some(&serde_json::Value::Bool(true)));
    } else if reading.ready {
        assert!((200..300).contains(&status));
    }
});
