//! Property tests over the parsers that see untrusted text (the short,
//! always-on counterpart of the cargo-fuzz targets in `fuzz/`): durations,
//! signals, URLs, drain bodies, ECS metadata and protection answers get
//! random bytes, random words from their own alphabet and mutations of the
//! documented examples. None may panic, and each result keeps its invariants.

use drainit::app::values::parse_duration;
use drainit::proto::drain_body::{evaluate, is_json};
use drainit::proto::ecs_body::{parse_container, parse_protection_answer, parse_task};
use drainit::proto::http::{parse_url, Failure, Kind, Response};
use drainit::util::signame::{parse_signal, signal_name};

const ROUNDS: usize = 30_000;

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

#[test]
fn durations() {
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..ROUNDS {
        let text = rng.word("0123456789.msh -+e", 12);
        if let Ok(d) = parse_duration(&text) {
            assert!(d.as_secs() <= 365 * 24 * 3600, "{text:?} -> {d:?}");
        }
        let raw = String::from_utf8_lossy(&rng.bytes(16)).into_owned();
        let _ = parse_duration(&raw);
        // Every well-formed duration parses to exactly its value.
        let n = rng.below(100_000) as u128;
        let (text, ms) = match rng.below(4) {
            0 => (format!("{n}ms"), n),
            1 => (format!("{n}s"), n * 1000),
            2 => (format!("{n}m"), n * 60_000),
            _ => (format!("{n}"), n * 1000),
        };
        assert_eq!(
            parse_duration(&text).map(|d| d.as_millis()),
            Ok(ms),
            "{text}"
        );
    }
}

#[test]
fn signals() {
    let mut rng = Rng(0x5eed_0002);
    for _ in 0..ROUNDS {
        let text = rng.word("SIGsigTERMINTRTMAX+-0123456789 ", 10);
        if let Ok(n) = parse_signal(&text) {
            assert!((1..=libc::SIGRTMAX()).contains(&n), "{text:?} -> {n}");
            assert_eq!(parse_signal(&signal_name(n)), Ok(n), "{text:?}");
        }
        let _ = parse_signal(&String::from_utf8_lossy(&rng.bytes(12)));
    }
}

#[test]
fn urls() {
    let mut rng = Rng(0x5eed_0003);
    for _ in 0..ROUNDS {
        let text = format!(
            "{}{}",
            ["http://", "HTTP://", "https://", "", "http:/"][rng.below(5)],
            rng.word("ab.1:[]/?#@%0 ", 24)
        );
        if let Ok(url) = parse_url(&text) {
            assert!(
                !url.host.is_empty() && url.port > 0 && url.path.starts_with('/'),
                "{text:?} -> {url:?}"
            );
            assert!(text.to_ascii_lowercase().starts_with("http://"), "{text:?}");
        }
        let _ = parse_url(&String::from_utf8_lossy(&rng.bytes(40)));
    }
}

#[test]
fn drain_bodies() {
    let mut rng = Rng(0x5eed_0004);
    let seeds: [&[u8]; 4] = [
        br#"{"readyForTermination":true,"activeExecutions":0}"#,
        br#"{"readyForTermination":false,"activeExecutions":3,"nested":{"a":[1,2,{"b":true}]}}"#,
        b"OK",
        b"[true, false, null, 1.5e3, \"x\"]",
    ];
    let content_types = [
        Some("application/json"),
        Some("application/problem+json"),
        Some("text/plain"),
        None,
        Some("application/json; charset=utf-8"),
    ];
    let pointers = ["/readyForTermination", "/nested/a/2/b", "/0", "/", "/a~1b"];
    for _ in 0..ROUNDS {
        let seed = seeds[rng.below(seeds.len())];
        let body = if rng.below(2) == 0 {
            rng.mutate(seed)
        } else {
            rng.bytes(64)
        };
        let content_type = content_types[rng.below(content_types.len())];
        let status = [200, 204, 299, 302, 404, 429, 500, 503][rng.below(8)];
        let pointer = pointers[rng.below(pointers.len())];
        let response = Response {
            status,
            content_type: content_type.map(String::from),
            body: body.clone(),
            ..Default::default()
        };
        let reading = evaluate(&Ok(response), pointer);
        let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        let at_pointer = json.as_ref().and_then(|v| v.pointer(pointer));
        let by_json = is_json(content_type) && at_pointer == Some(&serde_json::Value::Bool(true));
        let by_status = !is_json(content_type) && (200..300).contains(&status);
        // Ready exactly when a rule says so, never otherwise.
        assert_eq!(
            reading.ready,
            by_json || by_status,
            "{status} {content_type:?} {body:?} at {pointer}"
        );
        if !reading.ready {
            // A not-ready reading names its problem, unless the app itself
            // said false.
            let said_false =
                is_json(content_type) && at_pointer == Some(&serde_json::Value::Bool(false));
            assert_eq!(
                reading.problem.is_none(),
                said_false,
                "{status} {content_type:?} {body:?} at {pointer}: {:?}",
                reading.problem
            );
        }
    }
    for kind in [
        Kind::Refused,
        Kind::Timeout,
        Kind::TooLarge,
        Kind::Redirect,
        Kind::Io,
    ] {
        let failure = Failure::new(kind, "");
        assert!(!evaluate(&Err(failure), "/readyForTermination").ready);
    }
}

