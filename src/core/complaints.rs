//! Failures of a platform's endpoint, logged once per kind: an agent that
//! keeps failing the same way is said once, and its words never make a
//! key: the kinds are a fixed set (`Key`), so no answer can flood the log.

use log::warn;

use crate::proto::http::Kind;

/// What went wrong, as the key of "said once": a fixed set of values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// A request gave no usable answer, this way.
    Failed(Kind),
    /// Drain source number `.0` gave protection's poll no answer, this way.
    SourceFailed(usize, Kind),
    /// Drain source number `.0` answered a status that says its URL is
    /// wrong.
    SourceWrongUrl(usize),
    /// An answer whose status has this class (`http::status_class`) where
    /// a 2xx was expected.
    Status(&'static str),
    /// The ECS container metadata answered a status of this class.
    ContainerStatus(&'static str),
    /// An answer whose body does not read.
    Malformed,
    /// The ECS container metadata's body does not read.
    ContainerMalformed,
    /// The platform refused in its own words (ECS's `Failure`; a
    /// Kubernetes 422 or other 4xx).
    Refused,
    /// The platform answered an error of its own (ECS's `Error`).
    Error,
    /// An answer of this status class that says nothing known.
    Unexpected(&'static str),
    /// A status that says nothing known, whatever its class.
    UnexpectedStatus,
    /// 401: the token was refused.
    Unauthenticated,
    /// 403: not allowed.
    Forbidden,
    /// 404: no such object.
    NotFound,
    /// 429: too many requests.
    TooMany,
    /// 409 or 5xx: try again later.
    Retry,
}

/// Logs each kind of endpoint failure once.
#[derive(Debug, Default)]
pub struct Complaints {
    pub(crate) logged: Vec<Key>,
}

impl Complaints {
    pub fn once(&mut self, key: Key, what: &str, message: &str) {
        if !self.logged.contains(&key) {
            self.logged.push(key);
            warn!("{what}: {message} (logged once per kind; polling goes on)");
        }
    }
}
