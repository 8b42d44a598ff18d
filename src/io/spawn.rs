//! Starting the child: its own process group, the terminal's foreground
//! group when stdin is a tty, the signal state drainit inherited, and the
//! mapping of exec errors to the exit codes shells use.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::core::outcome::SpawnFailure;
use crate::io::signals::{add_raw, Inherited};

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
///
/// Usually with `posix_spawnp` (a vfork-style start: no copy of drainit's
/// page tables, and exec errors come back as its return value); with
/// fork+exec when stdin is a terminal (the child must take the terminal's
/// foreground, which `posix_spawn` cannot do), when SIGCHLD was
/// inherited ignored (which `posix_spawn` cannot give back), and always
/// with musl: its `posix_spawn` gives the caller's mask back through
/// `pthread_sigmask`, which drops 32-34 from it, so until drainit blocks
/// them again a `kill -33` sent the moment the child runs ends drainit
/// (seen under load). A fork leaves drainit's own mask alone.
pub fn spawn(
    program: &OsString,
    args: &[OsString],
    inherited: &'static Inherited,
) -> Result<i32, SpawnError> {
    // SAFETY: isatty only inspects fd 0.
    let tty = unsafe { libc::isatty(libc::STDIN_FILENO) } == 1;
    match inherited.spawn_defaults() {
        Some(defaults) if !tty && !inherited.blocks_reserved() && !cfg!(target_env = "musl") => {
            spawn_posix(program, args, inherited, &defaults)
        }
        _ => spawn_forked(program, args, inherited),
    }
}

fn spawn_error(source: io::Error) -> SpawnError {
    SpawnError {
        failure: classify(&source),
        source,
    }
}

fn spawn_posix(
    program: &OsString,
    args: &[OsString],
    inherited: &Inherited,
    defaults: &libc::sigset_t,
) -> Result<i32, SpawnError> {
    let nul = |_| {
        spawn_error(io::Error::new(
            io::ErrorKind::InvalidInput,
            "argument contains a NUL byte",
        ))
    };
    let c_args: Vec<CString> = std::iter::once(program)
        .chain(args)
        .map(|a| CString::new(a.as_bytes()).map_err(nul))
        .collect::<Result<_, _>>()?;
    let mut argv: Vec<*mut libc::c_char> = c_args
        .iter()
        .map(|a| a.as_ptr() as *mut libc::c_char)
        .collect();
    argv.push(std::ptr::null_mut());
    let mut pid: libc::pid_t = 0;
    // SAFETY: the attribute object is initialised before use and destroyed
    // after; argv is NUL-terminated and outlives the call; environ is the
    // process environment, which nothing modifies concurrently here.
    let rc = unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        libc::posix_spawnattr_setflags(
            &mut attr,
            (libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short,
        );
        // Its own process group (pgid = its pid), set before exec: no window
        // in which a signal to the group could miss it.
        libc::posix_spawnattr_setpgroup(&mut attr, 0);
        libc::posix_spawnattr_setsigmask(&mut attr, inherited.mask());
        libc::posix_spawnattr_setsigdefault(&mut attr, &with_libc_internals(*defaults, inherited));
        let rc = libc::posix_spawnp(
            &mut pid,
            c_args[0].as_ptr(),
            std::ptr::null(),
            &attr,
            argv.as_ptr(),
            environ,
        );
        libc::posix_spawnattr_destroy(&mut attr);
        rc
    };
    // musl's posix_spawn restores the caller's mask through
    // `pthread_sigmask`, which drops the reserved numbers (32-34) from the
    // mask it saved: block them again, or a `kill -33` would end drainit.
    crate::io::signals::block_handled();
    if rc != 0 {
        return Err(spawn_error(io::Error::from_raw_os_error(rc)));
    }
    Ok(pid)
}

extern "C" {
    static environ: *const *mut libc::c_char;
}

/// Both C libraries' `posix_spawn` may set their internal signals 32 and 33
/// to SIG_IGN in the child unless they are in the default set (glibc always
/// does; musl when it installed a handler for them, which drainit never
/// makes it do), and SIG_IGN survives exec. drainit passes on exactly what
/// it inherited, read before any thread existed (glibc's first thread puts
/// a handler on 33): default unless it inherited SIG_IGN, as fork+exec
/// does. `sigaddset` refuses these numbers, so the bits are set directly
/// (`signals::add_raw`).
const _: () = assert!(std::mem::size_of::<libc::sigset_t>() >= 8);

fn with_libc_internals(mut set: libc::sigset_t, inherited: &Inherited) -> libc::sigset_t {
    for signo in [32, 33] {
        if !inherited.reserved_ignored(signo) {
            add_raw(&mut set, signo as usize);
        }
    }
    set
}

fn spawn_forked(
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
        Err(source) => Err(spawn_error(source)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_internals_are_bits_31_and_32_of_the_set() {
        // SAFETY: sigemptyset initialises the set it is given.
        let set = unsafe {
            let mut set = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            add_raw(&mut set, 32);
            add_raw(&mut set, 33);
            set
        };
        let words: &[libc::c_ulong] = unsafe {
            // SAFETY: sigset_t is an array of unsigned longs (see above).
            std::slice::from_raw_parts(
                &set as *const libc::sigset_t as *const libc::c_ulong,
                std::mem::size_of::<libc::sigset_t>() / std::mem::size_of::<libc::c_ulong>(),
            )
        };
        #[cfg(target_pointer_width = "64")]
        let expected: &[libc::c_ulong] = &[0x1_8000_0000];
        #[cfg(target_pointer_width = "32")]
        let expected: &[libc::c_ulong] = &[0x8000_0000, 1];
        assert_eq!(&words[..expected.len()], expected);
        assert!(words[expected.len()..].iter().all(|&w| w == 0));
    }

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
