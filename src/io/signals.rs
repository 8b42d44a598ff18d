//! Signal policy (which signals drainit forwards, which are its own, which
//! it never catches), signal name parsing, the process-wide signal state
//! drainit inherited, and the one wait of the event loop.
//!
//! drainit blocks every catchable signal and takes them synchronously with
//! `sigtimedwait` in the event loop (tini's primitive, without its fixed
//! one-second timeout), so no code ever runs in a signal handler. The state it
//! inherited (mask and the few dispositions it changes) is captured before
//! `main` and restored in the child, so `nohup drainit -- app` still ignores
//! SIGHUP in the app, as it would under tini. The C libraries' cancellation
//! signals (32, 33) drainit also sets to SIG_IGN, for the moment a new
//! thread is born with one unblocked (`ignore_reserved`).
//!
//! The one forwarding rule: a signal is forwarded only when another process
//! sent it (see [`Received::from_outside`]). What the kernel does with each
//! kind of signal, and therefore why blocking everything is safe:
//!
//! - A fault the kernel raises in drainit itself (a real SIGSEGV, BUS, FPE,
//!   ILL, TRAP, a seccomp SIGSYS) goes through `force_sig_info`, which
//!   unblocks the signal and resets it to the default action when it is
//!   blocked, and lifts PID 1's protection for it: drainit dies of its own
//!   fault at once, blocked or not. It never reaches the queue we wait on.
//! - `abort()` is not such a fault: the C library sends SIGABRT to its own
//!   thread (SI_TKILL) and unblocks it at the default action (glibc unblocks
//!   first, musl raises first and unblocks after); as PID 1 the kernel drops
//!   it, and the C library then executes a crashing instruction, which is a
//!   real fault. drainit still ends (139 rather than 134), never hangs.
//! - A signal another process sends with kill(2), tgkill(2) or sigqueue(3)
//!   (`si_code` SI_USER, SI_TKILL, SI_QUEUE, all <= 0) waits in the queue
//!   for `sigtimedwait` like any other. A blocked signal is never discarded
//!   as ignored, which is also why PID 1 receives these at all.
//! - A SIGPIPE the kernel raises after drainit's own write to a dead pipe
//!   (its stderr, when a log collector went away) arrives as SI_USER with
//!   drainit's own pid, and `raise()` gives SI_TKILL with it: hence the pid
//!   test beside the `si_code` test.
//! - Signals the kernel generates for other reasons (`si_code` > 0: SIGCHLD's
//!   CLD_*, SI_KERNEL for a tty hangup or resize, POLL_* for I/O) are about
//!   drainit itself, never forwarded.

use std::io;
use std::mem::MaybeUninit;
use std::sync::OnceLock;
use std::time::Duration;

pub use crate::util::signame::{parse_signal, signal_name};
use crate::util::signame::{rtmax, rtmin};

/// The signals the kernel raises for a fault. Sent by another process they
/// are forwarded like any other signal (dumb-init does; tini and the kernel's
/// PID-1 protection drop them); raised by a real fault in drainit they end
/// drainit by the default action whatever its mask (see the module docs).
pub const FAULTS: [i32; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Terminal job-control signals. Sent by another process they are forwarded
/// unchanged (the app decides what stopping means); drainit itself is never
/// stopped by them (called `dumb-init`, it stops itself after forwarding
/// one: `stop_self`): they stay blocked, and the kernel treats a blocked SIGTTIN/TTOU
/// as ignored when drainit touches a tty from a background group (reading,
/// writing, `tcsetpgrp`), so it generates none. Unlike tini, drainit does not
/// set them to SIG_IGN: setting SIG_IGN discards a pending signal, so one
/// sent before the loop runs would be lost instead of forwarded.
pub const JOB_CONTROL: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// Stops drainit, every thread of it, until a SIGCONT: what dumb-init does
/// after forwarding a job-control signal (called by its name). SIGSTOP
/// cannot be blocked; the SIGCONT that resumes drainit stays queued (it is
/// blocked) and is forwarded by the loop like any other. As PID 1 of a
/// namespace the kernel drops a SIGSTOP sent from inside it, drainit's own
/// included: only the child stops (as with dumb-init).
pub fn stop_self() {
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(own_pid(), libc::SIGSTOP) };
}

