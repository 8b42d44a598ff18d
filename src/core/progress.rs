//! What the drain polls already said: each distinct failure logged once,
//! numeric progress fields logged when they change.

use std::collections::BTreeMap;

use log::{info, warn};

use crate::proto::drain_body::Reading;

/// Remembers what was already logged across polls.
#[derive(Debug, Default)]
pub struct Progress {
    logged_problems: Vec<String>,
    last_numbers: BTreeMap<String, String>,
    pub polls: u64,
    pub last_summary: Option<String>,
}

impl Progress {
    /// Records one reading and logs what is new about it.
    pub fn observe(&mut self, reading: &Reading) {
        self.polls += 1;
        self.last_summary = Some(reading.summary.clone());
        if let Some((kind, message)) = &reading.problem {
            if crate::util::text::first_time(&mut self.logged_problems, kind) {
                warn!("drain endpoint not ready: {message} (logged once; polling goes on)");
            }
        }
        for (key, value) in &reading.numbers {
            if self.last_numbers.get(key) != Some(value) {
                match self.last_numbers.get(key) {
                    Some(old) => info!("drain progress: {key}={value} (was {old})"),
                    None => info!("drain progress: {key}={value}"),
                }
            }
        }
        if !reading.numbers.is_empty() {
            self.last_numbers = reading.numbers.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::drain_body::evaluate;
    use crate::proto::http::{Failure, Kind, Response};

    const FIELD: &str = "/readyForTermination";

    fn plain(status: u16, content_type: Option<&str>) -> Result<Response, Failure> {
        Ok(Response {
            status,
            content_type: content_type.map(String::from),
            body: b"OK".to_vec(),
        })
    }

    #[test]
    fn progress_counts_polls() {
        let mut p = Progress::default();
        let refused = || Err(Failure::new(Kind::Refused, "refused"));
        p.observe(&evaluate(&refused(), FIELD));
        p.observe(&evaluate(&refused(), FIELD));
        assert_eq!(p.polls, 2);
        assert_eq!(p.logged_problems.len(), 1);
    }

    #[test]
    fn status_codes_cannot_flood_the_log_once_keys() {
        let mut p = Progress::default();
        for status in 100..1000 {
            p.observe(&evaluate(&plain(status, Some("text/plain")), FIELD));
        }
        // 1xx, 3xx, 4xx, 5xx and other (2xx is ready).
        assert_eq!(p.logged_problems.len(), 5, "{:?}", p.logged_problems);
    }
}
