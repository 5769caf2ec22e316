//! The daemon's side: a thread that opens the segment, takes a snapshot after every
//! publish and hands it to the UI, sleeping in the kernel on the segment's generation
//! word in between ([`Segment::wait_publish`], shared with `gpupeek --follow`), so the
//! monitor uses no CPU between updates. A missing, restarting, stopped or stale daemon
//! is reported as such and waited for; only a bad segment name ends it.

use std::sync::mpsc::Sender;
use std::time::Duration;

use gpupeek_shm::{Error, History, Segment, Snapshot};

use crate::Event;

/// Samples of each GPU's history ring kept (more than any terminal is wide).
pub const HISTORY_KEEP: usize = 512;

/// How long to sleep between attempts to open a segment that is not there.
const REOPEN_INTERVAL: Duration = Duration::from_secs(1);

/// What the daemon published, or why there is nothing to show.
#[derive(Debug, Default)]
pub struct Feed {
    /// The last snapshot taken (`None` when the segment could not be read at all).
    pub snapshot: Option<Snapshot>,
    /// Each GPU's history ring, by NVML index.
    pub histories: Vec<(u32, History)>,
    /// Why the daemon is not live (starting, stopped, stale, ...), `None` when it is.
    pub down: Option<String>,
}

/// Starts the thread following segment `name`; it ends when `tx`'s receiver is gone.
pub fn spawn(name: String, tx: Sender<Event>) {
    std::thread::spawn(move || loop {
        match Segment::open(&name) {
            Ok(segment) => {
                if follow(&segment, &tx).is_err() {
                    return;
                }
            }
            Err(e @ Error::InvalidName { .. }) => {
                let _ = tx.send(Event::Fatal(e.to_string()));
                return;
            }
            Err(e) => {
                let down = Feed {
                    down: Some(format!("{e}; waiting for gpupeekd")),
                    ..Feed::default()
                };
                if tx.send(Event::Feed(Box::new(down))).is_err() {
                    return;
                }
                std::thread::sleep(REOPEN_INTERVAL);
            }
        }
    });
}

/// Sends a feed after each publish of `segment` until it is replaced (`Ok`) or the UI
/// is gone (`Err`).
fn follow(segment: &Segment, tx: &Sender<Event>) -> Result<(), ()> {
    let epoch = segment.current_epoch();
    loop {
        let generation = segment.generation();
        let (feed, period_ns) = read(segment);
        tx.send(Event::Feed(Box::new(feed))).map_err(|_| ())?;
        if segment.wait_publish(generation, period_ns, epoch).is_none() {
            return Ok(());
        }
    }
}

/// One snapshot of `segment`, judged, with the history rings; and the daemon's period.
fn read(segment: &Segment) -> (Feed, u64) {
    match segment.snapshot() {
        Ok(snap) => {
            let period_ns = snap.status.period_ns;
            let liveness = snap.liveness(gpupeek_shm::mono_now_ns());
            let down = liveness.describe(segment.name(), period_ns);
            let histories = segment.histories(&snap, HISTORY_KEEP);
            let feed = Feed {
                snapshot: Some(snap),
                histories,
                down,
            };
            (feed, period_ns)
        }
        Err(e) => (
            Feed {
                down: Some(e.to_string()),
                ..Feed::default()
            },
            0,
        ),
    }
}
