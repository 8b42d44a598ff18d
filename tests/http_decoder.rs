//! Property tests over the sans-IO response decoder (the always-on
//! counterpart of the `http_response` fuzz target): generated responses in
//! every framing decode to their body at every split point; random and
//! mutated bytes never panic, never exceed the bounds, and give the same
//! answer however they are cut.

use drainit::proto::http::BODY_LIMIT;
use drainit::proto::http_decoder::{
    decode, Decoder, Limits, Step, CONTENT_TYPE_LIMIT, EXCHANGE_LIMIT,
};

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// A well-formed response carrying `body`, in a framing `rng` picks, with
/// optional interim responses, extensions and trailers.
fn response(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rng.below(3) {
        out.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n");
    }
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n");
    match rng.below(3) {
        0 => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
            // Anything after the promised length is not read as body.
            out.extend_from_slice(b"HTTP/1.1 500 Extra\r\n\r\n");
        }
        1 => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            let mut rest = body;
            while !rest.is_empty() {
                let n = (1 + rng.below(40)).min(rest.len());
                let ext = if rng.below(2) == 0 { ";name=value" } else { "" };
                out.extend_from_slice(format!("{n:x}{ext}\r\n").as_bytes());
                out.extend_from_slice(&rest[..n]);
                out.extend_from_slice(b"\r\n");
                rest = &rest[n..];
            }
            out.extend_from_slice(b"0\r\n");
            for _ in 0..rng.below(3) {
                out.extend_from_slice(b"X-Trailer: t\r\n");
            }
            out.extend_from_slice(b"\r\n");
        }
        _ => {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(body);
        }
    }
    out
}

/// Feeds `bytes` cut at `cuts` (sorted offsets), then end of stream.
fn decode_cut(bytes: &[u8], cuts: &[usize]) -> Step {
    let mut decoder = Decoder::new(false);
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let step = decoder.feed(&bytes[from..cut]);
        assert!(decoder.total() <= EXCHANGE_LIMIT);
        if step != Step::NeedMore {
            return step;
        }
        from = cut;
    }
    decoder.finish()
}

fn check_invariants(step: &Step) {
    if let Step::Done(r) = step {
        assert!(r.body.len() <= BODY_LIMIT);
        assert!((200..1000).contains(&r.status), "final status {}", r.status);
    }
}

#[test]
fn every_framing_decodes_at_every_split_point() {
    let mut rng = Rng(0x5eed_0901);
    for round in 0..60 {
        let body: Vec<u8> = rng.bytes(200);
        let bytes = response(&mut rng, &body);
        for cut in 0..=bytes.len() {
            match decode_cut(&bytes, &[cut]) {
                Step::Done(r) => assert_eq!(r.body, body, "round {round}, cut {cut}"),
                other => panic!("round {round}, cut {cut}: {other:?}"),
            }
        }
    }
}

#[test]
fn random_cuts_of_random_and_mutated_bytes_agree() {
    let mut rng = Rng(0x5eed_0902);
    for round in 0..50_000 {
        let mut bytes = if rng.below(2) == 0 {
            let body = rng.bytes(64);
            response(&mut rng, &body)
        } else {
            rng.bytes(300)
        };
        for _ in 0..rng.below(6) {
            if bytes.is_empty() {
                break;
            }
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = rng.next() as u8,
                1 => bytes.insert(at, b"\r\n0;:-+ \t"[rng.below(9)]),
                _ => {
                    bytes.remove(at);
                }
            }
        }
        let whole = decode(&bytes, false);
        check_invariants(&whole);
        let mut cuts: Vec<usize> = (0..rng.below(6))
            .map(|_| rng.below(bytes.len() + 1))
            .collect();
        cuts.sort_unstable();
        assert_eq!(decode_cut(&bytes, &cuts), whole, "round {round}: {bytes:?}");
    }
}

