//! Starting the child: its own process group, the terminal's foreground
//! group when stdin is a tty, the signal state drainit inherited, and the
//! mapping of exec errors to the exit codes shells use.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::exit::SpawnFailure;
use crate::signals::Inherited;

/// A child that could not be started, with the OS error for the log.
#[derive(Debug)]
pub struct SpawnError {
    pub failure: SpawnFailure,
    pub source: io::Error,
}

fn classify(err: &io::Error) -> SpawnFailure {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => SpawnFailure::NotFound,
        Some(libc::EACCES) | Some(libc::ENOEXEC) | Some(libc::EISDIR) | Some(libc::EPERM) => {
            SpawnFailure::NotExecutable
        }
        _ => SpawnFailure::Other,
    }
}

/// Starts `program` and returns its PID, which is also its process group.
pub fn spawn(
    program: &OsString,
    args: &[OsString],
    inherited: &'static Inherited,
) -> Result<i32, SpawnError> {
    let mut command = Command::new(program);
    command.args(args);
    // setpgid runs in the child before exec, and spawn() returns only once
    // exec has succeeded, so there is no window in which a signal sent to
    // the group could miss the child (the race tini avoids the same way).
    command.process_group(0);
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe calls (tcsetpgrp, getpgrp, sigaction, sigprocmask).
    unsafe {
        command.pre_exec(move || {
            // Take the terminal so Ctrl-C and job control reach the app.
            // SIGTTOU is still ignored here (inherited from drainit), so a
            // background drainit does not stop on it; ENOTTY means no tty.
            if libc::isatty(libc::STDIN_FILENO) == 1 {
                libc::tcsetpgrp(libc::STDIN_FILENO, libc::getpgrp());
            }
            inherited.restore_in_child()
        });
    }
    match command.spawn() {
        // Dropping the handle neither waits nor kills: the reaper owns it.
        Ok(child) => Ok(child.id() as i32),
        Err(source) => Err(SpawnError {
            failure: classify(&source),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_errors_map_like_a_shell() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert_eq!(classify(&e(libc::ENOENT)), SpawnFailure::NotFound);
        assert_eq!(classify(&e(libc::ENOTDIR)), SpawnFailure::NotFound);
        assert_eq!(classify(&e(libc::EACCES)), SpawnFailure::NotExecutable);
        assert_eq!(classify(&e(libc::ENOEXEC)), SpawnFailure::NotExecutable);
        assert_eq!(classify(&e(libc::EAGAIN)), SpawnFailure::Other);
        assert_eq!(classify(&e(libc::ENOMEM)), SpawnFailure::Other);
        assert_eq!(classify(&e(libc::E2BIG)), SpawnFailure::Other);
    }
}
