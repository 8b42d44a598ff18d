//! Log output on stderr: `[drainit]`-prefixed text lines or one JSON object
//! per line (`ts`, `level`, `msg`, plus fields), tini's verbosity levels,
//! and a `DRAINIT_LOG` filter for fine control (env_filter, the filter
//! syntax of env_logger, without env_logger's writer and formatter).

use std::time::{SystemTime, UNIX_EPOCH};

use log::{LevelFilter, Record};
use serde_json::{json, Value};

use crate::core::settings::{Config, LogFormat};
use crate::io::logwriter;

/// Log target of the exit report line; its message is the report's JSON.
pub const REPORT_TARGET: &str = "drainit::report";

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

/// `2026-11-21T21:39:50.123Z` without a date library (civil-from-days).
pub fn rfc3339(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// One JSON log line for a record.
pub fn json_line(record: &Record<'_>, now: SystemTime) -> Value {
    let level = record.level().as_str().to_ascii_lowercase();
    let msg = record.args().to_string();
    if record.target() == REPORT_TARGET {
        // From bytes, as every body is parsed: one reader in the binary.
        if let Ok(report) = serde_json::from_slice::<Value>(msg.as_bytes()) {
            return json!({"ts": rfc3339(now), "level": level, "msg": "exit report", "report": report});
        }
    }
    json!({"ts": rfc3339(now), "level": level, "msg": msg})
}

/// drainit's logger: one line per record on stderr, handed whole to the
/// log writer (`io::logwriter`), so lines from worker threads never
/// interleave and, once the child runs, no line waits for stderr. Lines the
/// writer had to drop are counted in the next line that gets through.
struct Logger {
    filter: env_filter::Filter,
    format: LogFormat,
}

impl Logger {
    fn line(&self, level: log::Level, target: &str, args: &std::fmt::Arguments<'_>) -> String {
        match self.format {
            LogFormat::Text if target == REPORT_TARGET => {
                format!("[drainit] {level:<5} exit report {args}\n")
            }
            LogFormat::Text => format!("[drainit] {level:<5} {args}\n"),
            LogFormat::Json => format!(
                "{}\n",
                json_line(
                    &Record::builder()
                        .args(*args)
                        .level(level)
                        .target(target)
                        .build(),
                    SystemTime::now()
                )
            ),
        }
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.filter.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.filter.matches(record) {
            return;
        }
        let mut line = String::new();
        let lost = logwriter::take_lost();
        if lost > 0 {
            let note = format_args!(
                "{lost} log lines were dropped before this one: stderr is not being read fast enough"
            );
            line = self.line(log::Level::Warn, "drainit", &note);
        }
        line.push_str(&self.line(record.level(), record.target(), record.args()));
        // The exit report's line is never dropped for want of queue room,
        // and at exit it goes out whole or is counted.
        let queued = if record.target() == REPORT_TARGET {
            logwriter::write_final(line.into_bytes())
        } else {
            logwriter::write(line.into_bytes())
        };
        if !queued {
            logwriter::restore_lost(lost);
        }
    }

    fn flush(&self) {}
}

pub fn init(config: &Config) {
    let mut builder = env_filter::Builder::new();
    builder.filter_level(level_for(config.verbosity));
    if let Some(filter) = &config.log_filter {
        let _ = builder.try_parse(filter);
    }
    let filter = builder.build();
    let max = filter.filter();
    let logger = Logger {
        filter,
        format: config.log_format,
    };
    // A second init can only fail in tests; logging is never worth a panic.
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(max);
    }
}

/// Starts the log writer, which owns stderr from now on, unless no line
/// can come: verbosity 0 (or a `DRAINIT_LOG` that lets nothing through)
/// and no `--emf`. As early as the log is set: the thread's start runs
/// beside the rest of drainit's (the child waits for it to block
/// drainit's signals: `threads::wait_until_blocked`).
pub fn start_writer(config: &Config) {
    let lines = log::max_level() != LevelFilter::Off || config.emf.is_some();
    if !lines {
        logwriter::own_without_writer();
    } else if let Err(e) = logwriter::start() {
        log::error!("cannot start the log writer: {e}; lines wait for drainit's exit");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_297_190_123);
        assert_eq!(rfc3339(t), "2026-11-21T21:39:50.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn json_lines_parse_and_embed_the_report() {
        let now = UNIX_EPOCH;
        let line = json_line(
            &Record::builder()
                .args(format_args!("a \"quoted\" msg\n"))
                .level(log::Level::Warn)
                .target("drainit")
                .build(),
            now,
        );
        let back: Value = serde_json::from_str(&line.to_string()).unwrap();
        assert_eq!(back["level"], "warn");
        assert_eq!(back["msg"], "a \"quoted\" msg\n");
        let report = json_line(
            &Record::builder()
                .args(format_args!("{{\"outcome\":\"drained\"}}"))
                .level(log::Level::Info)
                .target(REPORT_TARGET)
                .build(),
            now,
        );
        assert_eq!(report["report"]["outcome"], "drained");
    }
}
