//! What the app says over the notify socket, as one part of the core: each
//! accepted message counted and kept for the exit report, the readiness
//! word and an extension handed to the timeline (which decides whether
//! they count), and the log lines about them, rate-limited where the app
//! can repeat them.

use std::time::{Duration, Instant};

use log::{debug, info};

use crate::core::event::Note;
use crate::core::outcome::NotifyReport;
use crate::core::timeline::{Event, Stop};
use crate::proto::notify_msg::STATUS_MAX;
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
