//! How a drain source is asked (`How`), its answer as it came back
//! (`Reply`) and what that answer says (`Read`): the words between the
//! sources' part of the core and each kind of source.

use std::path::PathBuf;
use std::time::Duration;

use super::url::Count;
use crate::core::event::{Answer, Seen};
use crate::core::outcome::Ended;
use crate::core::settings::Cmd;
use crate::proto::exchange::Request;
use crate::proto::http::{Failure, Kind as HttpKind, Response};

/// How a source is asked, and so which lane it needs.
#[derive(Debug, Clone)]
pub enum How {
    /// An HTTP request on a request thread: the round's lane (`Lane::Poll`)
    /// or protection's (`Lane::Protect`), whose threads the shell starts
    /// before the child (answered by `Input::Http`).
    Send(Request),
    /// A command run, killed when its time is up (`Input::RunEnded`).
    Run(Cmd),
    /// One look at a file (`Input::File`); takes no poll slot.
    Look(PathBuf),
}

/// An answer as it came back.
#[derive(Debug, Clone, Copy)]
pub enum Reply<'a> {
    Http(&'a Result<Response, Failure>),
    /// How the run ended (Err: it could not start), and after how long it
    /// was killed for running too long.
    Run(Result<Ended, ()>, Option<Duration>),
    File(&'a Seen),
}

/// What an answer says.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub answer: Answer,
    /// The progress line for the report and the ready line.
    pub summary: Option<String>,
    /// `--drain-count-field` as read: its pointer and what the answer
    /// carried there.
    pub count: Option<(String, Count)>,
    /// No answer at all: its kind and a line for protection's complaints.
    pub failure: Option<(HttpKind, String)>,
    /// A status that says the URL itself looks wrong (401, 403, 404, 405).
    pub wrong_url: Option<u16>,
    /// The answer can never say ready (a JSON body without the boolean,
    /// or one that does not parse): what `--check` calls a mistake.
    pub never_ready: bool,
}

impl Read {
    pub fn answer(answer: Answer) -> Read {
        Read {
            answer,
            summary: None,
            count: None,
            failure: None,
            wrong_url: None,
            never_ready: false,
        }
    }
}
