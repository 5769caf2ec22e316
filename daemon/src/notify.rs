//! The systemd notification protocol (`sd_notify(3)`), without libsystemd.
//!
//! When systemd (or anything else that speaks the protocol) starts the daemon with
//! `$NOTIFY_SOCKET` set, the daemon sends one datagram per state change to that Unix
//! socket: `READY=1` after its first publish, `STATUS=...` when what it is doing changes,
//! `WATCHDOG=1` while it is healthy, and `STOPPING=1` when it shuts down. A socket name
//! starting with `@` is in the abstract namespace. Without `$NOTIFY_SOCKET` every call is
//! a no-op.
//!
//! Watchdog: when `$WATCHDOG_USEC` is set (and `$WATCHDOG_PID`, if set, is this process),
//! the daemon must ping at least that often; it pings at each tick and, when ticks are
//! further apart than half the watchdog period, from the wait between them, so a ping is
//! never more than half a period late. Pings come from the event loop itself: a tick that
//! hangs (a stuck driver call) stops them, and systemd restarts the daemon.
//!
//! Sending is best effort: a failed send is logged once and never stops the daemon.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// A connection to the service manager's notification socket (or nothing).
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
    next_ping: Option<Instant>,
    status: String,
    warned: bool,
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID`. A socket that cannot
    /// be used is logged and ignored.
    pub fn from_env() -> Self {
        let socket = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty());
        let target = socket.and_then(|path| match connect(&path) {
            Ok(target) => Some(target),
            Err(e) => {
                log::warn!(
                    "NOTIFY_SOCKET={}: {e}; not notifying",
                    path.to_string_lossy()
                );
                None
            }
        });
        let watchdog = target.as_ref().and(watchdog_from_env());
        Notifier {
            target,
            watchdog,
            next_ping: None,
            status: String::new(),
            warned: false,
        }
    }

    /// Whether there is a service manager to notify.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// `READY=1`, with a status line.
    pub fn ready(&mut self, status: &str) {
        self.status = status.to_owned();
        self.send(&format!("READY=1\nSTATUS={status}"));
    }

    /// `STATUS=...`, only when it differs from the last one sent.
    pub fn status(&mut self, status: &str) {
        if self.target.is_some() && self.status != status {
            self.status = status.to_owned();
            self.send(&format!("STATUS={status}"));
        }
    }

    /// `STOPPING=1`.
    pub fn stopping(&mut self) {
        self.send("STOPPING=1\nSTATUS=stopping");
    }

    /// `WATCHDOG=1` now, if a watchdog is armed.
    pub fn ping(&mut self, now: Instant) {
        if let Some(period) = self.watchdog {
            self.send("WATCHDOG=1");
            self.next_ping = Some(now + period / 2);
        }
    }

    /// When the next watchdog ping is due (`None` without a watchdog).
    pub fn ping_due(&self) -> Option<Instant> {
        self.watchdog
            .map(|_| self.next_ping.unwrap_or_else(Instant::now))
    }

    fn send(&mut self, message: &str) {
        let Some((socket, addr)) = &self.target else {
            return;
        };
        if let Err(e) = socket.send_to_addr(message.as_bytes(), addr) {
            if !self.warned {
                log::warn!("cannot notify the service manager: {e}");
                self.warned = true;
            }
        }
    }
}

/// An unbound datagram socket and the address of `path` (`@name`: abstract).
fn connect(path: &std::ffi::OsStr) -> io::Result<(UnixDatagram, SocketAddr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)?
        }
        None if bytes.starts_with(b"/") => SocketAddr::from_pathname(path)?,
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an absolute path or @abstract name",
            ))
        }
    };
    Ok((UnixDatagram::unbound()?, addr))
}

/// The watchdog period, when `$WATCHDOG_USEC` asks this process for one.
fn watchdog_from_env() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}
