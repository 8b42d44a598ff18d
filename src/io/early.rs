//! Writes to stdout and stderr outside the log (a usage error, help and
//! version text, `--check`'s findings) that never wait for a reader,
//! whatever fd 1 or 2 is, so a stalled log driver or terminal can hold
//! neither PID 1's exit nor the check's bound and signals. Each write
//! waits for room at most its patience, then drops what is left; once a
//! write ran out of time, the next ones on that descriptor take only what
//! it takes at once, until one goes out whole again.
//!
//! How a descriptor is written without blocking, never changing the open
//! file description it shares (with the child, a shell, other
//! processes): a pipe, a FIFO, `/dev/null` or a terminal is opened again
//! through `/proc/self/fd/N` as a non-blocking description of drainit's
//! own ([`reopen`]); a socket is sent to with `MSG_DONTWAIT`; a regular
//! file or a block device is written as it is (the kernel waits for no
//! reader there). Anything else (another device, a pipe or a terminal
//! drainit may not open again, no `/proc`) is written by a thread of its
//! own, blocking as it must, while the caller waits at most its patience;
//! a thread still blocked takes no more text, and one blocked at exit
//! ends with the process. It also answers what the log's writer
//! (`logwriter`) asks of fd 2: whether it is a pipe, whether the pipe
//! takes a line whole, and a wait for room.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// How long an early line (a usage error) may wait for room: the exit
/// code never waits longer for a stderr nobody reads.
pub const EARLY_WAIT: Duration = Duration::from_millis(100);

/// What [`reopen`] may open again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopen {
    /// A pipe, a FIFO or `/dev/null` (the log's writer: see `logwriter`).
    Pipes,
    /// Those, and a terminal (an early write may be cut anywhere).
    PipesAndTerminals,
}

/// fd 1 and fd 2 ran out of time on their last write: the next write
/// does not wait.
static STALLED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
/// A thread of [`by_thread`] is still writing to fd 1 or fd 2.
static THREAD_OUT: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Writes `text` to stdout within `patience`; true when all of it went out.
pub fn stdout(text: &[u8], patience: Duration) -> bool {
    write(libc::STDOUT_FILENO, text, patience)
}

/// Writes `text` to stderr within `patience`; true when all of it went out.
pub fn stderr(text: &[u8], patience: Duration) -> bool {
    write(libc::STDERR_FILENO, text, patience)
}

/// Writes `text` to `fd` (1 or 2), waiting for room at most `patience`
/// (none when the last write ran out of time); the rest is dropped.
fn write(fd: i32, text: &[u8], patience: Duration) -> bool {
    let slot = usize::from(fd == libc::STDERR_FILENO);
    let patience = match STALLED[slot].load(Ordering::Relaxed) {
        true => Duration::ZERO,
        false => patience,
    };
    let until = Instant::now() + patience;
    let done = match kind(fd) {
        Kind::Reopens => match reopen(fd, Reopen::PipesAndTerminals) {
            Some(own) => {
                let done = write_until(own, text, until, false);
                // SAFETY: the descriptor reopen opened; nothing else has it.
                unsafe { libc::close(own) };
                done
            }
            None => by_thread(fd, slot, text, until),
        },
        Kind::Socket => write_until(fd, text, until, true),
        Kind::Plain => write_until(fd, text, until, false),
        Kind::Other => by_thread(fd, slot, text, until),
    };
    let whole = done == text.len();
    STALLED[slot].store(!whole, Ordering::Relaxed);
    whole
}

/// What a descriptor is, as far as writing it without blocking goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A pipe, a FIFO, `/dev/null` or a terminal: [`reopen`] may open it
    /// again.
    Reopens,
    /// `MSG_DONTWAIT` makes each send non-blocking.
    Socket,
    /// A regular file or a block device: no reader to wait for.
    Plain,
    /// Anything else, or a descriptor fstat cannot read.
    Other,
}

