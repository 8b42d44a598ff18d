//! Log output: `[drainit]`-prefixed lines on stderr, with tini's verbosity
//! levels and a `DRAINIT_LOG` filter for fine control.

use std::io::Write;

use log::LevelFilter;

use crate::config::Config;

/// tini's verbosity: 0 silent, 1 warnings (default), 2 info, 3 debug, 4 trace.
pub fn level_for(verbosity: u8) -> LevelFilter {
    match verbosity {
        0 => LevelFilter::Off,
        1 => LevelFilter::Warn,
        2 => LevelFilter::Info,
        3 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

pub fn init(config: &Config) {
    let mut builder = env_logger::Builder::new();
    builder.filter_level(level_for(config.verbosity));
    if let Some(filter) = &config.log_filter {
        builder.parse_filters(filter);
    }
    builder
        .format(|out, record| writeln!(out, "[drainit] {:<5} {}", record.level(), record.args()));
    // A second init can only fail in tests; logging is never worth a panic.
    let _ = builder.try_init();
}
