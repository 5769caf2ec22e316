//! What `gpupeek serve` says besides metrics: whether it is ready (`/-/ready`) and the
//! events of its update stream (`/events`). Every endpoint reads the segment once per
//! request or event through [`Reading`], so `/metrics`, `/snapshot`, `/-/ready` and
//! `/events` agree on the daemon's state and on what a live daemon's document shows;
//! the events are the `--json` document ([`crate::json`]) on one line.
//!
//! The segment stays mapped between readings ([`with_segment`]): opening it maps it
//! anew and faults in every page a snapshot touches, at each request and event, where
//! telling whether the name still leads to the same segment is one open and one fstat.

use std::sync::{Mutex, PoisonError};

use gpupeek_shm::{Segment, Snapshot};

use crate::{check_live, iso_time, json, metrics, published_time, view};

/// One reading of a segment as the exporter's endpoints use it.
pub struct Reading {
    /// The snapshot, when the segment could be read (whether or not its daemon is live).
    pub snap: Option<Snapshot>,
    /// `gpupeek_daemon_state`'s word: `live`, `stale`, `no_segment`, ...
    pub state: &'static str,
    /// The one line a client would print when the daemon is not live (no daemon, stale,
    /// NVML error, released, untrusted segment, ...); `None` when it is.
    pub reason: Option<String>,
    /// When it was read, on `CLOCK_MONOTONIC`, ns.
    pub now_ns: u64,
}

impl Reading {
    /// The reading of segment `name` given what taking its snapshot gave.
    pub fn new(name: &str, result: Result<Snapshot, gpupeek_shm::Error>) -> Reading {
        let now_ns = gpupeek_shm::mono_now_ns();
        match result {
            Ok(snap) => {
                let liveness = snap.liveness(now_ns);
                let state = metrics::live_state(&liveness);
                let reason = check_live(name, liveness, snap.status.period_ns)
                    .err()
                    .map(|e| e.message);
                Reading {
                    snap: Some(snap),
                    state,
                    reason,
                    now_ns,
                }
            }
            Err(e) => Reading {
                snap: None,
                state: metrics::error_state(&e),
                reason: Some(e.to_string()),
                now_ns,
            },
        }
    }

    /// The snapshot of a live daemon; `None` when the numbers are not current.
    pub fn live(&self) -> Option<&Snapshot> {
        self.snap.as_ref().filter(|_| self.reason.is_none())
    }

    /// The view the network endpoints show of a live daemon's snapshot. Privacy: what
    /// the segment shows this reader and nothing more: processes as the daemon published
    /// them (its process policy decides) with the daemon's pids, never filled in from the
    /// server's own `/proc` as a one-shot `gpupeek` fills in its user's own processes.
    pub fn view(&self) -> Option<view::View> {
        let snap = self.live()?;
        view::View::new(snap, None, &view::Context::default()).ok()
    }
}

/// Reads segment `name` once.
pub fn read(name: &str) -> Reading {
    Reading::new(name, with_segment(name, Segment::snapshot).and_then(|r| r))
}

/// `f` of segment `name`, mapped by an earlier call when that is still the segment the
/// name leads to, else opened again: when the name was removed or re-created by a
/// restarted daemon ([`Segment::replaced`]), or a daemon took the segment over in place
/// (a new epoch, perhaps with another geometry). The error opening it gave otherwise.
pub fn with_segment<T>(name: &str, f: impl FnOnce(&Segment) -> T) -> Result<T, gpupeek_shm::Error> {
    static KEPT: Mutex<Option<Segment>> = Mutex::new(None);
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let same = kept.as_ref().is_some_and(|s| {
        s.name() == name && s.current_epoch() == s.header().epoch && !s.replaced()
    });
    if !same {
        *kept = None;
        *kept = Some(Segment::open(name)?);
    }
    Ok(f(kept.as_ref().expect("opened above")))
}