fn kind(fd: i32) -> Kind {
    // SAFETY: fstat writes into a local stat.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Kind::Other;
        }
        st
    };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFSOCK => Kind::Socket,
        libc::S_IFREG | libc::S_IFBLK => Kind::Plain,
        libc::S_IFIFO => Kind::Reopens,
        libc::S_IFCHR if reopens_device(fd, st.st_rdev) => Kind::Reopens,
        _ => Kind::Other,
    }
}

/// `/dev/null`, or a terminal other than the pty multiplexer (`/dev/ptmx`
/// opened again would make a new pty, not reach this one).
fn reopens_device(fd: i32, rdev: libc::dev_t) -> bool {
    if rdev == libc::makedev(1, 3) {
        return true;
    }
    // SAFETY: isatty only asks the descriptor.
    rdev != libc::makedev(5, 2) && unsafe { libc::isatty(fd) } == 1
}

/// `fd` (a pipe, a FIFO or `/dev/null`, with [`Reopen::PipesAndTerminals`]
/// also a terminal) opened again through `/proc/self/fd/N` as a
/// non-blocking, close-on-exec description of drainit's own, never as a
/// controlling terminal; None for anything else, for a descriptor not
/// open for writing, or when the open fails or reaches another file.
pub fn reopen(fd: i32, kinds: Reopen) -> Option<i32> {
    // SAFETY: fstat writes into a local stat; open takes a NUL-terminated
    // path; the fd is closed again unless it is kept.
    unsafe {
        let mut before: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut before) != 0 {
            return None;
        }
        let allowed = match before.st_mode & libc::S_IFMT {
            libc::S_IFIFO => true,
            libc::S_IFCHR if before.st_rdev == libc::makedev(1, 3) => true,
            libc::S_IFCHR => {
                kinds == Reopen::PipesAndTerminals && reopens_device(fd, before.st_rdev)
            }
            _ => false,
        };
        if !allowed {
            return None;
        }
        // Only a descriptor drainit may write: never a write end it lacked.
        let access = libc::fcntl(fd, libc::F_GETFL) & libc::O_ACCMODE;
        if access != libc::O_WRONLY && access != libc::O_RDWR {
            return None;
        }
        let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).ok()?;
        let flags = libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
        let own = libc::open(path.as_ptr(), flags);
        if own < 0 {
            return None;
        }
        // The same file, not whatever a /proc of another kind held.
        let mut after: libc::stat = std::mem::zeroed();
        let same = libc::fstat(own, &mut after) == 0
            && after.st_dev == before.st_dev
            && after.st_ino == before.st_ino
            && after.st_rdev == before.st_rdev;
        if !same {
            libc::close(own);
            return None;
        }
        Some(own)
    }
}

/// Writes `text` to `fd`, which never blocks (a non-blocking description,
/// a socket sent to with `MSG_DONTWAIT`, a regular file), waiting for room
/// with `poll` until `until`; the bytes written.
fn write_until(fd: i32, text: &[u8], until: Instant, socket: bool) -> usize {
    let mut done = 0;
    while done < text.len() {
        let rest = &text[done..];
        // SAFETY: writes from a live slice to an open descriptor.
        let n = unsafe {
            match socket {
                true => libc::send(
                    fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                ),
                false => libc::write(fd, rest.as_ptr().cast(), rest.len()),
            }
        };
        if n > 0 {
            done += n as usize;
            continue;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) if n < 0 => {}
            Some(libc::EAGAIN) if n < 0 => {
                if !wait_writable(fd, Some(until)) {
                    break;
                }
            }
            Some(libc::EPIPE) if n < 0 => {
                take_own_sigpipe();
                break;
            }
            // Another error, or a write that took nothing.
            _ => break,
        }
    }
    done
}

/// What a writer thread did: the bytes written, once it is done.
type Done = Arc<(Mutex<Option<usize>>, Condvar)>;

