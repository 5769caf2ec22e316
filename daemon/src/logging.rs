//! Logging: stderr in the foreground, syslog (facility daemon) once detached.
//!
//! Messages go through the `log` facade so the rest of the daemon does not care where
//! they end up. If syslog or stderr cannot be written the daemon keeps running and logs
//! nowhere rather than failing. When stderr is the systemd journal (`$JOURNAL_STREAM`
//! names it), each line starts with its syslog priority (`<4>` for a warning,
//! sd-daemon(3)), so `journalctl -p warning` shows the alerts.

use log::{Level, LevelFilter, Log, Metadata, Record};

struct Stderr {
    journal: bool,
}

impl Log for Stderr {
    fn enabled(&self, _: &Metadata) -> bool {
        true
    }

    fn log(&self, record: &Record) {
        let priority = if self.journal {
            match record.level() {
                Level::Error => "<3>",
                Level::Warn => "<4>",
                Level::Info => "<6>",
                Level::Debug | Level::Trace => "<7>",
            }
        } else {
            ""
        };
        say_raw(format_args!(
            "{priority}gpupeekd: {}: {}",
            record.level().as_str().to_lowercase(),
            record.args()
        ));
    }

    fn flush(&self) {}
}

/// Writes `gpupeekd: LINE` to stderr. A stderr that is gone (a closed pipe, a full disk)
/// loses the line but never stops the daemon: `eprintln!` would panic instead.
pub fn say(line: std::fmt::Arguments) {
    say_raw(format_args!("gpupeekd: {line}"));
}

/// Writes `line` and a newline to stderr, ignoring a stderr that is gone.
fn say_raw(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Sends log messages to stderr.
pub fn to_stderr() {
    let journal = stderr_is_journal();
    let _ = log::set_boxed_logger(Box::new(Stderr { journal }));
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

/// Whether stderr is the stream `$JOURNAL_STREAM` (`DEVICE:INODE`) names.
fn stderr_is_journal() -> bool {
    let Some((dev, ino)) = std::env::var("JOURNAL_STREAM").ok().and_then(|v| {
        let (dev, ino) = v.split_once(':')?;
        Some((
            dev.parse::<nix::libc::dev_t>().ok()?,
            ino.parse::<nix::libc::ino_t>().ok()?,
        ))
    }) else {
        return false;
    };
    nix::sys::stat::fstat(std::io::stderr()).is_ok_and(|st| st.st_dev == dev && st.st_ino == ino)
}
