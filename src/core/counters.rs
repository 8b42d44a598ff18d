//! The counts a run keeps for `/status`, `/metrics` and the report:
//! signals forwarded by signal, requests by purpose and result. Every
//! label comes from a fixed set.

use crate::proto::http::{Failure, Response};

/// Why a request was made, for the counters (a fixed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Hook,
    Drain,
    /// The platform's stop watch (`core::watch`). Its label stays the one
    /// published since the ECS watch came, `ecs_metadata`: ECS is the only
    /// watch platform, and a metric's label is part of the contract.
    Watch,
    ProtectPoll,
    ProtectUpdate,
}

impl RequestKind {
    pub const ALL: [RequestKind; 5] = [
        RequestKind::Hook,
        RequestKind::Drain,
        RequestKind::Watch,
        RequestKind::ProtectPoll,
        RequestKind::ProtectUpdate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Hook => "stop_hook",
            RequestKind::Drain => "drain",
            RequestKind::Watch => "ecs_metadata",
            RequestKind::ProtectPoll => "protect_poll",
            RequestKind::ProtectUpdate => "protect_update",
        }
    }
}

/// How a request ended, for the counters (a fixed set).
pub const RESULTS: [&str; 3] = ["2xx", "other_status", "failed"];

/// The result's index in `RESULTS`.
pub fn result_index(result: &Result<Response, Failure>) -> usize {
    match result {
        Ok(r) if (200..300).contains(&r.status) => 0,
        Ok(_) => 1,
        Err(_) => 2,
    }
}

/// Counts the run keeps for `/status`, `/metrics` and the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Signals forwarded to the app, by the number sent (1-64).
    pub forwarded: [u64; 65],
    /// Requests answered, by `RequestKind` and `RESULTS`.
    pub requests: [[u64; RESULTS.len()]; RequestKind::ALL.len()],
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            forwarded: [0; 65],
            requests: [[0; RESULTS.len()]; RequestKind::ALL.len()],
        }
    }
}

impl Counters {
    pub fn forwarded(&mut self, signo: i32) {
        if let Some(n) = usize::try_from(signo)
            .ok()
            .and_then(|i| self.forwarded.get_mut(i))
        {
            *n += 1;
        }
    }

    pub fn answered(&mut self, kind: RequestKind, result: &Result<Response, Failure>) {
        let at = RequestKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or(0);
        self.requests[at][result_index(result)] += 1;
    }
}
