//! Mechanism without policy: the syscalls, sockets and threads.

pub mod arena;
pub mod commands;
pub mod early;
pub mod handoff;
pub mod http;
#[cfg(feature = "k8s")]
pub mod k8s;
pub mod logwriter;
pub mod notify;
pub mod procfs;
pub mod reaper;
pub mod report_file;
pub mod serve;
pub mod signals;
pub mod spawn;
pub mod threads;
#[cfg(feature = "k8s")]
pub mod tls;
pub mod workers;
