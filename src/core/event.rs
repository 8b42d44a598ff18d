//! Everything that can happen to a run, as the core hears it: one `Input`
//! enum for signals, reaped processes, request results, command runs,
//! notify messages and the passing of time, and the `Token` that ties a
//! request or a command run to the answer that comes back for it.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::core::outcome::Ended;
use crate::core::settings::Cmd;
use crate::proto::exchange::Request;
use crate::proto::http::{Failure, Response};

/// Names one request or command run the core asked for; its answer comes
/// back with it. Never reused within a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(pub u32);

/// What the notify reader hands over: the messages it read since its last
/// note, parsed and counted. It hands a note over at once when one carries
/// something for the stop (the readiness word, an extension, the first
/// READY=1), and otherwise only with the next such note or at the exit's
/// flush, so an app that sends a flood of STATUS costs no wake-ups. The
/// core decides what a note means for the stop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Note {
    /// When the last of its messages was received.
    pub at: Option<Instant>,
    /// Accepted datagrams it stands for, and those refused (their sender)
    /// or dropped (too long).
    pub received: u64,
    pub refused: u64,
    pub dropped: u64,
    /// When the app first said `READY=1`, if it did in these messages.
    pub ready_at: Option<Instant>,
    /// `X_DRAINIT_READY_FOR_TERMINATION=1`.
    pub drained: bool,
    pub extend: Option<Duration>,
    /// The latest `STATUS=` text, already cut to `notify_msg::STATUS_MAX`.
    pub status: Option<Vec<u8>>,
    /// Accepted messages by what they carry (`notify_msg::KINDS`).
    pub kinds: [u64; 6],
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A signal another process sent (never SIGCHLD, never drainit's own).
    Signal(i32),
    /// The main child ended.
    ChildExited(Ended),
    /// A command the core started ended.
    RunEnded { token: Token, ended: Ended },
    /// A command could not be started.
    RunFailed { token: Token },
    /// Any other process was reaped (an orphan re-parented to drainit).
    OrphanReaped { pid: i32 },
    /// The reaper found no child at all.
    NoneLeft,
    /// A request came back.
    Http {
        token: Token,
        result: Result<Response, Failure>,
    },
    /// A drain file was looked at (the verdict is the core's).
    File { token: Token, seen: Seen },
    /// The escalation's SIGKILL reached neither the group nor the child.
    KillFailed,
    /// `TerminateOthers` found no other process to signal.
    OthersGone,
    /// Notify messages read since the last note.
    Notify(Note),
    /// The notify reader read everything sent before drainit's own flush
    /// marker (at exit, so the report counts the last messages).
    NotifyFlushed,
    /// Nothing but time: fire the timers that are due.
    Timeout,
}

/// Which threads run a request: each lane has its own, so drain polls
/// never wait behind a stuck ECS agent or hook, nor the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Drain rounds (at most `core::sources::MAX_POLLS` at once).
    Poll,
    /// Task protection's polls and requests.
    Protect,
    /// The platform watch's requests (the ECS task metadata).
    Watch,
    /// `--stop-url` hooks.
    Hook,
}

/// What the core asks the shell to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `signo` (already rewritten) to the child, or to its process
    /// group when `group`; `stop` marks the stop signal itself.
    Forward { signo: i32, group: bool, stop: bool },
    /// SIGKILL to the child's process group and to the child; answer
    /// `KillFailed` if the child's own kill fails.
    KillChild,
    /// SIGTERM to every other process; answer `OthersGone` if there is none.
    TerminateOthers,
    /// `signo` to what the ended child left in its process group (called
    /// `dumb-init`, in its session mode); an empty group is no failure.
    SignalGroupLeft { signo: i32 },
    /// drainit stops itself (SIGSTOP) after forwarding a job-control
    /// signal (called `dumb-init`); a SIGCONT resumes it.
    StopSelf,
    /// Start a request on a thread of `lane`; answer `Http` with the token.
    Send {
        token: Token,
        lane: Lane,
        request: Request,
        timeout: Duration,
    },
    /// Start a command in its own process group; answer `RunEnded` when it
    /// is reaped, or `RunFailed` now.
    StartRun { token: Token, cmd: Cmd },
    /// SIGKILL to a command's process group.
    KillRun(Token),
    /// Look at a drain file: ready when written since the stop began at
    /// `since`; answer `File`.
    CheckFile {
        token: Token,
        path: PathBuf,
        since: Instant,
    },
    /// The run is over: the shell writes the report and exits.
    Exit,
}

/// What one look at a drain file found: io makes the `stat`, the core
/// judges it (`core::sources::file::verdict`).
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// The file's time, and when the stop began, both on the wall clock.
    Written {
        mtime: SystemTime,
        stop_began: SystemTime,
    },
    Absent,
    /// Any other failure of the `stat`.
    Unreadable(String),
}

/// One answer of one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Ready,
    /// A definite "not yet" (a status, an exit code, a missing file).
    NotReady(String),
    /// No answer at all (refused, timed out, failed to start): for task
    /// protection neither busy nor idle.
    NoAnswer(String),
}

impl Answer {
    pub fn is_ready(&self) -> bool {
        *self == Answer::Ready
    }

    pub fn summary(&self) -> String {
        match self {
            Answer::Ready => "ready".into(),
            Answer::NotReady(why) => format!("not ready: {why}"),
            Answer::NoAnswer(why) => format!("no answer: {why}"),
        }
    }
}
