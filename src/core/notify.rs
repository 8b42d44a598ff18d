//! What the app says over the notify socket, as one part of the core: each
//! accepted message counted and kept for the exit report, the readiness
//! word and an extension handed to the timeline (which decides whether
//! they count), and the log lines about them, rate-limited where the app
//! can repeat them. At its end, the reader's rules: who may send, and
//! which messages are handed to the loop at once (`refusal`, `Gather`).

use std::time::{Duration, Instant};

use log::{debug, info};

use crate::core::event::Note;
use crate::core::outcome::NotifyReport;
use crate::core::timeline::{Event, Stop};
use crate::proto::notify_msg::{kinds, Access, Message, STATUS_MAX};
use crate::util::text::escape;
use crate::util::time::millis;

/// The least time between two debug lines of a kind the app can repeat.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// What the app said over the notify socket, for the exit report.
#[derive(Debug, Clone, Default)]
pub struct NotifyState {
    pub(crate) ready_after: Option<Duration>,
    pub(crate) status: Option<Vec<u8>>,
    pub(crate) received: u64,
    pub(crate) refused: u64,
    /// Accepted messages by `notify_msg::KINDS`.
    pub(crate) kinds: [u64; 6],
    pub(crate) dropped: u64,
    pub(crate) stop_to_ready_word_ms: Option<u64>,
    pub(crate) said_extend: Option<Instant>,
    pub(crate) said_extend_ignored: bool,
    pub(crate) said_ignored: bool,
}

impl NotifyState {
    /// The timeline moved the deadline (`first`: the first time this stop).
    pub fn on_extended(&mut self, now: Instant, since: Instant, deadline: Instant, first: bool) {
        let at = millis(deadline.saturating_duration_since(since));
        if first {
            info!(
                "app extends the deadline (EXTEND_TIMEOUT_USEC): now {at} ms after the stop began"
            );
        } else if self.said_extend.map_or(true, |t| now >= t + LOG_EVERY) {
            // A flood of extensions moves the deadline every turn: at most
            // one line a second says so.
            self.said_extend = Some(now);
            debug!("app extends the deadline: now {at} ms after the stop began");
        }
    }

    /// Notify messages: counted and kept for the exit report; the
    /// readiness word and an extension become timeline events, which
    /// decide whether they count (the readiness word's flagged, last).
    /// `counting_only`: the fallback's core, or the run is over.
    pub fn on_note(
        &mut self,
        now: Instant,
        note: Note,
        started: Instant,
        stopping: bool,
        counting_only: bool,
    ) -> [Option<Event>; 2] {
        self.received += note.received;
        self.refused += note.refused;
        for (all, new) in self.kinds.iter_mut().zip(note.kinds) {
            *all += new;
        }
        self.dropped += note.dropped;
        if let (Some(at), None) = (note.ready_at, self.ready_after) {
            let after = at.saturating_duration_since(started);
            self.ready_after = Some(after);
            info!("app is ready (READY=1), {} ms after start", millis(after));
        }
        if let Some(mut status) = note.status {
            status.truncate(STATUS_MAX);
            self.status = Some(status);
        }
        let at = note.at.unwrap_or(now);
        if counting_only {
            return [None, None];
        }
        let mut extend = None;
        if let Some(by) = note.extend {
            if stopping {
                extend = Some(Event::Extend { at, by });
            } else if !std::mem::replace(&mut self.said_extend_ignored, true) {
                debug!("EXTEND_TIMEOUT_USEC outside a stop ignored (said once)");
            }
        }
        [extend, note.drained.then_some(Event::NotifyReady { at })]
    }

    /// A readiness word that did not count.
    pub fn ignored(&mut self) {
        if !std::mem::replace(&mut self.said_ignored, true) {
            debug!(
                "X_DRAINIT_READY_FOR_TERMINATION ignored: it counts only after the stop signal was forwarded"
            );
        }
    }

    /// The exit report's `notify` object.
    pub fn report(&self, stop: Option<Stop>) -> NotifyReport {
        NotifyReport {
            ready_ms: self.ready_after.map(millis),
            status: self
                .status
                .as_ref()
                .map(|s| escape(&String::from_utf8_lossy(s), STATUS_MAX)),
            received: self.received,
            refused: self.refused,
            dropped: self.dropped,
            deadline_ms: stop.and_then(|s| Some(millis(s.deadline? - s.since))),
            stop_to_ready_word_ms: self.stop_to_ready_word_ms,
        }
    }
}

// ---------------------------------------------------------------------------
// The reader's rules: who may send, and which messages are handed to the
// loop at once. `io/notify.rs` keeps the socket and the credentials it
// reads; it asks these and performs what they say.

/// Why a datagram's sender is refused (`--notify-access`), or None when it
/// may send. `pid`: the sender as the kernel vouches for it, in drainit's
/// PID namespace (None or 0: outside it); `child`: the main child's pid
/// (0 before it runs).
pub fn refusal(pid: Option<i32>, access: Access, child: i32) -> Option<&'static str> {
    match (pid, access) {
        (None | Some(0), _) => Some("a process outside drainit's PID namespace"),
        (Some(p), Access::Main) if p != child => {
            Some("a process other than the main child (--notify-access main)")
        }
        _ => None,
    }
}

/// What the reader has read but not handed over yet, and when it last
/// handed over. What the stop may wait for (the drained word, an
/// extension, the first `READY=1`) goes at once; counts and STATUS wait
/// for it, for the exit's flush, or (with the health listener) for
/// `every` to pass, so a flood of STATUS costs the loop no wake-ups.
#[derive(Debug)]
pub struct Gather {
    pending: Note,
    ready_sent: bool,
    handed: Instant,
    every: Option<Duration>,
}

