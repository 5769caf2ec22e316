//! What the daemon's loop waits on between ticks: signals (through signal-hook and mio)
//! or the next deadline, waking in between only for a due watchdog ping. SIGTERM and
//! SIGINT set the stop flag (signal-hook's flag registration, set up in `run`, makes a
//! second one exit at once); SIGHUP is logged and ignored.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

use crate::notify::Notifier;

/// The one thing the loop waits on between ticks: signals, or a deadline.
pub struct Waiter {
    poll: Poll,
    events: Events,
    signals: Signals,
    stop: Arc<AtomicBool>,
}

impl Waiter {
    /// Registers for SIGTERM, SIGINT and SIGHUP; a stop signal sets `stop`.
    pub fn new(stop: Arc<AtomicBool>) -> std::io::Result<Self> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut signals, Token(0), Interest::READABLE)?;
        Ok(Waiter {
            poll,
            events: Events::with_capacity(4),
            signals,
            stop,
        })
    }

    /// Sleeps until `deadline` or until a stop signal arrives, waking in between to send
    /// any watchdog ping that falls due.
    pub fn until(&mut self, deadline: Instant, notifier: &mut Notifier) -> std::io::Result<()> {
        loop {
            let now = Instant::now();
            if self.stop.load(Ordering::Relaxed) || now >= deadline {
                return Ok(());
            }
            let wake = match notifier.ping_due() {
                Some(due) if due <= now => {
                    notifier.ping(now);
                    continue;
                }
                Some(due) => due.min(deadline),
                None => deadline,
            };
            match self.poll.poll(&mut self.events, Some(wake - now)) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for signal in self.signals.pending() {
                match signal {
                    SIGHUP => {
                        log::info!("SIGHUP ignored: gpupeekd has no configuration to reload")
                    }
                    _ => log::info!("signal {signal} received"),
                }
            }
        }
    }
}
