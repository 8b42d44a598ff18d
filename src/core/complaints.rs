//! Failures of a platform's endpoint, logged once per kind: an agent that
//! keeps failing the same way is said once, and its words never make a
//! key (the kinds are a fixed set), so no answer can flood the log.

use log::warn;

/// Logs each kind of endpoint failure once.
#[derive(Debug, Default)]
pub struct Complaints {
    pub(crate) logged: Vec<String>,
}

impl Complaints {
    pub fn once(&mut self, kind: &str, what: &str, message: &str) {
        if crate::util::text::first_time(&mut self.logged, kind) {
            warn!("{what}: {message} (logged once per kind; polling goes on)");
        }
    }
}
