//! What the app says over the notify socket, as the core hears it: each
//! accepted message counted and kept for the exit report, the readiness
//! word and an extension handed to the timeline (which decides whether
//! they count), and the log lines about them, rate-limited where the app
//! can repeat them.

use std::time::{Duration, Instant};

use log::{debug, info};

use crate::core::event::Note;
use crate::core::machine::Machine;
use crate::core::outcome::NotifyReport;
use crate::core::timeline::Event;
use crate::proto::notify_msg::STATUS_MAX;
use crate::util::text::escape;
use crate::util::time::millis;

/// The least time between two debug lines of a kind the app can repeat.
const LOG_EVERY: Duration = Duration::from_secs(1);

impl Machine<'_> {
    pub(super) fn on_extended(&mut self, now: Instant, deadline: Instant, first: bool) {
        let since = self.timeline.stop().map_or(now, |s| s.since);
        let at = millis(deadline.saturating_duration_since(since));
        let Some(n) = &mut self.notify else {
            return;
        };
        if first {
            info!(
                "app extends the deadline (EXTEND_TIMEOUT_USEC): now {at} ms after the stop began"
            );
        } else if n.said_extend.map_or(true, |t| now >= t + LOG_EVERY) {
            // A flood of extensions moves the deadline every turn: at most
            // one line a second says so.
            n.said_extend = Some(now);
            debug!("app extends the deadline: now {at} ms after the stop began");
        }
    }

    /// Notify messages: counted and kept for the exit report; the
    /// readiness word and an extension go to the timeline, which decides
    /// whether they count. The fallback's core only counts.
    pub(super) fn on_note(&mut self, now: Instant, note: Note) {
        let stopping = self.timeline.stop().is_some();
        let counting_only = self.fallback || self.outcome().is_some();
        let Some(n) = &mut self.notify else {
            return;
        };
        n.received += note.received;
        n.refused += note.refused;
        for (all, new) in n.kinds.iter_mut().zip(note.kinds) {
            *all += new;
        }
        n.dropped += note.dropped;
        if let (Some(at), None) = (note.ready_at, n.ready_after) {
            let after = at.saturating_duration_since(self.started);
            n.ready_after = Some(after);
            info!("app is ready (READY=1), {} ms after start", millis(after));
        }
        if let Some(mut status) = note.status {
            status.truncate(STATUS_MAX);
            n.status = Some(status);
        }
        let at = note.at.unwrap_or(now);
        if counting_only {
            return;
        }
        if let Some(by) = note.extend {
            if stopping {
                self.feed(now, Event::Extend { at, by });
            } else if !std::mem::replace(&mut n.said_extend_ignored, true) {
                debug!("EXTEND_TIMEOUT_USEC outside a stop ignored (said once)");
            }
        }
        if note.drained {
            self.feed_word(now, Event::NotifyReady { at });
        }
    }

    pub(super) fn notify_ignored(&mut self) {
        if let Some(n) = &mut self.notify {
            if !std::mem::replace(&mut n.said_ignored, true) {
                debug!(
                    "X_DRAINIT_READY_FOR_TERMINATION ignored: it counts only after the stop signal was forwarded"
                );
            }
        }
    }

    /// The exit report's `notify` object.
    pub(super) fn notify_report(&self) -> Option<NotifyReport> {
        let n = self.notify.as_ref()?;
        Some(NotifyReport {
            ready_ms: n.ready_after.map(millis),
            status: n
                .status
                .as_ref()
                .map(|s| escape(&String::from_utf8_lossy(s), STATUS_MAX)),
            received: n.received,
            refused: n.refused,
            dropped: n.dropped,
            deadline_ms: self
                .timeline
                .stop()
                .and_then(|s| Some(millis(s.deadline? - s.since))),
            stop_to_ready_word_ms: n.stop_to_ready_word_ms,
        })
    }
}