#[test]
fn ecs_bodies() {
    let mut rng = Rng(0x5eed_0005);
    let seeds: [&[u8]; 6] = [
        include_bytes!("fixtures/ecs/task-v4.json"),
        include_bytes!("fixtures/ecs/container-v4.json"),
        include_bytes!("fixtures/ecs/task-protection-ok.json"),
        include_bytes!("fixtures/ecs/task-protection-failure.json"),
        include_bytes!("fixtures/ecs/task-protection-access-denied.json"),
        include_bytes!("fixtures/ecs/task-protection-timeout.json"),
    ];
    for _ in 0..ROUNDS / 3 {
        let seed = seeds[rng.below(seeds.len())];
        let body = if rng.below(3) == 0 {
            rng.bytes(128)
        } else {
            rng.mutate(seed)
        };
        if let Ok(task) = parse_task(&body) {
            assert!(!task.desired_status.is_empty());
        }
        let _ = parse_container(&body);
        let _ = parse_protection_answer([200, 400, 429, 500][rng.below(4)], &body);
    }
}

/// POSIX single quoting of one word: what an operator writes in a shell.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[test]
fn commands() {
    use drainit::io::commands::parse_command;
    let path = Some("/usr/bin:/bin");
    let mut rng = Rng(0x5eed_0012);
    for _ in 0..ROUNDS / 10 {
        // Random text from the quoting alphabet: never a panic, and an
        // accepted command always names a program that exists.
        let text = format!("true {}", rng.word("ab '\"\\\\ \t\n$;|*", 16));
        if let Ok(cmd) = parse_command(&text, path) {
            assert_eq!(cmd.argv[0], "true");
            assert!(cmd.program.exists(), "{text:?} -> {cmd:?}");
        }
        let raw = String::from_utf8_lossy(&rng.bytes(24)).into_owned();
        if let Ok(cmd) = parse_command(&raw, path) {
            assert!(!cmd.argv.is_empty() && cmd.program.exists(), "{raw:?}");
        }
        // Words quoted as a shell user would come back exactly.
        let words: Vec<String> = (0..rng.below(5))
            .map(|_| rng.word("ab '\"\\\\ \t,$", 8))
            .collect();
        let text = std::iter::once("true".to_string())
            .chain(words.iter().map(|w| quote(w)))
            .collect::<Vec<_>>()
            .join(" ");
        let cmd = parse_command(&text, path).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(cmd.argv[1..], words[..], "{text:?}");
        // An unclosed quote is always refused.
        let open = format!("{text} '{}", rng.word("ab \"", 6));
        assert!(parse_command(&open, path).is_err(), "{open:?}");
    }
}

#[test]
fn protection_over_sources() {
    use drainit::core::event::Answer;
    use drainit::core::sources::protect_busy;
    let mut rng = Rng(0x5eed_0013);
    for _ in 0..ROUNDS {
        let answers: Vec<Answer> = (0..rng.below(6))
            .map(|_| match rng.below(3) {
                0 => Answer::Ready,
                1 => Answer::NotReady("busy".into()),
                _ => Answer::NoAnswer("refused".into()),
            })
            .collect();
        let any_busy = answers.iter().any(|a| matches!(a, Answer::NotReady(_)));
        let all_ready = answers.iter().all(Answer::is_ready);
        // Busy wins; idle needs every source; no answer alone is neither.
        let expected = if any_busy {
            Some(true)
        } else if all_ready {
            Some(false)
        } else {
            None
        };
        assert_eq!(protect_busy(&answers), expected, "{answers:?}");
    }
}
