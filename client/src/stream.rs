//! What `gpupeek serve` says besides metrics: whether it is ready (`/-/ready`) and the
//! events of its update stream (`/events`). Both read the segment as every client does;
//! the events are the `--json` document ([`crate::json`]) on one line.

use gpupeek_shm::{Segment, Snapshot};

use crate::{check_live, iso_time, json, published_time, view, view_context, Exit};

/// `Ok` when segment `name` can be read and its daemon is live; otherwise the one line
/// a client would print (no daemon, stale, NVML error, released, untrusted, ...).
pub fn readiness(name: &str) -> Result<(), String> {
    let segment = Segment::open(name).map_err(|e| Exit::from(e).message)?;
    let snap = segment.snapshot().map_err(|e| Exit::from(e).message)?;
    live(segment.name(), &snap)
}

fn live(name: &str, snap: &Snapshot) -> Result<(), String> {
    check_live(
        name,
        snap.liveness(gpupeek_shm::mono_now_ns()),
        snap.status.period_ns,
    )
    .map_err(|e| e.message)
}

/// One publish of a segment, as the update stream sends it.
pub struct Event {
    /// The generation it shows.
    pub generation: u64,
    /// Whether the daemon was live: `data` is then the `--json` document on one line,
    /// with `"generation"` first and the node's name as `"hostname"`; otherwise a
    /// one-line object `{"generation":G,"hostname":NODE,"error":"..."}` saying why not.
    pub live: bool,
    /// The event's data, one line of JSON.
    pub data: String,
}

/// The current publish of `segment` as an [`Event`], for node `node`.
pub fn event(segment: &Segment, node: &str) -> Event {
    let generation = segment.generation();
    let down = |generation: u64, message: String| Event {
        generation,
        live: false,
        data: serde_json::json!({"generation": generation, "hostname": node, "error": message})
            .to_string(),
    };
    let snap = match segment.snapshot() {
        Ok(snap) => snap,
        Err(e) => return down(generation, Exit::from(e).message),
    };
    if let Err(message) = live(segment.name(), &snap) {
        return down(snap.generation, message);
    }
    let ctx = view_context(&snap);
    let Ok(view) = view::View::new(&snap, None, &ctx) else {
        return down(snap.generation, "no GPU".into());
    };
    let time = iso_time(&published_time(view.published_unix_ns));
    Event {
        generation: snap.generation,
        live: true,
        data: json::event(&view, node, &time, snap.generation),
    }
}

/// This machine's host name (the default `--node-name`).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}
