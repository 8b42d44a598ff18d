//! Pure decisions: takes `now` as a value and never makes a syscall.

pub mod asks;
pub mod complaints;
pub mod counters;
pub mod deadline;
pub mod emf;
pub mod event;
pub mod health;
pub mod hooks;
pub mod listener;
pub mod machine;
pub mod max_runtime;
pub mod metrics;
pub mod notify;
pub mod outcome;
pub mod protect;
pub mod rules;
pub mod settings;
pub mod sources;
pub mod status;
pub mod timeline;
pub mod timers;
pub mod watch;
