//! The response decoder fed arbitrary server bytes in arbitrary pieces: it
//! never panics, keeps its bounds, and gives the same answer however the
//! bytes are split.
#![no_main]

use drainit::proto::http_decoder::{
    decode, Decoder, Step, CHUNK_LINE_LIMIT, CONTENT_TYPE_LIMIT, EXCHANGE_LIMIT, HEAD_LIMIT,
};
use drainit::proto::http::BODY_LIMIT;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, bytes)) = data.split_first() else {
        return;
    };
    let head_request = control & 1 == 1;
    let whole = decode(bytes, head_request);
    if let Step::Done(response) = &whole {
        assert!(response.body.len() <= BODY_LIMIT);
        // Interim (1xx) responses are skipped: only a final one is an answer.
        assert!((200..1000).contains(&response.status));
    }
    // The same bytes in pieces of a size the control byte picks.
    let piece = usize::from(control >> 1).max(1);
    let mut decoder = Decoder::new(head_request);
    let mut step = Step::NeedMore;
    for part in bytes.chunks(piece) {
        step = decoder.feed(part);
        assert!(decoder.total() <= EXCHANGE_LIMIT);
        assert!(
            decoder.held() <= HEAD_LIMIT.max(CHUNK_LINE_LIMIT) + BODY_LIMIT + CONTENT_TYPE_LIMIT
        );
        if step != Step::NeedMore {
            break;
        }
    }
    if step == Step::NeedMore {
        step = decoder.finish();
    }
    assert_eq!(step, whole);
});
