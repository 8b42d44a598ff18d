//! The event loop and the run around it: waits for inputs, feeds the
//! core, performs its actions.

pub mod event_loop;
pub mod executor;
pub mod fallback;
pub mod lanes;
pub mod publish;
pub mod supervisor;