/// Dispositions the child gets back as drainit inherited them: SIGCHLD (an
/// inherited SIG_IGN would make the kernel reap our children before we see
/// their status, so drainit runs it at SIG_DFL), SIGPIPE (which the Rust
/// runtime sets to SIG_IGN before `main`), and the job-control pair (tini
/// ignores them for itself; listed so the child's start is the same
/// whichever way drainit ran them).
const RESTORED_IN_CHILD: [i32; 4] = [libc::SIGTTIN, libc::SIGTTOU, libc::SIGCHLD, libc::SIGPIPE];

/// Signals that can never be caught, so neither blocked nor forwarded.
const UNCATCHABLE: [i32; 2] = [libc::SIGKILL, libc::SIGSTOP];

/// True for a signal drainit forwards when another process sends it: every
/// catchable signal but SIGCHLD, which is drainit's own (reaping, and the
/// wake-up its worker threads send). Fault and job-control signals included.
pub fn is_forwardable(signo: i32) -> bool {
    (1..=rtmax()).contains(&signo) && !UNCATCHABLE.contains(&signo) && signo != libc::SIGCHLD
}

/// One signal the loop took, with what the kernel says about its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub signo: i32,
    /// `si_code`: <= 0 when a process sent it (SI_USER, SI_TKILL,
    /// SI_QUEUE), > 0 when the kernel generated it.
    pub code: i32,
    /// `si_pid` for a sent signal: the sender as seen in drainit's PID
    /// namespace, 0 when the sender is outside it (`docker stop`).
    pub sender: i32,
}

/// Where `si_pid`, `si_uid` and `si_value` sit in a `siginfo_t`, in
/// 32-bit words: after three ints, padded to 16 bytes on 64-bit targets.
const SI_PID_WORD: usize = if std::mem::size_of::<usize>() == 8 {
    4
} else {
    3
};

/// The siginfo of a wake-up (`threads::Waker`), for rt_tgsigqueueinfo:
/// SIGCHLD, SI_QUEUE, drainit's pid and uid. The kernel lets a process
/// queue any siginfo to itself and passes it on unchanged. Nothing in it
/// marks it as a wake-up: anyone in the container can queue the same
/// values, so the loop reaps after every SIGCHLD (`event_loop`).
pub fn wake_info() -> [i32; 32] {
    let mut info = [0i32; 32];
    info[0] = libc::SIGCHLD;
    info[2] = libc::SI_QUEUE;
    info[SI_PID_WORD] = own_pid();
    // SAFETY: getuid has no preconditions.
    info[SI_PID_WORD + 1] = unsafe { libc::getuid() } as i32;
    info
}

impl Received {
    /// The forwarding rule: another process sent this signal. Not a signal
    /// the kernel generated (`si_code` > 0), and not one drainit raised
    /// itself (its own SIGPIPE, a `raise()`, the workers' wake-up), which
    /// carry drainit's own pid.
    pub fn from_outside(&self) -> bool {
        self.code <= 0 && self.sender != own_pid()
    }
}

fn own_pid() -> i32 {
    static PID: OnceLock<i32> = OnceLock::new();
    *PID.get_or_init(|| std::process::id() as i32)
}

/// The signal mask and the changed dispositions as drainit found them.
pub struct Inherited {
    mask: libc::sigset_t,
    actions: [(i32, libc::sigaction); RESTORED_IN_CHILD.len()],
    /// The C library's 32 and 33 came in at SIG_IGN: read before any
    /// thread exists, since glibc's first thread puts a handler on 33.
    reserved_ignored: [bool; 2],
}

static INHERITED: OnceLock<Inherited> = OnceLock::new();

/// Every signal drainit takes in its loop: all but the two uncatchable ones,
/// the C library's reserved numbers (32 to SIGRTMIN-1) included. Left
/// unblocked, those would end a drainit that is not PID 1 by their default
/// action (`kill -33`); blocked and waited on, they are forwarded like any
/// other. drainit never uses what the C library reserves them for (thread
/// cancellation, set*id across threads, SIGEV_THREAD timers).
fn handled_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset only write into the set we own; the
    // reserved numbers, which `sigaddset` refuses, are set bit by bit.
    unsafe {
        let mut set = MaybeUninit::<libc::sigset_t>::zeroed();
        libc::sigemptyset(set.as_mut_ptr());
        let mut set = set.assume_init();
        for signo in 1..=rtmax() {
            if (32..rtmin()).contains(&signo) {
                add_raw(&mut set, signo as usize);
            } else if !UNCATCHABLE.contains(&signo) {
                libc::sigaddset(&mut set, signo);
            }
        }
        set
    }
}