/// `Ok` when segment `name` can be read and its daemon is live; otherwise the one line
/// a client would print (no daemon, stale, NVML error, released, untrusted, ...).
pub fn readiness(name: &str) -> Result<(), String> {
    read(name).reason.map_or(Ok(()), Err)
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

/// The current publish of `segment` as an [`Event`], for node `node`, with the pods
/// `kube` (the kubelet's answer, when asked) assigns the GPUs to.
pub fn event(segment: &Segment, node: &str, kube: Option<&gpupeek_kube::State>) -> Event {
    let generation = segment.generation();
    let reading = Reading::new(segment.name(), segment.snapshot());
    event_of(&reading, generation, node, kube)
}

/// The event for `reading`; `generation` is the segment's when it gave no snapshot.
fn event_of(
    reading: &Reading,
    generation: u64,
    node: &str,
    kube: Option<&gpupeek_kube::State>,
) -> Event {
    let generation = reading.snap.as_ref().map_or(generation, |s| s.generation);
    let down = |message: String| Event {
        generation,
        live: false,
        data: serde_json::json!({"generation": generation, "hostname": node, "error": message})
            .to_string(),
    };
    if let Some(why) = &reading.reason {
        return down(why.clone());
    }
    let Some(view) = reading.view() else {
        return down("no GPU".into());
    };
    let time = iso_time(&published_time(view.published_unix_ns));
    Event {
        generation,
        live: true,
        data: json::event(
            &view,
            node,
            &time,
            generation,
            crate::snapshot::pods(reading, kube),
        ),
    }
}

/// This machine's host name (the default `--node-name`).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpupeek_shm::layout::{gpu_valid as v, DaemonState, GpuState};
    use gpupeek_shm::{text, GpuRecord};

    fn snapshot(state: DaemonState) -> Snapshot {
        let mut g = GpuRecord {
            index: 0,
            state: GpuState::Ok as u32,
            valid: v::NAME | v::TEMPERATURE,
            temp_gpu_c: 41,
            ..Default::default()
        };
        text::encode(&mut g.name, "A");
        let mut snap = crate::testing::live_snapshot(vec![g]);
        snap.status.state = state as u32;
        snap.status.heartbeat_mono_ns = gpupeek_shm::mono_now_ns();
        snap.generation = 7;
        snap
    }

    fn json(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn the_event_and_the_snapshot_show_one_live_reading_alike() {
        let reading = Reading::new("gpupeek", Ok(snapshot(DaemonState::Live)));
        assert_eq!(reading.state, "live");
        assert_eq!(reading.reason, None);
        let event = event_of(&reading, 0, "node1", None);
        assert!(event.live);
        assert_eq!(event.generation, 7);
        let event = json(&event.data);
        let doc = json(&crate::snapshot::of(&reading, "host1", "node1", None));
        assert_eq!(event["gpus"], doc["gpus"]);
        assert_eq!(event["gpus"][0]["temperature.gpu"], 41);
        assert_eq!(doc["daemon"]["state"], "live");
        assert_eq!(doc["daemon"]["error"], serde_json::Value::Null);
    }

    #[test]
    fn a_daemon_not_live_is_the_same_line_in_the_probe_the_event_and_the_snapshot() {
        for reading in [
            Reading::new("gpupeek", Ok(snapshot(DaemonState::Stopped))),
            Reading::new(
                "gpupeek",
                Err(gpupeek_shm::Error::NotFound {
                    name: "gpupeek".into(),
                }),
            ),
        ] {
            let why = reading.reason.clone().expect("not live");
            let event = event_of(&reading, 3, "node1", None);
            assert!(!event.live);
            assert_eq!(json(&event.data)["error"], why.as_str());
            let doc = json(&crate::snapshot::of(&reading, "host1", "node1", None));
            assert_eq!(doc["daemon"]["error"], why.as_str());
            assert_eq!(doc["daemon"]["state"], reading.state);
            assert_eq!(doc["daemon"]["stale"], true);
            assert_eq!(doc["gpus"], serde_json::json!([]));
        }
    }
}
