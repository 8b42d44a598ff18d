//! drainit as a library: the modules behind the `drainit` binary, exposed so
//! the fuzz targets and property tests can drive the parsers directly. The
//! binary (`main.rs`) only installs the allocator and calls `app::main`.
//!
//! Layers, each importing only from the ones above it in this list (a test,
//! `tests/layers.rs`, keeps it so):
//!
//! - `util`: leaf helpers (time, text, signal names, version, fault points);
//! - `proto`: pure codecs (HTTP types and decoder, JSON, notify datagrams,
//!   ECS and drain bodies), no I/O;
//! - `core`: pure decisions (the stop timeline, drain-source bookkeeping,
//!   ECS policy, the outcome and exit report, the settings it runs on);
//! - `io`: mechanism without policy (signals, reaping, spawning, HTTP
//!   client, the notify socket, commands, /proc, threads);
//! - `shell`: the event loop that feeds the core and performs its actions;
//! - `app`: options, configuration, logging and `main`.

pub mod app;
pub mod core;
pub mod io;
pub mod proto;
pub mod shell;
pub mod util;
