//! drainit as a library: the modules behind the `drainit` binary, exposed so
//! the fuzz targets and property tests can drive the parsers directly. The
//! binary (`main.rs`) is the only user that runs the supervisor.

pub mod arena;
pub mod cli;
pub mod config;
pub mod drain;
pub mod ecs;
pub mod exit;
pub mod http;
pub mod logging;
pub mod reaper;
pub mod signals;
pub mod spawn;
pub mod supervisor;