/// Sets signal `signo` in `set`, bypassing `sigaddset` (which refuses the C
/// library's reserved numbers). Signal N is bit (N-1) % W of word
/// (N-1) / W, W the width of an unsigned long, as both C libraries lay it
/// out (so 32-bit targets work too).
pub(crate) fn add_raw(set: &mut libc::sigset_t, signo: usize) {
    let words = std::mem::size_of::<libc::sigset_t>() / std::mem::size_of::<libc::c_ulong>();
    let base = set as *mut libc::sigset_t as *mut libc::c_ulong;
    let (word, bit) = (
        (signo - 1) / libc::c_ulong::BITS as usize,
        (signo - 1) % libc::c_ulong::BITS as usize,
    );
    if word < words {
        // SAFETY: on both C libraries sigset_t is an array of unsigned longs
        // (so aligned for them), and `word` is inside it (checked above).
        unsafe { *base.add(word) |= 1 << bit };
    }
}

/// Signals 1 to 64 as the kernel sees a set: bit N-1 for signal N (the
/// first 8 bytes of either C library's `sigset_t`, which is how
/// `rt_sigprocmask` reads it).
pub(crate) fn kernel_bits(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes (spawn.rs checks it at compile
    // time); unaligned, since 32-bit targets align it to 4.
    unsafe { std::ptr::read_unaligned(set as *const libc::sigset_t as *const u64) }
}

/// Blocks every handled signal again, the reserved numbers included, after
/// a C library call that may have unblocked those (see `spawn`).
pub(crate) fn block_handled() {
    let _ = raw_sigprocmask(libc::SIG_BLOCK, &handled_set(), std::ptr::null_mut());
}

/// The signal mask call of the kernel itself: the C libraries' wrappers
/// quietly drop their reserved numbers from the set (glibc does).
/// `rt_sigprocmask` takes the kernel's set size, 8 bytes, a prefix of the
/// C library's larger `sigset_t` on Linux.
pub(crate) fn raw_sigprocmask(
    how: libc::c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> io::Result<()> {
    // SAFETY: the kernel reads 8 bytes of `set` and writes 8 of `old` (when
    // not null); both point to whole sigset_t values, which are larger.
    let rc = unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set, old, 8usize) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Captures the inherited signal state and blocks every handled signal.
///
/// Runs before `main` (from `.init_array`), while the process has one
/// thread, so that a signal sent in the first microseconds is kept pending
/// for the child instead of killing PID 1, and before the Rust runtime
/// replaces SIGPIPE's disposition.
pub fn capture_and_block() {
    let handled = handled_set();
    // SAFETY: plain libc calls on stack values; single-threaded at this point.
    unsafe {
        let mut old = MaybeUninit::<libc::sigset_t>::zeroed();
        // The kernel's own call, reserved numbers included; the old mask is
        // the kernel's whole truth, which the child gets back.
        let _ = raw_sigprocmask(libc::SIG_BLOCK, &handled, old.as_mut_ptr());
        let mut actions =
            [(0, MaybeUninit::<libc::sigaction>::zeroed().assume_init()); RESTORED_IN_CHILD.len()];
        for (slot, &signo) in actions.iter_mut().zip(RESTORED_IN_CHILD.iter()) {
            slot.0 = signo;
            libc::sigaction(signo, std::ptr::null(), &mut slot.1);
        }
        let _ = INHERITED.set(Inherited {
            mask: old.assume_init(),
            actions,
            reserved_ignored: [is_ignored(32), is_ignored(33)],
        });
    }
    ignore_reserved();
}

/// Sets the C libraries' cancellation signals, 32 and 33, to SIG_IGN for
/// drainit's whole life; the child gets back what drainit inherited
/// (`Inherited::reserved_ignored`, `spawn`). Both C libraries start every
/// new thread with their own unblocked (musl's 33, glibc's 32) for its
/// first instructions, until the thread blocks it again
/// (`threads::spawn_thread`), and neither puts a handler on it before a
/// thread is cancelled: at SIG_DFL, a `kill -33` (or -32) taken by a
/// thread being born (a name lookup's, a request thread's, at any time
/// after the child started) ended drainit. At SIG_IGN the copies
/// pending at that moment are discarded instead (the newborn thread takes
/// every one it can), never drainit: the kernel never drops a blocked
/// signal as ignored when it is sent (the main thread blocks it, or
/// waits on it), so outside a thread's birth it waits in the queue for
/// the loop, which forwards it. Setting SIG_IGN discards a copy already pending, so this runs at
/// the very start (`capture_and_block`), before anyone had a reason to
/// send one. glibc's later handler on 33 (its set*id broadcast, which
/// drainit never uses) replaces the SIG_IGN and ignores what it did not
/// send itself.
fn ignore_reserved() {
    for signo in [32, 33] {
        let _ = ignore_raw(signo);
    }
}

/// Whether the C library's signal `signo` (32 or 33) came in at SIG_IGN,
/// as captured before `main`; None when nothing was captured (drainit
/// then never changed it). Async-signal-safe (a load), for the spawner's
/// child.
pub(crate) fn inherited_ignored(signo: libc::c_int) -> Option<bool> {
    INHERITED
        .get()
        .map(|inherited| inherited.reserved_ignored(signo))
}

/// The signal's disposition is SIG_IGN, asked of the kernel directly: the
/// C libraries' `sigaction` refuses their internal signals. The handler is
/// the first field of the kernel's `struct sigaction` on Linux targets; the
/// buffer is larger than the whole struct on any of them.
pub fn is_ignored(signo: libc::c_int) -> bool {
    let mut old = [0usize; 16];
    // SAFETY: rt_sigaction with no new action only writes the old one into
    // `old`, which is large enough; the size argument is the kernel's
    // sigset size (8 bytes).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signo,
            std::ptr::null::<u8>(),
            old.as_mut_ptr(),
            8usize,
        )
    };
    rc == 0 && old[0] == libc::SIG_IGN
}