/// Writes `text` to `fd` from a thread, blocking there as it must, and
/// waits for it at most until `until`: the bytes written by then (0 when
/// it is not done; the thread goes on, and ends with the process). While
/// a thread is still out on `fd`, nothing more is given to it.
fn by_thread(fd: i32, slot: usize, text: &[u8], until: Instant) -> usize {
    if text.is_empty() {
        return 0;
    }
    if THREAD_OUT[slot].swap(true, Ordering::AcqRel) {
        return 0;
    }
    let done: Done = Arc::new((Mutex::new(None), Condvar::new()));
    let (theirs, owned) = (Arc::clone(&done), text.to_vec());
    let work = Box::new(move || {
        let n = write_blocking(fd, &owned);
        // Free before the caller wakes, so that its next line may go.
        THREAD_OUT[slot].store(false, Ordering::Release);
        let (lock, changed) = &*theirs;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = Some(n);
        changed.notify_all();
    });
    if crate::io::threads::spawn_thread("drainit-out", 64 * 1024, work).is_err() {
        THREAD_OUT[slot].store(false, Ordering::Release);
        return 0;
    }
    let (lock, changed) = &*done;
    let mut state = lock.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(n) = *state {
            return n;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return 0;
        }
        state = match changed.wait_timeout(state, left) {
            Ok((state, _)) => state,
            Err(e) => e.into_inner().0,
        };
    }
}

/// All of `text` to `fd`, blocking (a writer thread's); the bytes written.
fn write_blocking(fd: i32, text: &[u8]) -> usize {
    let mut done = 0;
    while done < text.len() {
        let rest = &text[done..];
        // SAFETY: writes from a live slice.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            done += n as usize;
            continue;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) if n < 0 => {}
            // A description someone else made non-blocking.
            Some(libc::EAGAIN) if n < 0 => {
                let mut fds = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one pollfd we own.
                unsafe { libc::poll(&mut fds, 1, -1) };
            }
            Some(libc::EPIPE) if n < 0 => {
                take_own_sigpipe();
                break;
            }
            _ => break,
        }
    }
    done
}

/// What fd 2 is, read once: a pipe (FIFO) gets the whole-line check.
pub fn stderr_is_pipe() -> bool {
    static PIPE: OnceLock<bool> = OnceLock::new();
    *PIPE.get_or_init(|| {
        // SAFETY: fstat writes only into `st`.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstat(libc::STDERR_FILENO, &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFIFO
        }
    })
}

/// The pipe behind fd 2 certainly takes `len` more bytes at once: its
/// free buffers, counted as if every byte queued held one of them (a
/// kernel buffer holds at most a page), hold `len`. Only ever true too
/// rarely, never wrongly; `None` when the pipe could never hold it.
pub fn pipe_takes_whole(len: usize) -> Option<bool> {
    // SAFETY: fcntl and ioctl on fd 2 with an int out-parameter; sysconf
    // reads the auxiliary vector.
    let (size, queued, page) = unsafe {
        let size = libc::fcntl(libc::STDERR_FILENO, libc::F_GETPIPE_SZ);
        let mut queued: libc::c_int = 0;
        let rc = libc::ioctl(libc::STDERR_FILENO, libc::FIONREAD, &mut queued);
        if size <= 0 || rc != 0 {
            return None;
        }
        (
            size as usize,
            queued.max(0) as usize,
            libc::sysconf(libc::_SC_PAGESIZE).max(1) as usize,
        )
    };
    let buffers = size / page;
    let need = len.div_ceil(page);
    if need > buffers {
        return None;
    }
    Some(buffers - queued.min(buffers) >= need)
}

/// Waits for `fd` to take more (POLLOUT) until `until`, or for ever;
/// false when the time ran out.
pub fn wait_writable(fd: i32, until: Option<Instant>) -> bool {
    let timeout = match until {
        None => -1,
        Some(until) => {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            // Rounded up: a wait never ends just short of the deadline.
            left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32
        }
    };
    let mut fds = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd we own. An error or POLLERR/POLLHUP is left to the
    // next write, which says what it is.
    unsafe { libc::poll(&mut fds, 1, timeout) };
    true
}

/// After a write into a pipe nobody reads: the SIGPIPE the kernel raised
/// in this thread (blocked, like every signal in drainit) is taken here,
/// so the loop does not wake for it. The thread's own is taken before one
/// sent to the process, which stays for the loop.
pub fn take_own_sigpipe() {
    // SAFETY: a set we fill ourselves, a zero timeout, no siginfo.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
    }
}
