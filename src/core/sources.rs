//! Drain sources and stop hooks as bookkeeping: the sources a run polls
//! (URLs, commands, files), rounds over them, which source answered what,
//! when a round or the hooks are over, and what the exit report says about
//! each source. Pure: starting commands and reading files is `io::commands`.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::core::event::Answer;
use crate::core::outcome::Ended;
use crate::core::settings::Cmd;

use crate::core::timeline::Ticket;
use crate::util::signame::signal_name;
use crate::util::time::millis;

/// Filesystem timestamps come from a coarse clock (one tick behind the one
/// drainit reads), so a file written just after the stop began may carry a
/// time slightly before it; this much earlier still counts.
pub const MTIME_SLACK: Duration = Duration::from_millis(20);

/// The file's time, with the clock slack, is not before the stop. Checked
/// arithmetic: an app can set any mtime (`touch -d`, `utimensat` up to the
/// file system's limit), and `SystemTime + Duration` panics on overflow.
pub fn written_during_stop(mtime: SystemTime, stop_began: SystemTime) -> bool {
    mtime
        .checked_add(MTIME_SLACK)
        .map_or(true, |late| late >= stop_began)
}

/// A drain source as configured.
#[derive(Debug, Clone)]
pub enum Probe {
    Url(String),
    Exec(Cmd),
    File(PathBuf),
}

impl Probe {
    pub fn kind(&self) -> Kind {
        match self {
            Probe::Url(_) => Kind::Url,
            Probe::Exec(_) => Kind::Exec,
            Probe::File(_) => Kind::File,
        }
    }

    pub fn target(&self) -> String {
        match self {
            Probe::Url(url) => url.clone(),
            Probe::Exec(cmd) => cmd.text.clone(),
            Probe::File(path) => path.display().to_string(),
        }
    }
}

/// A source's target as the health listener may show it to anyone: a URL
/// without user-info or query, of a command only its program.
pub fn public_target(kind: Kind, target: &str) -> String {
    match kind {
        Kind::Url => public_url(target),
        Kind::Exec => shlex::split(target)
            .and_then(|words| words.into_iter().next())
            .unwrap_or_default(),
        Kind::File => target.to_string(),
    }
}

/// `url` without user-info, query or fragment.
pub fn public_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let rest = &rest[..end];
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{authority}{path}")
}

/// What a command run said, from how it ended: exit 0 is ready; killed
/// for running too long is no answer; anything else is not ready.
pub fn run_answer(ended: Ended, timed_out: Option<Duration>) -> Answer {
    match (timed_out, ended) {
        (Some(after), _) => Answer::NoAnswer(format!("killed after {} ms", millis(after))),
        (None, Ended::Exited(0)) => Answer::Ready,
        (None, Ended::Exited(code)) => Answer::NotReady(format!("exit {code}")),
        (None, Ended::Signaled(signo)) => {
            Answer::NotReady(format!("killed by {}", signal_name(signo)))
        }
    }
}

/// The kind of a source, as the exit report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Url,
    Exec,
    File,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Url => "url",
            Kind::Exec => "exec",
            Kind::File => "file",
        }
    }
}

/// A source and what it last said during this stop.
#[derive(Debug, Clone)]
pub struct Source {
    pub kind: Kind,
    pub target: String,
    /// Reported ready at least once during this stop: sticks.
    pub ready: bool,
    pub last: Option<Answer>,
    /// An answer is awaited in the current round.
    pending: bool,
}

/// The drain sources of a run, rounds over them, and the stop hooks.
#[derive(Debug, Default)]
pub struct Board {
    pub sources: Vec<Source>,
    /// The round in flight (the timeline's poll ticket).
    round: Option<Ticket>,
    /// Rounds completed (the report's `drain_polls`): a round abandoned
    /// before every source answered (escalation, the child ended) does not
    /// count, as a poll answered after the stop moved on does not.
    pub rounds: u64,
    /// The hooks in flight: their ticket and how many have not finished.
    hooks: Option<(Ticket, usize)>,
}

impl Board {
    pub fn add(&mut self, kind: Kind, target: &str) {
        self.sources.push(Source {
            kind,
            target: target.to_string(),
            ready: false,
            last: None,
            pending: false,
        });
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

    /// The hooks fire: `count` of them, answered under `ticket`.
    pub fn begin_hooks(&mut self, ticket: Ticket, count: usize) {
        self.hooks = (count > 0).then_some((ticket, count));
    }

    /// One hook finished; true when it was the last of `ticket`.
    pub fn hook_done(&mut self, ticket: Ticket) -> bool {
        match &mut self.hooks {
            Some((t, left)) if *t == ticket => {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    self.hooks = None;
                    return true;
                }
                false
            }
            _ => false,
        }
    }

