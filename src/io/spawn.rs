//! Starting processes: the child (its own process group, the terminal's
//! foreground group when stdin is a tty, the signal state drainit
//! inherited, the directory it moves into when drainit has left it, and
//! the mapping of exec errors to the exit codes shells use)
//! and the commands drain sources and stop hooks run, both with one
//! spawner of drainit's own.
//!
//! The spawner is `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own,
//! as both C libraries' `posix_spawn` are, without their mask handling:
//! drainit's thread blocks every catchable signal (32-34 included) at all
//! times, the child is born with that mask, and it stays so until one raw
//! `rt_sigprocmask` just before `execve`. The parent's mask is never
//! touched (musl's `posix_spawn` restores it through `pthread_sigmask`,
//! which hands 32-34 back, so a `kill -33` at that moment ended drainit),
//! and nothing is copied (no fork of drainit's page tables). The exec's
//! outcome needs no pipe: the parent sleeps until the child has exec'd or
//! exited, and a child that could not exec leaves its errno in the memory
//! they share before it exits.
//!
//! The child runs on the parent's memory, so it makes raw system calls
//! only, allocates nothing and never runs a signal handler: the handlers
//! drainit may have (the Rust runtime's SIGSEGV and SIGBUS, the C
//! library's 32-34) are set back to the default before any signal is
//! unblocked; every other signal is at SIG_DFL or SIG_IGN in drainit
//! (drainit takes signals with `sigwaitinfo`, never with a handler).

use std::cell::UnsafeCell;
use std::ffi::{CStr, CString, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use crate::core::outcome::SpawnFailure;
use crate::io::signals::Inherited;

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

fn spawn_error(source: io::Error) -> SpawnError {
    SpawnError {
        failure: classify(&source),
        source,
    }
}

/// The search path when `PATH` is unset, as execvp and shells use.
pub const DEFAULT_PATH: &[u8] = b"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The child's stack: its frames and one path being tried (PATH_MAX).
const STACK_SIZE: usize = 16 * 1024;
const PATH_MAX: usize = libc::PATH_MAX as usize;

/// Signals drainit may hold a handler for (or, 32 and 33, ignores
/// itself), set back to the default in the child before anything is
/// unblocked.
const HANDLED_BY_SOMEONE: [i32; 5] = [libc::SIGSEGV, libc::SIGBUS, 32, 33, 34];

/// The stack every child starts on, one child at a time (`SPAWNING`).
/// Only the pages the child touches cost memory.
struct Stack(UnsafeCell<MaybeUninit<[u8; STACK_SIZE]>>);
// SAFETY: used only while `SPAWNING` is held.
unsafe impl Sync for Stack {}
static STACK: Stack = Stack(UnsafeCell::new(MaybeUninit::uninit()));
static SPAWNING: Mutex<()> = Mutex::new(());

/// The signal state the child execs with.
enum Signals<'a> {
    /// What drainit inherited (the main child).
    Inherited(&'a Inherited),
    /// An empty mask and SIGPIPE at its default (commands).
    Clean,
}

/// Everything the child needs, prepared by the parent (the child
/// allocates nothing).
struct Plan<'a> {
    /// A path (with a '/') or a name looked up on `path`.
    program: &'a CStr,
    /// `PATH` when `program` has no '/'.
    search: Option<&'a [u8]>,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    /// Take the terminal's foreground (stdin is a tty).
    tty: bool,
    /// stdin from /dev/null, stdout to stderr (commands).
    quiet_stdio: bool,
    signals: Signals<'a>,
    /// The dispositions drainit changed from what it inherited must be
    /// given back one by one (SIGCHLD or 32/33 came in ignored).
    full_restore: bool,
    /// A directory (an open descriptor) the child moves to before exec;
    /// None: drainit's own.
    dir: Option<i32>,
    /// The errno of a child that could not exec (0: it did).
    error: AtomicI32,
}

extern "C" {
    static environ: *const *const libc::c_char;
}

/// Starts `program` and returns its PID, which is also its process group.
/// Found on `PATH` like execvp (the default path when unset).
pub fn spawn(
    program: &OsString,
    args: &[OsString],
    inherited: &'static Inherited,
) -> Result<i32, SpawnError> {
    spawn_in(program, args, inherited, None)
}

/// As `spawn`, the child moving to the directory open as `dir` before it
/// execs (`fchdir`): drainit may already have left it, so the child never
/// sees drainit in it.
pub fn spawn_in(
    program: &OsString,
    args: &[OsString],
    inherited: &'static Inherited,
    dir: Option<std::os::fd::BorrowedFd<'_>>,
) -> Result<i32, SpawnError> {
    use std::os::fd::AsRawFd;
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
    let search = if program.as_bytes().contains(&b'/') {
        None
    } else {
        // SAFETY: getenv returns a pointer into the environment, which
        // nothing modifies while drainit runs.
        let path = unsafe { libc::getenv(c"PATH".as_ptr()) };
        Some(if path.is_null() {
            DEFAULT_PATH
        } else {
            unsafe { CStr::from_ptr(path) }.to_bytes()
        })
    };
    // SAFETY: isatty only inspects fd 0.
    let tty = unsafe { libc::isatty(libc::STDIN_FILENO) } == 1;
    let full_restore = inherited.spawn_defaults().is_none()
        || inherited.reserved_ignored(32)
        || inherited.reserved_ignored(33);
    run(
        &c_args,
        Plan {
            program: &c_args[0],
            search,
            argv: std::ptr::null(),
            envp: std::ptr::null(),
            tty,
            quiet_stdio: false,
            signals: Signals::Inherited(inherited),
            full_restore,
            dir: dir.map(|d| d.as_raw_fd()),
            error: AtomicI32::new(0),
        },
    )
    .map_err(spawn_error)
}

