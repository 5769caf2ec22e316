//! Logging: stderr in the foreground, syslog (facility daemon) once detached.
//!
//! Messages go through the `log` facade so the rest of the daemon does not care where
//! they end up. If syslog or stderr cannot be written the daemon keeps running and logs
//! nowhere rather than failing.

use log::{LevelFilter, Log, Metadata, Record};

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, _: &Metadata) -> bool {
        true
    }

    fn log(&self, record: &Record) {
        say(format_args!(
            "{}: {}",
            record.level().as_str().to_lowercase(),
            record.args()
        ));
    }

    fn flush(&self) {}
}

/// Writes `gpupeekd: LINE` to stderr. A stderr that is gone (a closed pipe, a full disk)
/// loses the line but never stops the daemon: `eprintln!` would panic instead.
pub fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "gpupeekd: {line}");
}

/// Sends log messages to stderr.
pub fn to_stderr() {
    let _ = log::set_boxed_logger(Box::new(Stderr));
    log::set_max_level(LevelFilter::Info);
}

/// Sends log messages to syslog; silently drops them if syslog is unreachable.
pub fn to_syslog() {
    let formatter = syslog::Formatter3164 {
        facility: syslog::Facility::LOG_DAEMON,
        hostname: None,
        process: "gpupeekd".into(),
        pid: std::process::id(),
    };
    if let Ok(logger) = syslog::unix(formatter) {
        let _ = log::set_boxed_logger(Box::new(syslog::BasicLogger::new(logger)));
        log::set_max_level(LevelFilter::Info);
    }
}
