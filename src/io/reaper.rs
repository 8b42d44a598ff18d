//! The only caller of `waitpid` in drainit: collects every child that has
//! changed state, main child and re-parented orphans alike.

pub use crate::core::outcome::Ended;

/// The most children one pass collects. A sustained storm of exiting
/// orphans could otherwise keep one pass going (and its list growing) for
/// as long as the storm lasts, with no turn for signals or the deadline.
pub const PASS_LIMIT: usize = 1024;

/// The result of one reaping pass.
#[derive(Debug, Default)]
pub struct Reaped {
    pub ended: Vec<(i32, Ended)>,
    /// No child of drainit is left at all (waitpid said ECHILD).
    pub none_left: bool,
}

/// Reaps every child that has exited, until none is left to collect or
/// `PASS_LIMIT` were; then drainit sends itself a SIGCHLD, so the next turn
/// of its loop (after the signals and timers of this one) goes on.
///
/// SIGCHLD coalesces: one signal may stand for a thousand dead orphans, so
/// one call drains them with WNOHANG rather than reaping one per signal.
/// (Raw libc: a child killed by a real-time signal must be represented too,
/// which nix's `Signal` cannot, and a status lost after waitpid is lost.)
pub fn reap_all() -> Reaped {
    let mut reaped = Reaped::default();
    loop {
        if reaped.ended.len() >= PASS_LIMIT {
            // SAFETY: kill has no memory effects; SIGCHLD to ourselves is
            // blocked and taken by the loop (never forwarded).
            unsafe { libc::kill(libc::getpid(), libc::SIGCHLD) };
            break;
        }
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            if libc::WIFEXITED(status) {
                reaped
                    .ended
                    .push((pid, Ended::Exited(libc::WEXITSTATUS(status))));
            } else if libc::WIFSIGNALED(status) {
                reaped
                    .ended
                    .push((pid, Ended::Signaled(libc::WTERMSIG(status))));
            }
            // Stop/continue reports are not requested, so nothing else comes.
            continue;
        }
        if pid < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => reaped.none_left = true,
                _ => {}
            }
        }
        // 0: children remain but none has exited.
        break;
    }
    reaped
}