/// Starts a command: `program` (a path) with `argv` (argv[0] first), in
/// its own process group, stdin from /dev/null, stdout and stderr to
/// drainit's stderr, an empty mask and SIGPIPE at its default; in `dir`
/// when given (opened only for the start: drainit keeps no hold on it).
pub fn spawn_command(
    program: &std::path::Path,
    argv: &[String],
    dir: Option<&std::path::Path>,
) -> io::Result<i32> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let nul = |_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte");
    let path = CString::new(program.as_os_str().as_bytes()).map_err(nul)?;
    let c_args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(nul))
        .collect::<Result<_, _>>()?;
    let dir = match dir {
        Some(dir) => Some(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?,
        ),
        None => None,
    };
    run(
        &c_args,
        Plan {
            program: &path,
            // A command's program is resolved at start: always a path.
            search: None,
            argv: std::ptr::null(),
            envp: std::ptr::null(),
            tty: false,
            quiet_stdio: true,
            signals: Signals::Clean,
            full_restore: false,
            dir: dir.as_ref().map(|d| d.as_raw_fd()),
            error: AtomicI32::new(0),
        },
    )
}

/// Clones the child on the spawn stack and waits until it exec'd (its
/// PID) or could not (its errno; the child is reaped here).
fn run(c_args: &[CString], mut plan: Plan<'_>) -> io::Result<i32> {
    let mut argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    plan.argv = argv.as_ptr();
    // SAFETY: the process environment, read as it is (like posix_spawn).
    plan.envp = unsafe { environ };
    let _one_at_a_time = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the stack is ours while SPAWNING is held; its top is aligned
    // to 16 bytes as both ABIs want. With CLONE_VFORK this thread sleeps
    // until the child has exec'd or exited, so `plan`, `argv` and the
    // stack outlive every use the child makes of them; the child touches
    // nothing else of ours (see `child`).
    let pid = unsafe {
        let base = STACK.0.get() as *mut u8;
        let top = ((base as usize + STACK_SIZE) & !15) as *mut libc::c_void;
        libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &plan as *const Plan as *mut libc::c_void,
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let error = plan.error.load(Ordering::Acquire);
    if error != 0 {
        // The child exited at once: collect it here, as posix_spawn does,
        // so no status of a process nobody knows reaches the reaper.
        let mut status = 0;
        // SAFETY: waitpid on our own child's pid.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(pid)
}

/// The child, on the spawn stack and drainit's memory: raw system calls
/// only, then `execve`, or its errno left in the plan and an exit with
/// the shell's code for it.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Plan`, alive while the parent sleeps.
    let plan = unsafe { &*(arg as *const Plan) };
    let error = prepare_and_exec(plan).max(1);
    plan.error.store(error, Ordering::Release);
    // The exit code says it too, as a shell would: where the memory is not
    // shared after all (qemu-user runs CLONE_VFORK as a fork), the parent
    // sees a child that started and exited 127, 126 or 125 at once.
    let code = match classify(&io::Error::from_raw_os_error(error)) {
        SpawnFailure::NotFound => 127,
        SpawnFailure::NotExecutable => 126,
        SpawnFailure::Other => 125,
    };
    // SAFETY: ends this process only (it has one thread).
    unsafe { libc::syscall(libc::SYS_exit_group, code) };
    code
}

/// errno of the last raw call (the parent's thread slot, shared: the
/// parent never reads it after a successful spawn).
fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// Sets a disposition with the kernel's own call (`handler` is SIG_DFL or
/// SIG_IGN: no handler, so no restorer). The buffer is larger than the
/// kernel's `struct sigaction` on every Linux target.
fn set_raw(signo: i32, handler: usize) -> i64 {
    let new = [handler, 0, 0, 0];
    // SAFETY: rt_sigaction reads `new`; 8 is the kernel's sigset size.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signo,
            new.as_ptr(),
            std::ptr::null_mut::<usize>(),
            8usize,
        )
    }
}

