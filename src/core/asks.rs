//! What the core's parts have asked the shell for and not heard back
//! about: each request, command run and file look gets a `Token` here,
//! with the part (`Owner`) its answer goes back to and what the counters
//! call it; the actions wait in order for the shell. Every part asks
//! through one `Asks`, so tokens are never reused and the machine routes
//! an answer by its token alone.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::core::counters::RequestKind;
use crate::core::event::{Action, Lane, Token};
use crate::core::settings::Cmd;
use crate::proto::exchange::Request;

/// The part of the core an answer goes back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The stop hooks (`core::hooks`).
    Hooks,
    /// The drain sources, for a round or for protection (`core::sources`).
    Sources,
    /// The platform watch (`core::watch`).
    Watch,
    /// Protection's own requests to its platform (`core::protect`).
    Protect,
}

/// The asks out, and the actions not yet taken by the shell.
#[derive(Debug, Default)]
pub struct Asks {
    actions: VecDeque<Action>,
    next_token: u32,
    /// Requests, runs and looks not answered yet: their owner, and for a
    /// request what the counters call it.
    out: Vec<(Token, Owner, Option<RequestKind>)>,
}

impl Asks {
    /// After a panic of the core that held `old`: the tokens go on (an
    /// answer to `old`'s asks is never taken for one of the new core's),
    /// nothing asked is awaited.
    pub fn after(old: &Asks) -> Asks {
        Asks {
            next_token: old.next_token,
            ..Asks::default()
        }
    }

    fn token(&mut self, owner: Owner, kind: Option<RequestKind>) -> Token {
        self.next_token = self.next_token.wrapping_add(1);
        let token = Token(self.next_token);
        self.out.push((token, owner, kind));
        token
    }

    /// A request on a thread of `lane`; answered by `Input::Http`.
    pub fn send(
        &mut self,
        owner: Owner,
        kind: RequestKind,
        lane: Lane,
        request: Request,
        timeout: Duration,
    ) -> Token {
        let token = self.token(owner, Some(kind));
        self.push(Action::Send {
            token,
            lane,
            request,
            timeout,
        });
        token
    }

    /// A command in its own process group; answered by `RunEnded` or
    /// `RunFailed`.
    pub fn run(&mut self, owner: Owner, cmd: Cmd) -> Token {
        let token = self.token(owner, None);
        self.push(Action::StartRun { token, cmd });
        token
    }

    /// One look at a file (its time, against the stop's start `since`);
    /// answered by `Input::File`.
    pub fn look(&mut self, owner: Owner, path: PathBuf, since: Instant) -> Token {
        let token = self.token(owner, None);
        self.push(Action::CheckFile { token, path, since });
        token
    }

    pub fn push(&mut self, action: Action) {
        self.actions.push_back(action);
    }

    /// The next action for the shell.
    pub fn pop(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The ask with this token is answered: whose it was, and for a
    /// request what the counters call it. None: never asked, or answered.
    pub fn answered(&mut self, token: Token) -> Option<(Owner, Option<RequestKind>)> {
        let at = self.out.iter().position(|(t, ..)| *t == token)?;
        let (_, owner, kind) = self.out.swap_remove(at);
        Some((owner, kind))
    }
}