    pub fn abandon_hooks(&mut self) {
        self.hooks = None;
    }

    /// The report's `sources`: each source, whether it was ready during
    /// the stop, and its last answer.
    pub fn report(&self) -> Vec<Value> {
        self.sources
            .iter()
            .map(|s| {
                json!({
                    "kind": s.kind.name(),
                    "target": s.target,
                    "ready": s.ready,
                    "last": s.last.as_ref().map(Answer::summary),
                })
            })
            .collect()
    }
}

/// Task protection over several sources (`--ecs-protect`): busy while any
/// source that answered is not ready; idle when every one answered ready;
/// None (leave protection as it is) when a source gave no answer and no
/// other said busy.
pub fn protect_busy(answers: &[Answer]) -> Option<bool> {
    if answers.iter().any(|a| matches!(a, Answer::NotReady(_))) {
        return Some(true);
    }
    if answers.iter().all(Answer::is_ready) {
        return Some(false);
    }
    None
}

/// A command run's time: `limit`, never past the deadline (at least 1 ms).
pub fn run_timeout(limit: Duration, deadline: Option<Instant>, now: Instant) -> Duration {
    let left = deadline.map_or(limit, |d| d.saturating_duration_since(now));
    limit.min(left).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_targets_show_no_secrets() {
        assert_eq!(
            public_target(Kind::Url, "http://user:pw@127.0.0.1:8080/drain?token=x#f"),
            "http://127.0.0.1:8080/drain"
        );
        assert_eq!(public_target(Kind::Url, "http://h/?a=b"), "http://h/");
        assert_eq!(
            public_target(Kind::Exec, "'/opt/my tool' --password hunter2"),
            "/opt/my tool"
        );
        assert_eq!(public_target(Kind::File, "/tmp/done"), "/tmp/done");
    }

    fn t(n: u32) -> Ticket {
        Ticket::for_test(n)
    }

    fn board(n: usize) -> Board {
        let mut b = Board::default();
        for i in 0..n {
            b.add(Kind::Url, &format!("http://127.0.0.1:{i}/"));
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
    fn hooks_are_over_when_the_last_finishes() {
        let mut b = Board::default();
        b.begin_hooks(t(7), 3);
        assert!(!b.hook_done(t(7)));
        assert!(!b.hook_done(t(6)), "another ticket");
        assert!(!b.hook_done(t(7)));
        assert!(b.hook_done(t(7)));
        assert!(!b.hook_done(t(7)), "over once");
        b.begin_hooks(t(8), 1);
        b.abandon_hooks();
        assert!(!b.hook_done(t(8)));
    }

    #[test]
    fn protection_ignores_sources_without_an_answer() {
        let no = || Answer::NoAnswer("refused".into());
        let busy = || Answer::NotReady("exit 1".into());
        assert_eq!(protect_busy(&[Answer::Ready, Answer::Ready]), Some(false));
        assert_eq!(protect_busy(&[Answer::Ready, busy()]), Some(true));
        assert_eq!(protect_busy(&[no(), busy()]), Some(true));
        assert_eq!(protect_busy(&[Answer::Ready, no()]), None);
        assert_eq!(protect_busy(&[no()]), None);
    }

    #[test]
    fn run_timeouts_stop_at_the_deadline() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(run_timeout(s(5), None, now), s(5));
        assert_eq!(run_timeout(s(5), Some(now + s(2)), now), s(2));
        assert_eq!(run_timeout(s(5), Some(now), now), Duration::from_millis(1));
    }

    #[test]
    fn any_file_time_is_judged_without_overflow() {
        let stop = SystemTime::now();
        // The largest time a file system can hold (tmpfs: any i64 second).
        let far = SystemTime::UNIX_EPOCH + Duration::new(i64::MAX as u64, 999_999_999);
        assert!(written_during_stop(far, stop));
        assert!(!written_during_stop(SystemTime::UNIX_EPOCH, stop));
        assert!(written_during_stop(stop - MTIME_SLACK, stop));
    }

    #[test]
    fn the_report_names_each_source_and_its_last_answer() {
        let mut b = board(1);
        b.add(Kind::File, "/tmp/x");
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