/// Sets SIG_IGN with the kernel's own call (the C libraries refuse their
/// internal numbers); SIG_IGN needs no handler, so no restorer either.
/// Async-signal-safe.
fn ignore_raw(signo: libc::c_int) -> io::Result<()> {
    let mut new = [0usize; 4];
    new[0] = libc::SIG_IGN;
    // SAFETY: rt_sigaction reads `new` (handler, flags 0, no restorer, an
    // empty mask), which is larger than the kernel's struct.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signo,
            new.as_ptr(),
            std::ptr::null_mut::<u8>(),
            8usize,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_disposition(signo: i32, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: installs SIG_IGN or SIG_DFL, no handler code involved.
    unsafe {
        let mut action: libc::sigaction = MaybeUninit::zeroed().assume_init();
        action.sa_sigaction = handler;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signo, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets drainit's own dispositions and returns the set the event loop waits
/// on. Signals stay blocked from `capture_and_block` on, so nothing sent
/// before this call is lost.
pub fn install() -> io::Result<(Handled, &'static Inherited)> {
    if INHERITED.get().is_none() {
        // Only when the constructor did not run (it always does in the
        // binary); keeps the invariant that handled signals are blocked.
        capture_and_block();
    }
    // musl's `sigaction` unblocks its own signals (33, 34) the first time
    // a handler is installed, which the Rust runtime does before `main`
    // (its SIGSEGV/SIGBUS guard): block them again, now for good on this
    // thread.
    block_handled();
    let inherited = INHERITED
        .get()
        .ok_or_else(|| io::Error::other("signal state was not captured"))?;
    set_disposition(libc::SIGCHLD, libc::SIG_DFL)?;
    // Undo the runtime's SIG_IGN so a SIGPIPE sent to PID 1 is queued and
    // forwarded instead of discarded. It stays blocked, so it never kills us.
    if let Some((_, action)) = inherited
        .actions
        .iter()
        .find(|(signo, _)| *signo == libc::SIGPIPE)
    {
        // SAFETY: restores a disposition the kernel gave us.
        unsafe { libc::sigaction(libc::SIGPIPE, action, std::ptr::null_mut()) };
    }
    Ok((Handled(handled_set()), inherited))
}

/// The blocked set the event loop takes signals from.
pub struct Handled(libc::sigset_t);

impl Handled {
    /// A handled signal is pending for this thread or the process: the
    /// loop has not taken everything sent so far (SIGCHLD included: a child
    /// that ended is not reaped yet).
    pub fn any_pending(&self) -> bool {
        // SAFETY: sigpending fills a zeroed set.
        let pending = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            if libc::sigpending(&mut set) != 0 {
                return false;
            }
            kernel_bits(&set)
        };
        pending & kernel_bits(&self.0) != 0
    }

    /// Waits for one handled signal, at most `timeout` (None: forever).
    /// Returns the signal and its origin, or None when the time is up (or
    /// the wait was interrupted).
    pub fn wait(&self, timeout: Option<Duration>) -> Option<Received> {
        // SAFETY: the kernel fills `info`; the set and timespec are valid.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let signo = match timeout {
                None => libc::sigwaitinfo(&self.0, &mut info),
                Some(t) => {
                    let ts = libc::timespec {
                        tv_sec: t.as_secs().min(i32::MAX as u64) as _,
                        tv_nsec: t.subsec_nanos() as libc::c_long,
                    };
                    libc::sigtimedwait(&self.0, &mut info, &ts)
                }
            };
            if signo <= 0 {
                return None;
            }
            Some(Received {
                signo,
                code: info.si_code,
                sender: info.si_pid(),
            })
        }
    }
}

