//! The only caller of `waitpid(-1)` in drainit (see ARCHITECTURE.md for the
//! two waits on one pid just started): collects every child that has
//! changed state, main child and re-parented orphans alike. One list is
//! kept for every pass (a storm of orphans costs no allocation per pass).

use std::sync::Mutex;

pub use crate::core::outcome::Ended;

/// The most children one pass collects. A sustained storm of exiting
/// orphans could otherwise keep one pass going (and its list growing) for
/// as long as the storm lasts, with no turn for signals or the deadline.
pub const PASS_LIMIT: usize = 1024;

/// The list every pass fills, handed back when its `Batch` is dropped.
static SPARE: Mutex<Vec<(i32, Ended)>> = Mutex::new(Vec::new());

/// The children one pass collected, in the order it collected them.
#[derive(Debug, Default)]
pub struct Batch(Vec<(i32, Ended)>);

impl Batch {
    fn take() -> Batch {
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        Batch(std::mem::take(&mut *spare))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The children collected, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, (i32, Ended)> {
        self.0.iter()
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        let mut list = std::mem::take(&mut self.0);
        list.clear();
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if list.capacity() > spare.capacity() {
            *spare = list;
        }
    }
}

/// Iterates a batch by value; its list goes back for the next pass.
pub struct BatchIter {
    batch: Batch,
    next: usize,
}

impl Iterator for BatchIter {
    type Item = (i32, Ended);

    fn next(&mut self) -> Option<(i32, Ended)> {
        let item = self.batch.0.get(self.next).copied()?;
        self.next += 1;
        Some(item)
    }
}

impl IntoIterator for Batch {
    type Item = (i32, Ended);
    type IntoIter = BatchIter;

    fn into_iter(self) -> BatchIter {
        BatchIter {
            batch: self,
            next: 0,
        }
    }
}

/// The result of one reaping pass.
#[derive(Debug, Default)]
pub struct Reaped {
    pub ended: Batch,
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
    let mut reaped = Reaped {
        ended: Batch::take(),
        none_left: false,
    };
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
                    .0
                    .push((pid, Ended::Exited(libc::WEXITSTATUS(status))));
            } else if libc::WIFSIGNALED(status) {
                reaped
                    .ended
                    .0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_list_serves_every_pass() {
        let mut batch = Batch::take();
        for pid in 0..PASS_LIMIT as i32 {
            batch.0.push((pid, Ended::Exited(0)));
        }
        let grown = batch.0.as_ptr();
        let seen: Vec<i32> = batch.into_iter().map(|(pid, _)| pid).collect();
        assert_eq!(seen.len(), PASS_LIMIT);
        assert_eq!(seen[PASS_LIMIT - 1], PASS_LIMIT as i32 - 1);
        // The next pass fills the same allocation, emptied.
        let next = Batch::take();
        assert!(next.is_empty());
        assert_eq!(next.0.as_ptr(), grown);
        assert!(next.0.capacity() >= PASS_LIMIT);
    }
}