#[test]
fn endless_input_ends_at_the_exchange_bound() {
    // Whatever repeats forever, the decoder stops by EXCHANGE_LIMIT.
    let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let ext_chunk = format!("1;e={}\r\nx\r\n", "e".repeat(3072));
    for (prefix, unit) in [
        (format!("{chunked}0\r\n"), "x-trailer: aaaa\r\n".to_string()),
        (chunked.to_string(), ext_chunk),
        ("HTTP/1.1 200 OK\r\n".into(), "X-Flood: a\r\n".into()),
        ("HTTP/1.1 200 OK\r\nX: ".into(), "a".into()),
        (String::new(), "HTTP/1.1 100 Continue\r\n\r\n".into()),
        (chunked.to_string(), "0".into()),
        ("HTTP/1.1 200 OK\r\n\r\n".into(), "body".into()),
        (chunked.to_string(), "1\r\nx\r\n".into()),
    ] {
        let mut decoder = Decoder::new(false);
        let mut step = decoder.feed(prefix.as_bytes());
        let block = unit.repeat(4096 / unit.len() + 1);
        let mut fed = prefix.len();
        while step == Step::NeedMore {
            step = decoder.feed(block.as_bytes());
            fed += block.len();
            assert!(
                fed <= EXCHANGE_LIMIT + 2 * block.len(),
                "{unit:?} never ended"
            );
        }
        assert!(matches!(step, Step::Failed(_)), "{unit:?}: {step:?}");
        assert!(decoder.total() <= EXCHANGE_LIMIT);
    }
}

/// Small limits, so that random responses run into every bound: whatever
/// the bytes, the decoder reads at most `exchange`, holds at most one head
/// or chunk line and the body, answers with at most `body` bytes, and says
/// the same however the bytes are cut.
#[test]
fn small_limits_hold_for_random_responses() {
    let limits = Limits {
        exchange: 250,
        head: 96,
        chunk_line: 12,
        body: 80,
        interim: 2,
    };
    let decode_small = |bytes: &[u8], cuts: &[usize]| {
        let mut decoder = Decoder::with_limits(false, limits);
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
            let step = decoder.feed(&bytes[from..cut]);
            assert!(decoder.total() <= limits.exchange);
            assert!(
                decoder.held()
                    <= limits.head.max(limits.chunk_line) + limits.body + CONTENT_TYPE_LIMIT,
                "held {}",
                decoder.held()
            );
            if step != Step::NeedMore {
                return step;
            }
            from = cut;
        }
        decoder.finish()
    };
    let mut rng = Rng(0x5eed_0903);
    let mut kinds = std::collections::BTreeSet::new();
    for round in 0..20_000 {
        let body = rng.bytes(120);
        let mut bytes = response(&mut rng, &body);
        if rng.below(4) == 0 {
            // Long header values and chunk extensions, more interim heads.
            let at = rng.below(bytes.len() + 1);
            let junk: &[u8] = match rng.below(3) {
                0 => b"X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
                1 => b"HTTP/1.1 100 Continue\r\n\r\n",
                _ => b";extension-extension",
            };
            bytes.splice(at..at, junk.iter().copied());
        }
        let whole = decode_small(&bytes, &[]);
        match &whole {
            Step::Done(r) => {
                assert!(r.body.len() <= limits.body);
                assert!((200..1000).contains(&r.status));
            }
            Step::Failed(f) => {
                kinds.insert(f.kind());
            }
            Step::NeedMore => unreachable!(),
        }
        let mut cuts: Vec<usize> = (0..rng.below(6))
            .map(|_| rng.below(bytes.len() + 1))
            .collect();
        cuts.sort_unstable();
        assert_eq!(
            decode_small(&bytes, &cuts),
            whole,
            "round {round}: {bytes:?}"
        );
    }
    for bound in [
        "too_large",
        "head_too_large",
        "line_too_long",
        "exchange_too_large",
        "too_many_interim",
    ] {
        assert!(kinds.contains(bound), "never reached {bound}: {kinds:?}");
    }
}
