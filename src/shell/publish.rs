//! The loop's side of the health listener: after each turn, the core's
//! status goes to the listener when it changed, and the listener's asks
//! are answered once no signal sent before them is still pending.

use std::sync::Arc;

use crate::core::machine::Machine;
use crate::core::status::Status;
use crate::io::serve::Shared;
use crate::io::signals::Handled;

/// What the loop last published.
pub struct Publisher {
    shared: Arc<Shared>,
    last: Option<Status>,
    /// The core's `version` when `last` was built.
    version: Option<u64>,
    served: u64,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Publisher(served {})", self.served)
    }
}

impl Publisher {
    pub fn new(shared: Arc<Shared>) -> Publisher {
        Publisher {
            shared,
            last: None,
            version: None,
            served: 0,
        }
    }

    /// After a turn: the status if it changed, and the listener's latest
    /// ask as served when every signal sent before it has been handled.
    pub fn publish(&mut self, machine: &Machine<'_>, signals: &Handled) {
        // Read before looking at the pending signals: whatever was sent
        // before this ask is either pending now or already handled.
        let asked = self.shared.asked();
        let caught_up = (asked > self.served && !signals.any_pending()).then_some(asked);
        // A new status only when an input may have changed it: a flood of
        // asks costs the loop a `sigpending`, not a status each.
        let mut changed = None;
        if self.version != Some(machine.version()) {
            self.version = Some(machine.version());
            let status = machine.status();
            if self.last.as_ref() != Some(&status) {
                changed = Some(status.clone());
                self.last = Some(status);
            }
        }
        if changed.is_none() && caught_up.is_none() {
            return;
        }
        if let Some(asked) = caught_up {
            self.served = asked;
        }
        self.shared.publish(changed, caught_up);
    }

    /// The status alone, when it changed, with no ask served: the last
    /// resort's, which handles no ask (a `/readyz` waiting on the loop
    /// still gets its 503).
    pub fn publish_status(&mut self, machine: &Machine<'_>) {
        let status = machine.status();
        if self.last.as_ref() != Some(&status) {
            self.last = Some(status.clone());
            self.shared.publish(Some(status), None);
        }
    }

    /// The loop is over: the last status, and no ask waits for it again.
    pub fn finish(&mut self, machine: &Machine<'_>) {
        self.shared.publish(Some(machine.status()), Some(u64::MAX));
        self.served = u64::MAX;
    }
}
