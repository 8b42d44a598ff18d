//! drainit as a library: the modules behind the `drainit` binary, exposed so
//! the fuzz targets and property tests can drive the parsers directly. The
//! binary (`main.rs`) is the only user that runs the supervisor.

pub mod arena;
pub mod cli;
pub mod config;
pub mod drain;
pub mod ecs;
pub mod exit;
pub mod fault;
pub mod http;
pub mod json;
pub mod logging;
pub mod notify;
pub mod reaper;
pub mod signals;
pub mod sources;
pub mod spawn;
pub mod supervisor;
pub mod timeline;
pub mod version;

/// Starts a named worker thread. Every thread drainit starts (requests,
/// name lookups, the notify reader) goes through this one non-generic
/// function: each `Builder::spawn` instance costs KiBs of the 1 MiB
/// static-binary budget.
#[inline(never)]
pub fn spawn_thread(
    name: &str,
    stack_size: usize,
    work: Box<dyn FnOnce() + Send>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .stack_size(stack_size)
        .spawn(move || {
            // Both C libraries unblock their own signals (32-34) in a new
            // thread, whatever its creator blocked: block them again, or a
            // `kill -33` sent to drainit could land here and end it (or be
            // lost). Nothing in drainit may call set*id from a thread:
            // glibc would wait on 33 for every thread.
            crate::signals::block_handled();
            work()
        })
        .map(|_| {
            // glibc unblocks 32 and 33 in the creating thread too, the first
            // time any thread is created (and installs its set*id handler
            // on 33): block them again here.
            crate::signals::block_handled();
        })
}
