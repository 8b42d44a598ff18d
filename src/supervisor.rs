//! The event loop: one thread waits on the signalfd (and, once draining
//! exists, on timers and poll results), forwards signals, hands SIGCHLD to
//! the reaper and decides the run's `Outcome`. Nothing here may end the
//! process while the child runs: every failure is logged and survived.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use log::{debug, info, warn};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::config::Config;
use crate::exit::Outcome;
use crate::reaper::{self, Ended};
use crate::signals::{self, Inherited};
use crate::spawn;

/// Where the child is in its life, from drainit's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    /// The child runs; signals are forwarded as they come.
    Running { pid: i32 },
    /// The child has been reaped: its PID must never be signalled again.
    Exited { ended: Ended },
}

impl Lifecycle {
    /// The PID that may still be signalled.
    fn signalable(&self) -> Option<i32> {
        match *self {
            Lifecycle::Running { pid } => Some(pid),
            Lifecycle::Exited { .. } => None,
        }
    }
}

/// Something the loop reacts to.
#[derive(Debug, Clone, Copy)]
enum Event {
    Signal { signo: i32, sender: i32 },
}

struct Supervisor<'a> {
    config: &'a Config,
    sigfd: OwnedFd,
    lifecycle: Lifecycle,
    orphans_reaped: u64,
}

/// Starts the child and supervises it until it has exited.
pub fn run(config: &Config, sigfd: OwnedFd, inherited: &'static Inherited) -> Outcome {
    let pid = match spawn::spawn(&config.program, &config.args, inherited) {
        Ok(pid) => pid,
        Err(e) => {
            log::error!("cannot run {:?}: {}", config.program, e.source);
            return Outcome::SpawnFailed(e.failure);
        }
    };
    debug!("started {:?} as pid {pid}", config.program);
    let mut supervisor = Supervisor {
        config,
        sigfd,
        lifecycle: Lifecycle::Running { pid },
        orphans_reaped: 0,
    };
    supervisor.run_loop()
}

impl Supervisor<'_> {
    fn run_loop(&mut self) -> Outcome {
        loop {
            for event in self.wait() {
                self.handle(event);
                if let Lifecycle::Exited { ended } = self.lifecycle {
                    return match ended {
                        Ended::Exited(code) => Outcome::Exited(code),
                        Ended::Signaled(signo) => Outcome::Signaled(signo),
                    };
                }
            }
        }
    }

    /// The next moment the loop must wake without an event. None while no
    /// timer is armed: then drainit sleeps until a signal arrives and makes
    /// no wake-ups at all.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    /// Blocks until something happens and returns what did.
    fn wait(&mut self) -> Vec<Event> {
        let timeout = match self.next_wakeup() {
            None => PollTimeout::NONE,
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                // Round up so the loop never wakes a hair early and spins.
                let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [PollFd::new(self.sigfd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                warn!("waiting for events failed: {e}");
                // Never spin on a persistent error.
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        signals::read_pending(&self.sigfd)
            .into_iter()
            .map(|(signo, sender)| Event::Signal { signo, sender })
            .collect()
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Signal { signo, .. } if signo == libc::SIGCHLD => self.reap(),
            Event::Signal { signo, sender } => {
                debug!("received {} from pid {sender}", signals::signal_name(signo));
                self.forward(signo);
            }
        }
    }

    fn reap(&mut self) {
        for (pid, ended) in reaper::reap_all() {
            if self.lifecycle.signalable() == Some(pid) {
                match ended {
                    Ended::Exited(code) => info!("main child exited with status {code}"),
                    Ended::Signaled(signo) => {
                        info!("main child was killed by {}", signals::signal_name(signo))
                    }
                }
                self.lifecycle = Lifecycle::Exited { ended };
            } else {
                self.orphans_reaped += 1;
                if self.config.warn_on_reap {
                    warn!("Reaped zombie process with pid={pid}");
                } else {
                    debug!("Reaped zombie process with pid={pid}");
                }
            }
        }
    }

    /// Forwards a received signal (after `-r`) to the child or its group.
    fn forward(&self, signo: i32) {
        let Some(pid) = self.lifecycle.signalable() else {
            return;
        };
        let Some(sent) = self.config.rewritten(signo) else {
            debug!("dropping {} as --rewrite asks", signals::signal_name(signo));
            return;
        };
        let target = if self.config.kill_process_group {
            -pid
        } else {
            pid
        };
        // SAFETY: kill has no memory effects; the PID has not been reaped
        // (the reaper runs on this same thread and updates the lifecycle).
        if unsafe { libc::kill(target, sent) } != 0 {
            // tini exits on EPERM here, throwing away the platform's grace
            // period; a failed forward is only worth a warning.
            warn!(
                "forwarding {} to {} {}: {}",
                signals::signal_name(sent),
                if target < 0 { "process group" } else { "pid" },
                pid,
                io::Error::last_os_error()
            );
        }
    }
}
