//! `--drain-exec`: a drain source asked by running a command in its own
//! process group (no thread), killed when its time is up (`--drain-timeout`,
//! never past the deadline). Exit 0 is ready.

use std::time::Duration;

use crate::core::event::Answer;
use crate::core::outcome::Ended;
use crate::core::settings::{Cmd, Config};
use crate::core::sources::{About, AnyKind, How, Kind, Read, Reply};
use crate::util::redact;
use crate::util::signame::signal_name;
use crate::util::time::millis;

pub struct Exec {
    cmd: Cmd,
}

/// The command sources of a run, in the order given.
pub fn from_config(config: &Config) -> impl Iterator<Item = AnyKind> + '_ {
    config
        .drain_execs
        .iter()
        .map(|cmd| -> AnyKind { AnyKind::Exec(Exec { cmd: cmd.clone() }) })
}

/// A command as it may leave drainit (the report, the logs, `/status`):
/// its program only, by the one redaction rule (`util::redact::command`).
pub fn public_command(text: &str) -> String {
    redact::command(text, redact::Commands::Program)
}

/// What a command run said, from how it ended: exit 0 is ready; killed
/// for running too long is no answer; anything else is not ready.
pub fn run_answer(ended: Ended, timed_out: Option<Duration>) -> Answer {
    match (timed_out, ended) {
        (Some(after), _) => Answer::NoAnswer(format!("killed after {} ms", millis(after))),
        (None, Ended::Exited(0)) => Answer::Ready,
        (None, Ended::Exited(code)) => Answer::NotReady(format!("exit {code}")),
        (None, Ended::Signaled(signo)) => {
            Answer::NotReady(format!("killed by {}", signal_name(signo)))
        }
    }
}

impl Kind for Exec {
    fn about(&self) -> About {
        About {
            name: "exec",
            target: public_command(&self.cmd.text),
            public: public_command(&self.cmd.text),
            protects: true,
        }
    }

    fn ask(&self) -> How {
        How::Run(self.cmd.clone())
    }

    fn read(&self, reply: Reply<'_>) -> Read {
        Read::answer(match reply {
            Reply::Run(Ok(ended), timed_out) => run_answer(ended, timed_out),
            _ => Answer::NoAnswer("cannot start".into()),
        })
    }
}
