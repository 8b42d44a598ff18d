//! The stop hooks as one part of the core: every `--stop-url` request and
//! every `--stop-exec` command fires together when the timeline asks; the
//! timeline hears once all are over (`HookDone`), and nothing waits for a
//! hook it abandoned.

use std::time::Duration;

use log::{debug, info, warn};

use crate::core::asks::{Asks, Owner};
use crate::core::counters::RequestKind;
use crate::core::event::{Action, Lane, Token};
use crate::core::outcome::Ended;
use crate::core::settings::Config;
use crate::core::timeline::Ticket;
use crate::proto::exchange::{Endpoint, Request};
use crate::proto::http::{Failure, Response};

/// The hooks in flight (the run's are the configuration's).
#[derive(Debug, Default)]
pub struct Hooks {
    /// The hooks in flight: their ticket and how many have not finished.
    pending: Option<(Ticket, usize)>,
    /// Hook asks out (requests and commands), by token, stale ones too.
    out: Vec<(Token, Ticket)>,
    /// The hook commands not yet reaped.
    runs: Vec<Token>,
}

impl Hooks {
    /// Every hook of `config` (`--stop-url`, `--stop-exec`) fires at once
    /// under `ticket`.
    pub fn fire(&mut self, ticket: Ticket, timeout: Duration, config: &Config, asks: &mut Asks) {
        let (urls, execs) = (&config.stop_hooks, &config.stop_execs);
        let count = urls.len() + execs.len();
        self.pending = (count > 0).then_some((ticket, count));
        for target in urls {
            info!(
                "stop hook: {} {}",
                target.method,
                crate::core::sources::url::public_url(&target.url)
            );
            let kind = RequestKind::Hook;
            let request =
                Request::new(Endpoint::HttpUrl(target.url.clone()), target.method.clone());
            let token = asks.send(Owner::Hooks, kind, Lane::Hook, request, timeout);
            self.out.push((token, ticket));
        }
        for cmd in execs {
            info!(
                "stop hook: running {}",
                crate::core::sources::exec::public_command(&cmd.text)
            );
            let token = asks.run(Owner::Hooks, cmd.clone());
            self.out.push((token, ticket));
            self.runs.push(token);
        }
    }

    /// A hook request answered; the ticket when it was the last hook.
    /// `awaited`: the timeline still waits for this ticket.
    pub fn on_http(
        &mut self,
        token: Token,
        result: &Result<Response, Failure>,
        awaited: impl Fn(Ticket) -> bool,
    ) -> Option<Ticket> {
        let ticket = self.take(token)?;
        if !awaited(ticket) {
            debug!("ignoring a late answer: the stop moved on without it");
            return None;
        }
        match result {
            Ok(response) => info!("stop hook answered HTTP {}", response.status),
            Err(failure) => warn!("stop hook failed: {failure}"),
        }
        self.done(ticket)
    }

    /// A hook command ended (Err: it could not start); the ticket when it
    /// was the last hook.
    pub fn on_run_end(&mut self, token: Token, ended: Result<Ended, ()>) -> Option<Ticket> {
        let ticket = self.take(token)?;
        self.runs.retain(|t| *t != token);
        match ended {
            Err(()) => {}
            Ok(Ended::Exited(0)) => info!("stop hook command finished"),
            Ok(other) => warn!("stop hook command ended: {other:?}"),
        }
        self.done(ticket)
    }

    fn take(&mut self, token: Token) -> Option<Ticket> {
        let at = self.out.iter().position(|(t, _)| *t == token)?;
        Some(self.out.swap_remove(at).1)
    }

    /// One hook finished; the ticket when it was the last of it.
    fn done(&mut self, ticket: Ticket) -> Option<Ticket> {
        match &mut self.pending {
            Some((t, left)) if *t == ticket => {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    self.pending = None;
                    return Some(ticket);
                }
                None
            }
            _ => None,
        }
    }

    /// Nothing waits for the hooks any more; their commands are killed
    /// (they stay in the table until reaped, so none is taken for an
    /// orphan).
    pub fn abandon(&mut self, asks: &mut Asks, why: &str) {
        self.pending = None;
        for token in &self.runs {
            debug!("killing command {token:?}: {why}");
            asks.push(Action::KillRun(*token));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u32) -> Ticket {
        Ticket::for_test(n)
    }

    #[test]
    fn hooks_are_over_when_the_last_finishes() {
        let mut b = Hooks {
            pending: Some((t(7), 3)),
            ..Hooks::default()
        };
        assert_eq!(b.done(t(7)), None);
        assert_eq!(b.done(t(6)), None, "another ticket");
        assert_eq!(b.done(t(7)), None);
        assert_eq!(b.done(t(7)), Some(t(7)));
        assert_eq!(b.done(t(7)), None, "over once");
        b.pending = Some((t(8), 1));
        b.abandon(&mut Asks::default(), "test");
        assert_eq!(b.done(t(8)), None);
    }
}
