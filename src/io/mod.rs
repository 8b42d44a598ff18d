//! Mechanism without policy: the syscalls, sockets and threads.

pub mod arena;
pub mod commands;
pub mod handoff;
pub mod http;
pub mod logwriter;
pub mod notify;
pub mod procfs;
pub mod reaper;
pub mod report_file;
pub mod serve;
pub mod signals;
pub mod spawn;
pub mod threads;
pub mod workers;
