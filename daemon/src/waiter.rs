//! What the daemon's loop waits on between ticks: signals (through signal-hook and mio)
//! or the next deadline, waking in between only for a due watchdog ping. SIGTERM and
//! SIGINT set the stop flag (signal-hook's flag registration, set up in `run`, makes a
//! second one exit at once); SIGHUP is logged and ignored. SIGUSR1 and SIGUSR2 are an
//! operator's requests to let go of NVML and to take it back (`gpupeekd --release`,
//! `--resume`): they end the wait at once, and the loop takes them with
//! [`Waiter::take_request`].

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook_mio::v1_0::Signals;

use crate::notify::Notifier;

/// An operator's request, by signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// SIGUSR1: let go of NVML (for a GPU reset or a MIG change).
    Release,
    /// SIGUSR2: take NVML back.
    Resume,
}

/// The one thing the loop waits on between ticks: signals, or a deadline.
pub struct Waiter {
    poll: Poll,
    events: Events,
    signals: Signals,
    stop: Arc<AtomicBool>,
    /// The newest request not yet taken.
    request: Option<Request>,
}

impl Waiter {
    /// Registers for SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2; a stop signal sets
    /// `stop`.
    pub fn new(stop: Arc<AtomicBool>) -> std::io::Result<Self> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2])?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut signals, Token(0), Interest::READABLE)?;
        Ok(Waiter {
            poll,
            events: Events::with_capacity(4),
            signals,
            stop,
            request: None,
        })
    }

    /// The operator's newest request since the last call, if any.
    pub fn take_request(&mut self) -> Option<Request> {
        self.request.take()
    }

    /// Sleeps until `deadline` or until a stop signal arrives, waking in between to send
    /// any watchdog ping that falls due.
    pub fn until(&mut self, deadline: Instant, notifier: &mut Notifier) -> std::io::Result<()> {
        loop {
            let now = Instant::now();
            if self.stop.load(Ordering::Relaxed) || self.request.is_some() || now >= deadline {
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
                    SIGUSR1 => self.request = Some(Request::Release),
                    SIGUSR2 => self.request = Some(Request::Resume),
                    _ => log::info!("signal {signal} received"),
                }
            }
        }
    }
}