impl Inherited {
    /// The mask drainit inherited, which the child starts with.
    pub fn mask(&self) -> &libc::sigset_t {
        &self.mask
    }

    /// drainit was started with one of the C library's own signals
    /// (32 to SIGRTMIN-1) blocked. glibc's `posix_spawn` cannot pass that
    /// on (it sets the child's mask through its filtering wrapper).
    pub fn blocks_reserved(&self) -> bool {
        let reserved = (32..rtmin()).fold(0u64, |bits, signo| bits | 1 << (signo - 1));
        kernel_bits(&self.mask) & reserved != 0
    }

    /// Signals whose inherited disposition was SIG_DFL among those drainit
    /// changes for itself: what `posix_spawn` must reset in the child.
    /// None when one was inherited as SIG_IGN but drainit runs it at
    /// SIG_DFL (SIGCHLD): `posix_spawn` cannot give that back.
    pub fn spawn_defaults(&self) -> Option<libc::sigset_t> {
        // SAFETY: only writes into a set we own.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for (signo, action) in &self.actions {
                if action.sa_sigaction == libc::SIG_DFL {
                    libc::sigaddset(&mut set, *signo);
                } else if *signo == libc::SIGCHLD {
                    return None;
                }
            }
            Some(set)
        }
    }

    /// The C library's signal `signo` (32 or 33) came in at SIG_IGN.
    pub fn reserved_ignored(&self, signo: i32) -> bool {
        match signo {
            32 => self.reserved_ignored[0],
            33 => self.reserved_ignored[1],
            _ => false,
        }
    }

    /// Gives the child the dispositions and mask drainit inherited. Called
    /// between fork and exec, so it only makes async-signal-safe calls.
    pub fn restore_in_child(&self) -> io::Result<()> {
        // SAFETY: sigaction and sigprocmask are async-signal-safe.
        unsafe {
            for (signo, action) in &self.actions {
                if libc::sigaction(*signo, action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // 32 and 33 inherited ignored stay so, whatever the C library
            // put on them since (exec resets a handler to the default).
            for signo in [32, 33] {
                if self.reserved_ignored(signo) {
                    ignore_raw(signo)?;
                }
            }
            // Exactly the inherited mask, the C library's numbers included.
            raw_sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::signame::NAMES;

    #[test]
    fn parses_every_spelling() {
        for text in [
            "TERM", "SIGTERM", "sigterm", "term", "SigTerm", "15", " 15 ",
        ] {
            assert_eq!(parse_signal(text), Ok(libc::SIGTERM), "{text}");
        }
        assert_eq!(parse_signal("KILL"), Ok(9));
        assert_eq!(parse_signal("SIGCLD"), Ok(libc::SIGCHLD));
        assert_eq!(parse_signal("IOT"), Ok(libc::SIGABRT));
    }

    #[test]
    fn every_named_signal_round_trips() {
        for (name, n) in NAMES {
            assert_eq!(parse_signal(name), Ok(n));
            assert_eq!(parse_signal(&format!("SIG{name}")), Ok(n));
            assert_eq!(parse_signal(&name.to_lowercase()), Ok(n));
            assert_eq!(parse_signal(&n.to_string()), Ok(n));
            assert_eq!(parse_signal(&signal_name(n)), Ok(n));
        }
    }

    #[test]
    fn realtime_signals() {
        // SIGRTMIN is 34 in every build, as Docker, systemd and glibc.
        assert_eq!(parse_signal("RTMIN"), Ok(34));
        assert_eq!(parse_signal("SIGRTMIN+3"), Ok(37));
        assert_eq!(parse_signal("rtmax-1"), Ok(rtmax() - 1));
        assert_eq!(parse_signal("RTMAX"), Ok(rtmax()));
        assert!(parse_signal("RTMAX+1").is_err());
        assert!(parse_signal("RTMIN-1").is_err());
        assert_eq!(signal_name(36), "SIGRTMIN+2");
        for n in 34..=rtmax() {
            assert_eq!(parse_signal(&signal_name(n)), Ok(n));
        }
    }

    #[test]
    fn rejects_garbage() {
        for text in [
            "",
            " ",
            "0",
            "32",
            "33",
            "-15",
            "65",
            "99999999999999",
            "TERMINATE",
            "SIG",
            "sig",
            "15s",
            "+15",
            "RTMIN+",
            "RTMIN+x",
            "RTMIN3",
            "1.5",
            "TERM,INT",
            "ß",
        ] {
            assert!(parse_signal(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn forwarding_policy() {
        for signo in [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
            libc::SIGALRM,
            libc::SIGTERM,
            libc::SIGCONT,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGWINCH,
            libc::SIGURG,
            libc::SIGPWR,
            rtmin(),
            rtmax(),
        ] {
            assert!(is_forwardable(signo), "{}", signal_name(signo));
        }
        for signo in FAULTS.iter().chain(&JOB_CONTROL) {
            assert!(is_forwardable(*signo), "{}", signal_name(*signo));
        }
        for signo in UNCATCHABLE {
            assert!(!is_forwardable(signo), "{}", signal_name(signo));
        }
        assert!(!is_forwardable(libc::SIGCHLD));
        assert!(!is_forwardable(0));
        assert!(!is_forwardable(rtmax() + 1));
    }

    /// The real thing: a Waker's SIGCHLD, taken by `wait`, reaches the
    /// loop as a SIGCHLD drainit sent itself (never forwarded).
    #[test]
    fn a_wakers_signal_reaches_the_loop() {
        let handled = Handled(handled_set());
        block_handled();
        crate::io::threads::Waker::for_this_thread().wake();
        // Other tests of this process may leave a SIGCHLD of their own.
        let mut seen = Vec::new();
        let woke = (0..20).any(|_| match handled.wait(Some(Duration::from_secs(5))) {
            Some(got) if got.signo == libc::SIGCHLD && got.code == libc::SI_QUEUE => {
                !got.from_outside()
            }
            other => {
                seen.push(other);
                false
            }
        });
        assert!(woke, "{seen:?}");
    }

    #[test]
    fn forwarding_rule_by_origin() {
        let me = std::process::id() as i32;
        let got = |code, sender| Received {
            signo: libc::SIGPIPE,
            code,
            sender,
        };
        // kill(2) from another process, inside or outside the namespace.
        assert!(got(libc::SI_USER, me + 1).from_outside());
        assert!(got(libc::SI_USER, 0).from_outside());
        // tgkill and sigqueue from another process.
        assert!(got(libc::SI_TKILL, me + 1).from_outside());
        assert!(got(libc::SI_QUEUE, me + 1).from_outside());
        // The kernel's SIGPIPE after our own write, and raise().
        assert!(!got(libc::SI_USER, me).from_outside());
        assert!(!got(libc::SI_TKILL, me).from_outside());
        // Generated by the kernel (SI_KERNEL, CLD_EXITED, POLL_IN).
        assert!(!got(0x80, 0).from_outside());
        assert!(!got(libc::CLD_EXITED, me + 1).from_outside());
        assert!(!got(1, 0).from_outside());
    }

    #[test]
    fn every_catchable_signal_is_waited_on() {
        let set = handled_set();
        for signo in 1..=rtmax() {
            // The C library's own numbers included, which `sigismember`
            // refuses: the kernel's bits are read directly.
            let member = kernel_bits(&set) & 1 << (signo - 1) != 0;
            assert_eq!(
                member,
                !UNCATCHABLE.contains(&signo),
                "{}",
                signal_name(signo)
            );
        }
    }
}