fn prepare_and_exec(plan: &Plan) -> i32 {
    // SAFETY (the whole function): raw system calls on values this child
    // owns or the parent lent it; nothing allocates, locks or unwinds.
    unsafe {
        // No handler may ever run here: it would run on drainit's memory.
        // One call each sets the default and reads what was there; one
        // that was ignored is ignored again (exec keeps SIG_IGN). 32 and
        // 33 drainit ignores itself (`signals::ignore_reserved`): ignored
        // again only when drainit inherited them so.
        for signo in HANDLED_BY_SOMEONE {
            let new = [libc::SIG_DFL, 0, 0, 0];
            let mut old = [0usize; 8];
            let rc = libc::syscall(
                libc::SYS_rt_sigaction,
                signo,
                new.as_ptr(),
                old.as_mut_ptr(),
                8usize,
            );
            let was_ignored = rc == 0 && old[0] == libc::SIG_IGN;
            let ignored = match signo {
                32 | 33 => crate::io::signals::inherited_ignored(signo).unwrap_or(was_ignored),
                _ => was_ignored,
            };
            if ignored {
                set_raw(signo, libc::SIG_IGN);
            }
        }
        if let Some(fd) = plan.dir {
            if libc::syscall(libc::SYS_fchdir, fd) != 0 {
                return errno();
            }
        }
        // Its own process group (pgid = its pid), set before exec: no
        // window in which a signal to the group could miss it.
        if libc::syscall(libc::SYS_setpgid, 0, 0) != 0 {
            return errno();
        }
        if plan.tty {
            // Take the terminal so Ctrl-C and job control reach the app.
            // SIGTTOU is blocked here, so a background drainit does not
            // stop on it; a failure leaves the terminal as it was.
            let pgid: libc::pid_t = libc::syscall(libc::SYS_getpid) as libc::pid_t;
            libc::syscall(
                libc::SYS_ioctl,
                libc::STDIN_FILENO,
                libc::TIOCSPGRP,
                &pgid as *const libc::pid_t,
            );
        }
        if plan.quiet_stdio {
            let null = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
            );
            if null < 0 {
                return errno();
            }
            if null != 0 {
                if libc::syscall(libc::SYS_dup3, null, 0, 0) < 0 {
                    return errno();
                }
                libc::syscall(libc::SYS_close, null);
            }
            if libc::syscall(libc::SYS_dup3, libc::STDERR_FILENO, libc::STDOUT_FILENO, 0) < 0 {
                return errno();
            }
        }
        // The one mask restore, then exec.
        let mut none: libc::sigset_t = std::mem::zeroed();
        let mask: *const libc::sigset_t = match plan.signals {
            Signals::Inherited(inherited) if plan.full_restore => {
                // Dispositions one by one, and the mask last.
                if let Err(e) = inherited.restore_in_child() {
                    return e.raw_os_error().unwrap_or(libc::EINVAL);
                }
                std::ptr::null()
            }
            Signals::Inherited(inherited) => inherited.mask(),
            Signals::Clean => {
                set_raw(libc::SIGPIPE, libc::SIG_DFL);
                libc::sigemptyset(&mut none);
                &none
            }
        };
        if !mask.is_null()
            && libc::syscall(
                libc::SYS_rt_sigprocmask,
                libc::SIG_SETMASK,
                mask,
                std::ptr::null_mut::<libc::sigset_t>(),
                8usize,
            ) != 0
        {
            return errno();
        }
        exec(plan)
    }
}

/// `execve`, on each `PATH` entry in turn for a bare name (execvp's
/// rules: a directory that is not there or not searchable is skipped;
/// any EACCES met is the error when nothing ran). Returns the errno.
fn exec(plan: &Plan) -> i32 {
    let execve = |path: *const libc::c_char| {
        // SAFETY: NUL-terminated path, argv and envp from the parent.
        unsafe { libc::syscall(libc::SYS_execve, path, plan.argv, plan.envp) };
        errno()
    };
    let Some(search) = plan.search else {
        return execve(plan.program.as_ptr());
    };
    let name = plan.program.to_bytes();
    if name.is_empty() {
        return libc::ENOENT;
    }
    let mut buffer = [0u8; PATH_MAX];
    let mut seen_eacces = false;
    let mut last = libc::ENOENT;
    for dir in search.split(|&b| b == b':') {
        // An empty entry is the current directory, as for execvp.
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let len = dir.len() + 1 + name.len();
        let Some(candidate) = buffer.get_mut(..len + 1) else {
            last = libc::ENAMETOOLONG;
            continue;
        };
        let (head, tail) = candidate.split_at_mut(dir.len());
        head.copy_from_slice(dir);
        let Some((slash, rest)) = tail.split_first_mut() else {
            continue;
        };
        *slash = b'/';
        let Some((nul, file)) = rest.split_last_mut() else {
            continue;
        };
        file.copy_from_slice(name);
        *nul = 0;
        last = execve(candidate.as_ptr().cast());
        match last {
            libc::EACCES => seen_eacces = true,
            libc::ENOENT
            | libc::ENOTDIR
            | libc::ESTALE
            | libc::ENODEV
            | libc::ETIMEDOUT
            | libc::ELOOP
            | libc::ENAMETOOLONG => {}
            _ => return last,
        }
    }
    if seen_eacces {
        libc::EACCES
    } else {
        last
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
