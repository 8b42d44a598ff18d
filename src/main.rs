//! The `drainit` binary: installs the start-up allocator and captures the
//! inherited signal state before `main`, then hands over to `app::main`.

use std::process::ExitCode;

/// Runs before `main`, while the process still has one thread: captures the
/// signal mask and dispositions drainit inherited and blocks every signal it
/// handles, so nothing sent during start-up is lost or kills PID 1.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static CAPTURE_SIGNALS_BEFORE_MAIN: extern "C" fn() = before_main;

#[cfg(not(test))]
extern "C" fn before_main() {
    drainit::io::signals::capture_and_block();
}

/// Start-up allocations come from a static arena (see `io/arena.rs` for why).
#[global_allocator]
static ALLOCATOR: drainit::io::arena::StartupArena = drainit::io::arena::StartupArena::new();

fn main() -> ExitCode {
    drainit::app::main::main()
}
