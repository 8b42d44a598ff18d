//! The program: options, validated configuration, logging, `main`.

pub mod check;
pub mod cli;
pub mod config;
pub mod logging;
pub mod main;
pub mod options;
pub mod probe;
pub mod reference;
pub mod values;