impl Gather {
    pub fn new(now: Instant, every: Option<Duration>) -> Gather {
        Gather {
            pending: Note::default(),
            ready_sent: false,
            handed: now,
            every,
        }
    }

    /// A datagram whose sender was refused.
    pub fn refused(&mut self) {
        self.pending.refused += 1;
    }

    /// A datagram too long to read.
    pub fn dropped(&mut self) {
        self.pending.dropped += 1;
    }

    /// An accepted message; true when what was gathered must be handed
    /// over now (`take`).
    pub fn accepted(&mut self, now: Instant, m: &Message<'_>) -> bool {
        let p = &mut self.pending;
        p.received += 1;
        p.at = Some(now);
        for (count, has) in p.kinds.iter_mut().zip(kinds(m)) {
            *count += u64::from(has);
        }
        if let Some(status) = m.status {
            p.status = Some(status[..status.len().min(STATUS_MAX)].to_vec());
        }
        let first_ready = m.ready && !self.ready_sent;
        if first_ready {
            p.ready_at.get_or_insert(now);
        }
        p.drained |= m.drained;
        p.extend = m.extend.or(p.extend);
        let urgent = m.drained || m.extend.is_some() || first_ready;
        self.ready_sent |= first_ready;
        urgent
    }

    /// When what was gathered is due anyway (with `every`), if anything
    /// waits.
    pub fn due(&self) -> Option<Instant> {
        let every = self.every?;
        (self.pending != Note::default()).then(|| self.handed + every)
    }

    /// What was gathered, to hand over now (None: nothing).
    pub fn take(&mut self, now: Instant) -> Option<Note> {
        if self.pending == Note::default() {
            return None;
        }
        self.handed = now;
        Some(std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod reader_tests {
    use super::*;
    use crate::proto::notify_msg::parse;

    fn t(ms: u64) -> Instant {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *ORIGIN.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    #[test]
    fn who_may_send() {
        let outside = "a process outside drainit's PID namespace";
        assert_eq!(refusal(None, Access::All, 7), Some(outside));
        assert_eq!(refusal(Some(0), Access::All, 7), Some(outside));
        assert_eq!(refusal(Some(9), Access::All, 7), None);
        assert_eq!(refusal(Some(7), Access::Main, 7), None);
        assert!(refusal(Some(9), Access::Main, 7)
            .is_some_and(|why| why.contains("--notify-access main")));
        // Before the child runs, nobody is the main child.
        assert!(refusal(Some(9), Access::Main, 0).is_some());
        assert_eq!(refusal(Some(0), Access::Main, 0), Some(outside));
    }

    #[test]
    fn what_the_stop_waits_for_goes_at_once_and_counts_wait() {
        let mut g = Gather::new(t(0), None);
        assert!(!g.accepted(t(1), &parse(b"STATUS=warming")));
        assert!(!g.accepted(t(2), &parse(b"STOPPING=1")));
        g.refused();
        g.dropped();
        assert_eq!(
            g.due(),
            None,
            "without the listener only urgency hands over"
        );
        // The first READY=1 is urgent and carries what was gathered.
        assert!(g.accepted(t(3), &parse(b"READY=1\nSTATUS=up")));
        let n = g.take(t(3)).unwrap();
        assert_eq!((n.received, n.refused, n.dropped), (3, 1, 1));
        assert_eq!(n.ready_at, Some(t(3)));
        assert_eq!(n.status.as_deref(), Some(&b"up"[..]));
        assert_eq!(n.at, Some(t(3)));
        assert_eq!(g.take(t(4)), None);
        // A second READY=1 is only counted.
        assert!(!g.accepted(t(5), &parse(b"READY=1")));
        let n = g.take(t(5)).unwrap();
        assert_eq!(n.ready_at, None);
        assert_eq!(n.kinds[0], 1);
        // The drained word and an extension are urgent, each time.
        assert!(g.accepted(t(6), &parse(b"X_DRAINIT_READY_FOR_TERMINATION=1")));
        assert!(g.take(t(6)).unwrap().drained);
        assert!(g.accepted(t(7), &parse(b"EXTEND_TIMEOUT_USEC=2000000")));
        assert!(!g.accepted(t(8), &parse(b"STATUS=x")));
        let n = g.take(t(8)).unwrap();
        assert_eq!(n.extend, Some(Duration::from_secs(2)));
    }

    #[test]
    fn with_the_listener_counts_are_due_once_a_period() {
        let every = Duration::from_millis(500);
        let mut g = Gather::new(t(0), Some(every));
        assert_eq!(g.due(), None, "nothing gathered, nothing due");
        for n in 0..100 {
            assert!(!g.accepted(t(10 + n), &parse(b"STATUS=busy")));
        }
        assert_eq!(g.due(), Some(t(500)));
        let n = g.take(t(500)).unwrap();
        assert_eq!(n.received, 100);
        assert_eq!(g.due(), None);
        g.refused();
        assert_eq!(g.due(), Some(t(1_000)));
    }

    #[test]
    fn a_long_status_is_cut() {
        let mut g = Gather::new(t(0), None);
        let mut long = b"STATUS=".to_vec();
        long.resize(STATUS_MAX + 100, b'a');
        g.accepted(t(1), &parse(&long));
        assert_eq!(g.take(t(1)).unwrap().status.unwrap().len(), STATUS_MAX);
    }
}
