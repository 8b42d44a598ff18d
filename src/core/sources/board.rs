//! Who is asked in a drain round and who answered: each source's sticky
//! readiness and last answer, the round in flight (an answer of another
//! round is stale), the rounds completed, and the report's `sources`.

use serde_json::{json, Value};

use crate::core::event::Answer;
use crate::core::timeline::Ticket;

/// A source and what it last said during this stop.
#[derive(Debug, Clone)]
pub struct Source {
    /// Its kind's name.
    pub kind: &'static str,
    pub target: String,
    /// The target as the health listener may show it to anyone.
    pub public: String,
    /// Asked for task protection.
    pub protects: bool,
    /// Reported ready at least once during this stop: sticks.
    pub ready: bool,
    pub last: Option<Answer>,
    /// An answer is awaited in the current round.
    pending: bool,
}

/// Who is asked in a round and who answered: sticky readiness, stale
/// answers, the rounds completed.
#[derive(Debug, Default)]
pub struct Board {
    pub sources: Vec<Source>,
    /// The round in flight (the timeline's poll ticket).
    round: Option<Ticket>,
    /// Rounds completed (the report's `drain_polls`): a round abandoned
    /// before every source answered (escalation, the child ended) does not
    /// count, as a poll answered after the stop moved on does not.
    pub rounds: u64,
}

impl Board {
    pub fn add(&mut self, kind: &'static str, target: &str) {
        self.sources.push(Source {
            kind,
            target: target.to_string(),
            public: target.to_string(),
            protects: true,
            ready: false,
            last: None,
            pending: false,
        });
    }

    /// The round with this ticket is in flight: its answers count.
    pub fn awaits(&self, ticket: Ticket) -> bool {
        self.round == Some(ticket)
    }

    /// Begins a round: the sources to ask (every one not yet ready; a
    /// source that was ready stays so). Empty: the round is already over.
    pub fn begin_round(&mut self, ticket: Ticket) -> Vec<usize> {
        let ask: Vec<usize> = (0..self.sources.len())
            .filter(|&i| !self.sources[i].ready)
            .collect();
        for &i in &ask {
            self.sources[i].pending = true;
        }
        self.round = (!ask.is_empty()).then_some(ticket);
        if ask.is_empty() {
            self.rounds += 1;
        }
        ask
    }

    /// Every source has been ready during this stop.
    pub fn all_ready(&self) -> bool {
        self.sources.iter().all(|s| s.ready)
    }

    /// Records an answer of source `index` in round `ticket`. Returns the
    /// previous answer (for logging changes) when it counted, and whether
    /// the round is now over, as `(previous, over)`; a stale answer (of an
    /// earlier or abandoned round) returns None.
    pub fn answer(
        &mut self,
        ticket: Ticket,
        index: usize,
        answer: Answer,
    ) -> Option<(Option<Answer>, bool)> {
        if self.round != Some(ticket) {
            return None;
        }
        let source = self.sources.get_mut(index).filter(|s| s.pending)?;
        source.pending = false;
        source.ready |= answer.is_ready();
        let previous = source.last.replace(answer);
        let over = self.sources.iter().all(|s| !s.pending);
        if over {
            self.round = None;
            self.rounds += 1;
        }
        Some((previous, over))
    }

    /// The round in flight is dropped (escalation, the child ended).
    pub fn abandon_round(&mut self) {
        self.round = None;
        for s in &mut self.sources {
            s.pending = false;
        }
    }

    /// The report's `sources`: each source, whether it was ready during
    /// the stop, and its last answer.
    pub fn report(&self) -> Vec<Value> {
        self.sources
            .iter()
            .map(|s| {
                json!({
                    "kind": s.kind,
                    "target": s.target,
                    "ready": s.ready,
                    "last": s.last.as_ref().map(Answer::summary),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u32) -> Ticket {
        Ticket::for_test(n)
    }

    fn board(n: usize) -> Board {
        let mut b = Board::default();
        for i in 0..n {
            b.add("url", &format!("http://127.0.0.1:{i}/"));
        }
        b
    }

    #[test]
    fn a_round_is_over_when_every_asked_source_answered() {
        let mut b = board(2);
        assert_eq!(b.begin_round(t(1)), [0, 1]);
        assert_eq!(b.answer(t(1), 0, Answer::Ready), Some((None, false)));
        assert_eq!(b.answer(t(1), 0, Answer::Ready), None, "answered twice");
        let (_, over) = b.answer(t(1), 1, Answer::NotReady("503".into())).unwrap();
        assert!(over);
        assert!(!b.all_ready());
        // Source 0 stays ready: only source 1 is asked again.
        assert_eq!(b.begin_round(t(2)), [1]);
        assert_eq!(b.answer(t(1), 1, Answer::Ready), None, "stale round");
        assert_eq!(
            b.answer(t(2), 1, Answer::NoAnswer("refused".into())),
            Some((Some(Answer::NotReady("503".into())), true))
        );
        assert!(!b.all_ready());
        b.begin_round(t(3));
        b.answer(t(3), 1, Answer::Ready).unwrap();
        assert!(b.all_ready());
        assert_eq!(b.begin_round(t(4)), Vec::<usize>::new());
        assert_eq!(b.rounds, 4);
    }

    #[test]
    fn an_abandoned_round_ignores_late_answers() {
        let mut b = board(1);
        b.begin_round(t(1));
        assert_eq!(b.rounds, 0, "not over yet");
        b.abandon_round();
        assert_eq!(b.answer(t(1), 0, Answer::Ready), None);
        assert!(!b.all_ready());
        assert_eq!(b.answer(t(1), 9, Answer::Ready), None, "no such source");
        assert_eq!(b.rounds, 0, "an abandoned round does not count");
    }

    #[test]
    fn the_report_names_each_source_and_its_last_answer() {
        let mut b = board(1);
        b.add("file", "/tmp/x");
        b.begin_round(t(1));
        b.answer(t(1), 1, Answer::NotReady("absent".into()));
        let r = b.report();
        assert_eq!(r[0]["kind"], "url");
        assert_eq!(r[0]["last"], Value::Null);
        assert_eq!(r[1]["kind"], "file");
        assert_eq!(r[1]["target"], "/tmp/x");
        assert_eq!(r[1]["last"], "not ready: absent");
        assert_eq!(r[1]["ready"], false);
    }
}
