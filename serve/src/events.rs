//! `/events`: the update stream. A thread of its own, started with the first stream,
//! sleeps on the segment's generation word (the futex the daemon wakes after each publish, as `gpupeek --follow` does) and
//! wakes the server's poll; the server then asks [`Publisher::event`] for the new
//! publish, rendered once for every stream. Nothing is sent when nothing is published:
//! there is no timer, only the keep-alive comments of the HTTP side.
//!
//! Each event is `id: GENERATION` and one `data:` line: the `--json` document with the
//! generation first, the node's name as `hostname` and `/snapshot`'s `pods` (the
//! kubelet's assignments, or null) last while the daemon is live; an
//! `event: down` whose data says why (`{"generation":G,"hostname":NODE,"error":...}`)
//! when a publish shows it is not (stopped, released, NVML error). A new stream gets the
//! current publish at once, so it needs no separate snapshot. Ids only grow within a
//! daemon's run and no event is sent twice; publishes that come faster than the server
//! gets to them (a loaded machine, a very short `--interval`) are sent as one event
//! showing the newest.

use std::sync::Arc;
use std::time::Duration;

use gpupeek::exporter;
use gpupeek_shm::Segment;
use mio::Waker;

use crate::http::{Response, EVENT_STREAM};

/// How long to wait before trying again to open a segment that is not there.
const REOPEN: Duration = Duration::from_secs(1);

/// Starts the thread that wakes `waker` after each publish on segment `name` (and when a
/// new daemon's segment appears).
pub fn watch(name: String, waker: Arc<Waker>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("publish-watch".into())
        .spawn(move || loop {
            let Ok(segment) = Segment::open(&name) else {
                std::thread::sleep(REOPEN);
                continue;
            };
            let epoch = segment.current_epoch();
            let period_ns = segment.status().map_or(1_000_000_000, |s| s.period_ns);
            let mut seen = segment.generation();
            // A segment not seen before: its state is news.
            if waker.wake().is_err() {
                return;
            }
            while let Some(generation) = segment.wait_publish(seen, period_ns, epoch) {
                if generation != seen {
                    seen = generation;
                    if waker.wake().is_err() {
                        return;
                    }
                }
            }
        })
        .map(drop)
}

/// Renders the events of segment `name` for node `node`.
pub struct Publisher {
    name: String,
    node: String,
    /// The last event sent, by generation and segment identity: a wake-up that brings
    /// nothing new sends nothing.
    last: Option<(u64, u64)>,
}

impl Publisher {
    pub fn new(name: String, node: String) -> Publisher {
        Publisher {
            name,
            node,
            last: None,
        }
    }

    /// The event for the current publish, unless it was sent already, with the pods
    /// `kube` assigns the GPUs to.
    pub fn event(&mut self, kube: Option<&gpupeek_kube::State>) -> Option<Vec<u8>> {
        let (event, epoch) = exporter::with_segment(&self.name, |segment| {
            (
                exporter::event(segment, &self.node, kube),
                segment.current_epoch(),
            )
        })
        .ok()?;
        let key = (event.generation, epoch);
        if self.last == Some(key) {
            return None;
        }
        self.last = Some(key);
        Some(encode(&event).into_bytes())
    }
}

/// The answer to a GET of `/events` on segment `name` for node `node`: a stream whose
/// first bytes are the reconnection delay, then the current publish (nothing while
/// there is no segment).
pub fn open(name: &str, node: &str, kube: Option<&gpupeek_kube::State>) -> Response {
    let mut body = String::from("retry: 2000\n\n");
    if let Ok(event) = exporter::with_segment(name, |segment| exporter::event(segment, node, kube))
    {
        body += &encode(&event);
    }
    Response {
        status: 200,
        content_type: EVENT_STREAM,
        body,
        extra: Vec::new(),
    }
}

fn encode(event: &exporter::Event) -> String {
    let kind = if event.live { "" } else { "event: down\n" };
    format!("{kind}id: {}\ndata: {}\n\n", event.generation, event.data)
}
