//! Pure decisions: takes `now` as a value and never makes a syscall.

pub mod counters;
pub mod drain;
pub mod ecs;
pub mod emf;
pub mod event;
pub mod health;
pub mod listener;
pub mod machine;
pub mod metrics;
pub mod notify;
pub mod outcome;
pub mod settings;
pub mod sources;
pub mod status;
pub mod timeline;
pub mod timers;
pub mod watch;
