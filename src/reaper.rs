//! The only caller of `waitpid` in drainit: collects every child that has
//! changed state, main child and re-parented orphans alike.

/// How a reaped process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signaled(i32),
}

/// The result of one reaping pass.
#[derive(Debug, Default)]
pub struct Reaped {
    pub ended: Vec<(i32, Ended)>,
    /// No child of drainit is left at all (waitpid said ECHILD).
    pub none_left: bool,
}

/// Reaps every child that has exited, until none is left to collect.
///
/// SIGCHLD coalesces: one signal may stand for a thousand dead orphans, so
/// one call drains them all with WNOHANG rather than reaping one per signal.
/// (Raw libc: a child killed by a real-time signal must be represented too,
/// which nix's `Signal` cannot, and a status lost after waitpid is lost.)
pub fn reap_all() -> Reaped {
    let mut reaped = Reaped::default();
    loop {
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
